// Compaction through the Worker with a small context window: older turns are summarised once and
// sent in their place, the stored history stays complete, /v1/streaming_query announces it, a
// failed summary is an error that changes nothing (told in the stream on /v1/streaming_query), and without compaction the turn is a 413.
import { describe, expect, inject, it } from "vitest";
import { callJson, call, echoedRequest, readSse, testConfig } from "./helpers.ts";

const WINDOW = 700;
const config = (compaction: Record<string, unknown>, extra: Record<string, unknown> = {}) =>
  testConfig({
    inference: { context_windows: { "scripted/parley-small": WINDOW, "scripted/parley-large": WINDOW } },
    compaction: { token_floor: 0, threshold_ratio: 0.7, buffer_turns: 2, buffer_max_ratio: 0.3, ...compaction },
    ...extra,
  });
const enabled = config({ enabled: true });
const disabled = config({ enabled: false });

/** A question of some forty words, numbered so each turn is told apart. */
const question = (n: number, marker = "") =>
  `Question ${n}: ${"the gateway keeps every conversation in its own durable object and replays the history to the model ".repeat(2)}${marker}`.trim();

type Query = { conversation_id: string; response: string; detail?: { response: string; cause: string } };
const ask = (json: Record<string, unknown>, conf = enabled, user = "compact") => callJson<Query>("/v1/query", { json, config: conf, user });

async function summariserCalls(): Promise<number> {
  const requests = (await (await fetch(`${inject("backendUrl").replace(/\/v1$/, "")}/__requests`)).json()) as Array<{ body: Record<string, unknown> }>;
  return requests.filter((request) => JSON.stringify(request.body).includes("summarise a conversation")).length;
}

/** A streaming_query body's events as they arrive (the stream may be read on after a break). */
function sseEvents(response: Response): AsyncIterable<{ event: string; data: Record<string, unknown> }> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffered = "";
  const next = async function* () {
    for (;;) {
      const end = buffered.indexOf("\n\n");
      if (end >= 0) {
        const block = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        const data = block.split("\n").find((line) => line.startsWith("data: "));
        if (data) yield JSON.parse(data.slice(6)) as { event: string; data: Record<string, unknown> };
        continue;
      }
      const { value, done } = await reader.read();
      if (done) return;
      buffered += value;
    }
  };
  return { [Symbol.asyncIterator]: () => next() };
}

/**
 * Asks on /v1/streaming_query in a new conversation of `user` until a turn compacts, with the
 * summariser held back (#hold-summary), and returns that turn's stream read up to its compaction
 * event; `release` lets the summary be made.
 */
async function streamUntilCompaction(user: string) {
  const key = `hold-${crypto.randomUUID().slice(0, 8)}`;
  const backend = inject("backendUrl").replace(/\/v1$/, "");
  const release = () => fetch(`${backend}/__release`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ key }) });
  let id: string | undefined;
  for (let n = 1; n <= 8; n++) {
    const response = await call("/v1/streaming_query", { json: { query: question(n, `#hold-summary=${key}`), conversation_id: id }, config: enabled, user });
    const events = sseEvents(response);
    const seen: Array<{ event: string; data: Record<string, unknown> }> = [];
    for await (const event of events) {
      seen.push(event);
      if (event.event === "compaction") return { events, seen, release, id: id ?? String(seen[0]!.data.conversation_id) };
    }
    expect(seen.at(-1)!.event).toBe("end");
    id ??= String(seen[0]!.data.conversation_id);
  }
  throw new Error("no turn compacted");
}

describe("compaction", () => {
  it("summarises older turns once, sends the summary in their place and keeps the stored history whole", async () => {
    let id: string | undefined;
    const before = await summariserCalls();
    let compactedAt = 0;
    for (let n = 1; n <= 8 && compactedAt === 0; n++) {
      const response = await call("/v1/streaming_query", { json: { query: question(n), conversation_id: id }, config: enabled, user: "compact" });
      const events = (await readSse(response)).map((e) => e.data as { event: string; data: Record<string, unknown> });
      expect(events.at(-1)!.event).toBe("end");
      id ??= String(events[0]!.data.conversation_id);
      const compaction = events.find((e) => e.event === "compaction");
      if (compaction) {
        expect(compaction.data).toEqual({ status: "started", conversation_id: id });
        compactedAt = n;
      }
    }
    expect(compactedAt).toBeGreaterThan(1);
    expect(await summariserCalls()).toBe(before + 1);

    // The next turn sends the summary, then only the turns after it; the summary is not made again.
    const next = await ask({ query: `#echo-request ${question(99)}`, conversation_id: id });
    expect(next.status).toBe(200);
    const sent = echoedRequest(next.body.response);
    expect(String(sent.input[0].content)).toMatch(/^Summary of earlier conversation:\nSummary: /);
    const userTurns = sent.input.filter((item: { role?: string }) => item.role === "user").length;
    expect(userTurns).toBeLessThan(compactedAt + 1);
    expect(await summariserCalls()).toBe(before + 1);

    // The history clients read keeps every turn.
    const detail = await callJson<{ chat_history: unknown[] }>(`/v1/conversations/${id}`, { config: enabled, user: "compact" });
    expect(detail.body.chat_history).toHaveLength(compactedAt + 1);
  });

  it("on /v1/streaming_query the compaction event comes before the summary is made, the answer after it", async () => {
    // The summariser answers only once the test lets it (#hold-summary), so the event must come first.
    const { events, seen, release } = await streamUntilCompaction("compact-early");
    expect(seen.map((e) => e.event)).toEqual(["start", "compaction"]);
    await release();
    for await (const event of events) seen.push(event);
    expect(seen.filter((e) => e.event === "token").length).toBeGreaterThan(0);
    expect(seen.at(-1)!.event).toBe("end");
  });

  it("a stream interrupted while its summary is made ends as interrupted, and the conversation goes on", async () => {
    const user = "compact-interrupted";
    const { events, seen, release, id } = await streamUntilCompaction(user);
    const requestId = String(seen[0]!.data.request_id);
    expect(await callJson("/v1/streaming_query/interrupt", { json: { request_id: requestId }, user })).toMatchObject({ status: 200, body: { interrupted: true } });
    for await (const event of events) seen.push(event);
    expect(seen.map((e) => e.event)).toEqual(["start", "compaction", "interrupted"]);
    await release();
    // Its slot is free: the next question is answered.
    expect((await ask({ query: "short", conversation_id: id }, enabled, user)).status).toBe(200);
  });

  it("without compaction the same conversation is refused with 413 before the model is called", async () => {
    let id: string | undefined;
    let refused: Query | undefined;
    for (let n = 1; n <= 8 && !refused; n++) {
      const answer = await ask({ query: question(n), conversation_id: id }, disabled, "no-compact");
      if (answer.status === 413) refused = answer.body;
      else id ??= answer.body.conversation_id;
    }
    expect(refused?.detail).toMatchObject({ response: "Prompt is too long" });
  });

  it("a conversation deleted while its summary is made stays deleted: the stream ends with its 404", async () => {
    const user = "compact-deleted";
    const { events, seen, release, id } = await streamUntilCompaction(user);
    expect((await callJson(`/v1/conversations/${id}`, { method: "DELETE", config: enabled, user })).status).toBe(200);
    await release();
    for await (const event of events) seen.push(event);
    expect(seen.map((e) => e.event)).toEqual(["start", "compaction", "error"]);
    expect(seen[2]!.data).toMatchObject({ status_code: 404, response: "Conversation not found" });
    expect((await callJson(`/v1/conversations/${id}`, { config: enabled, user })).status).toBe(404);
  });

  it("a caller without tokens is refused before the summary is made, on the stream too with an HTTP 429", async () => {
    const user = "compact-no-tokens";
    // A conversation grown until it no longer fits without compaction.
    let id: string | undefined;
    for (let n = 1; n <= 8; n++) {
      const answer = await ask({ query: question(n), conversation_id: id }, disabled, user);
      if (answer.status === 413) break;
      id ??= answer.body.conversation_id;
    }
    const spent = config({ enabled: true }, { quota_handlers: { limiters: [{ name: "none-left", type: "user_limiter", initial_quota: 0, quota_increase: 0, period: "1 day" }] } });
    const before = await summariserCalls();
    const streamed = await call("/v1/streaming_query", { json: { query: question(9), conversation_id: id }, config: spent, user });
    expect(streamed.status).toBe(429);
    expect(await streamed.json()).toEqual({ detail: { response: "The quota has been exceeded", cause: `User ${user} has no available tokens` } });
    expect((await ask({ query: question(9), conversation_id: id }, spent, user)).status).toBe(429);
    expect(await summariserCalls()).toBe(before);
  });

  it("a summary the model leaves empty is an error, and the history is left as it was", async () => {
    let id: string | undefined;
    let failed: { status: number; body: Query } | undefined;
    for (let n = 1; n <= 8 && !failed; n++) {
      const answer = await ask({ query: question(n, "#empty-summary"), conversation_id: id }, enabled, "empty-summary");
      if (answer.status !== 200) failed = answer;
      else id ??= answer.body.conversation_id;
    }
    expect(failed?.status).toBe(500);
    expect(failed?.body.detail!.cause).toContain("empty summary");
    // Nothing was summarised: a turn that fits still sees every earlier turn.
    const detail = await callJson<{ chat_history: unknown[] }>(`/v1/conversations/${id}`, { config: enabled, user: "empty-summary" });
    const kept = detail.body.chat_history.length;
    const roomy = config({ enabled: false }).replace(`"scripted/parley-small":${WINDOW}`, '"scripted/parley-small":100000');
    const next = await ask({ query: "#echo-request short", conversation_id: id }, roomy, "empty-summary");
    expect(echoedRequest(next.body.response).input.filter((item: { role?: string }) => item.role === "user")).toHaveLength(kept + 1);

    // /v1/streaming_query tells it in its stream, as the original does: start, compaction, the error.
    const streamed = await call("/v1/streaming_query", { json: { query: question(9), conversation_id: id }, config: enabled, user: "empty-summary" });
    expect(streamed.status).toBe(200);
    const events = (await readSse(streamed)).map((e) => e.data as { event: string; data: Record<string, unknown> });
    expect(events.map((e) => e.event)).toEqual(["start", "compaction", "error"]);
    expect(events[0]!.data.conversation_id).toBe(id);
    expect(events[2]!.data).toMatchObject({ status_code: 500, response: "Internal server error" });
    expect(String(events[2]!.data.cause)).toContain("empty summary");
    // Nothing was recorded of it.
    const after = await callJson<{ chat_history: unknown[] }>(`/v1/conversations/${id}`, { config: enabled, user: "empty-summary" });
    expect(after.body.chat_history).toHaveLength(kept + 1);
  });
});
