// SPEC "A2A events": a turn's events as the A2A task stream shows them. working with the model and
// conversation → text deltas and "Calling tool: <name>" as status messages → the answer as one
// artifact → a final status. Pure, so the order is unit-tested without a Worker; the task's context
// object translates its turn's events as they arrive (A2AContextDO.followTurn).
import type { TurnEvent, TurnResult } from "./conversation.ts";
import { answerArtifact, failedUpdate, statusUpdate, type A2AEvent, type TaskIds } from "./a2a-task.ts";

/** Output items that are the model calling a tool; their name is what the status message shows. */
const TOOL_CALL_ITEMS = new Set(["function_call", "mcp_call"]);

/** The A2A events of a turn: `start` once, then `events` for each run of the turn's events. */
export interface A2ATranslation {
  start(): A2AEvent[];
  /**
   * The A2A events of turn events that arrived together. Their text deltas become one status
   * message each run (the text as it came, in fewer events), so a fast backend's thousands of
   * deltas do not each cost the task a logged event.
   */
  events(events: TurnEvent[]): A2AEvent[];
}

/** Translates one turn's events; `turn` says which model answers in which conversation. */
export function a2aTranslation(ids: TaskIds, turn: { model: string; conversationId: string }): A2ATranslation {
  return {
    start: () => [statusUpdate(ids, "working", { metadata: { model: turn.model, conversation_id: turn.conversationId } })],
    events(events) {
      const out: A2AEvent[] = [];
      let text = "";
      const flush = () => {
        if (text) out.push(statusUpdate(ids, "working", { message: text }));
        text = "";
      };
      for (const event of events) {
        if (event.type === "finished") {
          flush();
          out.push(...finalEvents(ids, event.result));
          continue;
        }
        if (event.type !== "backend") continue;
        const backend = event.event;
        if (backend.type === "response.output_text.delta") {
          text += backend.delta;
        } else if (backend.type === "response.output_item.added" && TOOL_CALL_ITEMS.has(backend.item.type)) {
          const name = (backend.item as { name?: unknown }).name;
          flush();
          out.push(statusUpdate(ids, "working", { message: `Calling tool: ${typeof name === "string" ? name : backend.item.type}` }));
        }
      }
      flush();
      return out;
    },
  };
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
