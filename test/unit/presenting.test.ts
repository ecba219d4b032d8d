// Presenting a turn's events (worker/turn/presenting.ts): streaming_query's wire forms, which the
// conversation's Durable Object sends as they are, and the NDJSON events the Worker presents.
import { describe, expect, it } from "vitest";
import type { TurnEvent, TurnHead, TurnResult } from "../../worker/domain/conversation.ts";
import { EVENT_LINES, presenting, streamPresenter } from "../../worker/turn/presenting.ts";

const head = { conversationId: "c".repeat(48), requestId: "r-1" } as TurnHead;
const delta = (text: string): TurnEvent => ({ type: "backend", event: { type: "response.output_text.delta", delta: text } as never });
const result = (status: TurnResult["status"], text: string): TurnResult => ({
  status,
  response: null,
  text,
  inputTokens: 3,
  outputTokens: 2,
  summary: { user: "q", assistant: text, tool_calls: [], tool_results: [] },
  error: status === "failed" ? { status: 503, response: "Unable to connect to the inference backend", cause: "down" } : null,
  availableQuotas: {},
  ragChunks: [],
  referencedDocuments: [],
});

/** The server-sent events of a text, as {event, data} objects. */
function sseEvents(text: string): Array<{ event: string; data: Record<string, unknown> }> {
  return text
    .split("\n\n")
    .filter(Boolean)
    .map((block) => JSON.parse(block.replace(/^data: /, "")) as { event: string; data: Record<string, unknown> });
}

describe("streaming_query's server-sent events", () => {
  it("starts with the ids, sends each token as it comes, and ends with the result", () => {
    const form = presenting(streamPresenter("query-sse", head));
    expect(sseEvents(form.start())).toEqual([{ event: "start", data: { conversation_id: head.conversationId, request_id: "r-1" } }]);
    expect(sseEvents(form.events([delta("Hel"), delta("lo")]))).toEqual([
      { event: "token", data: { id: 0, token: "Hel" } },
      { event: "token", data: { id: 1, token: "lo" } },
    ]);
    const end = sseEvents(form.events([{ type: "finished", result: result("completed", "Hello") }]) + form.end());
    expect(end.map((event) => event.event)).toEqual(["turn_complete", "end"]);
    expect(end[0]!.data).toEqual({ id: 2, token: "Hello" });
    expect(end[1]!.data).toMatchObject({ input_tokens: 3, output_tokens: 2, truncated: false });
  });

  it("reports a failed turn as an error event, and events that end without a result as one", () => {
    const failed = presenting(streamPresenter("query-sse", head));
    failed.start();
    expect(sseEvents(failed.events([{ type: "finished", result: result("failed", "") }]) + failed.end())).toEqual([
      { event: "error", data: { status_code: 503, response: "Unable to connect to the inference backend", cause: "down" } },
    ]);
    const cut = presenting(streamPresenter("query-sse", head));
    cut.start();
    cut.events([delta("Hel")]);
    expect(sseEvents(cut.end())).toEqual([{ event: "error", data: expect.objectContaining({ status_code: 500 }) }]);
  });
});

describe("streaming_query's text/plain answer", () => {
  it("is the tokens themselves, with a failure said in words", () => {
    const form = presenting(streamPresenter("query-text", head));
    expect(form.start()).toBe("");
    expect(form.events([delta("Hel"), delta("lo")])).toBe("Hello");
    expect(form.events([{ type: "finished", result: result("failed", "") }])).toBe("\n\n[error: Unable to connect to the inference backend]");
  });
});

describe("events for the Worker to present", () => {
  it("are one JSON line each", () => {
    const form = presenting(EVENT_LINES);
    const events: TurnEvent[] = [delta("a"), { type: "compaction", conversationId: "c" }];
    expect(form.start()).toBe("");
    const text = form.events(events);
    expect(text.split("\n").filter(Boolean).map((line) => JSON.parse(line) as TurnEvent)).toEqual(events);
    expect(form.end()).toBe("");
  });
});
