// Tool activity of a backend response in the query endpoints' summary shapes (REFERENCE "Query"):
// tool calls {id, name, args, type: "tool_call"} and results {id, status, content, type, round}.
import type { Item } from "../domain/conversation.ts";

export interface ToolSummaries {
  tool_calls: Item[];
  tool_results: Item[];
}

/**
 * The tool activity of a turn: its answers to approval requests (from its input), then the calls of
 * its answer. `counts` leaves out activity that is not the server's to record (client tools when merged).
 */
export function summarizeTurn(input: Item[], output: Item[], counts: (item: Item) => boolean = () => true): ToolSummaries {
  const summaries: ToolSummaries = { tool_calls: [], tool_results: [] };
  for (const item of input) {
    if (item.type !== "mcp_approval_response") continue;
    summaries.tool_results.push({
      id: String(item.approval_request_id),
      status: item.approve === true ? "success" : "denied",
      content: JSON.stringify(typeof item.reason === "string" ? { reason: item.reason } : {}),
      type: "mcp_approval_response",
      round: 1,
    });
  }
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

/**
 * A tool call in REFERENCE's summary shape. A call waiting for approval keeps its own type
 * (`mcp_approval_request`, as the original system reports it): it has not run, and the client
 * answers it by its id.
 */
export function toolCall(item: Item): Item | null {
  const id = String(item.call_id ?? item.id ?? "");
  switch (item.type) {
    case "function_call":
      return { id, name: String(item.name), args: parseArguments(item.arguments), type: "tool_call" };
    case "mcp_call":
      return { id, name: String(item.name), args: withServer(parseArguments(item.arguments), item.server_label), type: "tool_call" };
    case "mcp_approval_request":
      return { id, name: String(item.name), args: withServer(parseArguments(item.arguments), item.server_label), type: "mcp_approval_request" };
    case "mcp_list_tools":
      return { id, name: "mcp_list_tools", args: { server_label: item.server_label }, type: "tool_call" };
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
    case "mcp_list_tools": {
      const tools = ((item.tools ?? []) as Item[]).map((tool) => ({ name: tool.name, description: tool.description ?? null, input_schema: tool.input_schema }));
      return { id, status: failed ? "failure" : "success", content: failed ? String(item.error) : JSON.stringify({ server_label: item.server_label, tools }), type: "tool_result", round: 1 };
    }
    case "file_search_call":
      return { id, status: failed ? "failure" : "success", content: JSON.stringify(item.results ?? []), type: "tool_result", round: 1 };
    default:
      return null;
  }
}

/** A call's arguments with the server it went to (an object's, as the original system adds it). */
function withServer(args: unknown, serverLabel: unknown): unknown {
  return args && typeof args === "object" && !Array.isArray(args) ? { ...(args as Item), server_label: serverLabel } : args;
}

function parseArguments(raw: unknown): unknown {
  if (typeof raw !== "string") return raw ?? {};
  try {
    return JSON.parse(raw);
  } catch {
    return { raw };
  }
}
