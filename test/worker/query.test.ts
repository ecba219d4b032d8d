import { describe, expect, inject, it } from "vitest";
import { backendRequests, call, callJson, echoedRequest, eventually, readSse, testConfig, wireMode } from "./helpers.ts";

type QueryResponse = {
  conversation_id: string;
  response: string;
  tool_calls: unknown[];
  tool_results: unknown[];
  input_tokens: number;
  output_tokens: number;
  available_quotas: Record<string, number>;
  truncated: boolean;
};

const ask = (body: Record<string, unknown>, options: { user?: string; config?: string } = {}) =>
  callJson<QueryResponse>("/v1/query", { json: body, user: options.user ?? "alice", config: options.config });

describe("POST /v1/query", () => {
  it("answers a new conversation and continues it with the whole history", async () => {
    const first = await ask({ query: "What is Parley?" });
    expect(first.status).toBe(200);
    expect(first.body.response).toBe("[user_turns=1] You said: What is Parley?");
    expect(first.body.conversation_id).toMatch(/^[0-9a-f]{48}$/);
    expect(first.body).toMatchObject({ truncated: false, available_quotas: {}, tool_calls: [], tool_results: [] });
    expect(first.body.output_tokens).toBe(6);
    expect(first.body.input_tokens).toBeGreaterThan(0);

    const id = first.body.conversation_id;
    const second = await ask({ query: "And quotas?", conversation_id: id });
    expect(second.body).toMatchObject({ conversation_id: id, response: "[user_turns=2] You said: And quotas?" });
    const third = await ask({ query: "#echo-request", conversation_id: id });
    const sent = echoedRequest(third.body.response) as { input: Array<{ role: string; content: unknown }>; instructions: string; model: string };
    expect(sent.input.map((item) => item.role)).toEqual(["user", "assistant", "user", "assistant", "user"]);
    expect(sent.input[1]!.content).toBe("[user_turns=1] You said: What is Parley?");
    expect(sent.model).toBe("scripted/parley-small");
    expect(sent.instructions).toContain("helpful assistant");

    // The list comes from the record store, which the conversation's Durable Object feeds after the answer.
    await eventually(async () => {
      const list = await callJson<{ conversations: Array<Record<string, unknown>> }>("/v1/conversations", { user: "alice" });
      const record = list.body.conversations.find((c) => c.conversation_id === id);
      expect(record).toMatchObject({ message_count: 3, last_used_model: "parley-small", last_used_provider: "scripted", topic_summary: "Topic: What is Parley?" });
    });
  });

  it("applies the identifier rules: prefixed, truncated and unknown ids are 404, another user's 403", async () => {
    const { body } = await ask({ query: "mine" });
    const id = body.conversation_id;
    for (const bad of [`conv_${id}`, id.slice(0, 41), "f".repeat(48)]) {
      const res = await ask({ query: "hi", conversation_id: bad });
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ detail: { response: "Conversation not found", cause: `Conversation with ID ${bad} does not exist` } });
    }
    const stolen = await ask({ query: "hi", conversation_id: id }, { user: "mallory" });
    expect(stolen.status).toBe(403);
    expect(stolen.body).toEqual({
      detail: {
        response: "User does not have permission to perform this action",
        cause: `User mallory does not have permission to read conversation with ID ${id}`,
      },
    });
  });

  it("chooses models: the request's, 404 for unknown ones, 403 without MODEL_OVERRIDE", async () => {
    const chosen = await ask({ query: "#echo-request", model: "parley-large", provider: "scripted" });
    expect(echoedRequest(chosen.body.response).model).toBe("scripted/parley-large");
    const unknown = await ask({ query: "hi", model: "gpt-9", provider: "scripted" });
    expect(unknown.status).toBe(404);
    expect((unknown.body as unknown as { detail: { response: string } }).detail.response).toBe("Model not found");
    // An embedding model is listed, but cannot answer: the client's mistake, not the backend's fault.
    const embedding = await ask({ query: "hi", model: "parley-embed", provider: "scripted" });
    expect(embedding.status).toBe(422);
    expect(embedding.body).toMatchObject({ detail: { response: "Invalid attribute value", cause: expect.stringContaining("scripted/parley-embed is not a language model") } });
    const restricted = testConfig({ authorization: { access_rules: [{ role: "*", actions: ["query"] }] } });
    const denied = await ask({ query: "hi", model: "parley-large", provider: "scripted" }, { config: restricted });
    expect(denied.status).toBe(403);
    expect((denied.body as unknown as { detail: { cause: string } }).detail.cause).toBe(
      "User lacks model_override permission required to override model/provider.",
    );
    const halfModel = await ask({ query: "hi", model: "parley-large" });
    expect(halfModel.status).toBe(422);
  });

  it("keeps the conversation's last model when the request names none", async () => {
    const first = await ask({ query: "hi", model: "parley-large", provider: "scripted" });
    const next = await ask({ query: "#echo-request", conversation_id: first.body.conversation_id });
    expect(echoedRequest(next.body.response).model).toBe("scripted/parley-large");
  });

  it("resolves the system prompt: request, configured, and rejected when disabled", async () => {
    const own = await ask({ query: "#echo-request", system_prompt: "Be terse." });
    expect(echoedRequest(own.body.response).instructions).toBe("Be terse.");
    const configured = testConfig({ customization: { system_prompt: "Configured prompt." } });
    const fromConfig = await ask({ query: "#echo-request" }, { config: configured });
    expect(echoedRequest(fromConfig.body.response).instructions).toBe("Configured prompt.");
    const disabled = testConfig({ customization: { disable_query_system_prompt: true } });
    const rejected = await ask({ query: "hi", system_prompt: "nope" }, { config: disabled });
    expect(rejected.status).toBe(422);
    // SPEC's errors: "instructions rejected" is the response text.
    expect(rejected.body).toEqual({
      detail: { response: "instructions rejected", cause: "This service does not accept a per-request system prompt; remove the `system_prompt` field from the request." },
    });
  });

  it("sends attachments as input_file parts and names YAML resources", async () => {
    const res = await ask({
      query: "#echo-request",
      attachments: [
        { attachment_type: "log", content_type: "text/plain", content: "line 1" },
        { attachment_type: "api object", content_type: "application/yaml", content: "kind: Pod\nmetadata:\n  name: web-1\n" },
      ],
    });
    const content = echoedRequest(res.body.response).input[0].content as Array<Record<string, string>>;
    expect(content.map((part) => part.type)).toEqual(["input_text", "input_text", "input_file", "input_text", "input_file"]);
    expect(content[2]).toMatchObject({ filename: "log-1.txt", file_data: `data:text/plain;base64,${btoa("line 1")}` });
    expect(content[3]!.text).toContain('Pod "web-1"');
    expect(content[4]!.filename).toBe("Pod-web-1.yaml");
  });

  it("rejects bad bodies with 422 in the envelope", async () => {
    const cases: Array<[unknown, string]> = [
      [{}, "Missing required attributes"],
      [{ query: "hi", surprise: 1 }, "Invalid attribute value"],
      [{ query: 42 }, "Invalid attribute value"],
      [{ query: "hi", attachments: [{ attachment_type: "poem", content_type: "text/plain", content: "x" }] }, "Invalid attribute value"],
    ];
    for (const [json, response] of cases) {
      const res = await callJson<{ detail: { response: string; cause: string } }>("/v1/query", { json, user: "alice" });
      expect(res.status).toBe(422);
      expect(res.body.detail.response).toBe(response);
    }
    const attachment = await callJson<{ detail: { cause: string } }>("/v1/query", {
      json: { query: "hi", attachments: [{ attachment_type: "poem", content_type: "text/plain", content: "x" }] },
    });
    expect(attachment.body.detail.cause).toContain("stack trace");
    // The value given is named, as the original's causes do.
    expect(attachment.body.detail.cause).toContain('not "poem"');
    const contentType = await callJson<{ detail: { cause: string } }>("/v1/query", {
      json: { query: "hi", attachments: [{ attachment_type: "log", content_type: "unknown/type", content: "x" }] },
    });
    expect(contentType.body.detail.cause).toContain('not "unknown/type"');
    const broken = await call("/v1/query", { method: "POST", body: "{not json", headers: { "Content-Type": "application/json" } });
    expect(broken.status).toBe(422);
    expect(await broken.json()).toEqual({ detail: { response: "Invalid request format", cause: "request body could not be parsed" } });
  });

  it("asks an empty question as it is, as the original does (only a missing one is refused)", async () => {
    const res = await callJson<{ conversation_id: string; response: string }>("/v1/query", { json: { query: "" }, user: "alice" });
    expect(res.status).toBe(200);
    expect(res.body.conversation_id).toMatch(/^[0-9a-f]{48}$/);
    // The answer is trimmed, as the original's llm_response is.
    expect(res.body.response).toBe("[user_turns=1] You said:");
  });

  it("reads a body as JSON without a content type or with a JSON one, and refuses any other (a cross-site form post)", async () => {
    const body = JSON.stringify({ query: "typed" });
    for (const type of ["application/json; charset=utf-8", "application/vnd.api+json", null]) {
      // Bytes, unlike a string, get no content type of their own.
      const sent = await call("/v1/query", { body: new TextEncoder().encode(body), headers: type ? { "Content-Type": type } : {} });
      expect(sent.status, String(type)).toBe(200);
    }
    for (const type of ["text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const refused = await callJson<{ detail: { response: string; cause: string } }>("/v1/query", { method: "POST", body, headers: { "Content-Type": type } });
      expect(refused.status, type).toBe(422);
      expect(refused.body.detail).toEqual({ response: "Invalid request format", cause: `the request body must be JSON (Content-Type: application/json), not ${type.split(";")[0]}` });
    }
  });

  it("maps backend failures: 413 for context length, 429 for rate limits", async () => {
    const tooLong = await ask({ query: "#context-too-long" });
    expect(tooLong.status).toBe(413);
    // In UPSTREAM's words, naming the model, as when Parley's own estimate finds it.
    expect(tooLong.body).toEqual({ detail: { response: "Prompt is too long", cause: "The input exceeds the context window size of model 'scripted/parley-small'." } });
    const limited = await ask({ query: "#rate-limit" }, { config: testConfig({ inference_backend: { max_retries: 0 } }) });
    expect(limited.status).toBe(429);
    expect((limited.body as unknown as { detail: { response: string } }).detail.response).toBe("The model quota has been exceeded");
  });

  it("summarizes tool calls and results", async () => {
    const res = await ask({ query: "#mcp-call:docs:lookup" });
    expect(res.body.tool_calls).toEqual([expect.objectContaining({ name: "lookup", type: "tool_call" })]);
    expect(res.body.tool_results).toEqual([expect.objectContaining({ status: "success", content: "scripted tool output", type: "tool_result", round: 1 })]);
  });

  it("answers five concurrent questions on one conversation in order", async () => {
    const { body } = await ask({ query: "start" });
    const id = body.conversation_id;
    const answers = await Promise.all([1, 2, 3, 4, 5].map((n) => ask({ query: `question ${n}`, conversation_id: id })));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const turns = answers.map((a) => Number(/user_turns=(\d+)/.exec(a.body.response)![1])).sort();
    expect(turns).toEqual([2, 3, 4, 5, 6]);
    const detail = await callJson<{ chat_history: Array<{ messages: Array<{ content: string; type: string }> }> }>(`/v1/conversations/${id}`, { user: "alice" });
    expect(detail.body.chat_history).toHaveLength(6);
    detail.body.chat_history.forEach((turn, index) => {
      expect(turn.messages[1]!.content).toContain(`user_turns=${index + 1}]`);
      expect(turn.messages[1]!.content).toContain(turn.messages[0]!.content);
    });
    await eventually(async () => {
      const list = await callJson<{ conversations: Array<Record<string, unknown>> }>("/v1/conversations", { user: "alice" });
      expect(list.body.conversations.find((c) => c.conversation_id === id)).toMatchObject({ message_count: 6 });
    });
  });
});

describe("POST /v1/streaming_query", () => {
  it("streams start, tokens, turn_complete and end, with the turn persisted before end", async () => {
    const response = await call("/v1/streaming_query", { json: { query: "stream this please" }, user: "alice" });
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    const events = (await readSse(response)).map((e) => e.data as { event: string; data: Record<string, unknown>; available_quotas?: unknown });
    expect(events[0]!.event).toBe("start");
    const id = events[0]!.data.conversation_id as string;
    expect(events[0]!.data.request_id).toMatch(/^[0-9a-f-]{36}$/);
    const tokens = events.filter((e) => e.event === "token");
    expect(tokens.map((t) => t.data.id)).toEqual(tokens.map((_, i) => i));
    // The answer's text part is announced by an empty token, as the original does; the deltas follow.
    expect(tokens[0]!.data.token).toBe("");
    const complete = events.find((e) => e.event === "turn_complete")!;
    expect(complete.data.token).toBe(tokens.map((t) => t.data.token).join(""));
    expect(complete.data.token).toBe("[user_turns=1] You said: stream this please");
    const end = events.at(-1)!;
    expect(end).toMatchObject({ event: "end", data: { referenced_documents: [], truncated: false, output_tokens: tokens.length - 1 }, available_quotas: {} });
    const detail = await callJson<{ chat_history: unknown[] }>(`/v1/conversations/${id}`, { user: "alice" });
    expect(detail.body.chat_history).toHaveLength(1);
  });

  it("streams plain text with media_type text/plain", async () => {
    const response = await call("/v2/streaming_query", { json: { query: "plain", media_type: "text/plain" }, user: "alice" });
    expect(response.headers.get("content-type")).toContain("text/plain");
    expect(await response.text()).toBe("[user_turns=1] You said: plain");
  });

  it("ends with an error event when the backend fails mid-stream", async () => {
    const response = await call("/v1/streaming_query", { json: { query: "#fail-midstream" }, user: "alice" });
    const events = (await readSse(response)).map((e) => e.data as { event: string; data: Record<string, unknown> });
    expect(events.filter((e) => e.event === "token" && e.data.token !== "")).toHaveLength(2);
    expect(events.at(-1)).toMatchObject({ event: "error", data: { status_code: 500, response: "Internal server error" } });
  });

  it("lists a conversation whose first turn failed mid-stream only once a turn of it answers", async () => {
    const user = "failed-first";
    const listed = async () => (await callJson<{ conversations: Array<{ conversation_id: string; message_count: number; topic_summary: string }> }>("/v1/conversations", { user })).body.conversations;
    const failedEvents = (await readSse(await call("/v1/streaming_query", { json: { query: "first #fail-midstream" }, user }))).map((e) => e.data as { event: string; data: { conversation_id?: string } });
    const failed = failedEvents[0]!.data.conversation_id!;
    const other = (await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "another" }, user })).body.conversation_id;
    await eventually(async () => expect((await listed()).map((c) => c.conversation_id)).toContain(other));
    // Fed from the same outbox delay: the failed one would be there by now.
    expect((await listed()).map((c) => c.conversation_id)).toEqual([other]);
    expect((await callJson<{ chat_history: unknown[] }>(`/v1/conversations/${failed}`, { user })).body.chat_history).toEqual([]);
    // Its id still goes on; from its first answer it is listed, its topic summed up from that answer, not from the failure.
    expect((await callJson("/v1/query", { json: { query: "again", conversation_id: failed }, user })).status).toBe(200);
    await eventually(async () => expect((await listed()).find((c) => c.conversation_id === failed)).toMatchObject({ message_count: 1, topic_summary: "Topic: again" }));
  });

  it("emits tool_call and tool_result events", async () => {
    const response = await call("/v1/streaming_query", { json: { query: "#mcp-call:docs:lookup" }, user: "alice" });
    const names = (await readSse(response)).map((e) => (e.data as { event: string }).event);
    expect(names.indexOf("tool_call")).toBeGreaterThan(0);
    expect(names.indexOf("tool_result")).toBe(names.indexOf("tool_call") + 1);
  });
});

describe("query tools", () => {
  const fake = inject("mcp");
  const config = testConfig({
    byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/data/docs" }],
    mcp_servers: [{ name: "helper", url: `${fake.base}/s/query-tools/mcp` }],
    mcp_security: { allowed_internal_hosts: ["127.0.0.1"] },
  });

  it("gives the file_search tool the unified form's rag.retrieval.tool.max_chunks", async () => {
    const capped = testConfig({ rag: { byok: { stores: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/data/docs" }] }, retrieval: { tool: { sources: ["docs"], max_chunks: 2 } } } });
    const question = "#echo-request capped tool search";
    const res = await ask({ query: question }, { config: capped });
    expect(res.status).toBe(200);
    // A Chat Completions backend has no file_search tool: Parley searches the store itself, with the tool's bound.
    if (wireMode() === "chat") {
      const searches = await backendRequests<{ query: string; max_num_results: number }>("/search", (body) => body.query === question);
      expect(searches.map((search) => search.body.max_num_results)).toEqual([2]);
    } else {
      expect(echoedRequest(res.body.response).tools[0]).toEqual({ type: "file_search", vector_store_ids: ["vs_docs"], max_num_results: 2 });
    }
  });

  it("offers the server's tools, restricted by vector_store_ids, and none with no_tools", async () => {
    // MCP tools reach the backend as function tools: the gateway runs them.
    const all = await ask({ query: "#echo-request" }, { config });
    const offered = echoedRequest(all.body.response).tools as Array<{ type: string; name?: string }>;
    // A Chat Completions backend has no file_search tool: Parley searches the tool stores itself.
    const functions = wireMode() === "chat" ? offered : offered.slice(1);
    // With neither rag list configured, the tool covers the configured store and every store the backend has.
    const everyStore = { type: "file_search", vector_store_ids: expect.arrayContaining(["vs_docs", "portal-rag"]), max_num_results: 10 };
    if (wireMode() !== "chat") expect(offered[0]).toEqual(everyStore);
    expect(functions.every((tool) => tool.type === "function")).toBe(true);
    expect(offered.map((tool) => tool.name)).toContain("echo");
    const none = await ask({ query: "#echo-request", no_tools: true }, { config });
    expect(echoedRequest(none.body.response).tools).toBeUndefined();
    const restricted = await ask({ query: "#echo-request", vector_store_ids: [] }, { config });
    expect(new Set(echoedRequest(restricted.body.response).tools.map((t: { type: string }) => t.type))).toEqual(new Set(["function"]));
  });
});
