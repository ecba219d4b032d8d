// The Worker's side of a turn: the one call to the conversation's Durable Object that runs it, and
// its events read back. Also the stub through which the endpoints reach a conversation.
import type { StreamPresentation, TurnEvent, TurnHead, TurnPlan, TurnResult, WireError } from "../domain/conversation.ts";
import { ApiError, errors } from "../errors.ts";
import { log } from "../log.ts";
import { ndjson, ndjsonParser } from "../domain/ndjson.ts";
import { presenting, streamPresenter, type TurnPresenter } from "./presenting.ts";
import type { ConversationDO } from "./conversation-runner.ts";

/** The RPC surface of a conversation's Durable Object as the Worker uses it. */
export type ConversationApi = Pick<ConversationDO, "runTurn" | "clientGone" | "checkAccess" | "interrupt" | "describe" | "setTopicSummary" | "destroy">;

/**
 * The stub of one conversation. Workers' RPC stub types map every field through a serializability
 * check that turns the plain-JSON item objects (typed `unknown` inside) into `never`; they are plain
 * JSON at run time, so the stub is typed by the class's own method signatures instead.
 */
export function conversationStub(env: Env, conversationId: string): ConversationApi {
  return env.CONVERSATION.getByName(conversationId) as unknown as ConversationApi;
}

export function fromWire(error: WireError): ApiError {
  return new ApiError(error.status as ApiError["status"], error.response, error.cause, error.headers);
}

export interface StartedTurn {
  head: TurnHead;
  /**
   * The turn's events as NDJSON, ending with exactly one `finished` (a JSON answer has only that
   * one); a stream whose plan named a presentation comes in that wire form instead, to be passed on
   * as it is.
   */
  readonly lines: ReadableStream<Uint8Array>;
  /** The same events, parsed. */
  readonly events: ReadableStream<TurnEvent>;
  /** A JSON answer's result, which the Durable Object returned with the call itself. */
  result: TurnResult | null;
}

/**
 * The request a turn answers, as far as the turn cares: its signal aborts when the client
 * disconnects (compatibility flag enable_request_signal), and work may outlive the response.
 */
export interface TurnClient {
  signal: AbortSignal;
  waitUntil(promise: Promise<unknown>): void;
}

/**
 * Runs a turn in its conversation's Durable Object. Resolves once it has started (the backend
 * accepted it), so failures before any output are ApiErrors the endpoint answers with. With
 * `client`, the object hears when that client disconnects (see ConversationDO.clientGone): a turn
 * still waiting for its conversation never starts, a stream ends even while its backend is silent.
 */
export async function startTurn(env: Env, plan: TurnPlan, client?: TurnClient): Promise<StartedTurn> {
  // A client that left while the turn was planned: nothing is asked of its conversation.
  if (client?.signal.aborted) throw errors.clientGone();
  const stub = conversationStub(env, plan.conversationId);
  const gone = () => client!.waitUntil(stub.clientGone(plan.requestId, plan.auth.userId).catch(() => undefined));
  client?.signal.addEventListener("abort", gone, { once: true });
  let start;
  try {
    start = await stub.runTurn(plan);
  } catch (error) {
    // The object itself failed (reset, overloaded): the conversation is fine, try again later.
    log.error("the conversation's Durable Object failed", error);
    throw errors.backendUnavailable("The conversation could not be reached; try again.");
  } finally {
    // A JSON answer has ended with the call; a stream's client may still leave while it runs.
    if (!plan.streaming) client?.signal.removeEventListener("abort", gone);
  }
  if (!start.ok) throw fromWire(start.error);
  const result = "result" in start ? start.result : null;
  const stream = "events" in start ? start.events : null;
  // A JSON answer's line is built only for a reader that wants it (finished() takes the result itself).
  const lines = () => stream ?? new Blob([`${JSON.stringify({ type: "finished", result: result! } satisfies TurnEvent)}\n`]).stream();
  return {
    head: start.head,
    result,
    get lines() {
      return lines();
    },
    get events() {
      return lines().pipeThrough(ndjson<TurnEvent>());
    },
  };
}

/** The turn's result: a JSON answer's at once, a stream's once its events have been read to the end. */
export async function finished(turn: StartedTurn): Promise<TurnResult> {
  if (turn.result) return turn.result;
  let result: TurnResult | null = null;
  for await (const event of turn.events) if (event.type === "finished") result = event.result;
  if (!result) throw errors.internal("the turn ended without a result");
  return result;
}

/**
 * A streamed answer's body: the turn's events, each presented as text by `presenter` and encoded,
 * in one stream stage. Events that arrive together go to the client as one chunk. Should the
 * events break off (the conversation's Durable Object reset mid-answer, as a deploy does), the
 * stage is ended rather than aborted, so that the presenter ends the answer in its wire form (a
 * response's `response.failed` and `[DONE]`) instead of the client seeing its connection cut.
 */
export function presented(turn: StartedTurn, presenter: TurnPresenter): ReadableStream<Uint8Array> {
  const parse = ndjsonParser<TurnEvent>();
  const encoder = new TextEncoder();
  const form = presenting(presenter);
  const send = (text: string, controller: TransformStreamDefaultController<Uint8Array>) => {
    if (text) controller.enqueue(encoder.encode(text));
  };
  let brokenLine = false;
  const stage = new TransformStream<Uint8Array, Uint8Array>({
    start: (controller) => send(form.start(), controller),
    transform: (chunk, controller) => send(form.events(parse(chunk)), controller),
    // A line cut in half by a break is dropped: the events before it are whole.
    flush: (controller) => send((brokenLine ? "" : form.events(parse(null))) + form.end(), controller),
  });
  turn.lines.pipeTo(stage.writable, { preventAbort: true }).catch(() => {
    // Also reached when the client went away: the stage is errored then, and closing it fails.
    brokenLine = true;
    stage.writable.close().catch(() => undefined);
  });
  return stage.readable;
}

/**
 * A stream the conversation's Durable Object presented itself (its plan named the form), passed on
 * as it is, byte for byte. Should the object's stream break off mid-answer (a reset, as a deploy
 * does), the answer still ends in its form (streaming_query's error event) instead of the client
 * seeing its connection cut. The pipe ends in a JavaScript TransformStream: piped into workerd's
 * native IdentityTransformStream instead, a request's pipes left timers counted against its
 * context's limit of 10,000 active ones (the full backend-faults reliability run hit it).
 */
export function passedOn(turn: StartedTurn, presentation: StreamPresentation): ReadableStream<Uint8Array> {
  const { readable, writable } = new TransformStream<Uint8Array, Uint8Array>();
  turn.lines.pipeTo(writable, { preventAbort: true }).catch(async () => {
    // Also reached when the client went away: the pipe is errored then, and writing fails.
    const writer = writable.getWriter();
    const ending = presenting(streamPresenter(presentation, turn.head)).end();
    if (ending) await writer.write(new TextEncoder().encode(ending)).catch(() => undefined);
    await writer.close().catch(() => undefined);
  });
  return readable;
}
