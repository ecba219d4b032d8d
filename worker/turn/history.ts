// What earlier turns contribute to the next backend call. Only items every Responses-compatible
// backend accepts as input are replayed: messages (answers as plain assistant messages) and
// function calls, which a client's function_call_output of the next turn refers to. Server-side
// tool activity (MCP, file search) is already reflected in the answers.
import type { Item, StoredTurn } from "../../durable-objects/conversation-do.ts";

export function historyInput(turns: StoredTurn[]): Item[] {
  const items: Item[] = [];
  for (const turn of turns) {
    if (turn.status === "failed") continue;
    items.push(...turn.input);
    for (const item of turn.output) {
      if (item.type === "function_call") items.push(item);
    }
    if (turn.summary.assistant) items.push({ type: "message", role: "assistant", content: turn.summary.assistant });
  }
  return items;
}
