// Tool activity of a backend response in the query endpoints' summary shapes (REFERENCE "Query"):
// tool calls {id, name, args, type: "tool_call"} and results {id, status, content, type, round}.
import type { Item } from "../../durable-objects/conversation-do.ts";

export interface ToolSummaries {
  tool_calls: Item[];
  tool_results: Item[];
}

/** `counts` leaves out tool activity that is not the server's to record (client tools when merged). */
export function summarizeOutput(output: Item[], counts: (item: Item) => boolean = () => true): ToolSummaries {
  const summaries: ToolSummaries = { tool_calls: [], tool_results: [] };
  for (const item of output) {
    if (!counts(item)) continue;
    const call = toolCall(item);
    if (!call) continue;
    summaries.tool_calls.push(call);
    const result = toolResult(item);
    if (result) summaries.tool_results.push(result);
  }
  return summaries;
}

export function toolCall(item: Item): Item | null {
  const id = String(item.call_id ?? item.id ?? "");
  switch (item.type) {
    case "function_call":
    case "mcp_call":
      return { id, name: String(item.name), args: parseArguments(item.arguments), type: "tool_call" };
    case "file_search_call":
      return { id, name: "file_search", args: { queries: item.queries ?? [] }, type: "tool_call" };
    case "web_search_call":
      return { id, name: "web_search", args: (item.action as Item | undefined) ?? {}, type: "tool_call" };
    default:
      return null;
  }
}

export function toolResult(item: Item): Item | null {
  const id = String(item.call_id ?? item.id ?? "");
  const failed = item.status === "failed" || (item.error !== undefined && item.error !== null);
  switch (item.type) {
    case "mcp_call":
      return { id, status: failed ? "failure" : "success", content: failed ? String(item.error) : String(item.output ?? ""), type: "tool_result", round: 1 };
    case "file_search_call":
      return { id, status: failed ? "failure" : "success", content: JSON.stringify(item.results ?? []), type: "tool_result", round: 1 };
    default:
      return null;
  }
}

function parseArguments(raw: unknown): unknown {
  if (typeof raw !== "string") return raw ?? {};
  try {
    return JSON.parse(raw);
  } catch {
    return { raw };
  }
}
