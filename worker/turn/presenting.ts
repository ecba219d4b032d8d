// Presenting a turn's events in an endpoint's wire form. A presenter turns each event into text as it
// arrives. streaming_query's streams are presented by the conversation's Durable Object itself (the
// plan names the form), so that their bytes pass through the Worker untouched: each chunk then
// crosses JavaScript once on its way to the client, not twice (about 0.5 ms of time to first token
// under Miniflare). The other endpoints' streams are presented by their adapters in the Worker
// (turn-client.ts `presented`), which need what only the Worker holds (the request, telemetry).
import { errors } from "../errors.ts";
import { failedResult, type Item, type StreamPresentation, type TurnEvent, type TurnHead, type WireError } from "../domain/conversation.ts";
import { toolCall, toolResult } from "./summaries.ts";

/** Where a presenter puts its text. */
export interface TextSink {
  enqueue(text: string): void;
}

/** An endpoint's wire form of a turn's events, produced synchronously, event by event. */
export interface TurnPresenter {
  start?(out: TextSink): void;
  transform(event: TurnEvent, out: TextSink): void;
  /** The events have ended (with `finished`, or cut short). */
  flush?(out: TextSink): void;
}

/** A presenter driven step by step, each step returning the text it produced. */
export interface Presenting {
  start(): string;
  events(events: Iterable<TurnEvent>): string;
  end(): string;
}

export function presenting(presenter: TurnPresenter): Presenting {
  let text = "";
  const out: TextSink = { enqueue: (chunk) => void (text += chunk) };
  const take = () => {
    const taken = text;
    text = "";
    return taken;
  };
  return {
    start() {
      presenter.start?.(out);
      return take();
    },
    events(events) {
      for (const event of events) presenter.transform(event, out);
      return take();
    },
    end() {
      presenter.flush?.(out);
      return take();
    },
  };
}

/** The events themselves, one JSON line each (NDJSON), for a Worker that reads them (turn-client.ts). */
export const EVENT_LINES: TurnPresenter = {
  transform: (event, out) => out.enqueue(`${JSON.stringify(event)}\n`),
};

/** What a streaming_query stream names of its turn. */
type StreamIds = Pick<TurnHead, "conversationId" | "requestId">;

/** The presenter of a stream the conversation's Durable Object sends in its endpoint's wire form. */
export function streamPresenter(presentation: StreamPresentation, head: StreamIds): TurnPresenter {
  switch (presentation) {
    case "query-sse":
      return queryEvents(head);
    case "query-text":
      return plainText();
  }
}

/**
 * A whole stream for a turn refused before it ran, for the refusals the original reports inside its
 * stream rather than by status: a prompt too long for the model (UPSTREAM "Compaction": its
 * backend reports the context length mid-stream, so the client gets 200 and an `error` event).
 */
export function refusedStream(presentation: StreamPresentation, ids: StreamIds, error: WireError): string {
  const form = presenting(streamPresenter(presentation, ids));
  return form.start() + form.events([{ type: "finished", result: failedResult("", error) }]) + form.end();
}

/** REFERENCE's streaming_query events: `data: {"event", "data"}` lines, no `event:` line. */
function queryEvents(turn: StreamIds): TurnPresenter {
  let tokenId = 0;
  let ended = false;
  const line = (event: string, data: unknown, extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ event, data, ...extra })}\n\n`;
  const error = (failure: WireError) => line("error", { status_code: failure.status, response: failure.response, cause: failure.cause });
  return {
    start(out) {
      // The turn is running in its conversation's Durable Object by now, so an interrupt sent as
      // soon as the client reads the request id finds it.
      out.enqueue(line("start", { conversation_id: turn.conversationId, request_id: turn.requestId }));
    },
    transform(event, out) {
      if (event.type === "backend") {
        const backend = event.event;
        if (backend.type === "response.output_text.delta") {
          out.enqueue(line("token", { id: tokenId++, token: backend.delta }));
        } else if (backend.type === "response.content_part.added") {
          // The original announces each part of the answer with an empty token (clients that
          // show its first token as a status line skip it).
          out.enqueue(line("token", { id: tokenId++, token: "" }));
        } else if (backend.type === "response.output_item.done") {
          const item = backend.item as unknown as Item;
          const call = toolCall(item);
          if (call) out.enqueue(line("tool_call", call));
          const result = toolResult(item);
          if (result) out.enqueue(line("tool_result", result));
        }
        return;
      }
      if (event.type === "compaction") {
        // The conversation's older turns were summarised before this answer (README "Conversations").
        out.enqueue(line("compaction", { status: "started", conversation_id: event.conversationId }));
        return;
      }
      const result = event.result;
      ended = true;
      if (result.status === "interrupted") {
        out.enqueue(line("interrupted", { request_id: turn.requestId }));
        return;
      }
      if (result.status === "failed") {
        out.enqueue(error(result.error ?? errors.internal()));
        return;
      }
      out.enqueue(line("turn_complete", { id: tokenId, token: result.text }));
      out.enqueue(
        line(
          "end",
          // rag_chunks: an extension (the JSON answer's field), so a streaming client sees what retrieval found too.
          { referenced_documents: result.referencedDocuments, rag_chunks: result.ragChunks, truncated: false, input_tokens: result.inputTokens, output_tokens: result.outputTokens },
          { available_quotas: result.availableQuotas },
        ),
      );
    },
    flush(out) {
      if (!ended) out.enqueue(error(errors.internal("the answer ended early")));
    },
  };
}

/** `media_type: text/plain`: the answer text itself, as it is generated. */
function plainText(): TurnPresenter {
  return {
    transform(event, out) {
      if (event.type === "backend" && event.event.type === "response.output_text.delta") out.enqueue(event.event.delta);
      if (event.type === "finished" && event.result.status === "failed") {
        out.enqueue(`\n\n[error: ${event.result.error?.response ?? "Internal server error"}]`);
      }
    },
  };
}
