// MCP tools in turns, through the Worker, against the real MCP server of test/fakes/mcp-server.ts and
// the scripted backend (which calls the tools its question names: #call-tool:NAME:{args}). The
// gateway lists the tools, offers them to the model as functions, runs the calls, hands the results
// back and loops; approvals gate calls until a client answers them, and an approved call runs once.
import { describe, expect, inject, it } from "vitest";
import { type CallOptions, call, callJson, echoedRequest, readSse, testConfig, unlessSearch, wireMode } from "./helpers.ts";

const fake = inject("mcp");
const label = (prefix: string) => `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
const url = (kind: "s" | "auth" | "hang", name: string) => `${fake.base}/${kind}/${name}/mcp`;
const calls = async (name: string) => (await (await fetch(`${fake.base}/__stats/${name}`)).json<{ call: number }>()).call;

type Item = Record<string, unknown> & { type: string };
type ResponsesBody = { id: string; status: string; output: Item[]; output_text: string; conversation: string; detail?: { response: string; cause: string } };
type QueryBody = { conversation_id: string; response: string; tool_calls: Item[]; tool_results: Item[]; detail?: { response: string; cause: string } };

/** A configuration with MCP servers (the tests' fake is on 127.0.0.1, which clients may name here). */
const configWith = (servers: unknown[], extra: Record<string, unknown> = {}) =>
  testConfig({ mcp_servers: servers, mcp_security: { allowed_internal_hosts: ["127.0.0.1"] }, ...extra });

const respond = (json: Record<string, unknown>, options: CallOptions = {}) => callJson<ResponsesBody>("/v1/responses", { user: "olivia", ...options, json });
const ask = (json: Record<string, unknown>, options: CallOptions = {}) => callJson<QueryBody>("/v1/query", { user: "olivia", ...options, json });
const ofType = (output: Item[], type: string) => output.filter((item) => item.type === type);
/** A client's own `mcp` tool: unlike the server's own, its lists and calls are shown in /v1/responses output. */
const ownTool = (server: string, name: string) => ({ type: "mcp", server_label: server, server_url: url("s", name), require_approval: "never" });
const approve = (id: string, approveIt = true, reason?: string) => ({ type: "mcp_approval_response", approval_request_id: id, approve: approveIt, ...(reason ? { reason } : {}) });

describe("tools in a turn", () => {
  it("lists the server's tools, runs the call the model makes and hands the result back", async () => {
    const name = label("run");
    const config = configWith([]);
    const { status, body } = await respond({ input: 'say it #call-tool:echo:{"text":"ping-42"} #echo-request', tools: [ownTool("public", name)] }, { config });
    expect(status).toBe(200);
    expect(body.status).toBe("completed");
    const [list] = ofType(body.output, "mcp_list_tools");
    expect(list).toMatchObject({ server_label: "public", error: null });
    expect((list!.tools as Array<{ name: string }>).map((tool) => tool.name)).toContain("echo");
    const [mcpCall] = ofType(body.output, "mcp_call");
    expect(mcpCall).toMatchObject({ server_label: "public", name: "echo", arguments: '{"text":"ping-42"}', output: "ping-42", error: null, status: "completed" });
    // The model's second call carried the function call and its output (the scripted backend echoes its request).
    const lastMessage = ofType(body.output, "message").at(-1)!;
    const seen = echoedRequest((lastMessage.content as Array<{ text: string }>)[0]!.text);
    expect(seen.input.find((item) => item.type === "function_call_output")).toMatchObject({ output: "ping-42" });
    expect(seen.tools.every((tool: { type: string }) => tool.type === "function")).toBe(true);
    expect(await calls(name)).toBe(1);
  });

  it("answers the model's call of a tool nobody offered itself, so the conversation goes on without a dangling call", async () => {
    const config = configWith([{ name: "public", url: url("s", label("made-up")) }]);
    const first = await ask({ query: "use #call-tool:no_such_tool:{}" }, { config });
    expect(first.status).toBe(200);
    expect(unlessSearch(first.body.tool_calls).map((c) => c.name)).toEqual(["mcp_list_tools"]);
    // The model was told, and answered (with a client's function it would have waited for the client).
    const told = await respond({ input: "use #call-tool:no_such_tool:{} then say #echo-request" }, { config });
    const said = ofType(told.body.output, "message").at(-1)!.content as Array<{ text: string }>;
    const seen = echoedRequest(said[0]!.text);
    expect(seen.input.find((item) => item.type === "function_call_output")).toMatchObject({ output: expect.stringContaining("There is no tool named 'no_such_tool'") });
    // Nothing of it is left for later turns: no function call without its output.
    const next = await ask({ query: "and now #echo-request", conversation_id: first.body.conversation_id }, { config });
    const later = echoedRequest(next.body.response);
    expect(later.input.filter((item) => item.type === "function_call")).toEqual([]);
    // On /v1/responses, a client's own function still waits for the client.
    const fn = { type: "function", name: "lookup", parameters: { type: "object", properties: {} } };
    const own = await respond({ input: "#call-tool:lookup", tools: [fn] }, { config });
    expect(ofType(own.body.output, "function_call")).toEqual([expect.objectContaining({ name: "lookup" })]);
  });

  it("uses a client mcp tool's credentials and shows them redacted in the response", async () => {
    const name = label("creds");
    const config = configWith([]);
    const tool = { type: "mcp", server_label: "mine", server_url: url("auth", name), require_approval: "never", authorization: fake.token, headers: { "X-Api-Key": "key-123" } };
    const { status, body } = await respond({ input: "who #call-tool:whoami:{}", tools: [tool] }, { config });
    expect(status).toBe(200);
    expect(ofType(body.output, "mcp_call")).toEqual([expect.objectContaining({ status: "completed" })]);
    const shown = (body as unknown as { tools: Item[] }).tools;
    expect(shown).toEqual([expect.objectContaining({ type: "mcp", server_label: "mine", authorization: "**********", headers: { "X-Api-Key": "**********" } })]);
    expect(JSON.stringify(body)).not.toContain(fake.token);
    expect(JSON.stringify(body)).not.toContain("key-123");
  });

  it("reports the call on the query endpoints as tool_calls and tool_results, and streams them", async () => {
    const config = configWith([{ name: "public", url: url("s", label("query")) }]);
    const { status, body } = await ask({ query: 'add #call-tool:add:{"a":2,"b":3}' }, { config });
    expect(status).toBe(200);
    expect(unlessSearch(body.tool_calls).map((c) => c.name)).toEqual(["mcp_list_tools", "add"]);
    expect(body.tool_calls.find((c) => c.name === "add")).toMatchObject({ args: { a: 2, b: 3, server_label: "public" }, type: "tool_call" });
    expect(body.tool_results.find((r) => r.content === "5")).toMatchObject({ status: "success", type: "tool_result" });
    // Each model call's message, trimmed and joined with a space, as the original's llm_response.
    const question = 'add #call-tool:add:{"a":2,"b":3}';
    expect(body.response).toBe(`[user_turns=1] You said: ${question} [user_turns=1] You said: ${question} [tool outputs: 5]`);

    const stream = await call("/v1/streaming_query", { user: "olivia", config, json: { query: 'add #call-tool:add:{"a":1,"b":1}' } });
    const events = (await readSse(stream)).map((e) => e.data as { event: string; data: Record<string, unknown> });
    const toolCall = events.find((e) => e.event === "tool_call" && e.data.name === "add");
    const toolResult = events.find((e) => e.event === "tool_result" && e.data.content === "2");
    expect(toolCall && toolResult).toBeTruthy();
    expect(events.at(-1)!.event).toBe("end");
  });

  it("keeps server MCP events out of a responses stream but shows a client's own MCP tool, indexes dense", async () => {
    const config = configWith([{ name: "public", url: url("s", label("stream")) }]);
    const hidden = await call("/v1/responses", { user: "olivia", config, json: { input: 'x #call-tool:echo:{"text":"a"}', stream: true } });
    const hiddenEvents = (await readSse(hidden)).filter((e) => e.event).map((e) => e.data as Record<string, unknown>);
    expect(hiddenEvents.some((e) => String(e.type).includes("mcp"))).toBe(false);
    const done = hiddenEvents.find((e) => e.type === "response.completed")!.response as { output: Item[] };
    expect(unlessSearch(done.output).map((item) => item.type)).toEqual(["message", "message"]);

    const own = await call("/v1/responses", {
      user: "olivia",
      config,
      json: { input: 'x #call-tool:echo:{"text":"b"}', stream: true, tools: [{ type: "mcp", server_label: "mine", server_url: url("s", label("own")), require_approval: "never" }] },
    });
    const events = (await readSse(own)).filter((e) => e.event).map((e) => e.data as Record<string, unknown>);
    const types = events.map((e) => e.type);
    expect(types).toContain("response.mcp_list_tools.completed");
    expect(types).toContain("response.mcp_call.completed");
    const added = events.filter((e) => e.type === "response.output_item.added").map((e) => [e.output_index, (e.item as Item).type]);
    expect(added).toEqual([
      [0, "mcp_list_tools"],
      [1, "message"],
      [2, "mcp_call"],
      [3, "message"],
    ]);
    const final = events.find((e) => e.type === "response.completed")!.response as { output: Item[] };
    expect(final.output.map((item) => item.type)).toEqual(["mcp_list_tools", "message", "mcp_call", "message"]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
  });

  it("a JSON answer shows what the stream shows: the server's own MCP lists and calls stripped, its approval requests kept", async () => {
    const config = configWith([
      { name: "public", url: url("s", label("strip")) },
      { name: "down", url: fake.downUrl },
      { name: "gated", url: url("s", label("strip-gated")), require_approval: "always" },
    ]);
    const input = 'hello #call-tool:public__add:{"a":1,"b":2} #call-tool:gated__echo:{"text":"g"}';
    const json = await respond({ input }, { config });
    expect(json.status).toBe(200);
    expect(unlessSearch(json.body.output).map((item) => item.type)).toEqual(["message", "mcp_approval_request"]);
    expect(JSON.stringify(json.body)).not.toContain("failed while listing");
    const stream = await call("/v1/responses", { user: "olivia", config, json: { input, stream: true } });
    const completed = (await readSse(stream)).map((e) => e.data as Record<string, unknown>).find((e) => e.type === "response.completed")!;
    expect((completed.response as { output: Item[] }).output.map((item) => item.type)).toEqual(json.body.output.map((item) => item.type));
  });

  it("stops at max_infer_iters and max_tool_calls, reporting the calls it did not run", async () => {
    const name = label("limits");
    const config = configWith([{ name: "public", url: url("s", name) }]);
    const tools = [ownTool("public", name)];
    const once = await respond({ input: 'loop #keep-calling #call-tool:echo:{"text":"again"}', max_infer_iters: 3, tools }, { config });
    expect(once.status).toBe(200);
    const loopCalls = ofType(once.body.output, "mcp_call");
    expect(loopCalls.map((c) => c.status)).toEqual(["completed", "completed", "failed"]);
    expect(loopCalls[2]!.error).toContain("max_infer_iters");
    expect(await calls(name)).toBe(2);

    const capped = await respond({ input: 'two #call-tool:echo:{"text":"1"} #call-tool:echo:{"text":"2"}', max_tool_calls: 1, tools }, { config });
    const cappedCalls = ofType(capped.body.output, "mcp_call");
    expect(cappedCalls.map((c) => c.status)).toEqual(["completed", "failed"]);
    expect(cappedCalls[1]!.error).toContain("max_tool_calls");

    // Without bounds in the request, the documented defaults hold (10 model calls).
    const unbounded = await ask({ query: 'loop #keep-calling #call-tool:echo:{"text":"x"}' }, { config });
    expect(unbounded.status).toBe(200);
    expect(unbounded.body.tool_calls.filter((c) => c.name === "echo")).toHaveLength(10);
  });

  it("reports a failing, slow, oversized or unreachable tool as a failed result, and the turn goes on", async () => {
    const config = configWith([
      { name: "public", url: url("s", label("faults")), timeout: 1 },
      { name: "gone", url: fake.downUrl },
    ]);
    // On the query endpoints, which show the server's own tools' activity.
    const { status, body } = await ask({ query: 'faults #call-tool:fail:{"message":"no"} #call-tool:sleep:{"ms":3000} #call-tool:big:{"bytes":70000}' }, { config });
    expect(status).toBe(200);
    const resultOf = (toolCall: Item | undefined) => body.tool_results.find((result) => result.id === toolCall?.id)!;
    const gone = body.tool_calls.find((toolCall) => toolCall.name === "mcp_list_tools" && (toolCall.args as Item).server_label === "gone");
    expect(resultOf(gone).status).toBe("failure");
    const [failed, slow, big] = ["fail", "sleep", "big"].map((name) => resultOf(body.tool_calls.find((toolCall) => toolCall.name === name)));
    expect(failed).toMatchObject({ status: "failure", content: "no" });
    expect(slow).toMatchObject({ status: "failure" });
    expect(String(slow!.content)).toContain("did not finish");
    expect(big!.status).toBe("success");
    expect(String(big!.content).length).toBeLessThan(70_000);
    expect(String(big!.content)).toContain("output truncated");
  });

  it("a hung server costs one wait, not one per request: its failed listing is remembered for a while", async () => {
    const config = configWith([{ name: "stuck", url: url("hang", label("stuck")), timeout: 1 }]);
    const timed = async (run: () => Promise<{ status: number }>) => {
      const started = Date.now();
      const { status } = await run();
      return { status, ms: Date.now() - started };
    };
    const first = await timed(() => ask({ query: "plain" }, { config }));
    expect(first.status).toBe(200);
    expect(first.ms).toBeGreaterThanOrEqual(900);
    // Every later request, of any endpoint, goes on without the server at once.
    const again = await timed(() => ask({ query: "plain" }, { config }));
    expect(again).toMatchObject({ status: 200 });
    expect(again.ms).toBeLessThan(500);
    const streamed = await timed(async () => {
      const response = await call("/v1/responses", { user: "olivia", config, json: { input: "plain", stream: true } });
      await readSse(response);
      return response;
    });
    expect(streamed.ms).toBeLessThan(500);
  });

  it("tool_choice mcp without a name forces one of that server's tools only; an unknown server or tool is a 422", async () => {
    const config = configWith([]);
    const tools = ["c1", "c2"].map((server) => ({ type: "mcp", server_label: server, server_url: url("s", label(server)), require_approval: "never" }));
    const asked = await respond({ input: "x #echo-request", tools, tool_choice: { type: "mcp", server_label: "c1" } }, { config });
    expect(asked.status).toBe(200);
    const seen = echoedRequest(asked.body.output_text);
    const offered = (seen.tools as Array<{ name: string }>).map((tool) => tool.name);
    const ofC1 = offered.filter((name) => name.startsWith("c1__"));
    expect(ofC1.length).toBeGreaterThan(0);
    if (wireMode() === "chat") {
      // Chat Completions narrows the tools themselves (chat-request.ts): only c1's go, one of them required.
      expect(ofC1).toEqual(offered);
      expect(seen.tool_choice).toBe("required");
    } else {
      expect(offered.some((name) => name.startsWith("c2__"))).toBe(true);
      expect(seen.tool_choice).toEqual({ type: "allowed_tools", mode: "required", tools: ofC1.map((name) => ({ type: "function", name })) });
    }

    const named = await respond({ input: "x #echo-request", tools, tool_choice: { type: "mcp", server_label: "c1", name: "echo" } }, { config });
    expect(echoedRequest(named.body.output_text).tool_choice).toEqual(
      wireMode() === "chat" ? { type: "function", function: { name: "c1__echo" } } : { type: "function", name: "c1__echo" },
    );

    const unknownServer = await respond({ input: "x", tools, tool_choice: { type: "mcp", server_label: "zz" } }, { config });
    expect(unknownServer.status).toBe(422);
    expect(unknownServer.body.detail!.cause).toContain("'zz'");
    const unknownTool = await respond({ input: "x", tools, tool_choice: { type: "mcp", server_label: "c1", name: "nope" } }, { config });
    expect(unknownTool.status).toBe(422);
    expect(unknownTool.body.detail!.cause).toContain("'nope'");
  });

  it("says which tool it calls on A2A", async () => {
    const config = configWith([{ name: "public", url: url("s", label("a2a")) }]);
    const response = await call("/a2a", {
      user: "olivia",
      config,
      headers: { Accept: "text/event-stream" },
      json: {
        jsonrpc: "2.0",
        id: 1,
        method: "message/stream",
        params: { message: { kind: "message", role: "user", messageId: crypto.randomUUID(), parts: [{ kind: "text", text: 'hi #call-tool:echo:{"text":"a2a"}' }] } },
      },
    });
    const messages = (await readSse(response)).map((e) => JSON.stringify(e.data));
    expect(messages.some((line) => line.includes("Calling tool: echo"))).toBe(true);
    expect(messages.at(-1)).toContain('"completed"');
  });
});

describe("credentials of the turn's servers", () => {
  it("kubernetes passes the caller's token, client takes MCP-HEADERS, and oauth answers 401 with the challenge", async () => {
    const k8s = configWith([{ name: "cluster", url: url("auth", label("k8s")), authorization_headers: { Authorization: "kubernetes" } }], {
      authentication: { module: "noop-with-token" },
      rlsapi_v1: { allow_verbose_infer: true },
    });
    const byToken = await ask({ query: "who #call-tool:whoami" }, { config: k8s, token: fake.token });
    expect(byToken.body.tool_results.find((r) => r.content === "authorized")).toBeTruthy();
    // /v1/infer hands its servers neither the caller's token nor MCP-HEADERS (UPSTREAM): one that
    // needs either is left out of the turn, which goes on without its tools.
    const inferred = await callJson<{ data: { text: string; tool_calls: Item[]; tool_results: Item[] } }>("/v1/infer", {
      config: k8s,
      token: fake.token,
      headers: { "MCP-HEADERS": JSON.stringify({ cluster: { Authorization: `Bearer ${fake.token}` } }) },
      json: { question: "who #call-tool:whoami", include_metadata: true },
    });
    expect(inferred.status).toBe(200);
    expect(inferred.body.data.tool_calls.filter((c) => c.name === "mcp_list_tools")).toEqual([]);
    expect(inferred.body.data.tool_results.find((r) => r.content === "authorized")).toBeUndefined();

    const client = configWith([{ name: "by-client", url: url("auth", label("client")), authorization_headers: { Authorization: "client" } }]);
    const withHeaders = await ask(
      { query: "who #call-tool:whoami" },
      { config: client, headers: { "MCP-HEADERS": JSON.stringify({ "by-client": { Authorization: `Bearer ${fake.token}` } }) } },
    );
    expect(withHeaders.body.tool_results.find((r) => r.content === "authorized")).toBeTruthy();
    // Without its credential the server is left out of the turn: no tools, and the answer goes on.
    const without = await ask({ query: "who #call-tool:whoami" }, { config: client });
    expect(without.status).toBe(200);
    expect(without.body.tool_calls.filter((c) => c.name === "mcp_list_tools")).toEqual([]);

    const oauth = configWith([{ name: "by-oauth", url: url("auth", label("oauth")), authorization_headers: { Authorization: "oauth" } }]);
    for (const path of ["/v1/query", "/v1/streaming_query", "/v1/responses"]) {
      const refused = await call(path, { user: "olivia", config: oauth, json: path === "/v1/responses" ? { input: "x" } : { query: "x" } });
      expect(refused.status).toBe(401);
      expect(refused.headers.get("WWW-Authenticate")).toContain("mcp-fake");
      await refused.body?.cancel();
    }
    // no_tools turns use no MCP server: nothing to probe.
    expect((await ask({ query: "x", no_tools: true }, { config: oauth })).status).toBe(200);
    // /v1/infer and A2A are not probed (UPSTREAM): their clients run no OAuth flow, so the server
    // is only left out of the turn.
    const infer = await callJson<{ data: { text: string } }>("/v1/infer", { user: "olivia", config: oauth, json: { question: "plain" } });
    expect(infer.status).toBe(200);
    expect(infer.body.data.text).toContain("You said: plain");
    const a2a = await callJson<{ result: { kind: string } }>("/a2a", {
      user: "olivia",
      config: oauth,
      json: { jsonrpc: "2.0", id: "1", method: "message/send", params: { message: { kind: "message", messageId: "m-oauth", role: "user", parts: [{ kind: "text", text: "plain" }] } } },
    });
    expect(a2a.status).toBe(200);
    expect(a2a.body.result).toMatchObject({ kind: "task", status: { state: "completed" } });
  });

  it("a credential the deployment holds (${env.NAME}) reaches the server", async () => {
    // The Worker and its Durable Objects share the deployment's secrets (vitest.config.ts binds this one).
    const config = configWith([{ name: "held", url: url("auth", label("held")), authorization_headers: { Authorization: "${env.MCP_TURN_CREDENTIAL}" } }]);
    const { body } = await ask({ query: "who #call-tool:whoami" }, { config });
    expect(body.tool_results.find((r) => r.content === "authorized")).toBeTruthy();
  });

  it("runs a server registered through the API, and refuses a client tool on an internal address", async () => {
    const name = label("registered");
    const config = configWith([]);
    const registered = await callJson("/v1/mcp-servers", { config, json: { name, url: url("s", name) } });
    expect(registered.status).toBe(201);
    const { body } = await ask({ query: 'x #call-tool:echo:{"text":"reg"}' }, { config });
    expect(body.tool_results.find((r) => r.content === "reg")).toBeTruthy();
    await callJson(`/v1/mcp-servers/${name}`, { config, method: "DELETE" });

    const guarded = testConfig();
    const refused = await respond({ input: "x", tools: [{ type: "mcp", server_label: "local", server_url: "http://169.254.169.254/mcp" }] }, { config: guarded });
    expect(refused.status).toBe(422);
    expect(refused.body.detail!.cause).toContain("tools[0].server_url");
  });
});

describe("approvals", () => {
  const gatedConfig = (name: string, approvals: Record<string, unknown> = {}) =>
    configWith([{ name: "guarded", url: url("s", name), require_approval: { always: ["echo"], never: ["add"] } }], { approvals });
  /** A responses turn that ended asking approval of the gated call `input` names: its server's label, configuration, answer and approval id. */
  const pendingApproval = async (tag: string, input: string, approvals: Record<string, unknown> = {}) => {
    const name = label(tag);
    const config = gatedConfig(name, approvals);
    const first = await respond({ input }, { config });
    const id = String(ofType(first.body.output, "mcp_approval_request")[0]!.id);
    return { name, config, first, id };
  };

  it("ends a responses turn with an approval request; approved, the call runs exactly once and the model continues", async () => {
    const name = label("approve");
    const config = gatedConfig(name);
    const first = await respond({ input: 'please #call-tool:echo:{"text":"approved-run"} #echo-request' }, { config });
    expect(first.status).toBe(200);
    expect(first.body.status).toBe("completed");
    const [request] = ofType(first.body.output, "mcp_approval_request");
    expect(request).toMatchObject({ server_label: "guarded", name: "echo", arguments: '{"text":"approved-run"}' });
    expect(String(request!.id)).toMatch(/^mcpr_/);
    expect(ofType(first.body.output, "mcp_call")).toEqual([]);
    expect(await calls(name)).toBe(0);

    const second = await respond({ previous_response_id: first.body.id, input: [approve(String(request!.id))] }, { config });
    expect(second.status).toBe(200);
    // The server's own call is not shown (only its approval request is); the model got its result.
    expect(ofType(second.body.output, "mcp_call")).toEqual([]);
    const seen = echoedRequest(second.body.output_text);
    expect(seen.input.find((item) => item.type === "function_call_output")).toMatchObject({ output: "approved-run" });
    expect(await calls(name)).toBe(1);

    // Sent again: already decided, nothing runs.
    const replay = await respond({ previous_response_id: second.body.id, input: [approve(String(request!.id))] }, { config });
    expect(replay.status).toBe(409);
    expect(replay.body.detail!.response).toBe("Approval request already decided");
    const replayByConversation = await respond({ conversation: first.body.conversation, input: [approve(String(request!.id))] }, { config });
    expect(replayByConversation.status).toBe(409);
    expect(await calls(name)).toBe(1);
  });

  it("refuses a tool_choice the turn cannot honour before the approved call runs, and the approval stays usable", async () => {
    const { name, config, first, id } = await pendingApproval("approve-choice", 'please #call-tool:echo:{"text":"chosen"}');
    const refused = await respond({ previous_response_id: first.body.id, input: [approve(id)], tool_choice: { type: "mcp", server_label: "guarded", name: "nope" } }, { config });
    expect([refused.status, refused.body.detail!.cause]).toEqual([422, "tool_choice: MCP server 'guarded' offers no tool 'nope'"]);
    expect(await calls(name)).toBe(0);
    expect((await respond({ previous_response_id: first.body.id, input: [approve(id)] }, { config })).status).toBe(200);
    expect(await calls(name)).toBe(1);
  });

  it("denied, the call never runs and the model is told", async () => {
    const { name, config, first, id } = await pendingApproval("deny", 'please #call-tool:echo:{"text":"never"} #echo-request');
    const denied = await respond({ conversation: first.body.conversation, input: [approve(id, false, "not today")] }, { config });
    expect(denied.status).toBe(200);
    expect(ofType(denied.body.output, "mcp_call")).toEqual([]);
    const seen = echoedRequest(denied.body.output_text);
    expect(String(seen.input.find((item) => item.type === "function_call_output")!.output)).toContain("denied");
    expect(await calls(name)).toBe(0);
    // Its record shows the answer.
    const detail = await callJson<{ chat_history: Array<{ tool_results: Item[] }> }>(`/v1/conversations/${first.body.conversation}`, { user: "olivia", config });
    expect(detail.body.chat_history[1]!.tool_results[0]).toMatchObject({ id, status: "denied", type: "mcp_approval_response" });
    // Later turns' history holds the denied call and its denial, as it holds an approved call and its result.
    const later = await respond({ conversation: first.body.conversation, input: "and now #echo-request" }, { config });
    const history = echoedRequest(later.body.output_text).input as Item[];
    const call = history.find((item) => item.type === "function_call")!;
    expect(call).toMatchObject({ name: "echo", arguments: '{"text":"never"}' });
    expect(history.find((item) => item.type === "function_call_output" && item.call_id === call.call_id)).toMatchObject({ output: "The user denied this tool call. Reason: not today" });
  });

  it("answers 404 for unknown, other users' and expired approvals, 409 for forks and stale ones; none of them runs anything", async () => {
    const { name, config, first, id } = await pendingApproval("refusals", 'please #call-tool:echo:{"text":"x"}', { approval_timeout_seconds: 1 });

    expect((await respond({ conversation: first.body.conversation, input: [approve("mcpr_unknown")] }, { config })).status).toBe(404);
    expect((await respond({ input: [approve(id)] }, { config })).status).toBe(404);
    const mallory = await respond({ input: "mine" }, { config, user: "mallory" });
    const otherUser = await respond({ conversation: mallory.body.conversation, input: [approve(id)] }, { config, user: "mallory" });
    expect(otherUser.status).toBe(404);
    expect(otherUser.body.detail!.response).toBe("Approval request not found");

    // The conversation moves on: the approval now answers an older turn.
    const later = await respond({ previous_response_id: first.body.id, input: "something else" }, { config });
    const stale = await respond({ previous_response_id: later.body.id, input: [approve(id)] }, { config });
    expect([stale.status, stale.body.detail!.response]).toEqual([409, "Approval request is not for the latest turn"]);
    // previous_response_id of an older response would fork the conversation.
    const fork = await respond({ previous_response_id: first.body.id, input: [approve(id)] }, { config });
    expect([fork.status, fork.body.detail!.response]).toEqual([409, "Approval request is not for the latest turn"]);

    const fresh = await respond({ input: 'again #call-tool:echo:{"text":"y"}' }, { config });
    const expiring = String(ofType(fresh.body.output, "mcp_approval_request")[0]!.id);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const expired = await respond({ previous_response_id: fresh.body.id, input: [approve(expiring)] }, { config });
    expect(expired.status).toBe(404);
    expect(await calls(name)).toBe(0);
  });

  it("runs the call once when the same approval arrives twice at once", async () => {
    const { name, config, first, id } = await pendingApproval("duplicate", 'please #call-tool:echo:{"text":"once"}');
    const both = await Promise.all([1, 2].map(() => respond({ previous_response_id: first.body.id, input: [approve(id)] }, { config })));
    expect(both.map((r) => r.status).sort()).toEqual([200, 409]);
    expect(both.find((r) => r.status === 409)!.body.detail!.response).toBe("Approval request already decided");
    expect(await calls(name)).toBe(1);
  });

  it("an approved call whose turn then failed is not run again when the answer is sent again: its result is reused", async () => {
    const { name, config, first, id } = await pendingApproval("retry", 'please #call-tool:echo:{"text":"kept-result"} #echo-request');
    // The call runs, then the model fails: nothing was answered, so the approval is not used up.
    const failed = await respond({ previous_response_id: first.body.id, input: [approve(id), { role: "user", content: "go on #fail-midstream" }] }, { config });
    expect(failed.status).toBe(500);
    expect(await calls(name)).toBe(1);
    const retried = await respond({ previous_response_id: first.body.id, input: [approve(id)] }, { config });
    expect(retried.status).toBe(200);
    expect(echoedRequest(retried.body.output_text).input.find((item) => item.type === "function_call_output")).toMatchObject({ output: "kept-result" });
    expect(await calls(name)).toBe(1);
  });

  it("an approval sent by a request that cannot reach its server is refused and stays usable", async () => {
    const name = label("unavailable");
    const config = configWith([]);
    const own = { type: "mcp", server_label: "c1", server_url: url("s", name), require_approval: "always" };
    const first = await respond({ input: 'x #call-tool:echo:{"text":"kept-approval"}', tools: [own] }, { config });
    const id = String(ofType(first.body.output, "mcp_approval_request")[0]!.id);
    const without = await respond({ previous_response_id: first.body.id, input: [approve(id)], tools: [] }, { config });
    expect(without.status).toBe(422);
    expect(without.body.detail!.cause).toContain("'c1'");
    expect(without.body.detail!.cause).toContain(id);
    expect(await calls(name)).toBe(0);
    const withTools = await respond({ previous_response_id: first.body.id, input: [approve(id)], tools: [own] }, { config });
    expect(withTools.status).toBe(200);
    expect(ofType(withTools.body.output, "mcp_call")[0]).toMatchObject({ server_label: "c1", output: "kept-approval", status: "completed" });
    expect(await calls(name)).toBe(1);
  });

  it("refuses a request's mcp tool whose require_approval lists a tool as both always and never", async () => {
    const tool = { type: "mcp", server_label: "c1", server_url: url("s", label("both")), require_approval: { always: { tool_names: ["echo"] }, never: { tool_names: ["echo", "add"] } } };
    const refused = await respond({ input: "x", tools: [tool] }, { config: configWith([]) });
    expect(refused.status).toBe(422);
    expect(refused.body.detail!.cause).toContain("tools.0.require_approval");
    expect(refused.body.detail!.cause).toContain("'echo'");
  });

  it("refuses an input that answers one approval twice, alike or not, and runs nothing", async () => {
    const { name, config, first, id } = await pendingApproval("twice", 'please #call-tool:echo:{"text":"twice"}');
    for (const answers of [[approve(id), approve(id, false)], [approve(id), approve(id)]]) {
      const refused = await respond({ previous_response_id: first.body.id, input: answers }, { config });
      expect(refused.status).toBe(422);
      expect(refused.body.detail!.cause).toContain(id);
    }
    expect(await calls(name)).toBe(0);
    // Still pending: a single answer runs it.
    expect((await respond({ previous_response_id: first.body.id, input: [approve(id)] }, { config })).status).toBe(200);
    expect(await calls(name)).toBe(1);
  });

  it("an approved call belongs to the turn that asked for it: before a new question sent with the approval, now and in later turns", async () => {
    const { name, config, first, id } = await pendingApproval("order", 'please #call-tool:echo:{"text":"ordered"}');
    const order = (text: string) => {
      const input = echoedRequest(text).input;
      const output = input.findIndex((item) => item.type === "function_call_output" && item.output === "ordered");
      const question = input.findIndex((item) => item.role === "user" && JSON.stringify(item.content).includes("and also this"));
      return { output, question };
    };
    const second = await respond({ previous_response_id: first.body.id, input: [approve(id), { role: "user", content: "and also this #echo-request" }] }, { config });
    expect(second.status).toBe(200);
    const now = order(second.body.output_text);
    expect(now.output).toBeGreaterThanOrEqual(0);
    expect(now.output).toBeLessThan(now.question);
    const third = await respond({ previous_response_id: second.body.id, input: "next #echo-request" }, { config });
    const later = order(third.body.output_text);
    expect(later.output).toBeGreaterThanOrEqual(0);
    expect(later.output).toBeLessThan(later.question);
  });

  it("on the query endpoints a gated call is not run, reported pending, and can be approved on /v1/responses", async () => {
    const name = label("query-gate");
    const config = gatedConfig(name);
    const asked = await ask({ query: 'gate #call-tool:echo:{"text":"later"} #call-tool:add:{"a":1,"b":2} #echo-request' }, { config });
    expect(asked.status).toBe(200);
    const pending = asked.body.tool_calls.find((c) => c.type === "mcp_approval_request")!;
    expect(pending).toMatchObject({ name: "echo", args: { text: "later", server_label: "guarded" } });
    // The ungated call ran.
    expect(asked.body.tool_results.find((r) => r.content === "3")).toBeTruthy();
    expect(await calls(name)).toBe(1);

    const approved = await respond({ conversation: asked.body.conversation_id, input: [approve(String(pending.id))] }, { config });
    expect(approved.status).toBe(200);
    expect(echoedRequest(approved.body.output_text).input.find((item) => item.type === "function_call_output" && item.output === "later")).toBeTruthy();
    expect(await calls(name)).toBe(2);
  });

  it("keeps decided approvals for approval_retention_days: with none, an answered one is gone", async () => {
    const { name, config, first, id } = await pendingApproval("retention", 'please #call-tool:echo:{"text":"r"}', { approval_retention_days: 0 });
    const second = await respond({ previous_response_id: first.body.id, input: [approve(id)] }, { config });
    expect(second.status).toBe(200);
    const replay = await respond({ previous_response_id: second.body.id, input: [approve(id)] }, { config });
    expect(replay.status).toBe(404);
    expect(await calls(name)).toBe(1);
  });
});
