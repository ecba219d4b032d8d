// The HTTP exchange of a model call. The openai SDK prepares the request (the URL and the headers
// it would send: credentials, organization and project, its platform headers) and reads the
// answer (its server-sent-event Stream, its APIError classes); the request itself is one fetch.
// What is left out is the SDK's request loop: model calls are never retried (SPEC "Limits"), their
// time-out is the caller's (per event, worker/turn/backend-call.ts), and the loop's preparation of
// every request cost a turn 0.2-0.35 ms of CPU and up to 0.26 ms of time to first token (measured
// side by side: the note of bench/RESULTS.md 2026-11-24T06:12Z). The prepared headers are the same
// for every call of a client and path, so they are built once.
import type OpenAI from "openai";
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import { Stream } from "openai/core/streaming";
import { MalformedAnswer, unreadable } from "./answer-shapes.ts";
import type { FileSearchResult } from "./file-search.ts";

export interface CallRequestOptions {
  /** What stops a model call: an interrupt, a client gone, the caller's time-out. */
  signal: AbortSignal;
  /** Called once the request has been handed to fetch, before its answer (a turn's running marker); must not throw. */
  sent?: () => void;
  /**
   * The searches Parley made for a Chat Completions backend in this turn's earlier model calls, by
   * tool and question (chat-call.ts): the tool loop's later calls reuse them instead of searching
   * and showing the same search again.
   */
  searches?: Map<string, FileSearchResult[]>;
}

type Prepared = Promise<{ url: string; headers: HeadersInit }>;
const preparedRequests = new WeakMap<OpenAI, Map<string, Prepared>>();

/** The SDK's request for POST `path` with a JSON body, built once per client and path. */
function prepared(client: OpenAI, path: string): Prepared {
  let paths = preparedRequests.get(client);
  if (!paths) preparedRequests.set(client, (paths = new Map()));
  let request = paths.get(path);
  if (!request) {
    request = client
      .buildRequest({ method: "post", path, body: "", headers: { "content-type": "application/json" } })
      .then(({ url, req }) => ({ url, headers: req.headers as HeadersInit }));
    // A request that could not be built is built again next time.
    request.catch(() => paths.delete(path));
    paths.set(path, request);
  }
  return request;
}

/** The SDK's error for a call that ended before an answer: its own abort, a time-out, or the connection. */
function transportError(signal: AbortSignal, cause: unknown): Error {
  if (!signal.aborted) return new APIConnectionError({ cause: cause instanceof Error ? cause : undefined });
  return (signal.reason as Error | undefined)?.name === "TimeoutError" ? new APIConnectionTimeoutError() : new APIUserAbortError();
}

/** Sends the call; resolves with an answer that succeeded, throws the SDK's errors otherwise. */
async function send(client: OpenAI, path: string, body: string, controller: AbortController, sent?: () => void): Promise<Response> {
  const { url, headers } = await prepared(client, path);
  let response: Response;
  try {
    const answered = fetch(url, { method: "POST", headers, body, signal: controller.signal });
    sent?.();
    response = await answered;
  } catch (error) {
    throw transportError(controller.signal, error);
  }
  if (response.ok) return response;
  const text = await response.text().catch((error: unknown) => (error instanceof Error ? error.message : String(error)));
  let json: object | undefined;
  try {
    json = JSON.parse(text) as object;
  } catch {
    json = undefined;
  }
  throw APIError.generate(response.status, json, json ? undefined : text, response.headers);
}

/** A call answered with one JSON document. */
export async function postModel<T>(client: OpenAI, path: string, body: string, request: CallRequestOptions): Promise<T> {
  const controller = linked(request.signal);
  const response = await send(client, path, body, controller, request.sent);
  try {
    return (await response.json()) as T;
  } catch (error) {
    if (controller.signal.aborted) throw transportError(controller.signal, error);
    throw unreadable(error);
  }
}

/** Content types that are plainly no event stream. */
const NOT_A_STREAM = /^\s*(application\/json|text\/html)\b/i;

/**
 * A streamed call: its server-sent events, parsed by the SDK as its own streams are. An answer that
 * is plainly no event stream (JSON or HTML: a server that ignored stream: true, a proxy's page) is
 * refused rather than read as a stream without events.
 */
export async function streamModel<T>(client: OpenAI, path: string, body: string, request: CallRequestOptions): Promise<Stream<T>> {
  const controller = linked(request.signal);
  const response = await send(client, path, body, controller, request.sent);
  const type = response.headers.get("content-type") ?? "";
  if (NOT_A_STREAM.test(type)) {
    controller.abort();
    throw new MalformedAnswer(`the inference backend answered a streamed call with ${type.split(";")[0]}, not an event stream`);
  }
  return Stream.fromSSEResponse<T>(response, controller, client);
}

/**
 * The call's own controller, which the SDK's Stream aborts when its reader stops early, aborted in
 * turn by the caller's signal.
 */
function linked(signal: AbortSignal): AbortController {
  const controller = new AbortController();
  if (signal.aborted) controller.abort(signal.reason);
  else signal.addEventListener("abort", () => controller.abort(signal.reason), { once: true });
  return controller;
}
