// A turn under faults, through the Worker: a backend that stalls, an answer that runs longer than
// the time-out, quotas under concurrency, and questions larger than the model or the storage take.
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, inject, it } from "vitest";
import { runtimeEnv } from "../../worker/turn/conversation-runner.ts";
import { call, callJson, eventually, largestStoredValue, MAX_STORED_VALUE, readSse, testConfig } from "./helpers.ts";

type Json = Record<string, unknown>;
type QueryEvent = { event: string; data: Json; available_quotas?: Record<string, number> };

const TIMEOUT_S = 2;
const timed = testConfig({ inference_backend: { timeout: TIMEOUT_S } });

/** The requests the scripted backend received whose body mentions `marker`. */
async function backendSaw(marker: string): Promise<number> {
  const requests = (await (await fetch(`${inject("backendUrl").replace(/\/v1$/, "")}/__requests`)).json()) as Array<{ body: unknown }>;
  return requests.filter((request) => JSON.stringify(request.body ?? "").includes(marker)).length;
}

const queryEvents = async (response: Response) => (await readSse(response)).map((event) => event.data as QueryEvent);

describe("a backend that stalls after its first deltas", () => {
  it("ends a stream within the time-out with SPEC's 503, and the conversation goes on", async () => {
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "before the stall" }, user: "stall", config: timed });
    const id = first.body.conversation_id;
    const started = Date.now();
    const events = await queryEvents(await call("/v1/streaming_query", { json: { query: "one two three four #stall", conversation_id: id }, user: "stall", config: timed }));
    // Well within the backend's 150 s stall: the time-out bounds each event, not only the first.
    expect(Date.now() - started).toBeLessThan((TIMEOUT_S + 8) * 1000);
    expect(events.filter((event) => event.event === "token" && event.data.token !== "")).toHaveLength(2);
    expect(events.at(-1)).toMatchObject({ event: "error", data: { status_code: 503, response: "Unable to connect to the inference backend", cause: "The inference backend did not answer in time." } });

    const next = await callJson<{ response: string }>("/v1/query", { json: { query: "after the stall", conversation_id: id }, user: "stall", config: timed });
    // The failed turn is kept apart from what the model sees; the conversation goes on.
    expect(next.body.response).toBe("[user_turns=2] You said: after the stall");
    const detail = await callJson<{ chat_history: unknown[] }>(`/v1/conversations/${id}`, { user: "stall", config: timed });
    expect(detail.body.chat_history).toHaveLength(2);
  });

  it("ends a streamed response with response.failed, and a JSON answer with 503", async () => {
    const stream = (await readSse(await call("/v1/responses", { json: { input: "one two three #stall", stream: true }, user: "stall", config: timed }))).map((event) => event.data);
    expect(stream.at(-1)).toBe("[DONE]");
    expect(stream.at(-2)).toMatchObject({ type: "response.failed", response: { status: "failed", error: { code: "server_error", message: expect.stringContaining("did not answer in time") } } });

    const json = await callJson<{ detail: Json }>("/v1/query", { json: { query: "one two three #stall" }, user: "stall", config: timed });
    expect(json.status).toBe(503);
    expect(json.body.detail).toEqual({ response: "Unable to connect to the inference backend", cause: "The inference backend did not answer in time." });
  });
});

describe("a backend that refuses the call", () => {
  // REFERENCE "Errors": connection failure 503, context length 413, 429 429, anything else 500.
  it("answers SPEC's 500 for its 4xx and 5xx, 413 for context length and 429 for its rate limit, on every endpoint", async () => {
    const expected: Array<[string, number, string]> = [
      ["#status=400", 500, "Internal server error"],
      ["#status=404", 500, "Internal server error"],
      ["#status=422", 500, "Internal server error"],
      ["#bad-key", 500, "Internal server error"],
      ["#status=502", 500, "Internal server error"],
      ["#context-too-long", 413, "Prompt is too long"],
      ["#rate-limit", 429, "The model quota has been exceeded"],
    ];
    for (const [marker, status, response] of expected) {
      const query = await callJson<{ detail: { response: string; cause: string } }>("/v1/query", { json: { query: `refused ${marker}` }, user: "refused" });
      expect([marker, query.status, query.body.detail.response]).toEqual([marker, status, response]);
      const responses = await callJson<{ detail: { response: string } }>("/v1/responses", { json: { input: `refused ${marker}` }, user: "refused" });
      expect([marker, responses.status, responses.body.detail.response]).toEqual([marker, status, response]);
      // Refused before anything was streamed: the status itself, but for a question too long for
      // the model, which the original's stream tells in an error event (UPSTREAM "Compaction").
      const streamed = await call("/v1/streaming_query", { json: { query: `refused ${marker}` }, user: "refused" });
      if (status === 413) {
        expect(streamed.status).toBe(200);
        const events = await queryEvents(streamed);
        expect(events.map((event) => event.event)).toEqual(["start", "error"]);
        expect(events[1]!.data).toEqual({ status_code: 413, response, cause: "The input exceeds the context window size of model 'scripted/parley-small'." });
      } else {
        const stream = (await streamed.json()) as { detail: { response: string } };
        expect([marker, streamed.status, stream.detail.response]).toEqual([marker, status, response]);
      }
    }
    // A 4xx's cause says what the backend rejected; a 5xx's leaves the backend's words out.
    const rejected = await callJson<{ detail: { cause: string } }>("/v1/query", { json: { query: "refused #status=400" }, user: "refused" });
    expect(rejected.body.detail.cause).toBe("the inference backend answered 400: scripted status 400");
    const failed = await callJson<{ detail: { cause: string } }>("/v1/query", { json: { query: "refused #status=502" }, user: "refused" });
    expect(failed.body.detail.cause).toBe("the inference backend answered 502");
  });
});

describe("a backend whose answer is JSON of the wrong shape", () => {
  const CAUSE = /the inference backend's .* could not be read/;
  // In the chat wire mode, the scripted backend speaks Chat Completions (its chunks are checked then).
  const config = testConfig();
  const turns = async (id: string, user: string) =>
    (await callJson<{ chat_history: Array<{ messages: Array<{ content: string }> }> }>(`/v1/conversations/${id}`, { user, config })).body.chat_history.map(
      (turn) => turn.messages[0]!.content,
    );

  it("answers 500 naming what was wrong, and the conversation goes on", async () => {
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "before" }, user: "misshapen", config });
    const id = first.body.conversation_id;
    const bad = await callJson<{ detail: { response: string; cause: string } }>("/v1/query", { json: { query: "broken #misshapen", conversation_id: id }, user: "misshapen", config });
    expect(bad.status).toBe(500);
    expect(bad.body.detail.response).toBe("Internal server error");
    expect(bad.body.detail.cause).toMatch(CAUSE);
    // The conversation was not left held: the next question is answered at once, the failed turn kept apart.
    const next = await callJson<{ response: string }>("/v1/query", { json: { query: "after", conversation_id: id }, user: "misshapen", config });
    expect(next.body.response).toBe("[user_turns=2] You said: after");
    expect(await turns(id, "misshapen")).toEqual(["before", "after"]);
  });

  it("ends a stream with SPEC's error event or response.failed after the deltas that were sound", async () => {
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "before" }, user: "misshapen-stream", config });
    const id = first.body.conversation_id;
    const events = await queryEvents(await call("/v1/streaming_query", { json: { query: "one two three four #misshapen", conversation_id: id }, user: "misshapen-stream", config }));
    expect(events.filter((event) => event.event === "token" && event.data.token !== "")).toHaveLength(2);
    expect(events.at(-1)).toMatchObject({ event: "error", data: { status_code: 500, response: "Internal server error", cause: expect.stringMatching(CAUSE) } });
    const next = await callJson<{ response: string }>("/v1/query", { json: { query: "after", conversation_id: id }, user: "misshapen-stream", config });
    expect(next.body.response).toBe("[user_turns=2] You said: after");

    const stream = (await readSse(await call("/v1/responses", { json: { input: "one two three #misshapen", stream: true }, user: "misshapen-stream", config }))).map((event) => event.data);
    expect(stream.at(-1)).toBe("[DONE]");
    expect(stream.at(-2)).toMatchObject({ type: "response.failed", response: { status: "failed", error: { code: "server_error", message: expect.stringMatching(CAUSE) } } });
  });
});

describe("a backend whose stream ends before its answer does", () => {
  // A clean end of the stream without the terminal event (response.completed; a chat stream's finish_reason).
  it("fails the turn on every streaming endpoint, records none of it, and the conversation goes on", async () => {
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "before" }, user: "end-early" });
    const id = first.body.conversation_id;
    const events = await queryEvents(await call("/v1/streaming_query", { json: { query: "one two three four #end-early", conversation_id: id }, user: "end-early" }));
    expect(events.filter((event) => event.event === "token" && event.data.token !== "")).toHaveLength(2);
    expect(events.at(-1)).toMatchObject({ event: "error", data: { status_code: 500, response: "Internal server error", cause: expect.stringContaining("ended its answer before finishing it") } });

    const stream = (await readSse(await call("/v1/responses", { json: { input: "one two three #end-early", stream: true, conversation: `conv_${id}` }, user: "end-early" }))).map((event) => event.data);
    expect(stream.at(-1)).toBe("[DONE]");
    expect(stream.at(-2)).toMatchObject({ type: "response.failed", response: { status: "failed" } });

    const next = await callJson<{ response: string }>("/v1/query", { json: { query: "after", conversation_id: id }, user: "end-early" });
    expect(next.body.response).toBe("[user_turns=2] You said: after");
    const detail = await callJson<{ chat_history: unknown[] }>(`/v1/conversations/${id}`, { user: "end-early" });
    expect(detail.body.chat_history).toHaveLength(2);
  });
});

describe("a backend that answers a streamed call in JSON", () => {
  it("answers 500 saying so (nothing was streamed yet), and the conversation goes on", async () => {
    const config = testConfig();
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "before" }, user: "ignores-stream", config });
    const id = first.body.conversation_id;
    const stream = await callJson<{ detail: Json }>("/v1/streaming_query", { json: { query: "stream please #ignore-stream", conversation_id: id }, user: "ignores-stream", config });
    expect(stream.status).toBe(500);
    expect(stream.body.detail).toEqual({ response: "Internal server error", cause: "the inference backend answered a streamed call with application/json, not an event stream" });
    const next = await callJson<{ response: string }>("/v1/query", { json: { query: "after", conversation_id: id }, user: "ignores-stream", config });
    expect(next.body.response).toBe("[user_turns=2] You said: after");
  });
});

describe("a turn that cannot be recorded", () => {
  /** Makes the conversation's next commit fail once, as a storage fault would. */
  async function failNextCommit(id: string): Promise<void> {
    await runInDurableObject(env.CONVERSATION.getByName(id), (instance) => {
      const object = instance as unknown as { commitTurn: (...args: unknown[]) => unknown };
      const commit = object.commitTurn;
      object.commitTurn = function () {
        object.commitTurn = commit;
        throw new Error("the storage failed");
      };
    });
  }

  it("is reported as failed, recorded as failed, and the conversation goes on", async () => {
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "before" }, user: "unrecorded" });
    const id = first.body.conversation_id;
    await failNextCommit(id);
    const json = await callJson<{ detail: Json }>("/v1/query", { json: { query: "lost", conversation_id: id }, user: "unrecorded" });
    expect(json.status).toBe(500);
    expect(json.body.detail).toEqual({ response: "Internal server error", cause: "the answer could not be recorded" });

    await failNextCommit(id);
    const events = await queryEvents(await call("/v1/streaming_query", { json: { query: "lost too", conversation_id: id }, user: "unrecorded" }));
    expect(events.at(-1)).toMatchObject({ event: "error", data: { status_code: 500, cause: "the answer could not be recorded" } });

    const next = await callJson<{ response: string }>("/v1/query", { json: { query: "after", conversation_id: id }, user: "unrecorded" });
    // Both were recorded as failed (kept apart from what the model sees), not left running.
    expect(next.body.response).toBe("[user_turns=2] You said: after");
    await runInDurableObject(env.CONVERSATION.getByName(id), (instance) => {
      const sql = (instance as unknown as { sql: SqlStorage }).sql;
      expect(sql.exec<{ status: string }>("SELECT status FROM turns ORDER BY turn_number").toArray().map((row) => row.status)).toEqual(["completed", "failed", "failed", "completed"]);
      expect(sql.exec("SELECT 1 FROM running_turns").toArray()).toHaveLength(0);
    });
  });
});

describe("a turn that runs longer than the time-out", () => {
  it("keeps its conversation until it ends, so a question sent meanwhile sees it", { timeout: 20_000 }, async () => {
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "start" }, user: "long", config: timed });
    const id = first.body.conversation_id;
    // Every delta well within the time-out, the whole answer well beyond it.
    const slow = "a b c d e f g h #slow=600";
    const long = call("/v1/streaming_query", { json: { query: slow, conversation_id: id }, user: "long", config: timed });
    const longResponse = await long;
    const reader = queryEvents(longResponse);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const meanwhile = await callJson<{ response: string }>("/v1/query", { json: { query: "meanwhile", conversation_id: id }, user: "long", config: timed });
    const longEvents = await reader;
    expect(longEvents.at(-1)?.event).toBe("end");
    expect(longEvents.find((event) => event.event === "turn_complete")?.data.token).toBe(`[user_turns=2] You said: ${slow}`);
    expect(meanwhile.body.response).toBe("[user_turns=3] You said: meanwhile");
    const detail = await callJson<{ chat_history: Array<{ messages: Array<{ content: string }> }> }>(`/v1/conversations/${id}`, { user: "long", config: timed });
    expect(detail.body.chat_history.map((turn) => turn.messages[0]!.content)).toEqual(["start", slow, "meanwhile"]);
  });

  it("is not timed out while its client reads slowly: the time-out is the backend's, not the client's", { timeout: 20_000 }, async () => {
    // A 1 MB answer (the scripted model repeats the question), more than the stream holds for a
    // client that does not read, so the turn waits for it with the backend's last events unread.
    const big = "x".repeat(1_000_000);
    const response = await call("/v1/streaming_query", { json: { query: big }, user: "long", config: timed });
    const reader = response.body!.getReader();
    await reader.read();
    await new Promise((resolve) => setTimeout(resolve, (TIMEOUT_S + 2) * 1000));
    const rest: Uint8Array[] = [];
    for (let next = await reader.read(); !next.done; next = await reader.read()) rest.push(next.value);
    const events = await queryEvents(new Response(new Blob(rest)));
    expect(events.filter((event) => event.event === "error")).toEqual([]);
    expect(events.find((event) => event.event === "turn_complete")?.data.token).toBe(`[user_turns=1] You said: ${big}`);
    expect(events.at(-1)?.event).toBe("end");
  });

  it("ends on an interrupt while its client is not reading, and the conversation goes on", { timeout: 20_000 }, async () => {
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "start" }, user: "stuck" });
    const id = first.body.conversation_id;
    const response = await call("/v1/streaming_query", { json: { query: "x".repeat(1_000_000), conversation_id: id }, user: "stuck" });
    const reader = response.body!.getReader();
    const opening = new TextDecoder().decode((await reader.read()).value);
    const requestId = /"request_id":\s*"([^"]+)"/.exec(opening)![1]!;
    // The client reads no further: the turn holds its 1 MB answer for it, and its conversation.
    const next = callJson<{ response: string }>("/v1/query", { json: { query: "next", conversation_id: id }, user: "stuck" });
    const early = await Promise.race([next.then(() => "answered"), new Promise((resolve) => setTimeout(() => resolve("waiting"), 1000))]);
    expect(early).toBe("waiting");
    const interrupted = await callJson("/v1/streaming_query/interrupt", { json: { request_id: requestId }, user: "stuck" });
    expect(interrupted.status).toBe(200);
    expect((await next).body.response).toBe("[user_turns=3] You said: next");
    await reader.cancel();
  });
});

describe("quotas under concurrency", () => {
  const limited = (name: string) => testConfig({ quota_handlers: { limiters: [{ type: "user_limiter", name, initial_quota: 200, quota_increase: 0, period: "1 day" }] } });
  const quotaLeft = async (config: string, user: string) =>
    (await callJson<{ quotas: Array<{ limiter: string; available: number }> }>("/v1/quotas", { user, config })).body.quotas[0]!.available;

  it("100 parallel questions of one user consume at most the limit plus one turn", async () => {
    const config = limited("parallel");
    const answers = await Promise.all(
      Array.from({ length: 100 }, (_, n) => callJson<{ input_tokens: number; output_tokens: number }>("/v1/query", { json: { query: `parallel ${n}` }, user: "q-parallel", config })),
    );
    const ok = answers.filter((answer) => answer.status === 200);
    expect(ok.length).toBeGreaterThan(0);
    expect(answers.every((answer) => answer.status === 200 || answer.status === 429)).toBe(true);
    const consumed = ok.reduce((sum, answer) => sum + answer.body.input_tokens + answer.body.output_tokens, 0);
    expect(consumed).toBeLessThanOrEqual(250);
    // Settled after the answers: the counter shows exactly what they used.
    await eventually(async () => expect(await quotaLeft(config, "q-parallel")).toBe(Math.max(0, 200 - consumed)));
  });

  it("100 parallel streams on one conversation consume at most the limit plus one turn", async () => {
    const config = limited("one-conversation");
    const first = await callJson<{ conversation_id: string; input_tokens: number; output_tokens: number }>("/v1/query", { json: { query: "first" }, user: "q-stream", config });
    const id = first.body.conversation_id;
    const streams = await Promise.all(
      Array.from({ length: 100 }, async (_, n) => {
        const response = await call("/v1/streaming_query", { json: { query: `stream ${n}`, conversation_id: id }, user: "q-stream", config });
        return response.status === 200 ? queryEvents(response) : response.status;
      }),
    );
    const ends = streams.flatMap((events) => (typeof events === "number" ? [] : events.filter((event) => event.event === "end")));
    expect(streams.every((events) => typeof events !== "number" || events === 429)).toBe(true);
    const consumed = first.body.input_tokens + first.body.output_tokens + ends.reduce((sum, end) => sum + Number(end.data.input_tokens) + Number(end.data.output_tokens), 0);
    expect(consumed).toBeLessThanOrEqual(250);
  });

  it("reports what was admitted minus the turn's own use", async () => {
    const config = limited("reported");
    const answer = await callJson<{ input_tokens: number; output_tokens: number; available_quotas: Record<string, number> }>("/v1/query", { json: { query: "how much?" }, user: "q-report", config });
    expect(answer.body.available_quotas).toEqual({ reported: 200 - answer.body.input_tokens - answer.body.output_tokens });
  });
});

describe("questions larger than the model or the storage take", () => {
  it("refuses a request body over the limit with 413 before calling the model", async () => {
    const marker = `huge-${crypto.randomUUID()}`;
    const response = await callJson<{ detail: Json }>("/v1/query", { json: { query: `${marker} ${"x".repeat(10 * 1024 * 1024)}` }, user: "size" });
    expect(response.status).toBe(413);
    expect(response.body.detail.response).toBe("Prompt is too long");
    expect(await backendSaw(marker)).toBe(0);
  });

  it("reads out a refused body sent without a length before answering 413, so a client still sending gets the answer", async () => {
    // 10 MiB in 64 KiB chunks, counting what the gateway pulled: all of it by the time the 413 is out.
    const chunk = new TextEncoder().encode("x".repeat(64 * 1024));
    const total = 160;
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"query":"'));
      },
      pull(controller) {
        if (pulled === total) {
          controller.enqueue(new TextEncoder().encode('"}'));
          controller.close();
          return;
        }
        pulled += 1;
        controller.enqueue(chunk);
      },
    });
    const response = await callJson<{ detail: Json }>("/v1/query", { body, headers: { "Content-Type": "application/json" }, user: "size" });
    expect(response.status).toBe(413);
    expect(response.body.detail).toEqual({ response: "Prompt is too long", cause: "The prompt exceeds the maximum allowed length." });
    expect(pulled).toBe(total);

    // One that never ends is read only so far (64 MiB past the limit), then let go.
    let endless = 0;
    const neverEnds = new ReadableStream<Uint8Array>({
      pull(controller) {
        endless += 1;
        controller.enqueue(chunk);
      },
    });
    expect((await call("/v1/query", { body: neverEnds, headers: { "Content-Type": "application/json" }, user: "size" })).status).toBe(413);
    expect(endless * chunk.byteLength).toBeGreaterThan(66 * 1024 * 1024);
    expect(endless * chunk.byteLength).toBeLessThan(67 * 1024 * 1024);
  });

  it("refuses input beyond the model's context window with 413, without calling it", async () => {
    const config = testConfig({ inference: { context_windows: { "scripted/parley-small": 50 } } });
    const marker = `window-${crypto.randomUUID()}`;
    const cause = "The input exceeds the context window size of model 'scripted/parley-small'.";
    const response = await callJson<{ detail: Json }>("/v1/query", { json: { query: `${marker} ${"word ".repeat(100)}` }, user: "size", config });
    expect(response.status).toBe(413);
    expect(response.body.detail).toEqual({ response: "Prompt is too long", cause });
    // A stream tells it in its error event, after the start event the original sends first.
    const streamed = await call("/v1/streaming_query", { json: { query: `${marker} ${"word ".repeat(100)}` }, user: "size", config });
    expect(streamed.status).toBe(200);
    const events = await queryEvents(streamed);
    expect(events).toEqual([
      { event: "start", data: { conversation_id: expect.any(String), request_id: expect.any(String) } },
      { event: "error", data: { status_code: 413, response: "Prompt is too long", cause } },
    ]);
    const text = await call("/v1/streaming_query", { json: { query: `${marker} ${"word ".repeat(100)}`, media_type: "text/plain" }, user: "size", config });
    expect([text.status, await text.text()]).toEqual([200, "\n\n[error: Prompt is too long]"]);
    expect(await backendSaw(marker)).toBe(0);
  });

  it("stores a question and an answer larger than one storage value, and goes on", async () => {
    // 1.5 MB each way (the scripted model repeats the question): more than a SQLite value holds.
    const big = "big ".repeat(384 * 1024);
    const answer = await callJson<{ conversation_id: string; response: string }>("/v1/query", { json: { query: big }, user: "size" });
    expect(answer.status).toBe(200);
    const id = answer.body.conversation_id;
    const next = await callJson<{ response: string }>("/v1/query", { json: { query: "and then?", conversation_id: id }, user: "size" });
    expect(next.body.response).toBe("[user_turns=2] You said: and then?");
    const detail = await callJson<{ chat_history: Array<{ messages: Array<{ content: string }> }> }>(`/v1/conversations/${id}`, { user: "size" });
    expect(detail.body.chat_history[0]!.messages[0]!.content).toBe(big);
    expect(await largestStoredValue(env.CONVERSATION.getByName(id))).toBeLessThanOrEqual(MAX_STORED_VALUE);
    await eventually(async () => {
      const list = await callJson<{ conversations: Array<Json> }>("/v1/conversations", { user: "size" });
      expect(list.body.conversations.find((conversation) => conversation.conversation_id === id)).toMatchObject({ message_count: 2 });
    });
  });

  it("refuses a turn the conversation has no room for, and stays readable, continuable and forkable", async () => {
    // 1.9 MiB each way (the scripted model repeats the question), kept twice each: about 7.6 Mi of
    // the conversation's 10 Mi characters, so a second question as large has no room.
    const big = "big ".repeat(480 * 1024);
    const first = await callJson<{ id: string; conversation: string }>("/v1/responses", { json: { input: big }, user: "size" });
    expect(first.status).toBe(200);
    const marker = `no-room-${crypto.randomUUID()}`;
    const refused = await callJson<{ detail: Json }>("/v1/responses", { json: { input: `${marker} ${big}`, previous_response_id: first.body.id }, user: "size" });
    expect(refused.status).toBe(413);
    expect(refused.body.detail).toEqual({
      response: "Prompt is too long",
      cause: "The conversation keeps at most 10485760 characters of turns and has no room for this one; start a new conversation, or continue from an earlier response.",
    });
    expect(await backendSaw(marker)).toBe(0);

    const next = await callJson<{ output_text: string }>("/v1/responses", { json: { input: "and then?", previous_response_id: first.body.id }, user: "size" });
    expect(next.status).toBe(200);
    const fork = await callJson<{ conversation: string; output_text: string }>("/v1/responses", { json: { input: "or else?", previous_response_id: first.body.id }, user: "size" });
    expect(fork.status).toBe(200);
    expect(fork.body.conversation).not.toBe(first.body.conversation);
    // The fork's model saw the large first turn; its views start with the fork's own turn.
    expect(fork.body.output_text).toBe("[user_turns=2] You said: or else?");
    for (const [id, question, turns] of [[first.body.conversation, big, 2], [fork.body.conversation, "or else?", 1]] as const) {
      const detail = await callJson<{ chat_history: Array<{ messages: Array<{ content: string }> }> }>(`/v1/conversations/${id}`, { user: "size" });
      expect(detail.status).toBe(200);
      expect(detail.body.chat_history).toHaveLength(turns);
      expect(detail.body.chat_history[0]!.messages[0]!.content).toBe(question);
    }
  });

  it("refuses at once a question that would wait beyond what its conversation holds, and answers the rest", { timeout: 30_000 }, async () => {
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "hello" }, user: "queue" });
    const id = first.body.conversation_id;
    // A slow turn holds the conversation; large questions wait behind it, each holding about
    // 3.8 Mi characters (its items and its text): two fit the 8 Mi that may wait, a third does not.
    const slow = callJson<{ response: string }>("/v1/query", { json: { query: "one two three four five six #slow=400", conversation_id: id }, user: "queue" });
    await new Promise((resolve) => setTimeout(resolve, 200));
    const big = "big ".repeat(480 * 1024);
    const started = Date.now();
    const waiting = [1, 2, 3].map((n) => call("/v1/query", { json: { query: `${n} ${big}`, conversation_id: id }, user: "queue" }));
    const refused = await Promise.race(waiting.map(async (answer) => ((await answer).status === 429 ? answer : new Promise<never>(() => {}))));
    // Refused without waiting for the slow turn (which answers after about 2.4 s).
    expect(Date.now() - started).toBeLessThan(1_500);
    expect(refused.headers.get("retry-after")).toBe("1");
    expect(((await refused.json()) as { detail: Json }).detail).toEqual({
      response: "The quota has been exceeded",
      cause: `Too many questions are waiting for conversation ${id} (at most 1000 turns, or 8388608 characters of questions); try again once it has answered.`,
    });
    expect((await slow).body.response).toBe("[user_turns=2] You said: one two three four five six #slow=400");
    // The two that waited run in turn: the first answered, the second finds no room left in the
    // conversation (README "Limits": 10 Mi characters).
    expect((await Promise.all(waiting)).map((answer) => answer.status).sort()).toEqual([200, 413, 429]);
    const next = await callJson<{ response: string }>("/v1/query", { json: { query: "and now", conversation_id: id }, user: "queue" });
    expect(next.body.response).toBe("[user_turns=4] You said: and now");
  });

  it("lets at most 1000 turns wait for one conversation, however small", async () => {
    await runInDurableObject(env.CONVERSATION.getByName(`queue-${crypto.randomUUID()}`), async (instance) => {
      const object = instance as unknown as { takeTurn(units: () => number): Promise<(() => void) | null> };
      const running = await object.takeTurn(() => 1);
      const waiting = Array.from({ length: 1000 }, () => object.takeTurn(() => 1));
      expect(await object.takeTurn(() => 1)).toBeNull();
      running!();
      // Each in turn, once the one before it has ended; then there is room again.
      for (const turn of waiting) (await turn)!();
      const again = await object.takeTurn(() => 1);
      expect(again).not.toBeNull();
      again!();
    });
  });
});

describe("a conversation's Durable Object that restarts mid-turn", () => {
  /** Reads a stream until its first token of text, restarts every Durable Object, and reads what is left. */
  async function restartAfterFirstToken(stream: Response, token = '"token":"['): Promise<string> {
    const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
    let seen = "";
    while (!seen.includes(token)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before its first token: ${seen}`);
      seen += value;
    }
    // Every object's memory is gone (as after an eviction or a crash); storage stays.
    await abortAllDurableObjects();
    // The object's stream is cut (its client saw part of an answer); whatever still comes ends it.
    for (;;) {
      const next = await reader.read().catch(() => ({ done: true as const, value: undefined }));
      if (next.done) break;
      seen += next.value;
    }
    return seen;
  }

  it("delivers what it still owes under the Worker's own configuration, not the bundled one", () => {
    // After a restart no turn has named a configuration: the object's environment (the Worker's, with
    // its PARLEY_CONFIG) is what deliveries load, so records reach the configured store.
    const deployed = { ...env, PARLEY_CONFIG: testConfig({ name: "deployed" }) } as Env;
    expect(runtimeEnv(deployed, null).PARLEY_CONFIG).toBe(deployed.PARLEY_CONFIG);
    expect(runtimeEnv(deployed, deployed.PARLEY_CONFIG!)).toBe(deployed);
    const named = testConfig({ name: "named by the turn" });
    expect(runtimeEnv(deployed, named).PARLEY_CONFIG).toBe(named);
  });

  it("records the running turn as incomplete, and the conversation goes on", { timeout: 20_000 }, async () => {
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "before the restart" }, user: "restart" });
    const id = first.body.conversation_id;
    const question = "one two three four five six seven eight #slow=500";
    const seen = await restartAfterFirstToken(await call("/v1/streaming_query", { json: { query: question, conversation_id: id }, user: "restart" }));
    // The stream ends with SPEC's error event, not a cut connection.
    expect(seen.trimEnd().split("\n\n").at(-1)).toBe('data: {"event":"error","data":{"status_code":500,"response":"Internal server error","cause":"the answer ended early"}}');

    const after = await callJson<{ response: string }>("/v1/query", { json: { query: "after the restart", conversation_id: id }, user: "restart" });
    expect(after.status).toBe(200);
    // The restarted turn's question is part of the history the model sees.
    expect(after.body.response).toBe("[user_turns=3] You said: after the restart");
    const detail = await callJson<{ chat_history: Array<{ messages: Array<{ content: string; type: string }> }> }>(`/v1/conversations/${id}`, { user: "restart" });
    expect(detail.body.chat_history.map((turn) => turn.messages[0]!.content)).toEqual(["before the restart", question, "after the restart"]);
    // Recorded without an answer: the partial text was lost with the object's memory.
    expect(detail.body.chat_history[1]!.messages.slice(1).map((message) => message.content).join("")).toBe("");
  });

  it("records a JSON answer's turn as incomplete once it has run past its marker's delay", { timeout: 20_000 }, async () => {
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "before the restart" }, user: "restart-json" });
    const id = first.body.conversation_id;
    const question = "one two three four five six seven eight #slow=500";
    const pending = call("/v1/query", { json: { query: question, conversation_id: id }, user: "restart-json" });
    // A JSON answer's marker waits 100 ms after the model call left (a quicker turn commits once).
    await eventually(() =>
      runInDurableObject(env.CONVERSATION.getByName(id), (instance) => {
        expect((instance as unknown as { sql: SqlStorage }).sql.exec("SELECT 1 FROM running_turns").toArray()).toHaveLength(1);
      }),
    );
    await abortAllDurableObjects();
    const cut = await pending;
    expect(cut.status).toBeGreaterThanOrEqual(500);

    const after = await callJson<{ response: string }>("/v1/query", { json: { query: "after the restart", conversation_id: id }, user: "restart-json" });
    expect(after.body.response).toBe("[user_turns=3] You said: after the restart");
    const detail = await callJson<{ chat_history: Array<{ messages: Array<{ content: string }> }> }>(`/v1/conversations/${id}`, { user: "restart-json" });
    expect(detail.body.chat_history.map((turn) => turn.messages[0]!.content)).toEqual(["before the restart", question, "after the restart"]);
  });

  it("leaves no marker behind a turn that ended, whether it left one or not", { timeout: 20_000 }, async () => {
    const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "quick" }, user: "markers" });
    const id = first.body.conversation_id;
    // Past its marker's delay (the marker is left, then removed with the commit), then a stream.
    expect((await callJson("/v1/query", { json: { query: "one two #slow=150", conversation_id: id }, user: "markers" })).status).toBe(200);
    expect((await call("/v1/streaming_query", { json: { query: "streamed", conversation_id: id }, user: "markers" }).then((r) => r.text())).length).toBeGreaterThan(0);
    await runInDurableObject(env.CONVERSATION.getByName(id), (instance) => {
      expect((instance as unknown as { sql: SqlStorage }).sql.exec("SELECT request_id FROM running_turns").toArray()).toEqual([]);
    });
    // A restart finds nothing to record: the history is the three turns, each completed.
    await abortAllDurableObjects();
    const detail = await callJson<{ chat_history: Array<{ messages: Array<{ content: string }> }> }>(`/v1/conversations/${id}`, { user: "markers" });
    expect(detail.body.chat_history.map((turn) => turn.messages[0]!.content)).toEqual(["quick", "one two #slow=150", "streamed"]);
  });

  it("ends a streamed response with response.failed and [DONE], not a cut connection", { timeout: 20_000 }, async () => {
    const response = await call("/v1/responses", { json: { input: "one two three four five six seven eight #slow=500", stream: true }, user: "restart-responses" });
    const seen = await restartAfterFirstToken(response, "response.output_text.delta");
    const events = seen.split("\n\n").filter((frame) => frame.includes("data: "));
    expect(events.at(-1)).toBe("data: [DONE]");
    expect(events.at(-2)).toContain('"type":"response.failed"');
    expect(events.at(-2)).toContain("the response ended early");
  });

  it("keeps a conversation whose first turn was running (it is written with that turn's marker)", { timeout: 20_000 }, async () => {
    const question = "a first question, cut short #slow=500";
    const seen = await restartAfterFirstToken(await call("/v1/streaming_query", { json: { query: question }, user: "restart-new" }));
    const id = /"conversation_id":"([^"]+)"/.exec(seen)![1]!;

    const detail = await callJson<{ chat_history: Array<{ messages: Array<{ content: string }> }> }>(`/v1/conversations/${id}`, { user: "restart-new" });
    expect(detail.status).toBe(200);
    expect(detail.body.chat_history.map((turn) => turn.messages[0]!.content)).toEqual([question]);
    const other = await call(`/v1/conversations/${id}`, { user: "someone-else" });
    expect(other.status).toBe(403);
    // The list view hears of it too (the restarted turn's record goes out with it), before any other turn.
    await eventually(async () => {
      const list = await callJson<{ conversations: Array<Json> }>("/v1/conversations", { user: "restart-new" });
      expect(list.body.conversations.find((conversation) => conversation.conversation_id === id)).toMatchObject({ message_count: 1 });
    });
    const after = await callJson<{ response: string }>("/v1/query", { json: { query: "and now", conversation_id: id }, user: "restart-new" });
    expect(after.body.response).toBe("[user_turns=2] You said: and now");
  });
});

describe("a new conversation's first write", () => {
  it("leaves its object usable when it rolls back (the schema it created is gone with it)", async () => {
    const stub = env.CONVERSATION.getByName(`rollback-${crypto.randomUUID()}`);
    await runInDurableObject(stub, (instance) => {
      // The object's own steps, as a turn takes them: the conversation is written with the turn's first write.
      const object = instance as unknown as { create(userId: string): void; withCreation(write: () => void): void; access(userId: string): string; sql: SqlStorage };
      object.create("rollback-user");
      expect(() =>
        object.withCreation(() => {
          throw new Error("the write failed");
        }),
      ).toThrow("the write failed");
      // Not written, still the caller's in memory: the turn's next write writes it.
      expect(object.access("rollback-user")).toBe("ok");
      object.withCreation(() => {});
      expect(object.access("rollback-user")).toBe("ok");
      expect(object.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = 'owner'").one().value).toBe("rollback-user");
    });
  });
});
