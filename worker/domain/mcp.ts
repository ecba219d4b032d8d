// The MCP servers a turn may use and the approvals of their tool calls, as plain data: the Worker
// assembles them for a request (worker/mcp/servers.ts) and the conversation's Durable Object runs
// them. A leaf: it imports no module of the gateway.

/** A server's require_approval (configuration form). */
export type ApprovalPolicy = "always" | "never" | { always: string[]; never: string[] };

/** config: static `mcp_servers`; api: registered through /v1/mcp-servers; client: a request's own `mcp` tool. */
export type McpServerSource = "config" | "api" | "client";

/** A server ready for one request, its credentials assembled: what listTools and callTool take. */
export interface McpServer {
  /** The server's name, which is its tools' server_label. */
  name: string;
  url: string;
  providerId: string;
  source: McpServerSource;
  /** Sent with every MCP request to the server: credentials and forwarded request headers. */
  headers: Record<string, string>;
  /** Bound of one list or call, connection included. */
  timeoutMs: number;
  requireApproval: ApprovalPolicy;
  /** Only these tools are offered (a client tool's allowed_tools); null: all of them. */
  allowedTools: string[] | null;
}

/** The MCP side of a turn: the servers whose tools the gateway offers and runs, and the loop's bounds. */
export interface TurnMcp {
  servers: McpServer[];
  /** Model calls in one turn at most (max_infer_iters). */
  maxInferIters: number;
  /** Tool calls the gateway runs in one turn at most (max_tool_calls). */
  maxToolCalls: number;
  /**
   * What a gated call does: "end" ends the turn with the approval request (/v1/responses, whose
   * client can answer it); "continue" reports it unrun and lets the model go on (query, A2A).
   */
  gate: "end" | "continue";
}

/** A client's answer to an approval request (an `mcp_approval_response` input item). */
export interface ApprovalAnswer {
  id: string;
  approve: boolean;
  reason: string | null;
}

/** A gated call, recorded as pending with the turn that asked for it. */
export interface ApprovalRequest {
  /** mcpr_…: the approval_request_id a client answers. */
  id: string;
  serverLabel: string;
  toolName: string;
  /** The function name the model called it by, and its call id (to hand the model the result). */
  functionName: string;
  callId: string;
  arguments: string;
}

/** A decided approval as the turn that answers it uses it. */
export interface ApprovalDecision {
  request: ApprovalRequest;
  approve: boolean;
  reason: string | null;
  /** The call's mcp_call item, when it already ran (a retried answer reuses it, never runs it again). */
  outcome: Record<string, unknown> | null;
}
