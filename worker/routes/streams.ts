// What every turn endpoint does with a turn's events: read them to the result, or send them on as
// a streamed body.
import { errors } from "../errors.ts";
import type { TurnEvent, TurnResult } from "../turn/engine.ts";

/** Reads a turn's events to the end and returns its result. */
export async function finished(events: ReadableStream<TurnEvent>): Promise<TurnResult> {
  let result: TurnResult | null = null;
  for await (const event of events) if (event.type === "finished") result = event.result;
  if (!result) throw errors.internal("the turn ended without a result");
  return result;
}

export function sse(body: ReadableStream<string>): Response {
  return new Response(body.pipeThrough(new TextEncoderStream()), {
    headers: { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "keep-alive" },
  });
}

export function textStream(body: ReadableStream<string>): Response {
  return new Response(body.pipeThrough(new TextEncoderStream()), { headers: { "Content-Type": "text/plain; charset=utf-8" } });
}
