// The one table of authorization actions: every endpoint names exactly one of these, and
// `authorization.access_rules` grant them to roles. The names are the original system's, so its
// configurations load unchanged; SPEC's upper-case spellings (MODEL_OVERRIDE, A2A_JSONRPC,
// RLSAPI_V1_INFER) name the same actions. Nothing here imports anything: config/ reads it too.
export const ACTIONS = {
  /** Grants every action. PUT /v1/feedback/status */
  admin: "admin",
  /** Reading, listing, continuing and deleting conversations of other users. */
  listOtherConversations: "list_other_conversations",
  readOtherConversations: "read_other_conversations",
  queryOtherConversations: "query_other_conversations",
  deleteOtherConversations: "delete_other_conversations",
  /** POST /v1/query, /v2/query, /query */
  query: "query",
  /** POST /v1/responses */
  responses: "responses",
  /** POST /v1/streaming_query (v2, unversioned) and /v1/streaming_query/interrupt */
  streamingQuery: "streaming_query",
  /** GET /v1|v2|v3/conversations/{conversation_id} */
  getConversation: "get_conversation",
  /** GET /v1|v2|v3/conversations */
  listConversations: "list_conversations",
  /** DELETE /v1|v2/conversations/{conversation_id} */
  deleteConversation: "delete_conversation",
  /** PUT /v1|v2/conversations/{conversation_id} */
  updateConversation: "update_conversation",
  /** POST /v1/feedback */
  feedback: "feedback",
  /** GET /v1/models */
  models: "get_models",
  /** GET /v1/tools, /v1/mcp-auth/client-options */
  tools: "get_tools",
  /** GET /v1/shields */
  shields: "get_shields",
  /** GET /v1/providers */
  providers: "list_providers",
  /** GET /v1/providers/{provider_id} */
  provider: "get_provider",
  /** GET /v1/rags */
  listRags: "list_rags",
  /** GET /v1/rags/{id} */
  getRag: "get_rag",
  /** GET /metrics (unless skip_for_metrics) */
  metrics: "get_metrics",
  /** GET /v1/config */
  config: "get_config",
  /** GET /, /v1/info, /readiness, /liveness (unless skip_for_health_probes) */
  info: "info",
  /** Sending model/provider in a query, responses or A2A request. */
  modelOverride: "model_override",
  /** POST /v1/infer */
  infer: "rlsapi_v1_infer",
  /** POST, GET, DELETE /v1/mcp-servers */
  registerMcpServer: "register_mcp_server",
  listMcpServers: "list_mcp_servers",
  deleteMcpServer: "delete_mcp_server",
  /** GET and POST /a2a */
  a2a: "a2a_jsonrpc",
  /** Defined by the original system and accepted in configurations; no endpoint checks them. */
  a2aAgentCard: "a2a_agent_card",
  a2aTaskExecution: "a2a_task_execution",
  a2aMessage: "a2a_message",
  /** POST/PUT/DELETE /v1/vector-stores... */
  manageVectorStores: "manage_vector_stores",
  /** GET /v1/vector-stores... */
  readVectorStores: "read_vector_stores",
  /** POST /v1/files */
  manageFiles: "manage_files",
  /** POST/PUT/DELETE /v1/prompts */
  managePrompts: "manage_prompts",
  /** GET /v1/prompts, /v1/prompts/{id} */
  readPrompts: "read_prompts",
  /** Extension: GET /v1/quotas (own counters and token history). */
  readQuotas: "read_quotas",
  /** Extension: GET /v1/quotas/{limiter}/{subject} (any subject). */
  readAnyQuota: "read_any_quota",
} as const;

export type Action = (typeof ACTIONS)[keyof typeof ACTIONS];

const KNOWN: ReadonlySet<string> = new Set(Object.values(ACTIONS));

/** The action a configuration names, in any letter case; null when there is no such action. */
export function actionNamed(name: string): Action | null {
  const action = name.toLowerCase();
  return KNOWN.has(action) ? (action as Action) : null;
}
