// What earlier turns contribute to the next backend call. Only items every Responses-compatible
// backend accepts as input are replayed: messages (answers as plain assistant messages) and
// function calls, which a client's function_call_output of the next turn refers to. Server-side
// tool activity (MCP, file search) is already reflected in the answers.
import type { Item, StoredTurn } from "./conversation-do.ts";

/** The items one recorded turn adds to the input of every later turn. */
export function turnHistory(turn: StoredTurn): Item[] {
  if (turn.status === "failed") return [];
  const items: Item[] = [...turn.input];
  for (const item of turn.output) {
    if (item.type === "function_call") items.push(item);
  }
  if (turn.summary.assistant) items.push({ type: "message", role: "assistant", content: turn.summary.assistant });
  return items;
}
