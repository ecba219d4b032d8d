import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, inject, it } from "vitest";
import { call, callJson, eventually, readSse, settle } from "./helpers.ts";

type Detail = { conversation_id: string; chat_history: Array<{ messages: Array<{ content: string; type: string }>; status: string; model: string; provider: string }> };

async function newConversation(user: string, query = "hello there"): Promise<string> {
  const { body } = await callJson<{ conversation_id: string }>("/v1/query", { json: { query }, user });
  return body.conversation_id;
}

/** Reads SSE events from a streaming body one at a time. */
function eventReader(response: Response) {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  return {
    reader,
    async next(): Promise<{ event: string; data: Record<string, unknown> } | null> {
      for (;;) {
        const end = buffer.indexOf("\n\n");
        if (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          return JSON.parse(block.replace(/^data: /, "")) as { event: string; data: Record<string, unknown> };
        }
        const { value, done } = await reader.read();
        if (done) return null;
        buffer += value;
      }
    },
  };
}

describe("conversation views", () => {
  it("gives a conversation begun by a stream its topic summary once the stream has ended", async () => {
    const events = await readSse(await call("/v1/streaming_query", { json: { query: "Where do streams go?" }, user: "streamer" }));
    const start = events[0]!.data as { event: string; data: { conversation_id: string } };
    expect(start.event).toBe("start");
    const id = start.data.conversation_id;
    await eventually(async () => {
      const listed = await callJson<{ conversations: Array<Record<string, unknown>> }>("/v2/conversations", { user: "streamer" });
      expect(listed.body.conversations).toEqual([expect.objectContaining({ conversation_id: id, topic_summary: "Topic: Where do streams go?" })]);
    });
  });

  it("gives a conversation whose first answer failed its topic summary with the first answer that does not", async () => {
    const failed = (await readSse(await call("/v1/streaming_query", { json: { query: "about kubernetes #fail-midstream" }, user: "topics" }))).map(
      (entry) => entry.data as { event: string; data: { conversation_id?: string } },
    );
    const id = failed[0]!.data.conversation_id!;
    expect(failed.at(-1)!.event).toBe("error");
    await (await call("/v1/streaming_query", { json: { query: "about kubernetes pods", conversation_id: id }, user: "topics" })).text();
    await eventually(async () => {
      const listed = await callJson<{ conversations: Array<Record<string, unknown>> }>("/v2/conversations", { user: "topics" });
      expect(listed.body.conversations).toEqual([expect.objectContaining({ conversation_id: id, topic_summary: "Topic: about kubernetes pods" })]);
    });
  });

  it("leaves an alarm for the record it still owes the lists, in case its object is gone before its timer", async () => {
    const user = "alarmed";
    const id = await newConversation(user);
    await eventually(async () => {
      const listed = await callJson<{ conversations: Array<{ message_count: number }> }>("/v1/conversations", { user });
      expect(listed.body.conversations[0]?.message_count).toBe(1);
    });
    const asked = Date.now();
    for (const query of ["and again", "and once more"]) expect((await callJson("/v1/query", { json: { query, conversation_id: id }, user })).status).toBe(200);
    // Written less than a second before, the record waits for the rest of that second (its timer);
    // the alarm covers it, set with its slack of 30 s.
    const stub = env.CONVERSATION.getByName(id);
    const alarm = await runInDurableObject(stub, (_instance, state) => state.storage.getAlarm());
    expect(alarm).toBeGreaterThan(asked + 1_000);
    expect(alarm).toBeLessThanOrEqual(Date.now() + 1_000 + 30_000);
    // Gone before its timer (memory lost, storage kept): woken by its alarm, it delivers the record.
    await abortAllDurableObjects();
    await runDurableObjectAlarm(env.CONVERSATION.getByName(id));
    await eventually(async () => {
      const listed = await callJson<{ conversations: Array<{ message_count: number }> }>("/v1/conversations", { user });
      expect(listed.body.conversations[0]?.message_count).toBe(3);
    });
  });

  it("lists a new conversation as soon as its first answer has come, and a busy one within a second", async () => {
    const user = "lister";
    const listed = async () => (await callJson<{ conversations: Array<{ conversation_id: string; message_count: number }> }>("/v1/conversations", { user })).body.conversations;
    const id = await newConversation(user, "Say hello");
    // No waiting: a client that lists right after its answer finds the conversation.
    expect(await listed()).toEqual([expect.objectContaining({ conversation_id: id, message_count: 1 })]);
    for (const query of ["one", "two", "three"]) expect((await callJson("/v1/query", { json: { query, conversation_id: id }, user })).status).toBe(200);
    await eventually(async () => expect((await listed())[0]?.message_count).toBe(4));
  });

  it("lists, shows, updates and deletes a conversation in every version", async () => {
    const id = await newConversation("carol", "What is the gateway?");
    const v1 = await eventually(async () => {
      const listed = await callJson<{ conversations: Array<Record<string, unknown>> }>("/v1/conversations", { user: "carol" });
      expect(listed.body.conversations).toEqual([
        expect.objectContaining({ conversation_id: id, message_count: 1, last_used_model: "parley-small", topic_summary: "Topic: What is the gateway?" }),
      ]);
      return listed;
    });
    expect(v1.body.conversations[0]!.created_at).toMatch(/^\d{4}-\d\d-\d\dT.*Z$/);
    const v3 = await callJson<{ conversations: unknown[] }>("/v3/conversations", { user: "carol" });
    expect(v3.body).toEqual(v1.body);
    const v2 = await callJson<{ conversations: Array<Record<string, unknown>> }>("/v2/conversations", { user: "carol" });
    expect(v2.body.conversations).toEqual([{ conversation_id: id, topic_summary: "Topic: What is the gateway?", last_message_timestamp: expect.any(Number) }]);

    const detail = await callJson<Detail>(`/v1/conversations/${id}`, { user: "carol" });
    expect(detail.body.conversation_id).toBe(id);
    expect(detail.body.chat_history[0]).toMatchObject({
      messages: [
        { type: "user", content: "What is the gateway?" },
        { type: "assistant", content: "[user_turns=1] You said: What is the gateway?" },
      ],
      model: "parley-small",
      provider: "scripted",
      status: "completed",
    });
    expect((await callJson<Detail>(`/v2/conversations/${id}`, { user: "carol" })).body.chat_history).toEqual(detail.body.chat_history);
    expect((await callJson<{ created_at: string }>(`/v3/conversations/${id}`, { user: "carol" })).body.created_at).toBeTruthy();

    expect(await callJson(`/v2/conversations/${id}`, { method: "PUT", json: { topic_summary: "Gateways" }, user: "carol" })).toEqual({
      status: 200,
      body: { conversation_id: id, success: true, message: "Topic summary updated successfully" },
    });
    expect((await callJson<{ conversations: Array<{ topic_summary: string }> }>("/v1/conversations", { user: "carol" })).body.conversations[0]!.topic_summary).toBe("Gateways");
    expect((await callJson(`/v1/conversations/${id}`, { method: "PUT", json: { topic_summary: "" }, user: "carol" })).status).toBe(422);

    expect(await callJson(`/v1/conversations/${id}`, { method: "DELETE", user: "carol" })).toEqual({
      status: 200,
      body: { conversation_id: id, deleted: true, success: true, response: "Conversation deleted successfully" },
    });
    expect((await callJson(`/v1/conversations/${id}`, { user: "carol" })).status).toBe(404);
    expect((await callJson("/v1/query", { json: { query: "again", conversation_id: id }, user: "carol" })).status).toBe(404);
    expect(await callJson(`/v2/conversations/${id}`, { method: "DELETE", user: "carol" })).toEqual({
      status: 200,
      body: { conversation_id: id, deleted: false, success: true, response: "Conversation not found" },
    });
  });

  it("answers the /v2 views, the original's cache-backed ones, with SPEC's 500 when no conversation_cache type is configured", async () => {
    const id = await newConversation("uncached");
    const config = JSON.stringify({ name: "no cache", inference_backend: { url: inject("backendUrl") }, authentication: { module: "noop" }, conversation_cache: {} });
    const cacheError = { detail: { response: "Conversation cache not configured", cause: "Conversation cache is not configured or unavailable." } };
    for (const [method, path, json] of [
      ["GET", "/v2/conversations", undefined],
      ["GET", `/v2/conversations/${id}`, undefined],
      ["PUT", `/v2/conversations/${id}`, { topic_summary: "kept" }],
      ["DELETE", `/v2/conversations/${id}`, undefined],
    ] as const) {
      expect(await callJson(path, { method, json, user: "uncached", config }), `${method} ${path}`).toEqual({ status: 500, body: cacheError });
    }
    // The other versions answer, and nothing was changed or deleted.
    expect((await callJson(`/v1/conversations/${id}`, { user: "uncached", config })).status).toBe(200);
    expect((await callJson<{ conversations: unknown[] }>("/v3/conversations", { user: "uncached", config })).body.conversations).toHaveLength(1);
  });

  it("shows a conversation only to its owner", async () => {
    const id = await newConversation("dave");
    for (const [method, path] of [["GET", `/v1/conversations/${id}`], ["GET", `/v2/conversations/${id}`], ["GET", `/v3/conversations/${id}`], ["DELETE", `/v1/conversations/${id}`]] as const) {
      const res = await callJson<{ detail: { response: string } }>(path, { method, user: "eve" });
      expect(res.status, `${method} ${path}`).toBe(403);
      expect(res.body.detail.response).toBe("User does not have permission to perform this action");
    }
    for (const [method, operation] of [["PUT", "update"], ["DELETE", "delete"]] as const) {
      const res = await callJson<{ detail: { cause: string } }>(`/v1/conversations/${id}`, { method, json: method === "PUT" ? { topic_summary: "mine now" } : undefined, user: "eve" });
      expect(res.status).toBe(403);
      expect(res.body.detail.cause).toBe(`User eve does not have permission to ${operation} conversation with ID ${id}`);
    }
    expect((await callJson<{ conversations: unknown[] }>("/v1/conversations", { user: "eve" })).body.conversations).toEqual([]);
    expect((await callJson(`/v1/conversations/${id}`, { user: "dave" })).status).toBe(200);
  });

  it("answers malformed ids with 400 on every conversation endpoint, unknown well-formed ids with 404", async () => {
    const malformed = ["abc", `conv_${"a".repeat(47)}`, "A".repeat(48), "a".repeat(47), "123e4567-e89b-12d3-a456-42661417400"];
    for (const id of malformed) {
      for (const [method, path] of [
        ["GET", `/v1/conversations/${id}`],
        ["GET", `/v2/conversations/${id}`],
        ["GET", `/v3/conversations/${id}`],
        ["DELETE", `/v1/conversations/${id}`],
        ["DELETE", `/v2/conversations/${id}`],
        ["PUT", `/v2/conversations/${id}`],
      ] as const) {
        const res = await callJson(path, { method, user: "dave", json: method === "PUT" ? { topic_summary: "x" } : undefined });
        expect(res, `${method} ${path}`).toEqual({
          status: 400,
          body: { detail: { response: "Invalid conversation ID format", cause: `conversation id ${id} has invalid format` } },
        });
      }
    }
    // A UUID is a form the original system accepts; no conversation here has one.
    for (const unknown of ["0".repeat(48), `conv_${"0".repeat(48)}`, "123e4567-e89b-12d3-a456-426614174000"]) {
      expect((await callJson(`/v2/conversations/${unknown}`, { user: "dave" })).status, unknown).toBe(404);
      expect((await callJson(`/v1/conversations/${unknown}`, { method: "PUT", json: { topic_summary: "x" }, user: "dave" })).status, unknown).toBe(404);
      expect(await callJson(`/v1/conversations/${unknown}`, { method: "DELETE", user: "dave" }), unknown).toEqual({
        status: 200,
        body: { conversation_id: unknown.replace("conv_", ""), deleted: false, success: true, response: "Conversation not found" },
      });
    }
  });

  it("does not send back the whole of a huge unknown id", async () => {
    const huge = "a".repeat(100_000);
    const { status, body } = await callJson<{ detail: { response: string; cause: string } }>("/v1/query", { json: { query: "hi", conversation_id: huge }, user: "dave" });
    expect(status).toBe(404);
    expect(body.detail.response).toBe("Conversation not found");
    expect(body.detail.cause).toBe(`Conversation with ID ${"a".repeat(256)}… (100000 characters) does not exist`);
  });

  it("takes the backend form of an id (conv_ and the normalized id) on every conversation endpoint", async () => {
    const { body } = await callJson<{ conversation: string }>("/v1/responses", { json: { input: "hello" }, user: "dave" });
    const id = body.conversation;
    const backendForm = `conv_${id}`;
    for (const version of ["v1", "v2", "v3"]) {
      const detail = await callJson<{ conversation_id: string }>(`/${version}/conversations/${backendForm}`, { user: "dave" });
      expect(detail.status, version).toBe(200);
      expect(detail.body.conversation_id).toBe(id);
    }
    expect(await callJson(`/v2/conversations/${backendForm}`, { method: "PUT", json: { topic_summary: "Greetings" }, user: "dave" })).toEqual({
      status: 200,
      body: { conversation_id: id, success: true, message: "Topic summary updated successfully" },
    });
    expect((await callJson(`/v1/conversations/${backendForm}`, { method: "DELETE", user: "dave" })).body).toMatchObject({ conversation_id: id, deleted: true });
    expect((await callJson(`/v1/conversations/${id}`, { user: "dave" })).status).toBe(404);
  });
});

describe("interrupting and abandoning streams", () => {
  const slow = "#slow=40 one two three four five six seven eight nine ten eleven twelve";

  it("interrupts a running stream by request id and keeps the partial turn", async () => {
    const response = await call("/v1/streaming_query", { json: { query: slow }, user: "frank" });
    const events = eventReader(response);
    const start = (await events.next())!;
    expect(start.event).toBe("start");
    const requestId = start.data.request_id as string;
    expect((await events.next())!.event).toBe("token");

    expect(await callJson("/v1/streaming_query/interrupt", { json: { request_id: requestId }, user: "mallory" })).toMatchObject({ status: 403 });
    expect(await callJson("/v1/streaming_query/interrupt", { json: { request_id: requestId }, user: "frank" })).toEqual({
      status: 200,
      body: { request_id: requestId, interrupted: true, message: "Streaming request interrupted" },
    });
    const rest: string[] = [];
    for (let event = await events.next(); event; event = await events.next()) rest.push(event.event);
    expect(rest.at(-1)).toBe("interrupted");
    expect(rest).not.toContain("end");

    const detail = await callJson<Detail>(`/v1/conversations/${start.data.conversation_id}`, { user: "frank" });
    expect(detail.body.chat_history).toHaveLength(1);
    expect(detail.body.chat_history[0]!.status).toBe("interrupted");
    expect(detail.body.chat_history[0]!.messages[1]!.content.length).toBeLessThan("[user_turns=1] You said: ".length + slow.length);

    expect(await callJson("/v1/streaming_query/interrupt", { json: { request_id: requestId }, user: "frank" })).toEqual({
      status: 404,
      body: { detail: { response: "Streaming Request not found", cause: `Streaming Request with ID ${requestId} does not exist` } },
    });
  });

  it("can interrupt as soon as the start event has named the request", async () => {
    const response = await call("/v1/streaming_query", { json: { query: slow }, user: "frank" });
    const events = eventReader(response);
    const start = (await events.next())!;
    const interrupt = await callJson("/v1/streaming_query/interrupt", { json: { request_id: start.data.request_id }, user: "frank" });
    expect(interrupt.status).toBe(200);
    let last: string | undefined;
    for (let event = await events.next(); event; event = await events.next()) last = event.event;
    expect(last).toBe("interrupted");
  });

  it("a conversation deleted while a turn runs stays deleted", async () => {
    const id = await newConversation("judy");
    const response = await call("/v1/streaming_query", { json: { query: slow, conversation_id: id }, user: "judy" });
    const events = eventReader(response);
    expect((await events.next())!.event).toBe("start");
    expect((await callJson<{ deleted: boolean }>(`/v1/conversations/${id}`, { method: "DELETE", user: "judy" })).body.deleted).toBe(true);
    let last: { event: string; data: Record<string, unknown> } | undefined;
    for (let event = await events.next(); event; event = await events.next()) last = event;
    // The stream says why it stopped instead of ending as if its cut answer were whole.
    expect(last).toMatchObject({ event: "error", data: { status_code: 404, response: "Conversation not found" } });
    await settle();
    expect((await callJson(`/v1/conversations/${id}`, { user: "judy" })).status).toBe(404);
    expect((await callJson<{ conversations: unknown[] }>("/v1/conversations", { user: "judy" })).body.conversations).toEqual([]);
  });

  it("a conversation deleted while a question waits for its backend answers that question 404", async () => {
    for (const endpoint of ["/v1/query", "/v1/streaming_query"]) {
      const id = await newConversation("judy");
      const asked = call(endpoint, { json: { query: "a slow backend #late=1500", conversation_id: id }, user: "judy" });
      const conversation = env.CONVERSATION.getByName(id);
      // Once the turn is running (its backend call made), the conversation is deleted.
      await eventually(async () => expect(await runInDurableObject(conversation, (instance) => (instance as unknown as { active: Map<string, unknown> }).active.size)).toBe(1));
      expect((await callJson(`/v1/conversations/${id}`, { method: "DELETE", user: "judy" })).status).toBe(200);
      const answer = await asked;
      expect(answer.status, endpoint).toBe(404);
      expect(await answer.json(), endpoint).toEqual({ detail: { response: "Conversation not found", cause: `Conversation with ID ${id} does not exist` } });
    }
  });

  it("rejects malformed and unknown interrupt requests", async () => {
    expect((await callJson("/v1/streaming_query/interrupt", { json: { request_id: "nope" }, user: "frank" })).status).toBe(422);
    expect((await callJson("/v1/streaming_query/interrupt", { json: { request_id: crypto.randomUUID() }, user: "frank" })).status).toBe(404);
  });

  it("a client that disconnects mid-stream leaves the turn recorded as incomplete", async () => {
    const response = await call("/v1/streaming_query", { json: { query: slow }, user: "grace" });
    const events = eventReader(response);
    const start = (await events.next())!;
    await events.next();
    await events.reader.cancel();
    await settle();
    const id = start.data.conversation_id as string;
    // The turn ends in its conversation's Durable Object once the disconnect reaches it.
    const detail = await eventually(async () => {
      const found = await callJson<Detail>(`/v1/conversations/${id}`, { user: "grace" });
      expect(found.body.chat_history).toHaveLength(1);
      return found;
    });
    expect(detail.body.chat_history[0]!.status).toBe("incomplete");
    const next = await callJson<{ response: string }>("/v1/query", { json: { query: "still there?", conversation_id: id }, user: "grace" });
    expect(next.body.response).toBe("[user_turns=2] You said: still there?");
  });

  it("a client that disconnects while the backend is silent frees the conversation at once", async () => {
    // The request's signal aborts when its client goes (enable_request_signal): the stream ends
    // although nothing is written that could fail, instead of waiting out the backend's 150 s stall.
    const client = new AbortController();
    const response = await call("/v1/streaming_query", { json: { query: "one two three four #stall" }, user: "grace", signal: client.signal });
    const events = eventReader(response);
    const start = (await events.next())!;
    await events.next();
    client.abort();
    const id = start.data.conversation_id as string;
    const next = await callJson<{ response: string }>("/v1/query", { json: { query: "after the stall", conversation_id: id }, user: "grace" });
    expect(next.body.response).toBe("[user_turns=2] You said: after the stall");
    const detail = await callJson<Detail>(`/v1/conversations/${id}`, { user: "grace" });
    expect(detail.body.chat_history.map((turn) => turn.status)).toEqual(["incomplete", "completed"]);
  });

  it("a question whose client disconnects while it waits for its conversation never reaches the model", async () => {
    const holder = await call("/v1/streaming_query", { json: { query: "holding #stall" }, user: "grace" });
    const events = eventReader(holder);
    const start = (await events.next())!;
    const id = start.data.conversation_id as string;
    const marker = crypto.randomUUID();
    const client = new AbortController();
    const waiting = callJson("/v1/query", { json: { query: `left behind ${marker}`, conversation_id: id }, user: "grace", signal: client.signal });
    // Once it waits behind the holder, its client leaves; the object notes it.
    const conversation = env.CONVERSATION.getByName(id);
    const waitingTurns = () =>
      runInDurableObject(conversation, (object) => [...(object as unknown as { waitingTurns: Map<string, { left: boolean }> }).waitingTurns.values()].map((turn) => turn.left));
    await eventually(async () => expect(await waitingTurns()).toEqual([false]));
    client.abort();
    await eventually(async () => expect(await waitingTurns()).toEqual([true]));
    expect((await callJson("/v1/streaming_query/interrupt", { json: { request_id: start.data.request_id }, user: "grace" })).status).toBe(200);
    expect((await waiting).status).toBe(500);
    const requests = (await (await fetch(`${inject("backendUrl").replace(/\/v1$/, "")}/__requests`)).json()) as Array<{ body: unknown }>;
    expect(requests.filter((request) => JSON.stringify(request.body ?? "").includes(marker))).toEqual([]);
    const detail = await callJson<Detail>(`/v1/conversations/${id}`, { user: "grace" });
    expect(detail.body.chat_history.map((turn) => turn.status)).toEqual(["interrupted"]);
  });

  it("a question whose client left while it was planned is not sent to its conversation", async () => {
    const client = new AbortController();
    client.abort();
    const marker = crypto.randomUUID();
    expect((await callJson("/v1/query", { json: { query: `gone ${marker}` }, user: "grace", signal: client.signal })).status).toBe(500);
    const requests = (await (await fetch(`${inject("backendUrl").replace(/\/v1$/, "")}/__requests`)).json()) as Array<{ body: unknown }>;
    expect(requests.filter((request) => JSON.stringify(request.body ?? "").includes(marker))).toEqual([]);
  });

  it("a client that disconnects from a streamed response leaves the turn recorded as incomplete too", async () => {
    const response = await call("/v1/responses", { json: { input: slow, stream: true }, user: "grace" });
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let seen = "";
    while (!seen.includes("response.output_text.delta")) seen += (await reader.read()).value ?? "";
    await reader.cancel();
    await settle();
    const id = /"conversation":"([0-9a-f]{48})"/.exec(seen)![1]!;
    const detail = await eventually(async () => {
      const found = await callJson<Detail>(`/v1/conversations/${id}`, { user: "grace" });
      expect(found.body.chat_history).toHaveLength(1);
      return found;
    });
    expect(detail.body.chat_history[0]!.status).toBe("incomplete");
  });

  it("streams of one conversation never interleave", async () => {
    const id = await newConversation("heidi");
    // Each client reads its stream as soon as it starts: a turn holds the conversation until its
    // stream has been consumed, and the next turn starts only then.
    const texts = await Promise.all(
      [1, 2, 3].map(async (n) => {
        const res = await call("/v1/streaming_query", { json: { query: `#slow=5 stream ${n}`, conversation_id: id }, user: "heidi" });
        const events = (await readSse(res)).map((e) => e.data as { event: string; data: { token: string } });
        return events.find((e) => e.event === "turn_complete")!.data.token;
      }),
    );
    expect(texts.map((t) => Number(/user_turns=(\d)/.exec(t)![1])).sort()).toEqual([2, 3, 4]);
  });
});
