// The Worker's side of a turn: the one call to the conversation's Durable Object that runs it, and
// its events read back. Also the stub through which the endpoints reach a conversation.
import type { TurnEvent, TurnHead, TurnPlan, TurnResult, WireError } from "../domain/conversation.ts";
import { ApiError, errors } from "../errors.ts";
import { log } from "../log.ts";
import type { ConversationDO } from "./conversation-runner.ts";

/** The RPC surface of a conversation's Durable Object as the Worker uses it. */
export type ConversationApi = Pick<ConversationDO, "runTurn" | "checkAccess" | "interrupt" | "describe" | "setTopicSummary" | "destroy">;

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
  /** The turn's events, ending with exactly one `finished` (a JSON answer has only that one). */
  readonly events: ReadableStream<TurnEvent>;
  /** A JSON answer's result, which the Durable Object returned with the call itself. */
  result: TurnResult | null;
}

/**
 * Runs a turn in its conversation's Durable Object. Resolves once it has started (the backend
 * accepted it), so failures before any output are ApiErrors the endpoint answers with.
 */
export async function startTurn(env: Env, plan: TurnPlan): Promise<StartedTurn> {
  let start;
  try {
    start = await conversationStub(env, plan.conversationId).runTurn(plan);
  } catch (error) {
    // The object itself failed (reset, overloaded): the conversation is fine, try again later.
    log.error("the conversation's Durable Object failed", error);
    throw errors.backendUnavailable("The conversation could not be reached; try again.");
  }
  if (!start.ok) throw fromWire(start.error);
  if ("result" in start) {
    const result = start.result;
    return {
      head: start.head,
      result,
      // Built only for a reader that wants the answer as events (finished() takes the result itself).
      get events() {
        return new ReadableStream<TurnEvent>({
          start(controller) {
            controller.enqueue({ type: "finished", result });
            controller.close();
          },
        });
      },
    };
  }
  return { head: start.head, result: null, events: start.events.pipeThrough(new TextDecoderStream()).pipeThrough(ndjson<TurnEvent>()) };
}

/** The turn's result: a JSON answer's at once, a stream's once its events have been read to the end. */
export async function finished(turn: StartedTurn): Promise<TurnResult> {
  if (turn.result) return turn.result;
  let result: TurnResult | null = null;
  for await (const event of turn.events) if (event.type === "finished") result = event.result;
  if (!result) throw errors.internal("the turn ended without a result");
  return result;
}

/** Parses newline-delimited JSON text into values. */
export function ndjson<T>(): TransformStream<string, T> {
  let buffer = "";
  return new TransformStream<string, T>({
    transform(chunk, controller) {
      buffer += chunk;
      let end: number;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        if (line) controller.enqueue(JSON.parse(line) as T);
      }
    },
    flush(controller) {
      if (buffer) controller.enqueue(JSON.parse(buffer) as T);
    },
  });
}
