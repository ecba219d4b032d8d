// POST /v1/responses driven by the official openai package, pointed at the Worker.
import OpenAI from "openai";
import { describe, expect, inject, it } from "vitest";
import { call, callJson, echoedRequest, openaiClient, readSse, testConfig, unlessSearch, wireMode } from "./helpers.ts";

const mcpFake = inject("mcp");

const client = (options: { user?: string; config?: string; headers?: Record<string, string> } = {}) => openaiClient({ user: "olivia", ...options });

type WithExtensions = { conversation: string; available_quotas: Record<string, number> };

describe("POST /v1/responses with the openai client", () => {
  it("creates a response and continues it by conversation", async () => {
    const openai = client();
    const first = (await openai.responses.create({ model: "scripted/parley-small", input: "Hello gateway" })) as unknown as OpenAI.Responses.Response & WithExtensions;
    expect(first.output_text).toBe("[user_turns=1] You said: Hello gateway");
    expect(first).toMatchObject({ object: "response", status: "completed", model: "scripted/parley-small", available_quotas: {} });
    // Normalized (SPEC "Conversation identifiers" rule 1), as the original returns it.
    expect(first.conversation).toMatch(/^[0-9a-f]{48}$/);
    expect(first.usage?.output_tokens).toBe(5);
    expect(first.instructions).toBe("<server prompt applied>");

    const second = await openai.responses.create({ model: "scripted/parley-small", input: "again", conversation: first.conversation } as never);
    expect(second.output_text).toBe("[user_turns=2] You said: again");
    // The SDK's object form of the same.
    const byObject = await openai.responses.create({ input: "by object", conversation: { id: first.conversation } });
    expect(byObject.output_text).toBe("[user_turns=3] You said: by object");
    expect((byObject as unknown as WithExtensions).conversation).toBe(first.conversation);
    // The backend form is taken too.
    const third = await openai.responses.create({ input: "third", conversation: `conv_${first.conversation}` } as never);
    expect(third.output_text).toBe("[user_turns=4] You said: third");
    expect(third.model).toBe("parley-small");

    expect((third as unknown as WithExtensions).conversation).toBe(first.conversation);
    const detail = await callJson<{ chat_history: unknown[] }>(`/v1/conversations/${first.conversation}`, { user: "olivia" });
    expect(detail.body.chat_history).toHaveLength(4);
  });

  it("continues by previous_response_id, and forks from an older response", async () => {
    const openai = client();
    const a = (await openai.responses.create({ input: "one" })) as unknown as OpenAI.Responses.Response & WithExtensions;
    const b = (await openai.responses.create({ input: "two", previous_response_id: a.id })) as unknown as OpenAI.Responses.Response & WithExtensions;
    expect(b.output_text).toBe("[user_turns=2] You said: two");
    expect(b.conversation).toBe(a.conversation);
    expect(b.previous_response_id).toBe(a.id);

    const fork = (await openai.responses.create({ input: "fork", previous_response_id: a.id })) as unknown as OpenAI.Responses.Response & WithExtensions;
    expect(fork.output_text).toBe("[user_turns=2] You said: fork");
    expect(fork.conversation).not.toBe(a.conversation);
    // The model saw the history up to the response forked from; the new conversation starts with the fork's turn.
    const forked = await callJson<{ chat_history: Array<{ messages: Array<{ content: string }> }> }>(`/v1/conversations/${fork.conversation}`, { user: "olivia" });
    expect(forked.body.chat_history.map((turn) => turn.messages[0]!.content)).toEqual(["fork"]);
    const listed = await callJson<{ conversations: Array<{ conversation_id: string; message_count: number }> }>("/v1/conversations", { user: "olivia" });
    expect(listed.body.conversations.find((c) => c.conversation_id === fork.conversation)?.message_count).toBe(1);
    const again = await openai.responses.create({ input: "after the fork", previous_response_id: fork.id });
    expect(again.output_text).toBe("[user_turns=3] You said: after the fork");

    const c = await openai.responses.create({ input: "three", previous_response_id: b.id });
    expect(c.output_text).toBe("[user_turns=3] You said: three");
  });

  it("streams events the openai parser accepts, with conversation and available_quotas", async () => {
    const openai = client();
    const stream = await openai.responses.create({ input: "stream me", stream: true });
    const events: Array<Record<string, unknown>> = [];
    for await (const event of stream) events.push(event as unknown as Record<string, unknown>);
    const types = events.map((e) => e.type);
    expect(types[0]).toBe("response.created");
    expect(types.at(-1)).toBe("response.completed");
    expect(types.filter((t) => t === "response.output_text.delta")).toHaveLength(5);
    const completed = events.at(-1)!;
    expect(completed.available_quotas).toEqual({});
    expect(completed.conversation).toMatch(/^[0-9a-f]{48}$/);
    expect((completed.response as WithExtensions).conversation).toBe(completed.conversation);
    const inProgress = events.find((e) => e.type === "response.in_progress")!;
    expect(inProgress.available_quotas).toEqual({});
    expect((inProgress.response as WithExtensions).available_quotas).toEqual({});
    expect(events.find((e) => e.type === "response.created")!.available_quotas).toBeUndefined();
  });

  it("works with responses.stream() and finalResponse()", async () => {
    const openai = client();
    const runner = openai.responses.stream({ input: "final please" });
    const deltas: string[] = [];
    runner.on("response.output_text.delta", (event) => deltas.push(event.delta));
    const final = await runner.finalResponse();
    expect(final.output_text).toBe("[user_turns=1] You said: final please");
    expect(deltas.join("")).toBe(final.output_text);
  });

  it("ends the raw stream with [DONE] and persists the turn first", async () => {
    const response = await call("/v1/responses", { json: { input: "raw", stream: true }, user: "olivia" });
    const events = await readSse(response);
    expect(events.at(-1)!.data).toBe("[DONE]");
    const completed = events.at(-2)!.data as { response: { conversation: string } };
    const detail = await callJson<{ chat_history: unknown[] }>(`/v1/conversations/${completed.response.conversation}`, { user: "olivia" });
    expect(detail.body.chat_history).toHaveLength(1);
  });

  it("surfaces errors as the SDK's typed errors", async () => {
    const openai = client();
    await expect(openai.responses.create({ input: "x", temperature: 3 })).rejects.toBeInstanceOf(OpenAI.UnprocessableEntityError);
    await expect(openai.responses.create({ input: "x", model: "scripted/no-such-model" })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(openai.responses.create({ input: "x", previous_response_id: "resp_unknown" })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const a = await openai.responses.create({ input: "mine" });
    await expect(client({ user: "mallory" }).responses.create({ input: "x", previous_response_id: a.id })).rejects.toBeInstanceOf(OpenAI.PermissionDeniedError);
    const conflict = testConfig({ mcp_servers: [{ name: "docs", url: "http://127.0.0.1:9/mcp" }] });
    await expect(
      client({ config: conflict, headers: { "X-SVC-Merge-Server-Tools": "true" } }).responses.create({
        input: "x",
        tools: [{ type: "mcp", server_label: "docs", server_url: "http://127.0.0.1:9/other" } as never],
      }),
    ).rejects.toBeInstanceOf(OpenAI.ConflictError);
  });
});

describe("POST /v1/responses rules", () => {
  const post = (json: unknown, options: { config?: string; headers?: Record<string, string>; user?: string } = {}) =>
    callJson<Record<string, unknown> & { detail?: { response: string; cause: string } }>("/v1/responses", { json, user: options.user ?? "olivia", ...options });

  it("rejects conversation with previous_response_id, naming both", async () => {
    const res = await post({ input: "x", conversation: "a".repeat(48), previous_response_id: "resp_1" });
    expect(res.status).toBe(422);
    expect(res.body.detail!.cause).toContain("conversation");
    expect(res.body.detail!.cause).toContain("previous_response_id");
  });

  it("rejects a conversation id in no form a conversation id has (422, as the original), and looks up the forms it accepts", async () => {
    const res = await post({ input: "x", conversation: "short-id" });
    expect(res.status).toBe(422);
    expect(res.body.detail).toEqual({ response: "Invalid attribute value", cause: expect.stringContaining("Improper conversation ID 'short-id'") });
    // A well-formed id of no conversation is not found; a UUID is a form the original accepts (and never finds).
    for (const id of [`conv_${"b".repeat(48)}`, "123e4567-e89b-12d3-a456-426614174000"]) {
      const missing = await post({ input: "x", conversation: id });
      expect(missing.status, id).toBe(404);
      expect(missing.body.detail!.response).toBe("Conversation not found");
    }
  });

  it.each([
    [{ input: "x", include: ["nope"] }],
    [{ input: "x", temperature: -0.1 }],
    [{ input: "x", tools: [{ type: "file_search", vector_store_ids: ["vs_docs"], max_num_results: 51 }] }],
    [{ input: "x", tools: [{ type: "file_search", vector_store_ids: ["vs_docs"], max_num_results: 0 }] }],
    [{ input: "x", tool_choice: { type: "function" } }],
    [{ input: "x", text: { format: { type: "json_schema" } } }],
    [{ input: "x", surprise: true }],
    [{ input: [] }],
    [{}],
  ])("422 for %j", async (json) => {
    expect((await post(json)).status).toBe(422);
  });

  it("refuses the client's own tool mistakes with 422, before the backend refuses them as a server fault", async () => {
    const fn = (name: string) => ({ type: "function", name, parameters: { type: "object", properties: {} } });
    const refused = async (json: unknown, field: string) => {
      const res = await post(json);
      expect(res.status, JSON.stringify(json)).toBe(422);
      expect(res.body.detail, JSON.stringify(json)).toMatchObject({ response: "Invalid attribute value", cause: expect.stringContaining(field) });
      return res.body.detail!.cause;
    };
    expect(await refused({ input: "x", tools: [fn("f"), fn("f")] }, "tools.1.name")).toContain("duplicate function name 'f'");
    await refused({ input: "x", tools: [fn("bad name!")] }, "tools.0.name");
    await refused({ input: "x", tools: [fn("a".repeat(65))] }, "tools.0.name");
    expect(await refused({ input: "x", tools: [fn("lookup")], tool_choice: { type: "function", name: "nope" } }, "tool_choice.name")).toContain("'nope'");
    await refused({ input: "x", tool_choice: { type: "function", name: "lookup" } }, "tool_choice.name");
    expect((await post({ input: "x", tools: [fn("look-up_2")], tool_choice: { type: "function", name: "look-up_2" } })).status).toBe(200);

    await refused({ input: "x", metadata: { ["k".repeat(65)]: "v" } }, "metadata");
    await refused({ input: "x", metadata: { k: "v".repeat(513) } }, "metadata");
    expect((await post({ input: "x", metadata: { ["k".repeat(64)]: "v".repeat(512) } })).status).toBe(200);
  });

  it("refuses a function output that answers no call with 422, and takes one that does", async () => {
    const output = (callId: string) => ({ type: "function_call_output", call_id: callId, output: "42" });
    const orphan = await post({ input: [output("call_zzz")] });
    expect(orphan.status).toBe(422);
    expect(orphan.body.detail).toEqual({ response: "Invalid attribute value", cause: "No tool call found for function call output with call_id call_zzz." });

    // The call sent with it (a stateless client resending its items) is answered.
    const call = { type: "function_call", call_id: "call_own", name: "lookup", arguments: "{}" };
    expect((await post({ input: [{ role: "user", content: "q" }, call, output("call_own")] })).status).toBe(200);

    // A call of the conversation's history is answered by its id; another id still is not.
    const fn = { type: "function", name: "lookup", parameters: { type: "object", properties: {} } };
    const asked = await post({ input: "#call-tool:lookup", tools: [fn] });
    const called = (asked.body.output as Array<{ type: string; call_id: string }>).find((item) => item.type === "function_call")!;
    const wrong = await post({ input: [output("call_other")], previous_response_id: asked.body.id, tools: [fn] });
    expect(wrong.status).toBe(422);
    const answered = await post({ input: [output(called.call_id)], previous_response_id: asked.body.id, tools: [fn] });
    expect(answered.status).toBe(200);
  });

  it("accepts reasoning and max_output_tokens but does not send them to the backend", async () => {
    const res = await post({ input: "#echo-request", reasoning: { effort: "low" }, max_output_tokens: 50 });
    expect(res.status).toBe(200);
    const sent = echoedRequest(res.body.output_text as string) as Record<string, unknown>;
    expect(sent.reasoning).toBeUndefined();
    expect(sent.max_output_tokens).toBeUndefined();
    expect(res.body.reasoning).toBeNull();
    expect(res.body.max_output_tokens).toBeNull();
  });

  it("echoes client instructions and rejects them when disabled", async () => {
    const res = await post({ input: "#echo-request", instructions: "Answer in French." });
    expect(res.body.instructions).toBe("Answer in French.");
    expect(echoedRequest(res.body.output_text as string).instructions).toBe("Answer in French.");
    const disabled = await post({ input: "x", instructions: "no" }, { config: testConfig({ customization: { disable_query_system_prompt: true } }) });
    expect(disabled.status).toBe(422);
    expect(disabled.body.detail!.response).toBe("instructions rejected");
    expect(disabled.body.detail!.cause).toContain("`instructions`");
  });

  it("uses server tools by default, client tools instead, both with the merge header, and hides server MCP definitions", async () => {
    // The gateway runs MCP tools: the backend is offered them as functions, never as `mcp` tools.
    const config = testConfig({ mcp_servers: [{ name: "docs", url: `${mcpFake.base}/s/responses-tools/mcp` }] });
    const offered = (res: { body: Record<string, unknown> }) => echoedRequest(res.body.output_text as string).tools as Array<{ type: string; name: string }>;
    const serverOnly = await post({ input: "#echo-request" }, { config });
    // The server's tools: its MCP servers' as functions and, with no rag list configured, file_search
    // over every store the backend has (a Chat Completions backend is not sent it: Parley searches).
    const fileSearch = { type: "file_search", vector_store_ids: expect.arrayContaining(["vs_docs", "portal-rag"]), max_num_results: 10 };
    const serverFunctions = wireMode() === "chat" ? offered(serverOnly) : offered(serverOnly).slice(1);
    if (wireMode() !== "chat") expect(offered(serverOnly)[0]).toEqual(fileSearch);
    expect(serverFunctions.map((t) => t.type)).toEqual(Array(serverFunctions.length).fill("function"));
    expect(serverFunctions.map((t) => t.name)).toContain("echo");
    expect(serverOnly.body.tools).toEqual([fileSearch]);

    const fn = { type: "function", name: "lookup", parameters: { type: "object", properties: {} } };
    const clientOnly = await post({ input: "#echo-request", tools: [fn] }, { config });
    expect(offered(clientOnly).map((t) => t.name)).toEqual(["lookup"]);

    const merged = await post({ input: "#echo-request", tools: [fn] }, { config, headers: { "X-SVC-Merge-Server-Tools": "true" } });
    expect(offered(merged)[0]!.name).toBe("lookup");
    expect(offered(merged).map((t) => t.name)).toContain("echo");
    expect((merged.body.tools as Array<{ type: string }>).map((t) => t.type)).toEqual(["function", "file_search"]);

    const rag = testConfig({ byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/data/docs" }] });
    const conflicting = await post(
      { input: "x", tools: [{ type: "file_search", vector_store_ids: ["docs"] }] },
      { config: rag, headers: { "X-SVC-Merge-Server-Tools": "true" } },
    );
    expect(conflicting.status).toBe(409);
    expect(conflicting.body.detail!.response).toBe("Tool conflict detected");
  });

  it("takes an allowed_tools filter without a type as allowing no tool, as the original does", async () => {
    const choice = { type: "allowed_tools", mode: "required", tools: [{ "non-existing": "tool" }] };
    const none = await post({ input: "Say hello", tools: [], tool_choice: choice });
    expect(none.status).toBe(200);
    expect((none.body.output as Array<{ type: string }>).map((item) => item.type)).toEqual(["message"]);
    // With a tool offered, the backend is told that none may be called.
    const fn = { type: "function", name: "lookup", parameters: { type: "object", properties: {} } };
    const offered = await post({ input: "#echo-request", tools: [fn], tool_choice: choice });
    expect(offered.status).toBe(200);
    expect(echoedRequest(offered.body.output_text as string).tool_choice).toBe("none");
  });

  it("translates store ids to the backend and back", async () => {
    const rag = testConfig({ byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/data/docs" }] });
    const res = await post({ input: "#echo-request", tools: [{ type: "file_search", vector_store_ids: ["docs"] }] }, { config: rag });
    // A Chat Completions backend has no file_search tool: Parley searches the store itself, by its backend id.
    if (wireMode() !== "chat") expect(echoedRequest(res.body.output_text as string).tools[0].vector_store_ids).toEqual(["vs_docs"]);
    expect((res.body.tools as Array<{ vector_store_ids: string[] }>)[0]!.vector_store_ids).toEqual(["docs"]);
  });

  it("counts only server-deployed tool activity when tools are merged", async () => {
    // (Server MCP events out of streams, a client's own shown: test/worker/mcp-turns.test.ts.)
    const config = testConfig({ mcp_servers: [{ name: "docs", url: `${mcpFake.base}/s/responses-counts/mcp` }] });
    const fn = { type: "function", name: "lookup", parameters: { type: "object", properties: {} } };
    const res = await post(
      { input: '#call-tool:lookup #call-tool:echo:{"text":"x"}', tools: [fn] },
      { config, headers: { "X-SVC-Merge-Server-Tools": "true" } },
    );
    // The client's function call waits for the client: the gateway runs the server's call and the turn ends.
    // The server's own MCP items are not shown (UPSTREAM "MCP"), yet they are what counts.
    expect(unlessSearch(res.body.output as Array<{ type: string }>).map((item) => item.type)).toEqual(["function_call", "message"]);
    const detail = await callJson<{ chat_history: Array<{ tool_calls: Array<{ name: string }> }> }>(
      `/v1/conversations/${String(res.body.conversation)}`,
      { user: "olivia" },
    );
    expect(unlessSearch(detail.body.chat_history[0]!.tool_calls).map((call) => call.name)).toEqual(["mcp_list_tools", "echo"]);
  });

  it("renders stored prompts with variables", async () => {
    const created = await callJson<{ prompt_id: string }>("/v1/prompts", { json: { prompt: "You are {{persona}}.", variables: ["persona"] } });
    const res = await post({ input: "#echo-request", prompt: { id: created.body.prompt_id, variables: { persona: "a pirate" } } });
    expect(echoedRequest(res.body.output_text as string).instructions).toBe("You are a pirate.");
    const missing = await post({ input: "x", prompt: { id: created.body.prompt_id } });
    expect(missing.status).toBe(422);
    const unknown = await post({ input: "x", prompt: { id: `pmpt_${"0".repeat(48)}` } });
    expect(unknown.status).toBe(404);
    // A version it does not have is told as GET /v1/prompts/{id}?version= tells it.
    const version = await post({ input: "x", prompt: { id: created.body.prompt_id, version: "99", variables: { persona: "a pirate" } } });
    expect([version.status, (version.body as { detail?: unknown }).detail]).toEqual([
      404,
      { response: "Prompt not found", cause: `Prompt with ID ${created.body.prompt_id} (version 99) does not exist` },
    ]);
  });
});
