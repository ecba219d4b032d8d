// Which tools a turn offers the model (SPEC "Responses endpoint rules" 4 and 5): the server's own
// (file_search over the configured tool stores, the MCP servers of the configuration and of the
// registry) unless the client sends its own; with `X-SVC-Merge-Server-Tools: true`, the client's
// first and then the server's. MCP tools, the server's and the client's, are run by the gateway
// (tool-loop.ts): the backend receives the others only.
import { MAX_SEARCH_RESULTS } from "../backends/file-search.ts";
import { apiBackend, type Backends } from "../backends/providers.ts";
import type { Config } from "../config/schema.ts";
import type { BackendParams, Item } from "../domain/conversation.ts";
import type { McpServer } from "../domain/mcp.ts";
import { errors } from "../errors.ts";
import { resourceCall } from "./backend-errors.ts";
import { clientMcpServer } from "../mcp/servers.ts";
import { listedStores } from "../rag/backend-stores.ts";
import { findStore, isPortalStore, knowledgeSources, toBackendStoreId, toClientStoreId } from "../rag/knowledge.ts";
import { staticFilter } from "../rag/retrieval.ts";
import { allOf, type SearchFilter } from "../rag/solr.ts";
import type { PlanContext } from "./plan.ts";
import type { Tool, ToolChoice } from "./responses-request.ts";

export interface TurnTools {
  /** The request's tools, then the server's file_search when it applies (backend store ids). */
  tools: Tool[];
  /** The MCP servers the gateway runs for the turn: the client's `mcp` tools, then the server's. */
  mcpServers: McpServer[];
  /** Labels of server-deployed MCP servers: their events stay out of streams (SPEC rule 5). */
  serverMcpLabels: Set<string>;
}

/** The most distinct stores a request may name that the configuration does not (each costs a lookup). */
export const MAX_UNCONFIGURED_STORES = 32;

/**
 * Refuses the stores a client names that neither the configuration nor the backend has (404), so
 * that an unknown id is the same answer whether or not the model would have searched (the backend
 * fails the whole answer when it does). Only ids the configuration does not name cost a lookup,
 * each once, and at most MAX_UNCONFIGURED_STORES of them.
 */
async function checkClientStores(config: Config, backends: Backends, ids: readonly string[]): Promise<void> {
  const unconfigured = [...new Set(ids)].filter((id) => findStore(config, id) === undefined && !isPortalStore(config, id));
  if (unconfigured.length === 0) return;
  if (unconfigured.length > MAX_UNCONFIGURED_STORES) {
    throw errors.invalidValue(`vector stores: at most ${MAX_UNCONFIGURED_STORES} that the configuration does not name, got ${unconfigured.length}`);
  }
  const { client } = apiBackend(backends, "vector_stores");
  await Promise.all(
    unconfigured.map((id) =>
      resourceCall(
        "vector_stores",
        () => client.vectorStores.retrieve(id, { maxRetries: 0 }),
        () => errors.notFound("Vector store", id),
      ),
    ),
  );
}

/**
 * The server's file_search tool, over the request's stores, else the tool stores: with neither
 * list configured, every store the backend lists besides the configured ones (backend-stores.ts).
 */
async function serverFileSearch(context: PlanContext, vectorStoreIds?: string[] | null): Promise<Tool[]> {
  const { config, backends } = context.rt;
  const sources = knowledgeSources(config);
  const stores = new Set((vectorStoreIds ?? sources.tool).map((id) => toBackendStoreId(config, id)));
  if (!vectorStoreIds && sources.everyBackendStore) for (const id of (await listedStores(backends)) ?? []) stores.add(id);
  if (stores.size === 0) return [];
  // As many results as the configuration gives the tool (rag.retrieval.tool.max_chunks; 10 otherwise), within the backend's bound.
  const results = Math.min(sources.retrieval.toolMaxChunks, MAX_SEARCH_RESULTS);
  return [{ type: "file_search", vector_store_ids: [...stores], max_num_results: results }];
}

/**
 * What a backend receives of a turn's tools: all but MCP, which the gateway runs, with the portal
 * searched under its operator's filter (portalFiltered).
 */
export function backendTools(config: Config, tools: Tool[]): BackendParams {
  const forBackend = tools.flatMap<Tool>((tool) => (tool.type === "mcp" ? [] : tool.type === "file_search" ? portalFiltered(config, tool) : [tool]));
  return forBackend.length > 0 ? { tools: forBackend as NonNullable<BackendParams["tools"]> } : {};
}

type FileSearchTool = Extract<Tool, { type: "file_search" }>;

/**
 * A file_search tool as the backend receives it. portal.chunk_filter_query applies to every search
 * (SPEC), the model's too: a tool that searches the portal and other stores becomes two, the
 * portal's carrying the operator's filter ANDed with the tool's own (the other stores' attributes
 * are their own, as in inline searches). A filter the stores' filters cannot express leaves the
 * portal out (the load warned), since searching it without its filter could show what the filter hides.
 */
function portalFiltered(config: Config, tool: FileSearchTool): FileSearchTool[] {
  const portal = knowledgeSources(config).stores.find((store) => store.kind === "portal")?.vectorDbId;
  if (portal === undefined || !tool.vector_store_ids.includes(portal)) return [tool];
  const configured = staticFilter(config);
  if (configured.ok && configured.filter === null) return [tool];
  const others = tool.vector_store_ids.filter((id) => id !== portal);
  const rest = others.length > 0 ? [{ ...tool, vector_store_ids: others }] : [];
  if (!configured.ok) return rest;
  const filters = allOf([(tool.filters as SearchFilter | null | undefined) ?? null, configured.filter]) as FileSearchTool["filters"];
  return [...rest, { ...tool, vector_store_ids: [portal], filters }];
}

/**
 * The server's tools for the query endpoints and A2A, which take no tools from the client: its
 * file_search over the knowledge stores (unless `fileSearch` is false: /v1/infer, which UPSTREAM's
 * original runs with MCP tools only) and its MCP servers (unless `mcp` is false). The stores the
 * request names are checked either way (no_tools leaves inline retrieval on, restricted to them).
 */
export async function serverTools(
  context: PlanContext,
  vectorStoreIds: string[] | null | undefined,
  { fileSearch = true, mcp = true }: { fileSearch?: boolean; mcp?: boolean } = {},
): Promise<{ params: BackendParams; mcpServers: McpServer[] }> {
  const config = context.rt.config;
  if (vectorStoreIds) await checkClientStores(config, context.rt.backends, vectorStoreIds);
  const [fileSearchTool, servers] = await Promise.all([fileSearch ? serverFileSearch(context, vectorStoreIds) : [], mcp ? context.mcpServers() : null]);
  return { params: backendTools(config, fileSearchTool), mcpServers: servers?.servers ?? [] };
}

/** The tools of a responses request: the client's (ids translated), the server's, or both merged. */
export async function resolveTools(context: PlanContext, requested: Tool[] | null | undefined, merge: boolean): Promise<TurnTools> {
  const config = context.rt.config;
  const serverSide = async () => {
    const [servers, fileSearch] = await Promise.all([context.mcpServers(), serverFileSearch(context)]);
    return {
      fileSearch,
      servers: servers.servers,
      // A client tool may not take the name of a server the caller lacks credentials for either.
      labels: new Set([...servers.servers.map((server) => server.name), ...servers.skipped.map((server) => server.name)]),
    };
  };
  if (requested === null || requested === undefined) {
    const server = await serverSide();
    return { tools: server.fileSearch, mcpServers: server.servers, serverMcpLabels: new Set(server.servers.map((s) => s.name)) };
  }

  await checkClientStores(config, context.rt.backends, requested.flatMap((tool) => (tool.type === "file_search" ? tool.vector_store_ids : [])));
  const client = requested.map((tool) =>
    tool.type === "file_search" ? { ...tool, vector_store_ids: tool.vector_store_ids.map((id) => toBackendStoreId(config, id)) } : tool,
  );
  const clientServers = () =>
    requested.flatMap((tool, index) =>
      tool.type === "mcp" ? [clientMcpServer(tool, config.mcp_security.allowed_internal_hosts, `tools[${index}].server_url`)] : [],
    );
  if (!merge) return { tools: client, mcpServers: clientServers(), serverMcpLabels: new Set() };

  const server = await serverSide();
  for (const tool of client) {
    if (tool.type === "mcp" && server.labels.has(tool.server_label)) {
      throw errors.conflict("Tool conflict detected", `client MCP tool server_label '${tool.server_label}' conflicts with a server-configured MCP server`);
    }
    if (tool.type === "file_search" && server.fileSearch.length > 0) {
      throw errors.conflict("Tool conflict detected", "client file_search tool conflicts with the server-configured file_search tool");
    }
  }
  return {
    tools: [...client, ...server.fileSearch],
    mcpServers: [...clientServers(), ...server.servers],
    serverMcpLabels: new Set(server.servers.map((s) => s.name)),
  };
}

/**
 * A tool_choice of type `mcp` must name a server of the turn (SPEC "tool_choice"): one that is not
 * is the client's 422 here, before the turn; its tools are checked once they are listed (tool-loop.ts).
 */
export function checkMcpToolChoice(choice: ToolChoice, turnTools: TurnTools): void {
  if (typeof choice !== "object" || choice.type !== "mcp") return;
  if (!turnTools.mcpServers.some((server) => server.name === choice.server_label)) {
    throw errors.invalidValue(`tool_choice: no MCP server '${choice.server_label}' is available to this request`);
  }
}

/**
 * tool_choice as the backend is to take it: an allowed_tools filter without a type covers no tool
 * (the original answers such a request, without tools), and a list that allows no tool is `none`.
 */
export function backendAllowedTools(choice: BackendParams["tool_choice"]): BackendParams["tool_choice"] {
  if (typeof choice !== "object" || choice === null || choice.type !== "allowed_tools") return choice;
  const typed = choice.tools.filter((filter) => filter.type != null);
  if (typed.length === 0) return "none";
  return typed.length === choice.tools.length ? choice : { ...choice, tools: typed };
}

/** The tools as a response shows them: the client's as sent, the server's file_search; client store ids. */
export function presentTools(config: Config, turnTools: TurnTools): Tool[] {
  return turnTools.tools.map((tool) =>
    tool.type === "file_search" ? { ...tool, vector_store_ids: tool.vector_store_ids.map((id) => toClientStoreId(config, id)) } : tool,
  );
}

/**
 * The call id of a function_call_output that answers no function call, neither one of the
 * conversation's history nor one sent with it; null when each answers one. A backend refuses such
 * an input with a 400 of its own (OpenAI: "No tool call found for function call output"), which
 * would reach the client as a server fault.
 */
export function unansweredCallOutput(input: readonly Item[], history: readonly Item[]): string | null {
  const outputs = input.filter((item) => item.type === "function_call_output");
  if (outputs.length === 0) return null;
  const calls = new Set([...history, ...input].filter((item) => item.type === "function_call").map((item) => item.call_id));
  return (outputs.find((item) => !calls.has(item.call_id))?.call_id as string | undefined) ?? null;
}
