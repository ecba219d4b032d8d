// SPEC "A2A events": a turn's events as the A2A task stream shows them. working with the model and
// conversation → text deltas and "Calling tool: <name>" as status messages → the answer as one
// artifact → a final status. Pure, so the order is unit-tested without a Worker; and how they are
// handed to the task's context object, in batches.
import type { TurnEvent, TurnResult } from "../domain/conversation.ts";
import { answerArtifact, failedUpdate, statusUpdate, type A2AEvent, type TaskIds } from "../domain/a2a-task.ts";

/** Output items that are the model calling a tool; their name is what the status message shows. */
const TOOL_CALL_ITEMS = new Set(["function_call", "mcp_call"]);

/** Translates one turn's events; `turn` says which model answers in which conversation. */
export function turnToA2A(ids: TaskIds, turn: { model: string; conversationId: string }): TransformStream<TurnEvent, A2AEvent> {
  return new TransformStream<TurnEvent, A2AEvent>({
    start(controller) {
      controller.enqueue(statusUpdate(ids, "working", { metadata: { model: turn.model, conversation_id: turn.conversationId } }));
    },
    transform(event, controller) {
      if (event.type === "finished") {
        for (const a2a of finalEvents(ids, event.result)) controller.enqueue(a2a);
        return;
      }
      if (event.type !== "backend") return;
      const backend = event.event;
      if (backend.type === "response.output_text.delta" && backend.delta) {
        controller.enqueue(statusUpdate(ids, "working", { message: backend.delta }));
      } else if (backend.type === "response.output_item.added" && TOOL_CALL_ITEMS.has(backend.item.type)) {
        const name = (backend.item as { name?: unknown }).name;
        controller.enqueue(statusUpdate(ids, "working", { message: `Calling tool: ${typeof name === "string" ? name : backend.item.type}` }));
      }
    },
  });
}

/**
 * How a turn ends in A2A terms. A blocked turn's refusal is its answer. An incomplete answer is
 * shown as far as it got, then the task fails, since A2A has no "incomplete" state. An interrupted
 * turn was canceled (tasks/cancel stops turns through the conversation's interrupt).
 */
export function finalEvents(ids: TaskIds, result: TurnResult): A2AEvent[] {
  // Tokens left after this answer, as the other turn endpoints report them (an extension field).
  const metadata = { available_quotas: result.availableQuotas };
  switch (result.status) {
    case "completed":
    case "blocked":
      return [answerArtifact(ids, result.text), statusUpdate(ids, "completed", { final: true, metadata })];
    case "incomplete":
      return [
        ...(result.text ? [answerArtifact(ids, result.text)] : []),
        failedUpdate(ids, "The answer is incomplete: the inference backend stopped before finishing it.", metadata),
      ];
    case "interrupted":
      return [statusUpdate(ids, "canceled", { message: "Task canceled.", final: true, metadata })];
    case "failed": {
      const error = result.error;
      return [failedUpdate(ids, error ? `${error.response}: ${error.cause}` : "The inference backend failed.", metadata)];
    }
  }
}

/**
 * Passes `events` to `send`, one call at a time: what arrives while a call is out goes with the
 * next one, so the first event leaves at once and a slow or far-off receiver costs a round trip
 * per batch, not per event. Stops, cancelling `events`, when `send` answers false; a failure of
 * `events` is thrown once what came before it has been sent.
 */
export async function sendInBatches<T>(events: ReadableStream<T>, send: (batch: T[]) => Promise<boolean>): Promise<void> {
  const reader = events.getReader();
  const queue: T[] = [];
  let ended = false;
  let arrived = null as (() => void) | null;
  const reading = (async () => {
    try {
      for (let next = await reader.read(); !next.done; next = await reader.read()) {
        queue.push(next.value);
        arrived?.();
      }
    } finally {
      ended = true;
      arrived?.();
    }
  })();
  // Its failure is thrown below, after the sending.
  reading.catch(() => undefined);
  try {
    while (queue.length > 0 || !ended) {
      if (queue.length === 0) {
        await new Promise<void>((resolve) => (arrived = resolve));
        arrived = null;
      } else if (!(await send(queue.splice(0)))) {
        await reader.cancel("the receiver has ended");
        return;
      }
    }
  } catch (error) {
    await reader.cancel(error).catch(() => undefined);
    throw error;
  }
  await reading;
}
