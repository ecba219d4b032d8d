// Reading a backend's answer: its events are passed on as they arrive while what the turn records
// is kept (final response, text, status, usage). Output shields see the whole answer before any of
// it is released. JSON answers and blocked turns are turned into the same events, so one reader
// serves every kind of answer.
import type { Response as BackendResponse, ResponseStreamEvent } from "openai/resources/responses/responses";
import { usageWasEstimated } from "../backends/chat-events.ts";
import type { ModerationShieldConfig } from "../config/schema.ts";
import type { TokenUsage, TurnStatus } from "../domain/conversation.ts";
import { errors, type ApiError } from "../errors.ts";
import type { Runtime } from "../runtime.ts";
import { answerText } from "./backend-call.ts";
import { backendError } from "./backend-errors.ts";
import { blockedEvents, moderate, type ShieldVerdict } from "./shields.ts";

export interface Collected {
  status: TurnStatus | null;
  response: BackendResponse | null;
  text: string;
  deltas: number;
  error: ApiError | null;
  /** Tokens the model used, when the backend reported them (an output-blocked answer keeps its own). */
  usage: TokenUsage | null;
}

/**
 * The usage the backend itself reported, which the token metrics count (UPSTREAM: "when usage is
 * present"): not the chat translation's estimate, and nothing for an answer that reported none
 * (quotas are charged an estimate then, see turnOutcome; the metrics are not).
 */
export function reportedUsage(collected: Collected): TokenUsage | null {
  return usageWasEstimated(collected.response) ? null : collected.usage;
}

/** An answer that failed before anything of it was read. */
export function failedAnswer(error: ApiError): Collected {
  return { status: "failed", response: null, text: "", deltas: 0, error, usage: null };
}

/** Forwards the backend's events and keeps what persistence needs: final response, text, status. */
export async function collect(
  stream: AsyncIterable<ResponseStreamEvent>,
  signal: AbortSignal,
  forward: (event: ResponseStreamEvent) => Promise<void>,
): Promise<Collected> {
  const result: Collected = { status: null, response: null, text: "", deltas: 0, error: null, usage: null };
  try {
    for await (const event of stream) {
      switch (event.type) {
        case "response.output_text.delta":
          result.text += event.delta;
          result.deltas += 1;
          break;
        case "response.completed":
          result.status = (event.response.status as string) === "blocked" ? "blocked" : "completed";
          result.response = event.response;
          break;
        case "response.incomplete":
          result.status = "incomplete";
          result.response = event.response;
          break;
        case "response.failed":
          result.status = "failed";
          result.response = event.response;
          result.error ??= errors.internal(event.response.error?.message ?? "the inference backend failed");
          break;
        case "error":
          result.status = "failed";
          result.error = errors.internal(event.message || "the inference backend failed");
          break;
      }
      await forward(event);
      if (signal.aborted) break;
    }
  } catch (error) {
    // An interrupt or a client that went away is not a failure; a stalled or broken backend is.
    if (!signal.aborted) {
      result.status = "failed";
      result.error = backendError(error);
    }
  }
  // A stream that ended without its terminal event (not cut by us): the answer is not whole, and a
  // failed turn is no turn, as when the connection breaks.
  if (result.status === null && !signal.aborted) {
    result.status = "failed";
    result.error = errors.internal("the inference backend ended its answer before finishing it");
  }
  if (result.response) {
    result.text = answerText(result.response) || result.text.trim();
    const usage = result.response.usage;
    if (usage) result.usage = { input: usage.input_tokens, output: usage.output_tokens };
  }
  return result;
}

/**
 * Output shields see the whole answer before any of it is released: the backend's events are held
 * until it completes, then either released as they came or replaced by the refusal. A stream can
 * never bypass them; the price is that its first token waits for the last.
 */
export async function collectShielded(
  rt: Runtime,
  shields: ModerationShieldConfig[],
  blocked: (refusal: string, usage: TokenUsage | null) => AsyncIterable<ResponseStreamEvent>,
  stream: AsyncIterable<ResponseStreamEvent>,
  signal: AbortSignal,
  forward: (event: ResponseStreamEvent) => Promise<void>,
): Promise<Collected> {
  const held: ResponseStreamEvent[] = [];
  const collected = await collect(stream, signal, async (event) => void held.push(event));
  if (collected.status !== "completed") {
    for (const event of held) await forward(event);
    return collected;
  }
  let verdict: ShieldVerdict | null;
  try {
    verdict = await moderate(rt, shields, collected.text);
  } catch (error) {
    return { ...collected, status: "failed", error: backendError(error), text: "" };
  }
  if (!verdict) {
    for (const event of held) await forward(event);
    return collected;
  }
  return collect(blocked(verdict.refusal, collected.usage), signal, forward);
}

/** A refusal as the stream of an answer (see shields.ts blockedEvents). */
export async function* blockedStream(refusal: string, model: string, instructions: string, usage: TokenUsage | null): AsyncIterable<ResponseStreamEvent> {
  yield* blockedEvents(refusal, model, instructions, usage);
}
