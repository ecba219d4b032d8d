// Which tools a turn offers the model (SPEC "Responses endpoint rules" 4 and 5): the server's own
// (file_search over the configured tool stores, the configured MCP servers) unless the client
// sends its own; with `X-SVC-Merge-Server-Tools: true`, the client's first and then the server's.
import type { Config, McpServerConfig } from "../config/schema.ts";
import { errors } from "../errors.ts";
import { knowledgeSources, toBackendStoreId, toClientStoreId } from "../rag/knowledge.ts";
import type { BackendParams } from "./engine.ts";
import type { Tool } from "./responses-request.ts";

/** How many results file_search returns to the model (SPEC "Limits": tool RAG chunks). */
const TOOL_RAG_RESULTS = 10;

export interface TurnTools {
  /** Tools as the backend receives them (backend store ids). */
  tools: Tool[];
  /** Labels of server-deployed MCP servers among them; their events and definitions stay internal. */
  serverMcpLabels: Set<string>;
}

export function serverTools(config: Config, vectorStoreIds?: string[] | null): Tool[] {
  const tools: Tool[] = [];
  const stores = vectorStoreIds ?? knowledgeSources(config).tool;
  if (stores.length > 0) {
    tools.push({
      type: "file_search",
      vector_store_ids: stores.map((id) => toBackendStoreId(config, id)),
      max_num_results: TOOL_RAG_RESULTS,
    });
  }
  for (const server of config.mcp_servers) tools.push(mcpTool(server));
  return tools;
}

/** The server's tools as backend request fields; none at all when there are none. */
export function serverToolParams(config: Config, vectorStoreIds?: string[] | null): BackendParams {
  const tools = serverTools(config, vectorStoreIds);
  return tools.length > 0 ? { tools: tools as NonNullable<BackendParams["tools"]> } : {};
}

function mcpTool(server: McpServerConfig): Tool {
  const policy = server.require_approval;
  return {
    type: "mcp",
    server_label: server.name,
    server_url: server.url,
    require_approval:
      typeof policy === "string" ? policy : { always: { tool_names: policy.always }, never: { tool_names: policy.never } },
  };
}

/** The tools of a responses request: the client's (ids translated), the server's, or both merged. */
export function resolveTools(config: Config, requested: Tool[] | null | undefined, merge: boolean): TurnTools {
  const server = serverTools(config);
  const serverLabels = (tools: Tool[]) => new Set(tools.flatMap((tool) => (tool.type === "mcp" ? [tool.server_label] : [])));
  if (requested === null || requested === undefined) return { tools: server, serverMcpLabels: serverLabels(server) };

  const client = requested.map((tool) =>
    tool.type === "file_search" ? { ...tool, vector_store_ids: tool.vector_store_ids.map((id) => toBackendStoreId(config, id)) } : tool,
  );
  if (!merge) return { tools: client, serverMcpLabels: new Set() };

  const labels = serverLabels(server);
  for (const tool of client) {
    if (tool.type === "mcp" && labels.has(tool.server_label)) {
      throw errors.conflict("Tool conflict detected", `client MCP tool server_label '${tool.server_label}' conflicts with a server-configured MCP server`);
    }
    if (tool.type === "file_search" && server.some((s) => s.type === "file_search")) {
      throw errors.conflict("Tool conflict detected", "client file_search tool conflicts with the server-configured file_search tool");
    }
  }
  return { tools: [...client, ...server], serverMcpLabels: labels };
}

/** The tools as a response shows them: no server MCP definitions, client store ids. */
export function presentTools(config: Config, turnTools: TurnTools): Tool[] {
  return turnTools.tools
    .filter((tool) => !(tool.type === "mcp" && turnTools.serverMcpLabels.has(tool.server_label)))
    .map((tool) =>
      tool.type === "file_search" ? { ...tool, vector_store_ids: tool.vector_store_ids.map((id) => toClientStoreId(config, id)) } : tool,
    );
}
