// The model call of a turn. `inference_backend.timeout` bounds the wait for every event the backend
// sends, not only for its first answer: a stream that stalls after some deltas is stopped within the
// time-out and reported as SPEC's 503, like a backend that never answered. Turn calls are not
// retried (max_retries is the start-up probe's, SPEC "Limits"): a retry would stretch that bound and
// could answer a question twice.
import { APIError } from "openai";
import type { Response as BackendResponse, ResponseCreateParamsBase, ResponseStreamEvent } from "openai/resources/responses/responses";
import { callModel } from "../backends/model-call.ts";
import type { CallRequestOptions } from "../backends/model-request.ts";
import { routeMissing, routeModel } from "../backends/providers.ts";
import type { ModelInfo } from "../domain/conversation.ts";
import { ApiError, errors } from "../errors.ts";
import type { Runtime } from "../runtime.ts";
import { knowledgeSources, withClientStoreIds } from "../rag/knowledge.ts";
import { backendError } from "./backend-errors.ts";

const timedOut = (): ApiError => errors.backendUnavailable("The inference backend did not answer in time.");

/**
 * Starts the call and resolves once the backend has accepted it (so failures before any output are
 * plain errors); its events then follow, each within the time-out. `request.signal` stops it (an
 * interrupt, a client that went away), which ends the events without an error.
 */
export async function startModelCall(
  rt: Runtime,
  model: ModelInfo,
  params: Omit<ResponseCreateParamsBase, "stream">,
  streaming: boolean,
  request: CallRequestOptions,
): Promise<AsyncIterable<ResponseStreamEvent>> {
  const { signal } = request;
  const route = routeModel(rt.backends, model);
  const timeoutMs = route.timeoutMs;
  const call = new AbortController();
  const stop = () => call.abort(signal.reason);
  signal.addEventListener("abort", stop);
  // One timer at a time, not one per event: when it fires it stops the call if nothing came for the
  // whole time-out, and otherwise waits out the rest of it from the latest event. Only the
  // backend's time counts: while the turn is busy with an event (a client reading slowly holds it
  // back), the backend is not being waited for, and its time-out starts again once the next event
  // is asked for.
  let lastEventAt = Date.now();
  let eventHeld = false;
  const expire = () => {
    const quiet = eventHeld ? 0 : Date.now() - lastEventAt;
    if (quiet >= timeoutMs) call.abort(timedOut());
    else timer = setTimeout(expire, timeoutMs - quiet);
  };
  let timer = setTimeout(expire, timeoutMs);
  const done = () => {
    clearTimeout(timer);
    signal.removeEventListener("abort", stop);
  };
  /** The error to report: the time-out's own when it was the time-out that stopped the call. */
  const failure = (error: unknown) => {
    if (call.signal.aborted && call.signal.reason instanceof Error && "status" in call.signal.reason) return call.signal.reason as ApiError;
    if (route.wire === "responses" && error instanceof APIError && routeMissing(error)) {
      return new ApiError(501, "Not implemented by the configured providers", `Provider "${route.backend.id}" does not serve the Responses API; set extra.wire: chat`);
    }
    return backendError(error, params.model);
  };
  // Store ids go out in the backend's form (tools.ts) and come back in the client's.
  const translated = knowledgeSources(rt.config).stores.length > 0 ? (event: ResponseStreamEvent) => withClientStoreIds(rt.config, event) : null;
  try {
    const stream = await callModel(rt.backends, route, params, streaming, { signal: call.signal, sent: request.sent, searches: request.searches });
    if (!streaming) {
      done();
      return translated ? mapEvents(stream, translated) : stream;
    }
    return (async function* events() {
      try {
        for await (const event of stream) {
          eventHeld = true;
          yield translated ? translated(event) : event;
          eventHeld = false;
          lastEventAt = Date.now();
        }
        // The SDK ends an aborted stream quietly: a time-out must still be reported as one.
        if (!signal.aborted && call.signal.aborted) throw failure(call.signal.reason);
      } catch (error) {
        if (signal.aborted) return;
        throw failure(error);
      } finally {
        done();
      }
    })();
  } catch (error) {
    done();
    throw failure(error);
  }
}

async function* mapEvents(events: AsyncIterable<ResponseStreamEvent>, map: (event: ResponseStreamEvent) => ResponseStreamEvent): AsyncIterable<ResponseStreamEvent> {
  for await (const event of events) yield map(event);
}

/** The answer text of a backend response: its output messages' text parts, as OpenAI's `output_text` joins them. */
export function responseText(response: Pick<BackendResponse, "output">): string {
  let text = "";
  for (const item of response.output) {
    if (item.type !== "message") continue;
    for (const part of item.content) if (part.type === "output_text") text += part.text;
  }
  return text;
}

/**
 * The answer a turn records and the query endpoints give (`response`, the stream's closing
 * `turn_complete`, /v1/infer's text), as the original system reads it from the output: each
 * message's text and refusal parts trimmed, then the parts and the messages joined with a space,
 * so that the messages of a tool loop's rounds do not run together.
 */
export function answerText(response: Pick<BackendResponse, "output">): string {
  const fragments: string[] = [];
  for (const item of response.output) {
    if (item.type !== "message") continue;
    const parts = item.content.map((part) => (part.type === "output_text" ? part.text : part.refusal).trim()).filter((text) => text !== "");
    if (parts.length > 0) fragments.push(parts.join(" "));
  }
  return fragments.join(" ");
}

/**
 * A short call of the gateway's own beside a turn (topic summary, compaction summary, a shield's
 * classifier): not stored, not streamed, no history; the text of its answer, trimmed. Bounded by
 * the backend's time-out like a turn's call; its failures are thrown.
 */
export async function askModel(
  rt: Runtime,
  model: ModelInfo,
  params: { instructions?: string; input: string },
  signal: AbortSignal = new AbortController().signal,
): Promise<string> {
  const events = await startModelCall(rt, model, { model: model.identifier, ...params, store: false }, false, { signal });
  let text = "";
  for await (const event of events) if (event.type === "response.completed") text = responseText(event.response).trim();
  return text;
}
