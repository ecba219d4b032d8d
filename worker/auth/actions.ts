// The one table of authorization actions: every endpoint names exactly one of these, and
// `authorization.access_rules` grant them to roles. Names that SPEC fixes keep its spelling.
export const ACTIONS = {
  /** GET / */
  root: "get_root",
  /** GET /v1/info */
  info: "info",
  /** GET /v1/models */
  models: "get_models",
  /** GET /v1/tools */
  tools: "get_tools",
  /** GET /v1/shields */
  shields: "get_shields",
  /** GET /v1/providers */
  providers: "list_providers",
  /** GET /v1/providers/{id} */
  provider: "get_provider",
  /** GET /readiness, /liveness (unless skip_for_health_probes) */
  probes: "health_probes",
  /** GET /metrics (unless skip_for_metrics) */
  metrics: "get_metrics",
  /** GET /v1/config */
  config: "get_config",
  /** POST /authorized */
  authorized: "authorized",
  /** POST /v1/query, /v2/query */
  query: "query",
  /** POST /v1/streaming_query, /v2/streaming_query */
  streamingQuery: "streaming_query",
  /** POST /v1/streaming_query/interrupt */
  interrupt: "interrupt_streaming_query",
  /** sending model/provider in a query or responses request */
  modelOverride: "MODEL_OVERRIDE",
  /** GET /v1|v2|v3/conversations */
  listConversations: "list_conversations",
  /** GET /v1|v2|v3/conversations/{id} */
  getConversation: "get_conversation",
  /** DELETE /v1|v2/conversations/{id} */
  deleteConversation: "delete_conversation",
  /** PUT /v1|v2/conversations/{id} */
  updateConversation: "update_conversation",
  /** POST /v1/responses */
  responses: "responses",
  /** GET /v1/prompts, /v1/prompts/{id} */
  readPrompts: "read_prompts",
  /** POST/PUT/DELETE /v1/prompts */
  managePrompts: "manage_prompts",
  /** GET /v1/quotas (own), GET /v1/quotas/{limiter}/{subject} (any subject) */
  readQuotas: "read_quotas",
  readAnyQuota: "read_any_quota",
  /** POST /a2a, GET /a2a/health */
  a2a: "A2A_JSONRPC",
  /** POST /v1/infer */
  infer: "RLSAPI_V1_INFER",
  /** GET /v1/rags, /v1/rags/{id} */
  listRags: "list_rags",
  getRag: "get_rag",
  /** GET /v1/vector-stores... */
  readVectorStores: "read_vector_stores",
  /** POST/PUT/DELETE /v1/vector-stores... */
  manageVectorStores: "manage_vector_stores",
  /** POST /v1/files */
  manageFiles: "manage_files",
  /** POST /v1/feedback, GET /v1/feedback/status */
  feedback: "feedback",
  /** PUT /v1/feedback/status */
  manageFeedback: "manage_feedback",
} as const;

export type Action = (typeof ACTIONS)[keyof typeof ACTIONS];
