// The A2A endpoints driven by the official A2A SDK client, pointed at the Worker.
import type { AgentCard, Message, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent } from "@a2a-js/sdk";
import { A2AClient } from "@a2a-js/sdk/client";
import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { call, callJson, echoedRequest, eventually, largestStoredValue, MAX_STORED_VALUE, readSse, testConfig, wireMode } from "./helpers.ts";

type StreamEvent = Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent | Message;
type RpcError = { jsonrpc: "2.0"; id: number | string | null; error: { code: number; message: string; data?: Record<string, unknown> } };

const CARD = {
  name: "Parley test agent",
  description: "Answers questions",
  provider: { organization: "Parley", url: "https://parley.example.com" },
  documentationUrl: "https://parley.example.com/docs",
  skills: [{ id: "qa", name: "Q&A", description: "Answers questions", tags: ["qa"], examples: ["What is Parley?"] }],
  securitySchemes: { bearer: { type: "http", scheme: "bearer" } },
  security: [{ bearer: [] }],
};
const BASE = "http://parley.test";
const config = testConfig({ service: { base_url: BASE }, customization: { agent_card_config: CARD } });

/** A fetch for the SDK client that sends every request to the Worker as `user`. */
function workerFetch(options: { user?: string; config?: string } = {}): typeof fetch {
  return (async (input: RequestInfo | URL, init?: RequestInit) => {
    const url = new URL(String(input instanceof Request ? input.url : input));
    return call(`${url.pathname}${url.search}`, {
      ...init,
      body: init?.body ?? undefined,
      user: options.user ?? "ada",
      config: options.config ?? config,
    });
  }) as typeof fetch;
}

function client(options: { user?: string; config?: string } = {}): Promise<A2AClient> {
  return A2AClient.fromCardUrl(`${BASE}/.well-known/agent-card.json`, { fetchImpl: workerFetch(options) });
}

function userMessage(text: string, extra: Partial<Message> = {}): Message {
  return { kind: "message", messageId: crypto.randomUUID(), role: "user", parts: [{ kind: "text", text }], ...extra };
}

/** The result of a JSON-RPC call, failing the test when it is an error. */
function ok<T>(response: { result: T } | RpcError): T {
  if ("error" in response) throw new Error(`unexpected JSON-RPC error ${JSON.stringify(response.error)}`);
  return response.result;
}

function rpcError(response: unknown): RpcError["error"] {
  expect(response).toHaveProperty("error");
  return (response as RpcError).error;
}

function answerOf(task: Task): string {
  const part = task.artifacts?.[0]?.parts[0];
  return part?.kind === "text" ? part.text : "";
}

function statusText(event: StreamEvent): string | undefined {
  if (event.kind !== "status-update") return undefined;
  const part = event.status.message?.parts[0];
  return part?.kind === "text" ? part.text : undefined;
}

/**
 * Reads a stream to its end, or only until `until` holds. Reads with next() rather than for-await,
 * which would close the stream on leaving early; the rest is read by a later call.
 */
async function collect(stream: AsyncGenerator<StreamEvent>, until?: (event: StreamEvent) => boolean): Promise<StreamEvent[]> {
  const events: StreamEvent[] = [];
  for (;;) {
    const step = await stream.next();
    if (step.done) return events;
    events.push(step.value);
    if (until?.(step.value)) return events;
  }
}

/** Posts a raw JSON-RPC body (or text) to /a2a. */
async function rpc(body: unknown, options: { accept?: string; user?: string; config?: string } = {}) {
  const response = await call("/a2a", {
    method: "POST",
    body: typeof body === "string" ? body : JSON.stringify(body),
    headers: { "Content-Type": "application/json", ...(options.accept ? { Accept: options.accept } : {}) },
    user: options.user ?? "ada",
    config: options.config ?? config,
  });
  return { status: response.status, body: (await response.json()) as RpcError };
}

describe("agent card", () => {
  it("is served at both well-known paths without authentication and at GET /a2a with it, completed by the gateway", async () => {
    const guarded = testConfig({
      service: { base_url: `${BASE}/` },
      customization: { agent_card_config: CARD },
      authentication: { module: "noop-with-token" },
    });
    const cards: AgentCard[] = [];
    for (const path of ["/.well-known/agent-card.json", "/.well-known/agent.json", "/a2a"]) {
      // GET /a2a needs a2a_jsonrpc as POST /a2a does (UPSTREAM §8); test/worker/auth.test.ts checks the refusals.
      const { status, body } = await callJson<AgentCard>(path, { config: guarded, ...(path === "/a2a" ? { token: "any-token" } : {}) });
      expect(status).toBe(200);
      cards.push(body);
    }
    expect(cards[1]).toEqual(cards[0]);
    expect(cards[2]).toEqual(cards[0]);
    expect(cards[0]).toMatchObject({
      ...CARD,
      url: `${BASE}/a2a`,
      protocolVersion: "0.3.0",
      preferredTransport: "JSONRPC",
      additionalInterfaces: [{ transport: "JSONRPC", url: `${BASE}/a2a` }],
      capabilities: { streaming: true, pushNotifications: false },
      defaultInputModes: ["text/plain"],
      defaultOutputModes: ["text/plain"],
      version: expect.any(String),
    });
  });

  it("lists the main interface among configured additional ones", async () => {
    const other = { transport: "HTTP+JSON", url: "https://other.example.com/rest" };
    const configured = testConfig({ service: { base_url: BASE }, customization: { agent_card_config: { ...CARD, additionalInterfaces: [other] } } });
    const { body } = await callJson<AgentCard>("/.well-known/agent-card.json", { config: configured });
    expect(body.additionalInterfaces).toEqual([{ transport: "JSONRPC", url: `${BASE}/a2a` }, other]);
    const listed = testConfig({ service: { base_url: BASE }, customization: { agent_card_config: { ...CARD, additionalInterfaces: [other, { transport: "JSONRPC", url: `${BASE}/a2a` }] } } });
    expect((await callJson<AgentCard>("/.well-known/agent-card.json", { config: listed })).body.additionalInterfaces).toHaveLength(2);
  });

  it("uses the local address without service.base_url, and reads agent_card_path", async () => {
    const fromFile = testConfig({ customization: { agent_card_path: "agent-card.yaml" } });
    const { status, body } = await callJson<AgentCard>("/.well-known/agent-card.json", { config: fromFile });
    expect(status).toBe(200);
    expect(body).toMatchObject({
      name: "Parley",
      url: "http://127.0.0.1:8080/a2a",
      protocolVersion: "0.3.0",
      capabilities: { streaming: true },
    });
    // The bundled card goes with the bundled noop module: it asks for no credentials.
    expect(body.security).toBeUndefined();
    expect(body.skills[0]!.id).toBe("answer-questions");

    const custom = testConfig({ customization: { agent_card_config: { ...CARD, protocolVersion: "0.3.1" } } });
    expect((await callJson<AgentCard>("/a2a", { config: custom })).body.protocolVersion).toBe("0.3.1");
  });

  it("explains a missing card in the SPEC envelope", async () => {
    const missing = await callJson("/.well-known/agent-card.json", { config: testConfig() });
    expect(missing).toEqual({
      status: 404,
      body: { detail: { response: "Agent card not configured", cause: expect.stringContaining("customization.agent_card_config") } },
    });
  });

  it("a card that is not valid, inline or in its file, fails the configuration load naming the key", async () => {
    const inline = testConfig({ customization: { agent_card_config: { name: 12, skills: "notalist", bogus_field: 1 } } });
    expect(await callJson("/.well-known/agent-card.json", { config: inline })).toEqual({
      status: 500,
      body: {
        detail: {
          response: "Configuration is not loaded",
          cause:
            "configuration has not been initialized: invalid keys customization.agent_card_config.name, customization.agent_card_config.skills, customization.agent_card_config.bogus_field",
        },
      },
    });
    // parley.example.yaml is no agent card.
    const file = testConfig({ customization: { agent_card_path: "parley.example.yaml" } });
    expect(await callJson("/a2a", { config: file })).toEqual({
      status: 500,
      body: { detail: { response: "Configuration is not loaded", cause: "configuration has not been initialized: invalid keys customization.agent_card_path" } },
    });
  });

  it("lets the SDK client read the card", async () => {
    const a2a = await client();
    const card = await a2a.getAgentCard();
    expect(card.name).toBe("Parley test agent");
    expect(card.url).toBe(`${BASE}/a2a`);
  });
});

describe("GET /a2a/health", () => {
  it("reports the service, its version and the A2A SDK version", async () => {
    const { status, body } = await callJson<Record<string, string>>("/a2a/health", { config });
    expect(status).toBe(200);
    expect(body).toEqual({ status: "healthy", service: "parley-a2a", version: expect.any(String), a2a_sdk_version: expect.stringMatching(/^0\.3\./), timestamp: expect.any(String) });
    expect(Date.parse(body.timestamp!)).not.toBeNaN();
  });
});

describe("message/send", () => {
  it("answers in a completed task, and continues the conversation of its contextId", async () => {
    const a2a = await client();
    const first = ok(await a2a.sendMessage({ message: userMessage("Hello agent") })) as Task;
    expect(first).toMatchObject({ kind: "task", status: { state: "completed" } });
    expect(answerOf(first)).toBe("[user_turns=1] You said: Hello agent");
    expect(first.contextId).toEqual(expect.any(String));
    expect(first.history?.map((m) => m.role)).toEqual(["user", "agent"]);
    expect(first.artifacts).toHaveLength(1);

    const second = ok(await a2a.sendMessage({ message: userMessage("And again", { contextId: first.contextId }) })) as Task;
    expect(answerOf(second)).toBe("[user_turns=2] You said: And again");
    expect(second.contextId).toBe(first.contextId);
    expect(second.id).not.toBe(first.id);

    // The context's conversation is the user's, listed with its two turns.
    await eventually(async () => {
      const listed = await callJson<{ conversations: Array<{ message_count: number }> }>("/v3/conversations", { user: "ada", config });
      expect(listed.body.conversations.some((c) => c.message_count === 2)).toBe(true);
    });

    // Another user naming the same contextId reaches a conversation of their own.
    const other = await client({ user: "mallory" });
    const theirs = ok(await other.sendMessage({ message: userMessage("Whose context?", { contextId: first.contextId }) })) as Task;
    expect(answerOf(theirs)).toBe("[user_turns=1] You said: Whose context?");
    expect(rpcError(await other.getTask({ id: first.id })).code).toBe(-32001);
  });

  it("keeps a question and an answer larger than one storage value in its task", async () => {
    // 1.5 MB each way (the scripted model repeats the question; one word, so few deltas).
    const big = "x".repeat(1_500_000);
    const a2a = await client();
    const task = ok(await a2a.sendMessage({ message: userMessage(big) })) as Task;
    expect(task.status.state).toBe("completed");
    expect(answerOf(task)).toBe(`[user_turns=1] You said: ${big}`);
    const stored = ok(await a2a.getTask({ id: task.id })) as Task;
    expect(stored.history?.map((message) => (message.parts[0] as { text: string }).text.length)).toEqual([big.length, answerOf(task).length]);
    // A stream of the finished task replays its log: the artifact whole.
    const replayed = await collect(a2a.resubscribeTask({ id: task.id }));
    const artifact = replayed.find((event) => event.kind === "artifact-update") as TaskArtifactUpdateEvent;
    expect((artifact.artifact.parts[0] as { text: string }).text).toBe(answerOf(task));
    expect(await largestStoredValue(env.A2A_CONTEXT.getByName(JSON.stringify(["ada", task.contextId])))).toBeLessThanOrEqual(MAX_STORED_VALUE);
  });

  it("accepts SPEC's `type` for `kind`, answers the model named in metadata, and honours historyLength", async () => {
    const raw = await rpc({
      jsonrpc: "2.0",
      id: "req-1",
      method: "message/send",
      params: {
        message: { messageId: "m-1", role: "user", parts: [{ type: "text", text: "Which model?" }], metadata: { model: "parley-large", provider: "scripted" } },
        configuration: { historyLength: 1 },
      },
    });
    expect(raw.status).toBe(200);
    const task = (raw.body as unknown as { id: string; result: Task }).result;
    expect((raw.body as unknown as { id: string }).id).toBe("req-1");
    expect(answerOf(task)).toBe("[user_turns=1] You said: Which model?");
    expect(task.history).toHaveLength(1);
    expect(task.history![0]!.role).toBe("agent");

    const a2a = await client();
    const events = await collect(a2a.sendMessageStream({ message: userMessage("stream it", { metadata: { model: "parley-large", provider: "scripted" } }) }));
    const working = events.find((e) => e.kind === "status-update" && e.status.state === "working") as TaskStatusUpdateEvent;
    expect(working.metadata).toMatchObject({ model: "scripted/parley-large", conversation_id: expect.stringMatching(/^[0-9a-f]{48}$/) });
  });

  it("offers the server's tools, restricted by metadata vector_store_ids, with the server's system prompt", async () => {
    const withTools = testConfig({
      service: { base_url: BASE },
      customization: { agent_card_config: CARD, system_prompt: "You are the A2A test prompt." },
      byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/data/docs" }],
    });
    const a2a = await client({ config: withTools });
    const echoed = (task: Task) => echoedRequest(answerOf(task));
    const all = echoed(ok(await a2a.sendMessage({ message: userMessage("#echo-request") })) as Task);
    // A Chat Completions backend has no file_search: Parley searches the stores itself (README "Providers").
    // With neither rag list configured, the tool covers the configured store and every store the backend has.
    const everyStore = [{ type: "file_search", vector_store_ids: expect.arrayContaining(["vs_docs", "portal-rag"]), max_num_results: 10 }];
    expect(all.tools).toEqual(wireMode() === "chat" ? undefined : everyStore);
    expect(all.instructions).toBe("You are the A2A test prompt.");
    const none = echoed(ok(await a2a.sendMessage({ message: userMessage("#echo-request", { metadata: { vector_store_ids: [] } }) })) as Task);
    expect(none.tools).toBeUndefined();
  });

  it("asks for input when the message has no text, and continues the same task when it comes", async () => {
    const a2a = await client();
    const waiting = ok(
      await a2a.sendMessage({ message: { kind: "message", messageId: crypto.randomUUID(), role: "user", parts: [{ kind: "data", data: { q: 1 } }] } }),
    ) as Task;
    expect(waiting.status.state).toBe("input-required");
    expect(waiting.status.message?.parts[0]).toMatchObject({ kind: "text", text: expect.stringContaining("no text to answer") });

    const answered = ok(await a2a.sendMessage({ message: userMessage("Here is the text", { taskId: waiting.id }) })) as Task;
    expect(answered.id).toBe(waiting.id);
    expect(answered.status.state).toBe("completed");
    expect(answerOf(answered)).toBe("[user_turns=1] You said: Here is the text");

    // A finished task takes no more messages.
    const again = await a2a.sendMessage({ message: userMessage("more", { taskId: waiting.id }) });
    expect(rpcError(again).code).toBe(-32600);
  });

  it("fails the task when the backend fails mid-answer", async () => {
    const a2a = await client();
    const task = ok(await a2a.sendMessage({ message: userMessage("break #fail-midstream") })) as Task;
    expect(task.status.state).toBe("failed");
    expect(task.status.message?.parts[0]).toMatchObject({ kind: "text", text: expect.stringMatching(/^Internal server error: /) });
  });
});

describe("message/stream", () => {
  it("says working, with model and conversation, before the failure of a backend call that fails at once", async () => {
    const a2a = await client();
    const events = await collect(a2a.sendMessageStream({ message: userMessage("refused #status=500") }));
    const kinds = events.map((e) => (e.kind === "status-update" ? `${e.kind}:${e.status.state}${e.final ? ":final" : ""}` : e.kind));
    expect(kinds).toEqual(["task", "status-update:working", "status-update:failed:final"]);
    expect(events[1]!.metadata).toMatchObject({ model: expect.stringContaining("/"), conversation_id: expect.stringMatching(/^[0-9a-f]{48}$/) });
  });

  it("streams task, working with model and conversation, deltas, the artifact and the final status, in order", async () => {
    const a2a = await client();
    const events = await collect(a2a.sendMessageStream({ message: userMessage("Stream this answer") }));
    const kinds = events.map((e) => (e.kind === "status-update" ? `${e.kind}:${e.status.state}${e.final ? ":final" : ""}` : e.kind));
    expect(kinds[0]).toBe("task");
    expect(kinds[1]).toBe("status-update:working");
    expect(kinds.at(-2)).toBe("artifact-update");
    expect(kinds.at(-1)).toBe("status-update:completed:final");
    expect(kinds.slice(2, -2).every((k) => k === "status-update:working")).toBe(true);

    const task = events[0] as Task;
    expect(task.status.state).toBe("submitted");
    expect(events.every((e) => e.kind === "message" || (e.kind === "task" ? e.id : e.taskId) === task.id)).toBe(true);
    expect((events[1] as TaskStatusUpdateEvent).metadata).toEqual({ model: "scripted/parley-small", conversation_id: expect.stringMatching(/^[0-9a-f]{48}$/) });
    const deltas = events.slice(2, -2).map(statusText);
    expect(deltas.join("")).toBe("[user_turns=1] You said: Stream this answer");
    expect(deltas.length).toBeGreaterThan(1);
    const artifact = events.at(-2) as TaskArtifactUpdateEvent;
    expect(artifact).toMatchObject({ lastChunk: true, taskId: task.id, contextId: task.contextId, artifact: { parts: [{ kind: "text", text: "[user_turns=1] You said: Stream this answer" }] } });
    expect(events.at(-1)).toMatchObject({ final: true, status: { state: "completed" }, metadata: { available_quotas: {} } });

    // tasks/get afterwards tells the same story.
    const stored = ok(await a2a.getTask({ id: task.id })) as Task;
    expect(stored.status.state).toBe("completed");
    expect(answerOf(stored)).toBe("[user_turns=1] You said: Stream this answer");
  });

  it("names the tools the model calls", async () => {
    const a2a = await client();
    const events = await collect(a2a.sendMessageStream({ message: userMessage("look up #call-tool:lookup_docs #call-tool:search_kb") }));
    const texts = events.map(statusText).filter(Boolean);
    expect(texts.slice(0, 2)).toEqual(["Calling tool: lookup_docs", "Calling tool: search_kb"]);
    expect(events.at(-1)).toMatchObject({ final: true, status: { state: "completed" } });
  });

  it("needs an Accept header that admits text/event-stream", async () => {
    const message = { messageId: "m", role: "user", parts: [{ kind: "text", text: "hi" }] };
    const stream = { jsonrpc: "2.0", id: 7, method: "message/stream", params: { message } };
    for (const accept of [undefined, "application/json", "*/*;q=0.5, text/event-stream;q=0"]) {
      const { status, body } = await rpc(stream, { accept });
      expect(status, accept).toBe(200);
      expect(body, accept).toMatchObject({ jsonrpc: "2.0", id: 7, error: { code: -32600, message: expect.stringContaining("text/event-stream") } });
    }
    // Ranges that cover it, as HTTP clients send by default, are answered with the stream.
    for (const accept of ["*/*", "text/*", "application/json, text/event-stream;q=0.5"]) {
      const response = await call("/a2a", { json: stream, headers: { Accept: accept }, user: "ada", config });
      expect(response.headers.get("Content-Type"), accept).toMatch(/^text\/event-stream/);
      expect((await readSse(response)).at(-1)?.data, accept).toMatchObject({ id: 7, result: { kind: "status-update", final: true } });
    }
  });

  it("sends `data:` lines of JSON-RPC responses carrying the request id", async () => {
    const message = { messageId: "m", role: "user", parts: [{ kind: "text", text: "raw stream" }] };
    const response = await call("/a2a", {
      json: { jsonrpc: "2.0", id: "s-1", method: "message/stream", params: { message } },
      headers: { Accept: "text/event-stream" },
      user: "ada",
      config,
    });
    expect(response.headers.get("Content-Type")).toMatch(/^text\/event-stream/);
    const lines = (await readSse(response)).map((entry) => entry.data as { jsonrpc: string; id: string; result: { kind: string } });
    expect(lines.every((line) => line.jsonrpc === "2.0" && line.id === "s-1")).toBe(true);
    expect(lines.map((line) => line.result.kind)).toContain("artifact-update");
  });
});

describe("tasks/resubscribe, tasks/cancel, tasks/get", () => {
  it("replays a running task's events to a second connection and continues with the live ones", async () => {
    const first = await client();
    const stream = first.sendMessageStream({ message: userMessage("a slow answer with quite a few words in it #slow=40") });
    const early = await collect(stream, (event) => statusText(event) !== undefined);
    const task = early[0] as Task;

    const second = await client();
    const resubscribed = collect(second.resubscribeTask({ id: task.id }));
    const rest = await collect(stream);
    const replayed = await resubscribed;

    const original = [...early, ...rest];
    expect(original.at(-1)).toMatchObject({ final: true, status: { state: "completed" } });
    // Same events, same order: the second connection saw the start again and the live rest.
    expect(replayed).toEqual(original);

    // A finished task replays its events and ends.
    const again = await collect(second.resubscribeTask({ id: task.id }));
    expect(again).toEqual(original);
  });

  it("answers tasks/get with a running task's latest delta, without rewriting the task for each", async () => {
    const a2a = await client();
    const stream = a2a.sendMessageStream({ message: userMessage("a slow answer with quite a few words in it #slow=40") });
    const early = await collect(stream, (event) => statusText(event) === "You ");
    const task = early[0] as Task;
    const running = ok(await a2a.getTask({ id: task.id })) as Task;
    expect(running.status).toMatchObject({ state: "working" });
    const latest = (running.status.message?.parts[0] as { text?: string } | undefined)?.text;
    // A word of the answer (the one after "You " if the backend has sent it meanwhile).
    expect(latest).toMatch(/^\S+ $/);
    // Its row still holds the status the task began working with: deltas are in the event log.
    await runInDurableObject(env.A2A_CONTEXT.getByName(JSON.stringify(["ada", task.contextId])), (_instance, state) => {
      const row = state.storage.sql.exec<{ task: string }>("SELECT task FROM tasks WHERE task_id = ?", task.id).one();
      expect((JSON.parse(row.task) as Task).status.message).toBeUndefined();
    });
    const rest = await collect(stream);
    expect(rest.at(-1)).toMatchObject({ final: true, status: { state: "completed" } });
    expect((ok(await a2a.getTask({ id: task.id })) as Task).status.state).toBe("completed");
  });

  it("cancels a running task: every stream of it ends canceled, and it cannot be canceled twice", async () => {
    const a2a = await client();
    const stream = a2a.sendMessageStream({ message: userMessage("a slow answer that will be canceled before it ends #slow=40") });
    const early = await collect(stream, (event) => statusText(event) !== undefined);
    const task = early[0] as Task;
    const watcher = collect((await client()).resubscribeTask({ id: task.id }));

    const canceled = ok(await a2a.cancelTask({ id: task.id })) as Task;
    expect(canceled.status.state).toBe("canceled");
    const rest = await collect(stream);
    expect(rest.at(-1)).toMatchObject({ kind: "status-update", final: true, status: { state: "canceled" } });
    expect((await watcher).at(-1)).toEqual(rest.at(-1));
    expect(rest.some((e) => e.kind === "artifact-update")).toBe(false);

    expect(rpcError(await a2a.cancelTask({ id: task.id })).code).toBe(-32002);
    const stored = ok(await a2a.getTask({ id: task.id })) as Task;
    expect(stored.status.state).toBe("canceled");

    // The interrupted turn released its conversation and stays in its history.
    const next = ok(await a2a.sendMessage({ message: userMessage("after the cancel", { contextId: task.contextId }) })) as Task;
    expect(answerOf(next)).toBe("[user_turns=2] You said: after the cancel");
  });

  it("cancels a task still waiting behind another in its context: its turn never starts", async () => {
    const a2a = await client();
    const first = a2a.sendMessageStream({ message: userMessage("a slow answer ahead of the queue #slow=40") });
    const early = await collect(first, (event) => statusText(event) !== undefined);
    const contextId = (early[0] as Task).contextId;
    const queued = ok(await a2a.sendMessage({ message: userMessage("waiting in line", { contextId }), configuration: { blocking: false } })) as Task;
    expect((ok(await a2a.cancelTask({ id: queued.id })) as Task).status.state).toBe("canceled");
    expect((await collect(first)).at(-1)).toMatchObject({ final: true, status: { state: "completed" } });

    // The canceled question is not in the conversation: the next message is its second turn.
    const next = ok(await a2a.sendMessage({ message: userMessage("after the line", { contextId }) })) as Task;
    expect(answerOf(next)).toBe("[user_turns=2] You said: after the line");
    expect((ok(await a2a.getTask({ id: queued.id })) as Task).status.state).toBe("canceled");
  });

  it("fails a running task at once when its context object is reset mid-answer (a deploy), not at its time-out", async () => {
    const a2a = await client({ user: "reset" });
    const stream = a2a.sendMessageStream({ message: userMessage("a slow answer cut by a deploy #slow=40") });
    const early = await collect(stream, (event) => statusText(event) !== undefined);
    const task = early[0] as Task;
    await abortAllDurableObjects();
    await eventually(async () => expect((ok(await a2a.getTask({ id: task.id })) as Task).status.state).toBe("failed"));
    const failed = ok(await a2a.getTask({ id: task.id })) as Task;
    expect(failed.status.message?.parts[0]).toMatchObject({ text: "Internal server error: the task's turn broke off" });
    expect(failed.artifacts ?? []).toEqual([]);
    // The context goes on.
    const next = ok(await a2a.sendMessage({ message: userMessage("after the deploy", { contextId: task.contextId }) })) as Task;
    expect(next.status.state).toBe("completed");

    // A task left running by an instance that went away with the Worker that fed it (a crash of the
    // whole process): the next instance fails it as it starts.
    const stub = () => env.A2A_CONTEXT.getByName(JSON.stringify(["reset", task.contextId]));
    const orphan = { ...(next as Task), id: `${next.id.slice(0, -4)}beef`, status: { state: "working" as const } };
    await runInDurableObject(stub(), (_instance, state) => {
      state.storage.sql.exec("INSERT INTO tasks (task_id, state, task, request_id, deadline) VALUES (?, 'working', ?, 'a-request', ?)", orphan.id, JSON.stringify(orphan), Date.now() + 300_000);
    });
    await abortAllDurableObjects();
    await runInDurableObject(stub(), (_instance, state) => {
      expect(state.storage.sql.exec<{ state: string }>("SELECT state FROM tasks WHERE task_id = ?", orphan.id).one().state).toBe("failed");
    });
  });

  it("lets go of its turn's stream when the turn's events cannot be read, failing the task", async () => {
    const contextId = `unreadable-${crypto.randomUUID()}`;
    const stub = env.A2A_CONTEXT.getByName(JSON.stringify(["una", contextId]));
    const taskId = crypto.randomUUID();
    await stub.startTask({ taskId, contextId, message: { kind: "message", messageId: "m1", role: "user", parts: [{ kind: "text", text: "hi" }], contextId }, resume: false, requestId: null });
    let cancelled: unknown = null;
    const lines = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode("this is not a turn event\n"));
      },
      cancel(reason) {
        cancelled = reason ?? "cancelled";
      },
    });
    await runInDurableObject(stub, (instance) => instance.followTurn(taskId, { requestId: "r-1", model: "parley-small", conversationId: "c-1" }, lines));
    expect(cancelled).not.toBeNull();
    const task = (await stub.getTask(taskId)) as unknown as Task;
    expect([task.status.state, task.status.message?.parts[0]]).toEqual(["failed", { kind: "text", text: "Internal server error: the task's turn broke off" }]);
  });

  it("fails a task still running after the time-out", async () => {
    const a2a = await client({ user: "tim" });
    const stream = a2a.sendMessageStream({ message: userMessage("a slow answer that runs out of time #slow=40") });
    const early = await collect(stream, (event) => statusText(event) !== undefined);
    const task = early[0] as Task;

    const stub = env.A2A_CONTEXT.getByName(JSON.stringify(["tim", task.contextId]));
    await runInDurableObject(stub, (_instance, state) => {
      state.storage.sql.exec("UPDATE tasks SET deadline = 0 WHERE task_id = ?", task.id);
    });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    const rest = await collect(stream);
    expect(rest.at(-1)).toMatchObject({ final: true, status: { state: "failed" } });
    expect(statusText(rest.at(-1)!)).toBe("Task timed out after 300 seconds.");
    expect((ok(await a2a.getTask({ id: task.id })) as Task).status.state).toBe("failed");
    const next = ok(await a2a.sendMessage({ message: userMessage("after the time-out", { contextId: task.contextId }) })) as Task;
    expect(answerOf(next)).toBe("[user_turns=2] You said: after the time-out");
  });

  it("answers unknown tasks with -32001 and trims history to historyLength", async () => {
    const a2a = await client();
    expect(rpcError(await a2a.getTask({ id: "no-such-task" })).code).toBe(-32001);
    expect(rpcError(await a2a.cancelTask({ id: `${crypto.randomUUID()}.bm9wZQ` })).code).toBe(-32001);
    await expect(collect(a2a.resubscribeTask({ id: "no-such-task" }))).rejects.toThrow(/-32001/);

    const task = ok(await a2a.sendMessage({ message: userMessage("short") })) as Task;
    expect((ok(await a2a.getTask({ id: task.id, historyLength: 1 })) as Task).history).toHaveLength(1);
    expect((ok(await a2a.getTask({ id: task.id })) as Task).history).toHaveLength(2);
  });
});

describe("JSON-RPC errors (always HTTP 200)", () => {
  const message = { messageId: "m", role: "user", parts: [{ kind: "text", text: "hi" }] };

  it("-32700 parse error, -32600 invalid request, -32601 method not found", async () => {
    const parse = await rpc("{not json");
    expect(parse).toMatchObject({ status: 200, body: { jsonrpc: "2.0", id: null, error: { code: -32700 } } });
    const version = await rpc({ jsonrpc: "1.0", id: 1, method: "message/send", params: { message } });
    expect(version).toMatchObject({ status: 200, body: { id: 1, error: { code: -32600 } } });
    const noMethod = await rpc({ jsonrpc: "2.0", id: 2 });
    expect(noMethod.body.error.code).toBe(-32600);
    const unknown = await rpc({ jsonrpc: "2.0", id: 3, method: "tasks/explode", params: {} });
    expect(unknown).toMatchObject({ status: 200, body: { id: 3, error: { code: -32601 } } });
    // Valid JSON that is no request object.
    for (const body of ["42", '"text"', "null"]) expect(await rpc(body)).toMatchObject({ status: 200, body: { id: null, error: { code: -32600 } } });
    // Without an id but not a valid request: no notification, an invalid request answered with id null.
    for (const body of [{ jsonrpc: "aaa", method: "message/send", params: {} }, { method: "tasks/get", params: { id: "x" } }, { jsonrpc: "2.0", method: 7 }]) {
      expect(await rpc(body)).toMatchObject({ status: 200, body: { jsonrpc: "2.0", id: null, error: { code: -32600 } } });
    }
    // An id that is not a string, a number or null cannot be answered to (JSON-RPC 2.0 §5: null).
    for (const id of [{ a: 1 }, true, [1]]) {
      expect(await rpc({ jsonrpc: "2.0", id, method: "tasks/get", params: { id: "x" } })).toMatchObject({ status: 200, body: { id: null, error: { code: -32600 } } });
    }
  });

  it("-32602 for no parts, and for parts that are not A2A's text, file or data parts", async () => {
    const a2a = await client();
    const parts = [
      [],
      [{ kind: "image", url: "x" }],
      [{ kind: "file" }],
      [{ kind: "file", file: { mimeType: "text/plain" } }],
      [{ kind: "file", file: { bytes: "aGk=", uri: "https://example.com/a.txt" } }],
      [{ kind: "data", data: "not an object" }],
      [{ text: "no kind" }],
    ];
    for (const part of parts) {
      const refused = rpcError(await a2a.sendMessage({ message: { ...userMessage("hi"), parts: part } as never }));
      expect(refused.code, JSON.stringify(part)).toBe(-32602);
      expect(refused.message).toContain("message.parts");
    }
    // Well-formed ones, with `type` for `kind` as SPEC allows, are taken.
    const taken = ok(
      await a2a.sendMessage({
        message: { ...userMessage("hi"), parts: [{ type: "text", text: "a question" }, { kind: "file", file: { uri: "https://example.com/a.txt" } }, { kind: "data", data: { q: 1 } }] } as never,
      }),
    ) as Task;
    expect(answerOf(taken)).toBe("[user_turns=1] You said: a question");
  });

  it("carries out a notification (no id) and answers it with nothing", async () => {
    const contextId = `notified-${crypto.randomUUID()}`;
    const notify = (rpcBody: unknown) =>
      call("/a2a", { method: "POST", body: JSON.stringify(rpcBody), headers: { "Content-Type": "application/json" }, user: "ada", config });
    const sent = await notify({ jsonrpc: "2.0", method: "message/send", params: { message: { ...message, messageId: "n1", contextId } } });
    expect(sent.status).toBe(204);
    expect(await sent.text()).toBe("");
    expect((await notify({ jsonrpc: "2.0", method: "tasks/cancel", params: { id: "no-such-task" } })).status).toBe(204);
    // A streamed one is carried out too, Accept header or not; nobody reads its stream.
    const streamed = await notify({ jsonrpc: "2.0", method: "message/stream", params: { message: { ...message, messageId: "n2", contextId } } });
    expect([streamed.status, await streamed.text()]).toEqual([204, ""]);
    // A streamed one that fails at once (bad params, an unknown task) is answered with nothing as well.
    for (const failing of [
      { method: "message/stream", params: { message: { ...message, messageId: "n3", role: "agent" } } },
      { method: "tasks/resubscribe", params: { id: "no-such-task" } },
    ]) {
      const quiet = await notify({ jsonrpc: "2.0", ...failing });
      expect([quiet.status, await quiet.text()]).toEqual([204, ""]);
    }
    // The notified messages were answered in their context: the next one is its third turn.
    const a2a = await client();
    await eventually(async () => {
      const next = ok(await a2a.sendMessage({ message: userMessage("and then", { contextId }) })) as Task;
      expect(answerOf(next)).toMatch(/^\[user_turns=[3-9]\] You said: and then$/);
    });
  });

  it("-32602 invalid params through the SDK client: contextId at params level, bad message, model rules", async () => {
    const a2a = await client();
    const misplaced = rpcError(await a2a.sendMessage({ message: userMessage("hi"), contextId: "ctx-1" } as never));
    expect(misplaced).toMatchObject({ code: -32602, message: expect.stringContaining("contextId") });
    const agentRole = rpcError(await a2a.sendMessage({ message: { ...userMessage("hi"), role: "agent" } }));
    expect(agentRole).toMatchObject({ code: -32602, message: expect.stringContaining("message.role") });
    const noId = rpcError(await a2a.sendMessage({ message: { ...userMessage("hi"), messageId: "" } }));
    expect(noId.message).toContain("message.messageId");
    const half = rpcError(await a2a.sendMessage({ message: userMessage("hi", { metadata: { model: "parley-large" } }) }));
    expect(half.message).toContain("Provider must be specified if model is specified");
    const unknownModel = rpcError(await a2a.sendMessage({ message: userMessage("hi", { metadata: { model: "gpt-9", provider: "scripted" } }) }));
    expect(unknownModel).toMatchObject({ code: -32602, data: { status_code: 404, response: "Model not found" } });
    const noParams = await rpc({ jsonrpc: "2.0", id: 4, method: "tasks/get" });
    expect(noParams.body.error.code).toBe(-32602);
    const streamed = collect(a2a.sendMessageStream({ message: userMessage("hi"), contextId: "ctx-1" } as never));
    await expect(streamed).rejects.toThrow(/-32602/);
  });

  it("-32001 task not found and -32002 task not cancelable", async () => {
    const a2a = await client();
    expect(rpcError(await a2a.getTask({ id: "missing" })).code).toBe(-32001);
    const done = ok(await a2a.sendMessage({ message: userMessage("finish quickly") })) as Task;
    expect(rpcError(await a2a.cancelTask({ id: done.id }))).toMatchObject({ code: -32002 });
  });
});

describe("authorization", () => {
  it("closes GET and POST /a2a with HTTP 403 without a2a_jsonrpc; the well-known card and health stay open", async () => {
    const closed = testConfig({
      service: { base_url: BASE },
      customization: { agent_card_config: CARD },
      authorization: { access_rules: [{ role: "*", actions: ["query"] }] },
    });
    const a2a = await client({ config: closed });
    await expect(a2a.sendMessage({ message: userMessage("hi") })).rejects.toThrow(/403.*User does not have permission to access this endpoint/);
    await expect(collect(a2a.sendMessageStream({ message: userMessage("hi") }))).rejects.toThrow(/403/);
    expect((await call("/a2a", { config: closed })).status).toBe(403);
    // As in the original system, /a2a/health checks nothing (UPSTREAM §8).
    expect((await call("/a2a/health", { config: closed })).status).toBe(200);
  });

  it("needs MODEL_OVERRIDE to name a model in metadata", async () => {
    const noOverride = testConfig({
      service: { base_url: BASE },
      customization: { agent_card_config: CARD },
      authorization: { access_rules: [{ role: "*", actions: ["A2A_JSONRPC"] }] },
    });
    const a2a = await client({ config: noOverride });
    const denied = rpcError(await a2a.sendMessage({ message: userMessage("hi", { metadata: { model: "parley-large", provider: "scripted" } }) }));
    expect(denied).toMatchObject({ code: -32602, data: { status_code: 403, cause: "User lacks model_override permission required to override model/provider." } });
    const allowed = ok(await a2a.sendMessage({ message: userMessage("hi") })) as Task;
    expect(allowed.status.state).toBe("completed");
  });
});
