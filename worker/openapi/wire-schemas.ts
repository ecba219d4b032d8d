// The shapes Parley sends that no route validates, as zod schemas: the single source of the
// OpenAPI document's response schemas (SPEC "Resources and their fields", REFERENCE). Request
// schemas are not here: the document uses the very schemas the routes parse with. The A2A request
// envelope is here because the A2A SDK, not zod, parses it. test/worker/openapi.test.ts checks real
// answers against these schemas, so a route that changes its shape fails there.
import * as z from "zod";
import { AgentCardConfigSchema } from "../config/agent-card.ts";
import { LCORE_SHIELD_KINDS } from "../config/schema.ts";
import type { ModelInfo, RagChunk, ReferencedDocument } from "../domain/conversation.ts";
import { ReadinessSchema } from "../metrics/readiness.ts";
import type { AvailableQuotas } from "../quota/quotas.ts";
import { RESPONSE_KEYS } from "../routes/response-object.ts";

const timestamp = () => z.string().describe("ISO 8601 timestamp");
const unixTime = () => z.int().describe("Unix time in seconds");

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/** SPEC "Errors": the one envelope every error answer has (worker/errors.ts renders it). */
export const ErrorResponseSchema = z.object({
  detail: z.object({
    response: z.string().describe("What went wrong, in a fixed wording per kind of error"),
    cause: z.string().describe("Why, naming the field, resource or limit involved"),
  }),
});

// ---------------------------------------------------------------------------------------------
// Service
// ---------------------------------------------------------------------------------------------

export const InfoResponseSchema = z.object({ name: z.string(), service_version: z.string(), backend_version: z.string() });

export const ModelSchema = z.object({
  identifier: z.string().describe("`provider/model`, as /v1/responses takes it"),
  metadata: z.record(z.string(), z.unknown()),
  api_model_type: z.string(),
  provider_id: z.string(),
  type: z.literal("model"),
  provider_resource_id: z.string(),
  model_type: z.string().describe("`llm` or `embedding`"),
});

const ProviderHealthSchema = ReadinessSchema.shape.providers.element;

export const ModelsResponseSchema = z.object({
  models: z.array(ModelSchema),
  providers: z.array(ProviderHealthSchema).optional().describe("With several backends: which of them answered"),
});

export { ReadinessSchema };

export const LivenessResponseSchema = z.object({ alive: z.literal(true) });

export const ConfigurationResponseSchema = z.object({
  configuration: z.record(z.string(), z.unknown()).describe('The loaded configuration, every secret replaced by "**********"'),
});

export const AuthorizedResponseSchema = z.object({ user_id: z.string(), username: z.string(), skip_userid_check: z.boolean() });

// ---------------------------------------------------------------------------------------------
// Turns: query, streaming query, infer
// ---------------------------------------------------------------------------------------------

export const ToolCallSummarySchema = z.object({
  id: z.string(),
  name: z.string(),
  args: z.unknown(),
  type: z.enum(["tool_call", "mcp_approval_request"]).describe("`mcp_approval_request`: a call waiting for approval, answered on /v1/responses by its id"),
});

export const ToolResultSummarySchema = z.object({
  id: z.string(),
  status: z.string().describe("`success`, `failure`, or for answered approvals `success` / `denied`"),
  content: z.string(),
  type: z.enum(["tool_result", "mcp_approval_response"]),
  round: z.int(),
});

export const RagChunkSchema = z.object({
  content: z.string(),
  source: z.string().describe("The client's id of the store the chunk came from"),
  score: z.number(),
  attributes: z
    .object({ doc_url: z.string(), document_id: z.string() })
    .catchall(z.union([z.string(), z.number(), z.boolean()])),
});

export const ReferencedDocumentSchema = z.object({
  doc_url: z.string().nullable(),
  doc_title: z.string().nullable(),
  source: z.string(),
  document_id: z.string(),
});

export const AvailableQuotasSchema = z.record(z.string(), z.number()).describe("Limiter name to the tokens it has left");

export const QueryResponseSchema = z.object({
  conversation_id: z.string().describe("48 hexadecimal characters"),
  response: z.string(),
  rag_chunks: z.array(RagChunkSchema),
  tool_calls: z.array(ToolCallSummarySchema),
  tool_results: z.array(ToolResultSummarySchema),
  referenced_documents: z.array(ReferencedDocumentSchema),
  truncated: z.boolean(),
  input_tokens: z.int(),
  output_tokens: z.int(),
  available_quotas: AvailableQuotasSchema,
});

/** REFERENCE "Query": each `data:` line of /v1/streaming_query, one of these. */
export const QueryStreamEventSchema = z.discriminatedUnion("event", [
  z.object({ event: z.literal("start"), data: z.object({ conversation_id: z.string(), request_id: z.string() }) }),
  z.object({
    event: z.literal("token"),
    data: z.object({ id: z.int(), token: z.string().describe("A piece of the answer; empty where a part of the answer begins, as the original sends") }),
  }),
  z.object({ event: z.literal("tool_call"), data: ToolCallSummarySchema }),
  z.object({ event: z.literal("tool_result"), data: ToolResultSummarySchema }),
  z.object({ event: z.literal("turn_complete"), data: z.object({ id: z.int(), token: z.string().describe("The whole answer") }) }),
  z.object({
    event: z.literal("end"),
    data: z.object({
      referenced_documents: z.array(ReferencedDocumentSchema),
      rag_chunks: z.array(RagChunkSchema).describe("Extension: what retrieval found, as the JSON answer's rag_chunks"),
      truncated: z.boolean(),
      input_tokens: z.int(),
      output_tokens: z.int(),
    }),
    available_quotas: AvailableQuotasSchema,
  }),
  z.object({ event: z.literal("error"), data: z.object({ status_code: z.int(), response: z.string(), cause: z.string() }) }),
  z.object({ event: z.literal("interrupted"), data: z.object({ request_id: z.string() }) }),
  z.object({
    event: z.literal("compaction"),
    data: z.object({ status: z.literal("started"), conversation_id: z.string() }).describe("Extension: older turns were summarised before this answer"),
  }),
]);

export const InterruptResponseSchema = z.object({ request_id: z.string(), interrupted: z.boolean(), message: z.string() });

export const InferResponseSchema = z.object({
  data: z.object({
    text: z.string(),
    request_id: z.string(),
    // With rlsapi_v1.allow_verbose_infer and the request's include_metadata:
    tool_calls: z.array(ToolCallSummarySchema).optional(),
    tool_results: z.array(ToolResultSummarySchema).optional(),
    rag_chunks: z.array(RagChunkSchema).optional(),
    referenced_documents: z.array(ReferencedDocumentSchema).optional(),
    input_tokens: z.int().optional(),
    output_tokens: z.int().optional(),
  }),
});

// ---------------------------------------------------------------------------------------------
// /v1/responses
// ---------------------------------------------------------------------------------------------

/** An output item: OpenAI's item types, passed through as the backend and the tool loop made them. */
export const OutputItemSchema = z.looseObject({
  type: z.string().describe("message, web_search_call, file_search_call, function_call, mcp_call, mcp_list_tools or mcp_approval_request"),
  id: z.string().optional(),
});

const TypedResponseFields = {
  id: z.string(),
  object: z.literal("response"),
  created_at: unixTime(),
  completed_at: unixTime().nullable(),
  status: z.string().describe("completed, incomplete, failed, in_progress or blocked"),
  error: z.object({ code: z.string(), message: z.string() }).nullable(),
  model: z.string(),
  instructions: z.unknown().describe('The client\'s instructions, or "<server prompt applied>"'),
  output: z.array(OutputItemSchema),
  output_text: z.string(),
  usage: z.looseObject({ input_tokens: z.int(), output_tokens: z.int(), total_tokens: z.int() }),
  conversation: z.string().describe("The conversation's id: 48 hexadecimal characters (a request may also give the backend form, `conv_` before them)"),
  store: z.boolean(),
} satisfies Partial<Record<(typeof RESPONSE_KEYS)[number], z.ZodType>>;

/** The Responses object (every field of the openai package's Response, RESPONSE_KEYS) and the quotas left. */
export const ResponseObjectSchema = z.object({
  ...Object.fromEntries(RESPONSE_KEYS.map((key) => [key, z.unknown().describe("As resolved by the service")])),
  ...TypedResponseFields,
  available_quotas: AvailableQuotasSchema,
});

// ---------------------------------------------------------------------------------------------
// Conversations
// ---------------------------------------------------------------------------------------------

export const ConversationListItemSchema = z.object({
  conversation_id: z.string(),
  created_at: timestamp(),
  last_message_at: timestamp(),
  message_count: z.int(),
  last_used_model: z.string(),
  last_used_provider: z.string(),
  topic_summary: z.string(),
});

export const ConversationsListSchema = z.object({ conversations: z.array(ConversationListItemSchema) });

export const ConversationsCacheListSchema = z.object({
  conversations: z.array(z.object({ conversation_id: z.string(), topic_summary: z.string().nullable(), last_message_timestamp: z.number() })),
});

export const ChatTurnSchema = z.object({
  messages: z.array(z.object({ content: z.string(), type: z.enum(["user", "assistant"]) })),
  tool_calls: z.array(ToolCallSummarySchema),
  tool_results: z.array(ToolResultSummarySchema),
  provider: z.string(),
  model: z.string(),
  started_at: timestamp(),
  completed_at: timestamp(),
  status: z.enum(["completed", "incomplete", "interrupted", "blocked"]).describe("Extension: how the turn ended"),
});

export const ConversationDetailSchema = z.object({ conversation_id: z.string(), chat_history: z.array(ChatTurnSchema) });

export const ConversationDetailV3Schema = z.object({ conversation_id: z.string(), created_at: timestamp(), chat_history: z.array(ChatTurnSchema) });

export const ConversationDeleteResponseSchema = z.object({ conversation_id: z.string(), deleted: z.boolean(), success: z.boolean(), response: z.string() });

export const ConversationUpdateResponseSchema = z.object({ conversation_id: z.string(), success: z.boolean(), message: z.string() });

// ---------------------------------------------------------------------------------------------
// Quotas (extension)
// ---------------------------------------------------------------------------------------------

const QuotaCounterSchema = z.object({
  limiter: z.string(),
  type: z.enum(["user_limiter", "cluster_limiter"]),
  subject: z.string(),
  available: z.int(),
  next_reset_at: timestamp(),
  period_seconds: z.number(),
  initial_quota: z.int(),
  quota_increase: z.int(),
});

export const QuotasResponseSchema = z.object({
  quotas: z.array(QuotaCounterSchema),
  token_history: z.array(
    z.object({ provider: z.string(), model: z.string(), input_tokens: z.int(), output_tokens: z.int(), updated_at: timestamp() }),
  ),
});

export const SubjectQuotasResponseSchema = z.object({ quotas: z.array(QuotaCounterSchema) });

// ---------------------------------------------------------------------------------------------
// Prompts
// ---------------------------------------------------------------------------------------------

export const PromptResourceSchema = z.object({
  prompt_id: z.string().describe("`pmpt_` + 48 hexadecimal characters"),
  version: z.int(),
  is_default: z.boolean(),
  prompt: z.string(),
  variables: z.array(z.string()),
});

export const PromptsListSchema = z.object({ data: z.array(PromptResourceSchema) });

export const PromptDeleteResponseSchema = z.object({ prompt_id: z.string(), deleted: z.boolean(), response: z.string(), success: z.boolean() });

// ---------------------------------------------------------------------------------------------
// A2A
// ---------------------------------------------------------------------------------------------

/** The card as served: the configured card completed with url, version, capabilities and defaults. */
export const AgentCardSchema = AgentCardConfigSchema;

/** SPEC "A2A JSON-RPC": the envelope; the A2A SDK checks `params` for each method. */
export const A2ARequestSchema = z.object({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.string(), z.int()]).nullable(),
  method: z.string().describe("message/send, message/stream, tasks/get, tasks/cancel, tasks/resubscribe, ..."),
  params: z.record(z.string(), z.unknown()).optional(),
});

export const A2AResponseSchema = z.looseObject({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.string(), z.int()]).nullable(),
  result: z.unknown().optional(),
  error: z.looseObject({ code: z.int(), message: z.string() }).optional(),
});

export const A2AHealthSchema = z.object({ status: z.literal("healthy"), service: z.string(), version: z.string(), a2a_sdk_version: z.string(), timestamp: timestamp() });

// ---------------------------------------------------------------------------------------------
// Knowledge
// ---------------------------------------------------------------------------------------------

export const RagListSchema = z.object({ rags: z.array(z.string()) });

const storeFields = {
  id: z.string(),
  name: z.string(),
  created_at: unixTime(),
  last_active_at: unixTime().nullable(),
  expires_at: unixTime().nullable(),
  status: z.string(),
  usage_bytes: z.int(),
};

export const RagInfoSchema = z.object({ ...storeFields, object: z.string() });

export const VectorStoreSchema = z.object({ ...storeFields, metadata: z.record(z.string(), z.string()) });

export const VectorStoresListSchema = z.object({ data: z.array(VectorStoreSchema), object: z.literal("list") });

export const VectorStoreDeleteResponseSchema = z.object({ deleted: z.boolean(), vector_store_id: z.string(), response: z.string() });

/** POST /v1/files: the route streams the multipart body itself; this is its one part. */
export const FileUploadSchema = z.object({ file: z.file().describe("At most 100 MiB") });

export const FileSchema = z.object({
  id: z.string(),
  filename: z.string(),
  bytes: z.int(),
  created_at: unixTime(),
  purpose: z.literal("assistants"),
  object: z.literal("file"),
});

export const VectorStoreFileSchema = z.object({
  id: z.string(),
  vector_store_id: z.string(),
  status: z.string(),
  attributes: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
  last_error: z.object({ code: z.string(), message: z.string() }).nullable(),
  object: z.literal("vector_store.file"),
});

export const VectorStoreFilesListSchema = z.object({ data: z.array(VectorStoreFileSchema), object: z.literal("list") });

export const VectorStoreFileDeleteResponseSchema = z.object({ deleted: z.boolean(), vector_store_id: z.string(), file_id: z.string(), response: z.string() });

// ---------------------------------------------------------------------------------------------
// Providers and shields
// ---------------------------------------------------------------------------------------------

export const ShieldsResponseSchema = z.object({
  shields: z.array(
    z.union([
      z.object({ identifier: z.string(), params: z.record(z.string(), z.unknown()), provider_id: z.string(), provider_resource_id: z.string(), type: z.literal("shield") }).describe("A moderation shield"),
      z.object({ name: z.string(), provider_id: z.enum(LCORE_SHIELD_KINDS), type: z.literal("shield"), config: z.record(z.string(), z.unknown()) }).describe("One of the original system's own shield kinds"),
    ]),
  ),
});

export const ProvidersListSchema = z.object({
  providers: z.record(z.string(), z.array(z.object({ provider_id: z.string(), provider_type: z.string() }))).describe("By API: inference, safety"),
});

export const ProviderResponseSchema = z.object({
  api: z.enum(["inference", "safety"]),
  config: z.unknown().describe("Its configuration, secrets redacted"),
  health: z.object({ status: z.enum(["OK", "Error"]), message: z.string() }),
  provider_id: z.string(),
  provider_type: z.string(),
});

// ---------------------------------------------------------------------------------------------
// MCP
// ---------------------------------------------------------------------------------------------

export const ToolsResponseSchema = z.object({
  tools: z.array(
    z.object({
      identifier: z.string(),
      description: z.string(),
      parameters: z.array(z.object({ name: z.string(), description: z.string(), parameter_type: z.string(), required: z.boolean(), default: z.unknown() })),
      provider_id: z.string(),
      toolgroup_id: z.string().describe("The MCP server's name"),
      server_source: z.string().describe("The MCP server's URL"),
      type: z.literal("tool"),
    }),
  ),
});

export const McpClientOptionsSchema = z.object({ servers: z.array(z.object({ name: z.string(), client_auth_headers: z.array(z.string()) })) });

export const McpServersListSchema = z.object({
  servers: z.array(z.object({ name: z.string(), url: z.string(), provider_id: z.string(), source: z.enum(["config", "api"]) })),
});

export const McpServerRegistrationResponseSchema = z.object({ name: z.string(), url: z.string(), provider_id: z.string(), message: z.string() });

export const McpServerDeleteResponseSchema = z.object({ name: z.string(), deleted: z.boolean(), response: z.string() });

// ---------------------------------------------------------------------------------------------
// Feedback
// ---------------------------------------------------------------------------------------------

export const FeedbackResponseSchema = z.object({ response: z.literal("feedback received") });

export const FeedbackStatusSchema = z.object({ functionality: z.literal("feedback"), status: z.object({ enabled: z.boolean() }) });

export const FeedbackStatusUpdateResponseSchema = z.object({
  status: z.object({ previous_status: z.boolean(), updated_status: z.boolean(), updated_by: z.string(), timestamp: timestamp() }),
});

// ---------------------------------------------------------------------------------------------
// The domain's own types and these schemas describe one shape: a change to either fails to compile.
// ---------------------------------------------------------------------------------------------

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const SHAPES_AGREE: [
  Same<z.output<typeof ModelSchema>, ModelInfo>,
  Same<z.output<typeof RagChunkSchema>, RagChunk>,
  Same<z.output<typeof ReferencedDocumentSchema>, ReferencedDocument>,
  Same<z.output<typeof AvailableQuotasSchema>, AvailableQuotas>,
] = [true, true, true, true];
void SHAPES_AGREE;
