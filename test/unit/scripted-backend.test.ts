// Drives the scripted backend with the official openai client: if the SDK's own parsers accept
// its wire format, a real OpenAI-compatible backend can replace it in the gateway.
import OpenAI, { APIError, BadRequestError, InternalServerError, NotFoundError, RateLimitError } from "openai";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startScriptedBackend, type ScriptedBackend } from "../fakes/scripted-backend.ts";

let backend: ScriptedBackend;
let client: OpenAI;
const MODEL = "scripted/parley-small";

beforeAll(async () => {
  backend = await startScriptedBackend();
  // No retries: 429/5xx must surface at once as typed errors.
  client = new OpenAI({ baseURL: backend.url, apiKey: "test-key", maxRetries: 0 });
});

afterAll(async () => {
  await backend.close();
});

beforeEach(async () => {
  await fetch(backend.url.replace(/\/v1$/, "/__reset"), { method: "POST" });
});

async function collect(stream: AsyncIterable<ResponseStreamEvent>): Promise<ResponseStreamEvent[]> {
  const events: ResponseStreamEvent[] = [];
  for await (const event of stream) events.push(event);
  return events;
}

function rawPost(path: string, body: string): Promise<Response> {
  return fetch(`${backend.url}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body });
}

describe("models", () => {
  it("lists three Llama-Stack-style models", async () => {
    const models = [];
    for await (const model of client.models.list()) models.push(model);
    expect(models.map((model) => model.id)).toEqual(["scripted/parley-small", "scripted/parley-large", "scripted/parley-embed"]);
    expect(models[0]).toMatchObject({
      object: "model",
      owned_by: "scripted",
      custom_metadata: { model_type: "llm", provider_id: "scripted", provider_resource_id: "parley-small" },
    });
    expect(models[2]).toMatchObject({ custom_metadata: { model_type: "embedding", embedding_dimension: 384 } });
    expect(Number.isInteger(models[0].created)).toBe(true);
  });
});

describe("responses (JSON)", () => {
  it("answers a string input with the default format and usage", async () => {
    const response = await client.responses.create({ model: MODEL, input: "hello there", instructions: "be brief" });
    expect(response.id).toMatch(/^resp_[0-9a-f]{48}$/);
    expect(response.object).toBe("response");
    expect(response.status).toBe("completed");
    expect(response.output_text).toBe("[user_turns=1] You said: hello there");
    expect(response.instructions).toBe("be brief");
    expect(response.model).toBe(MODEL);
    expect(response.error).toBeNull();
    expect(response.truncation).toBe("disabled");
    expect(response.text).toEqual({ format: { type: "text" } });
    expect(response.output).toHaveLength(1);
    const message = response.output[0];
    expect(message).toMatchObject({ type: "message", status: "completed", role: "assistant" });
    if (message.type !== "message") throw new Error("expected a message");
    expect(message.id).toMatch(/^msg_/);
    expect(message.content).toEqual([{ type: "output_text", text: "[user_turns=1] You said: hello there", annotations: [], logprobs: [] }]);
    // input: "hello there" (2) + "be brief" (2); output: 5 word deltas
    expect(response.usage).toEqual({
      input_tokens: 4,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: 5,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: 9,
    });
  });

  it("counts user turns and takes Q from the last user message's input_text parts", async () => {
    const response = await client.responses.create({
      model: "parley-large",
      input: [
        { type: "message", role: "user", content: "first question" },
        { type: "message", id: "msg_prev", status: "completed", role: "assistant", content: [{ type: "output_text", text: "first answer", annotations: [] }] },
        { role: "user", content: [{ type: "input_text", text: "second" }, { type: "input_text", text: "question" }] },
      ],
    });
    expect(response.output_text).toBe("[user_turns=2] You said: second\nquestion");
    expect(response.usage?.input_tokens).toBe(6);
  });

  it("echoes the request body with #echo-request", async () => {
    const request = {
      model: MODEL,
      input: "show me #echo-request",
      instructions: "system prompt here",
      tools: [{ type: "function" as const, name: "lookup", parameters: { type: "object" }, strict: false }],
      metadata: { a: "b" },
    };
    const response = await client.responses.create(request);
    expect(JSON.parse(response.output_text)).toEqual(request);
    expect(response.tools).toEqual(request.tools);
    expect(response.metadata).toEqual({ a: "b" });
    const recorded = backend.requests.at(-1);
    expect(recorded).toMatchObject({ method: "POST", path: "/v1/responses", body: request });
    expect(recorded?.headers.authorization).toBe("Bearer test-key");
  });

  it("answers topic-summary requests with the first five words, ignoring markers", async () => {
    const response = await client.responses.create({
      model: MODEL,
      instructions: "Write a short Topic Summary of the question.",
      input: "how do I #rate-limit reset my quota in parley today",
    });
    expect(response.output_text).toBe("Topic: how do I reset my");
  });

  it("emits a function_call item before the message with #call-tool", async () => {
    const response = await client.responses.create({ model: MODEL, input: "weather? #call-tool:get_weather" });
    expect(response.output.map((item) => item.type)).toEqual(["function_call", "message"]);
    expect(response.output[0]).toMatchObject({
      type: "function_call",
      name: "get_weather",
      arguments: JSON.stringify({ query: "weather? #call-tool:get_weather" }),
      status: "completed",
    });
    const call = response.output[0];
    if (call.type !== "function_call") throw new Error("expected a function call");
    expect(call.call_id).toMatch(/^call_/);

    // Handing the tool result back does not call the tool again.
    const followUp = await client.responses.create({
      model: MODEL,
      input: [
        { role: "user", content: "weather? #call-tool:get_weather" },
        call,
        { type: "function_call_output", call_id: call.call_id, output: "sunny" },
      ],
    });
    expect(followUp.output.map((item) => item.type)).toEqual(["message"]);
  });

  it("emits an mcp_call item with #mcp-call", async () => {
    const response = await client.responses.create({ model: MODEL, input: "list pods #mcp-call:k8s:pods_list" });
    expect(response.output.map((item) => item.type)).toEqual(["mcp_call", "message"]);
    expect(response.output[0]).toMatchObject({
      server_label: "k8s",
      name: "pods_list",
      output: "scripted tool output",
      status: "completed",
    });
  });

  it("runs file search over the tool's stores with #file-search", async () => {
    const response = await client.responses.create({
      model: MODEL,
      input: "when does the quota reset happen? #file-search",
      tools: [{ type: "file_search", vector_store_ids: ["vs_docs", "portal-rag"], max_num_results: 3 }],
    });
    expect(response.output.map((item) => item.type)).toEqual(["file_search_call", "message"]);
    const call = response.output[0];
    if (call.type !== "file_search_call") throw new Error("expected a file search call");
    expect(call.queries).toEqual(["when does the quota reset happen?"]);
    const results = call.results ?? [];
    expect(results).toHaveLength(3);
    expect(results[0]).toMatchObject({ file_id: "file-quota-reset", filename: "quota-reset.md" });
    expect(results[0].attributes).toMatchObject({ document_id: "parley-quota-reset", doc_url: "https://docs.example.com/parley/quotas" });
    const scores = results.map((result) => result.score ?? 0);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);

    const withoutTool = await client.responses.create({ model: MODEL, input: "quota #file-search" });
    expect(withoutTool.output.map((item) => item.type)).toEqual(["message"]);
  });

  it("waits deltas x MS with #slow=MS", async () => {
    const started = Date.now();
    const response = await client.responses.create({ model: MODEL, input: "#slow=40 go" }); // 5 deltas
    expect(response.usage?.output_tokens).toBe(5);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
  });
});

describe("responses (streaming)", () => {
  it("streams OpenAI's event sequence with increasing sequence numbers", async () => {
    const events = await collect(await client.responses.create({ model: MODEL, input: "stream this please", stream: true }));
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
    expect(events.map((event) => event.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      ...Array(6).fill("response.output_text.delta"),
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const created = events[0];
    if (created.type !== "response.created") throw new Error("expected response.created");
    expect(created.response).toMatchObject({ status: "in_progress", output: [], usage: null });

    const deltas = events.flatMap((event) => (event.type === "response.output_text.delta" ? [event] : []));
    expect(deltas.map((delta) => delta.delta)).toEqual(["[user_turns=1] ", "You ", "said: ", "stream ", "this ", "please"]);
    for (const delta of deltas) expect(delta).toMatchObject({ output_index: 0, content_index: 0, logprobs: [] });

    const completed = events.at(-1);
    if (completed?.type !== "response.completed") throw new Error("expected response.completed");
    expect(completed.response.status).toBe("completed");
    // output_text is not on the wire (the SDK derives it); the message carries the text.
    expect(completed.response.output).toEqual([
      expect.objectContaining({ type: "message", content: [expect.objectContaining({ text: "[user_turns=1] You said: stream this please" })] }),
    ]);
    expect(completed.response.id).toBe(created.response.id);
    expect(completed.response.usage).toMatchObject({ input_tokens: 3, output_tokens: 6, total_tokens: 9 });
  });

  it("accumulates tool items and text with responses.stream().finalResponse()", async () => {
    const stream = client.responses.stream({
      model: MODEL,
      input: "find parley gateway configuration #call-tool:lookup #mcp-call:docs:search #file-search",
      tools: [{ type: "file_search", vector_store_ids: ["vs_docs"] }],
    });
    let text = "";
    stream.on("response.output_text.delta", (event) => {
      text += event.delta;
    });
    const response = await stream.finalResponse();
    expect(response.output.map((item) => item.type)).toEqual(["function_call", "mcp_call", "file_search_call", "message"]);
    const expected = "[user_turns=1] You said: find parley gateway configuration #call-tool:lookup #mcp-call:docs:search #file-search";
    expect(response.output_text).toBe(expected);
    expect(text).toBe(expected);
    expect(response.output[0]).toMatchObject({ arguments: JSON.stringify({ query: "find parley gateway configuration #call-tool:lookup #mcp-call:docs:search #file-search" }) });
    const search = response.output[2];
    if (search.type !== "file_search_call") throw new Error("expected a file search call");
    // "parley", "gateway", "configuration" match; "find" does not
    expect(search.results?.[0]).toMatchObject({ file_id: "file-parley-config", score: 0.75 });
  });

  it("ends without [DONE] and uses event: lines", async () => {
    const raw = await rawPost("/responses", JSON.stringify({ model: MODEL, input: "hi", stream: true }));
    expect(raw.headers.get("content-type")).toMatch(/^text\/event-stream/);
    const text = await raw.text();
    expect(text).not.toContain("[DONE]");
    expect(text.startsWith("event: response.created\ndata: {")).toBe(true);
    expect(text.trimEnd().split("\n\n").at(-1)).toMatch(/^event: response\.completed\ndata: /);
  });

  it("fails midstream with an error event then response.failed", async () => {
    const raw = await rawPost("/responses", JSON.stringify({ model: MODEL, input: "one two three four #fail-midstream", stream: true }));
    const events = (await raw.text())
      .trim()
      .split("\n\n")
      .map((block) => JSON.parse(block.split("\n")[1].slice("data: ".length)));
    expect(events.map((event) => event.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "error",
      "response.failed",
    ]);
    expect(events[6]).toMatchObject({ code: "server_error", message: "scripted failure", param: null, sequence_number: 6 });
    expect(events[7].response).toMatchObject({ status: "failed", error: { code: "server_error", message: "scripted failure" } });

    // The SDK turns the error event into an APIError after the deltas it already yielded.
    const seen: string[] = [];
    const stream = await client.responses.create({ model: MODEL, input: "one two #fail-midstream", stream: true });
    await expect(
      (async () => {
        for await (const event of stream) seen.push(event.type);
      })(),
    ).rejects.toBeInstanceOf(APIError);
    expect(seen.filter((type) => type === "response.output_text.delta")).toHaveLength(2);
  });

  it("applies the token delay options and survives a client that disconnects", async () => {
    const slow = await startScriptedBackend({ firstTokenDelayMs: 50, tokenDelayMs: 30, seed: false });
    try {
      const slowClient = new OpenAI({ baseURL: slow.url, apiKey: "k", maxRetries: 0 });
      const started = Date.now();
      await collect(await slowClient.responses.create({ model: MODEL, input: "a b c", stream: true })); // 6 deltas
      expect(Date.now() - started).toBeGreaterThanOrEqual(50 + 5 * 30 - 10);

      const stream = await slowClient.responses.create({ model: MODEL, input: `${"word ".repeat(50)}#slow=50`, stream: true });
      for await (const event of stream) {
        if (event.type === "response.output_text.delta") break; // aborts the request
      }
      await new Promise((resolve) => setTimeout(resolve, 120));
      const models = await slowClient.models.list();
      expect(models.data).toHaveLength(3);
    } finally {
      await slow.close();
    }
  });
});

describe("errors", () => {
  it("unknown model -> NotFoundError with model_not_found", async () => {
    const error = await client.responses.create({ model: "nope/missing", input: "hi" }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(NotFoundError);
    expect(error).toMatchObject({ status: 404, code: "model_not_found", param: "model", type: "invalid_request_error" });
    expect((error as NotFoundError).message).toContain("Model nope/missing not found");
  });

  it("#rate-limit -> RateLimitError", async () => {
    const error = await client.responses.create({ model: MODEL, input: "hi #rate-limit", stream: true }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(RateLimitError);
    expect(error).toMatchObject({ status: 429, code: "rate_limit_exceeded", type: "rate_limit_error" });
  });

  it("#context-too-long -> BadRequestError context_length_exceeded", async () => {
    const error = await client.responses.create({ model: MODEL, input: "hi #context-too-long" }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error).toMatchObject({ status: 400, code: "context_length_exceeded", param: "input" });
    expect((error as BadRequestError).message).toContain("maximum context length is 4096 tokens");
  });

  it("#fail-midstream without streaming -> 500 server_error", async () => {
    const error = await client.responses.create({ model: MODEL, input: "hi #fail-midstream" }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(InternalServerError);
    expect(error).toMatchObject({ status: 500, type: "server_error" });
  });

  it("missing input, bad JSON and unknown paths answer in OpenAI's error shape", async () => {
    const missing = await rawPost("/responses", JSON.stringify({ model: MODEL }));
    expect(missing.status).toBe(400);
    expect(await missing.json()).toEqual({
      error: { message: "Missing required parameter: 'input'.", type: "invalid_request_error", param: "input", code: "missing_required_parameter" },
    });
    const badJson = await rawPost("/responses", "{not json");
    expect(badJson.status).toBe(400);
    expect(await badJson.json()).toMatchObject({ error: { type: "invalid_request_error" } });
    const notJsonObject = await rawPost("/responses", "[1]");
    expect(notJsonObject.status).toBe(400);
    const unknown = await fetch(`${backend.url}/nothing-here`);
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { message: "Invalid URL (GET /v1/nothing-here)" } });
  });
});

describe("moderations", () => {
  it("flags inputs containing #unsafe", async () => {
    const result = await client.moderations.create({ model: "llama-guard", input: ["hello", "hurt them #unsafe"] });
    expect(result.id).toMatch(/^modr-/);
    expect(result.model).toBe("llama-guard");
    expect(result.results.map((entry) => entry.flagged)).toEqual([false, true]);
    expect(result.results[1].categories.violence).toBe(true);
    expect(result.results[1].categories.hate).toBe(false);
    expect(result.results[1].category_scores.violence).toBe(0.99);
    expect(Object.keys(result.results[0].categories)).toHaveLength(13);
    const single = await client.moderations.create({ input: "fine" });
    expect(single.results).toHaveLength(1);
  });
});

describe("vector stores and files", () => {
  it("has the seeded stores and files", async () => {
    const stores = await client.vectorStores.list({ order: "asc" });
    expect(stores.data.map((store) => [store.id, store.name])).toEqual([
      ["vs_docs", "docs"],
      ["portal-rag", "portal"],
    ]);
    expect(stores.data[0].file_counts).toMatchObject({ completed: 2, total: 2 });
    const portalFiles = await client.vectorStores.files.list("portal-rag");
    expect(portalFiles.data.map((file) => file.id)).toEqual(["file-openshift-install"]);
    expect(Object.keys(portalFiles.data[0].attributes ?? {}).sort()).toEqual(["doc_url", "parent_id", "reference_url", "title"]);
    const files = await client.files.list();
    expect(files.data).toHaveLength(3);
  });

  it("searches with scores, order and filters", async () => {
    const page = await client.vectorStores.search("vs_docs", { query: "quota reset for the gateway" });
    const hits = page.data;
    expect(hits.length).toBeGreaterThan(1);
    expect(hits[0].file_id).toBe("file-quota-reset");
    expect(hits[0].content[0].type).toBe("text");
    for (let index = 1; index < hits.length; index += 1) expect(hits[index - 1].score).toBeGreaterThanOrEqual(hits[index].score);

    const raw = await rawPost("/vector_stores/vs_docs/search", JSON.stringify({ query: "quota" }));
    expect(await raw.json()).toMatchObject({ object: "vector_store.search_results.page", search_query: "quota", has_more: false, next_page: null });

    const filtered = await client.vectorStores.search("vs_docs", {
      query: "quota reset for the gateway",
      filters: {
        type: "and",
        filters: [
          { type: "eq", key: "product", value: "parley" },
          { type: "in", key: "version", value: ["1.0"] },
        ],
      },
    });
    expect(new Set(filtered.data.map((hit) => hit.file_id))).toEqual(new Set(["file-parley-config"]));

    const none = await client.vectorStores.search("vs_docs", { query: "quota", filters: { type: "ne", key: "product", value: "parley" } });
    expect(none.data).toEqual([]);
    const limited = await client.vectorStores.search("vs_docs", { query: "the", max_num_results: 1 });
    expect(limited.data).toHaveLength(1);
    await expect(client.vectorStores.search("vs_docs", { query: "x", filters: { type: "bogus", key: "a", value: 1 } as never })).rejects.toBeInstanceOf(BadRequestError);
  });

  it("creates, updates, fills, searches and deletes a store", async () => {
    const store = await client.vectorStores.create({ name: "mine", metadata: { team: "a" } });
    expect(store).toMatchObject({ object: "vector_store", name: "mine", status: "completed", metadata: { team: "a" } });
    expect(store.id).toMatch(/^vs_/);
    expect((await client.vectorStores.retrieve(store.id)).name).toBe("mine");
    expect((await client.vectorStores.update(store.id, { name: "renamed" })).name).toBe("renamed");

    const file = await client.files.create({ file: new File(["zebras graze on the savanna at dawn"], "zebras.txt"), purpose: "assistants" });
    expect(file).toMatchObject({ object: "file", filename: "zebras.txt", purpose: "assistants", bytes: 35 });
    expect((await client.files.retrieve(file.id)).id).toBe(file.id);

    const attached = await client.vectorStores.files.create(store.id, { file_id: file.id, attributes: { year: 2024, kind: "animal" } });
    expect(attached).toMatchObject({ id: file.id, object: "vector_store.file", vector_store_id: store.id, status: "completed", attributes: { year: 2024 } });
    expect((await client.vectorStores.files.retrieve(file.id, { vector_store_id: store.id })).id).toBe(file.id);
    expect((await client.vectorStores.files.list(store.id)).data).toHaveLength(1);

    const hits = await client.vectorStores.search(store.id, { query: "zebras at night", filters: { type: "gte", key: "year", value: 2024 } });
    expect(hits.data).toHaveLength(1);
    expect(hits.data[0]).toMatchObject({ file_id: file.id, filename: "zebras.txt", score: 2 / 3, attributes: { year: 2024, kind: "animal" } });
    const older = await client.vectorStores.search(store.id, { query: "zebras", filters: { type: "lt", key: "year", value: 2024 } });
    expect(older.data).toHaveLength(0);

    expect(await client.vectorStores.files.delete(file.id, { vector_store_id: store.id })).toEqual({
      id: file.id,
      object: "vector_store.file.deleted",
      deleted: true,
    });
    expect(await client.files.delete(file.id)).toEqual({ id: file.id, object: "file", deleted: true });
    expect(await client.vectorStores.delete(store.id)).toEqual({ id: store.id, object: "vector_store.deleted", deleted: true });
    await expect(client.vectorStores.retrieve(store.id)).rejects.toBeInstanceOf(NotFoundError);
  });

  it("answers unknown ids with NotFoundError", async () => {
    await expect(client.vectorStores.retrieve("vs_missing")).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.files.retrieve("file-missing")).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.vectorStores.files.create("vs_docs", { file_id: "file-missing" })).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.vectorStores.files.retrieve("file-missing", { vector_store_id: "vs_docs" })).rejects.toBeInstanceOf(NotFoundError);
    const error = await client.responses
      .create({ model: MODEL, input: "x #file-search", tools: [{ type: "file_search", vector_store_ids: ["vs_missing"] }] })
      .catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(NotFoundError);
  });
});

describe("test-control endpoints", () => {
  it("lists, clears and resets recorded requests and state", async () => {
    const root = backend.url.replace(/\/v1$/, "");
    await client.models.list();
    const recorded = await (await fetch(`${root}/__requests`)).json();
    expect(recorded).toEqual([expect.objectContaining({ method: "GET", path: "/v1/models", body: null })]);

    expect((await fetch(`${root}/__requests`, { method: "DELETE" })).status).toBe(204);
    expect(backend.requests).toEqual([]);

    await client.vectorStores.delete("vs_docs");
    expect((await fetch(`${root}/__reset`, { method: "POST" })).status).toBe(204);
    expect((await client.vectorStores.retrieve("vs_docs")).name).toBe("docs");
    expect(backend.requests).toEqual([expect.objectContaining({ path: "/v1/vector_stores/vs_docs" })]);
  });

  it("keeps only the latest requests when given a record limit", async () => {
    const limited = await startScriptedBackend({ recordLimit: 3 });
    try {
      const limitedClient = new OpenAI({ baseURL: limited.url, apiKey: "test-key", maxRetries: 0 });
      for (let i = 1; i <= 10; i++) await limitedClient.responses.create({ model: MODEL, input: `question ${i}` });
      const kept = (await (await fetch(limited.url.replace(/\/v1$/, "/__requests"))).json()) as { body: { input: string } }[];
      // Between the limit and twice it (trimmed in batches), always the latest, in order.
      expect(kept.length).toBeGreaterThanOrEqual(3);
      expect(kept.length).toBeLessThan(6);
      expect(kept.map((request) => request.body.input)).toEqual(Array.from({ length: kept.length }, (_, index) => `question ${11 - kept.length + index}`));
    } finally {
      await limited.close();
    }
  });
});
