// Every operation the app serves, for the OpenAPI document (document.ts): its path (written as in
// the route files, `{name}` for `:name`), the action that guards it, the schemas of what it takes
// and answers, and the error statuses it can answer. Request schemas are the routes' own; response
// schemas are wire-schemas.ts. test/worker/openapi.test.ts checks this table against app.routes, so
// a route added without an entry here (or an entry without its route) fails there.
import type * as z from "zod";
import { ACTIONS, type Action } from "../auth/actions.ts";
import { FeedbackRequestSchema } from "../data/feedback.ts";
import { UpdateSchema as ConversationUpdateSchema } from "../routes/conversations.ts";
import { StatusUpdateSchema } from "../routes/feedback.ts";
import { InferRequestSchema } from "../routes/infer.ts";
import { AddFileSchema, CreateStoreSchema, UpdateStoreSchema } from "../routes/knowledge.ts";
import { RegistrationSchema } from "../routes/mcp.ts";
import { CreateSchema as PromptCreateSchema, UpdateSchema as PromptUpdateSchema, VersionQuerySchema } from "../routes/prompts.ts";
import { InterruptSchema, QueryRequestSchema } from "../routes/query.ts";
import { modelsQuery } from "../routes/service.ts";
import { AttachmentSchema } from "../turn/attachments.ts";
import { InputItemSchema, PromptReferenceSchema, ResponsesRequestSchema, TextFormatSchema, ToolChoiceSchema, ToolSchema } from "../turn/responses-request.ts";
import * as wire from "./wire-schemas.ts";

/** Request schemas by component name, rendered as the routes read them (zod's input side). */
export const REQUEST_SCHEMAS = {
  QueryRequest: QueryRequestSchema,
  Attachment: AttachmentSchema,
  StreamingInterruptRequest: InterruptSchema,
  ConversationUpdateRequest: ConversationUpdateSchema,
  ResponsesRequest: ResponsesRequestSchema,
  InputItem: InputItemSchema,
  Tool: ToolSchema,
  ToolChoice: ToolChoiceSchema,
  TextFormat: TextFormatSchema,
  PromptReference: PromptReferenceSchema,
  InferRequest: InferRequestSchema,
  PromptCreateRequest: PromptCreateSchema,
  PromptUpdateRequest: PromptUpdateSchema,
  VectorStoreCreateRequest: CreateStoreSchema,
  VectorStoreUpdateRequest: UpdateStoreSchema,
  VectorStoreFileAddRequest: AddFileSchema,
  FileUpload: wire.FileUploadSchema,
  McpServerRegistrationRequest: RegistrationSchema,
  FeedbackRequest: FeedbackRequestSchema,
  FeedbackStatusUpdateRequest: StatusUpdateSchema,
  A2ARequest: wire.A2ARequestSchema,
} satisfies Record<string, z.ZodType>;

/** Response schemas by component name, rendered as the routes write them (zod's output side). */
export const RESPONSE_SCHEMAS = {
  ErrorResponse: wire.ErrorResponseSchema,
  InfoResponse: wire.InfoResponseSchema,
  Model: wire.ModelSchema,
  ModelsResponse: wire.ModelsResponseSchema,
  ReadinessResponse: wire.ReadinessSchema,
  LivenessResponse: wire.LivenessResponseSchema,
  ConfigurationResponse: wire.ConfigurationResponseSchema,
  AuthorizedResponse: wire.AuthorizedResponseSchema,
  ToolCallSummary: wire.ToolCallSummarySchema,
  ToolResultSummary: wire.ToolResultSummarySchema,
  RagChunk: wire.RagChunkSchema,
  ReferencedDocument: wire.ReferencedDocumentSchema,
  AvailableQuotas: wire.AvailableQuotasSchema,
  QueryResponse: wire.QueryResponseSchema,
  QueryStreamEvent: wire.QueryStreamEventSchema,
  InterruptResponse: wire.InterruptResponseSchema,
  InferResponse: wire.InferResponseSchema,
  OutputItem: wire.OutputItemSchema,
  ResponseObject: wire.ResponseObjectSchema,
  ConversationListItem: wire.ConversationListItemSchema,
  ConversationsList: wire.ConversationsListSchema,
  ConversationsCacheList: wire.ConversationsCacheListSchema,
  ChatTurn: wire.ChatTurnSchema,
  ConversationDetail: wire.ConversationDetailSchema,
  ConversationDetailV3: wire.ConversationDetailV3Schema,
  ConversationDeleteResponse: wire.ConversationDeleteResponseSchema,
  ConversationUpdateResponse: wire.ConversationUpdateResponseSchema,
  QuotasResponse: wire.QuotasResponseSchema,
  SubjectQuotasResponse: wire.SubjectQuotasResponseSchema,
  PromptResource: wire.PromptResourceSchema,
  PromptsList: wire.PromptsListSchema,
  PromptDeleteResponse: wire.PromptDeleteResponseSchema,
  AgentCard: wire.AgentCardSchema,
  A2AResponse: wire.A2AResponseSchema,
  A2AHealth: wire.A2AHealthSchema,
  RagList: wire.RagListSchema,
  RagInfo: wire.RagInfoSchema,
  VectorStore: wire.VectorStoreSchema,
  VectorStoresList: wire.VectorStoresListSchema,
  VectorStoreDeleteResponse: wire.VectorStoreDeleteResponseSchema,
  File: wire.FileSchema,
  VectorStoreFile: wire.VectorStoreFileSchema,
  VectorStoreFilesList: wire.VectorStoreFilesListSchema,
  VectorStoreFileDeleteResponse: wire.VectorStoreFileDeleteResponseSchema,
  ShieldsResponse: wire.ShieldsResponseSchema,
  ProvidersList: wire.ProvidersListSchema,
  ProviderResponse: wire.ProviderResponseSchema,
  ToolsResponse: wire.ToolsResponseSchema,
  McpClientOptions: wire.McpClientOptionsSchema,
  McpServersList: wire.McpServersListSchema,
  McpServerRegistrationResponse: wire.McpServerRegistrationResponseSchema,
  McpServerDeleteResponse: wire.McpServerDeleteResponseSchema,
  FeedbackResponse: wire.FeedbackResponseSchema,
  FeedbackStatus: wire.FeedbackStatusSchema,
  FeedbackStatusUpdateResponse: wire.FeedbackStatusUpdateResponseSchema,
} satisfies Record<string, z.ZodType>;

export type RequestName = keyof typeof REQUEST_SCHEMAS;
export type ResponseName = keyof typeof RESPONSE_SCHEMAS;

/** Error statuses an operation can answer, besides 500 (every request) and its guard's 401/403. */
export type ErrorStatus = 400 | 401 | 403 | 404 | 409 | 413 | 422 | 429 | 501 | 503;

/** What a successful answer carries. */
export type Content =
  | { kind: "json"; schema: ResponseName }
  | { kind: "html" }
  | { kind: "sse"; events: ResponseName | null; description: string }
  | { kind: "text"; description: string }
  | { kind: "document" }
  | { kind: "static" };

export interface Operation {
  method: "get" | "post" | "put" | "delete";
  /** As registered in the route file, with `{name}` for `:name`. */
  path: string;
  tag: string;
  summary: string;
  description?: string;
  /**
   * The action the guard requires; null: any authenticated caller (/authorized); "public": no
   * authentication at all.
   */
  access: Action | null | "public";
  /** The configuration switch that lets the guard skip authentication. */
  skippable?: "health_probes" | "metrics";
  query?: z.ZodObject;
  body?: { schema: RequestName; media?: "application/json" | "multipart/form-data" };
  /** Several contents: the media types the answer may come in (JSON, or a stream when asked). */
  success: { status?: 200 | 201; description: string; content: Content | Content[] };
  errors?: ErrorStatus[];
  /** Another status the same body is answered with (readiness: 503). */
  alsoAnswers?: { status: 503; description: string };
  /** Descriptions of the path parameters. */
  params?: Record<string, string>;
}

const json = (schema: ResponseName): Content => ({ kind: "json", schema });

/** Errors of every endpoint that runs a turn: model, size, validation, quota, backend. */
const TURN_ERRORS: ErrorStatus[] = [403, 404, 413, 422, 429, 503];

const CONVERSATION_ID = "The conversation's id: 48 hexadecimal characters, or the backend form with `conv_` before them (a malformed one is a 400)";
const PROMPT_ID = "`pmpt_` + 48 hexadecimal characters";
const STORE_ID = "The configured rag_id, or the backend's vector store id for stores the configuration does not name";

function queryOperations(): Operation[] {
  const operations: Operation[] = [];
  for (const prefix of ["/v1", "/v2", ""]) {
    const variant = prefix === "/v1" ? "" : prefix === "/v2" ? " (conversations guide path)" : " (data collection guide path)";
    operations.push(
      {
        method: "post",
        path: `${prefix}/query`,
        tag: "Query",
        summary: `Ask a question and get the whole answer${variant}`,
        description: "Without conversation_id a new conversation is created; with it, the conversation's history is the context.",
        access: ACTIONS.query,
        body: { schema: "QueryRequest" },
        success: { description: "The answer", content: json("QueryResponse") },
        errors: TURN_ERRORS,
      },
      {
        method: "post",
        path: `${prefix}/streaming_query`,
        tag: "Query",
        summary: `Ask a question and stream the answer${variant}`,
        access: ACTIONS.streamingQuery,
        body: { schema: "QueryRequest" },
        success: {
          description: "Server-sent events; with media_type text/plain, the answer text itself",
          content: [
            {
              kind: "sse",
              events: "QueryStreamEvent",
              description:
                'Lines `data: {"event": E, "data": {...}}` separated by blank lines, no `event:` line: start, token, tool_call, tool_result, turn_complete, end (with top-level available_quotas), error, interrupted. Each is a QueryStreamEvent.',
            },
            { kind: "text", description: "With media_type text/plain: the answer text as it is generated" },
          ],
        },
        errors: TURN_ERRORS,
      },
    );
  }
  operations.push({
    method: "post",
    path: "/v1/streaming_query/interrupt",
    tag: "Query",
    summary: "Stop a running stream by its request_id",
    access: ACTIONS.streamingQuery,
    body: { schema: "StreamingInterruptRequest" },
    success: { description: "The stream was stopped", content: json("InterruptResponse") },
    errors: [404, 422],
  });
  return operations;
}

function conversationOperations(): Operation[] {
  const operations: Operation[] = [];
  for (const version of ["v1", "v2", "v3"]) {
    operations.push(
      {
        method: "get",
        path: `/${version}/conversations`,
        tag: "Conversations",
        summary: version === "v2" ? "List the caller's conversations (cache form)" : "List the caller's conversations",
        description: "Fed from each conversation after its answers, so a new conversation shows within moments of its first answer.",
        access: ACTIONS.listConversations,
        success: { description: "The conversations", content: json(version === "v2" ? "ConversationsCacheList" : "ConversationsList") },
      },
      {
        method: "get",
        path: `/${version}/conversations/{conversation_id}`,
        tag: "Conversations",
        summary: "A conversation and its turns",
        access: ACTIONS.getConversation,
        params: { conversation_id: CONVERSATION_ID },
        success: { description: "The conversation", content: json(version === "v3" ? "ConversationDetailV3" : "ConversationDetail") },
        errors: [400, 404],
      },
    );
    if (version === "v3") continue;
    operations.push(
      {
        method: "delete",
        path: `/${version}/conversations/{conversation_id}`,
        tag: "Conversations",
        summary: "Delete a conversation",
        description: "Always 200: `deleted` says whether there was one to delete.",
        access: ACTIONS.deleteConversation,
        params: { conversation_id: CONVERSATION_ID },
        success: { description: "The outcome", content: json("ConversationDeleteResponse") },
        errors: [400],
      },
      {
        method: "put",
        path: `/${version}/conversations/{conversation_id}`,
        tag: "Conversations",
        summary: "Change a conversation's topic summary",
        access: ACTIONS.updateConversation,
        params: { conversation_id: CONVERSATION_ID },
        body: { schema: "ConversationUpdateRequest" },
        success: { description: "Updated", content: json("ConversationUpdateResponse") },
        errors: [400, 404, 422],
      },
    );
  }
  return operations;
}

function serviceOperations(): Operation[] {
  const probes = (path: string, summary: string, schema: ResponseName, alsoAnswers?: Operation["alsoAnswers"]): Operation => ({
    method: "get",
    path,
    tag: "Service",
    summary,
    access: ACTIONS.info,
    skippable: "health_probes",
    success: { description: summary, content: json(schema) },
    ...(alsoAnswers ? { alsoAnswers } : {}),
  });
  return [
    {
      method: "get",
      path: "/",
      tag: "Service",
      summary: "The playground: ask questions, follow conversations, answer approvals",
      access: ACTIONS.info,
      success: { description: "HTML page", content: { kind: "html" } },
    },
    {
      method: "get",
      path: "/v1/info",
      tag: "Service",
      summary: "Service name and version, backend version",
      access: ACTIONS.info,
      success: { description: "Versions", content: json("InfoResponse") },
      errors: [503],
    },
    {
      method: "get",
      path: "/v1/models",
      tag: "Service",
      summary: "The models turns can use",
      access: ACTIONS.models,
      query: modelsQuery,
      success: { description: "Models, optionally narrowed to one model_type", content: json("ModelsResponse") },
      errors: [422, 503],
    },
    ...["/readiness", "/v1/readiness"].map((path) =>
      probes(path, "Readiness probe", "ReadinessResponse", { status: 503, description: "Not ready: the backend cannot be reached or a provider reports an error" }),
    ),
    ...["/liveness", "/v1/liveness"].map((path) => probes(path, "Liveness probe", "LivenessResponse")),
    {
      method: "get",
      path: "/v1/config",
      tag: "Service",
      summary: "The configuration, secrets redacted",
      access: ACTIONS.config,
      success: { description: "The configuration", content: json("ConfigurationResponse") },
    },
    {
      method: "post",
      path: "/authorized",
      tag: "Service",
      summary: "Who the caller is (never a token)",
      access: null,
      success: { description: "The caller's identity", content: json("AuthorizedResponse") },
    },
    {
      method: "get",
      path: "/openapi.json",
      tag: "Service",
      summary: "This document",
      access: ACTIONS.info,
      success: { description: "OpenAPI 3.1", content: { kind: "document" } },
    },
    {
      method: "get",
      path: "/docs",
      tag: "Service",
      summary: "This document in Swagger UI",
      access: ACTIONS.info,
      success: { description: "HTML page", content: { kind: "html" } },
    },
    {
      method: "get",
      path: "/static/{path}",
      tag: "Service",
      summary: "The pages' scripts and stylesheets",
      description: "Public files (the same for every caller, no data): the playground's and Swagger UI's.",
      access: "public",
      params: { path: "A file of the pages, e.g. playground.js or swagger-ui/swagger-ui.css (it may contain /)" },
      success: { description: "The file", content: { kind: "static" } },
      errors: [404],
    },
  ];
}

function responsesOperations(): Operation[] {
  return [
    {
      method: "post",
      path: "/v1/responses",
      tag: "Responses",
      summary: "The OpenAI Responses API: ask, continue, answer approvals",
      description:
        "Works with the official openai clients. Header `X-SVC-Merge-Server-Tools: true` merges the server's tools with the request's. " +
        "An MCP approval is answered with an `mcp_approval_response` input item and the conversation (or previous_response_id).",
      access: ACTIONS.responses,
      body: { schema: "ResponsesRequest" },
      success: {
        description: "The response object, or with stream: true server-sent events",
        content: [
          json("ResponseObject"),
          {
            kind: "sse",
            events: null,
            description:
              "With stream: true, `event: <type>` and `data: <json>` lines, blank-line separated, ended by `data: [DONE]` (response.created, response.in_progress, response.output_text.delta, response.output_item.added, response.output_item.done, response.completed, response.incomplete, response.failed, error).",
          },
        ],
      },
      errors: [...TURN_ERRORS, 409],
    },
    {
      method: "post",
      path: "/v1/infer",
      tag: "Infer",
      summary: "One question with the terminal's context, answered without a conversation (rlsapi v1)",
      access: ACTIONS.infer,
      body: { schema: "InferRequest" },
      success: { description: "The answer", content: json("InferResponse") },
      errors: [413, 422, 429, 503],
    },
  ];
}

function quotaOperations(): Operation[] {
  return [
    {
      method: "get",
      path: "/v1/quotas",
      tag: "Quotas",
      summary: "The caller's quota counters and token history (extension)",
      access: ACTIONS.readQuotas,
      success: { description: "Counters", content: json("QuotasResponse") },
    },
    {
      method: "get",
      path: "/v1/quotas/{limiter}/{subject}",
      tag: "Quotas",
      summary: "Any subject's counter of one limiter (extension)",
      access: ACTIONS.readAnyQuota,
      params: { limiter: "The limiter's name", subject: "A user id (user_limiter) or any value (cluster_limiter)" },
      success: { description: "The counter", content: json("SubjectQuotasResponse") },
      errors: [404],
    },
  ];
}

function promptOperations(): Operation[] {
  const operations: Operation[] = [];
  for (const path of ["/v1/prompts", "/v1/prompts/"]) {
    operations.push(
      {
        method: "get",
        path,
        tag: "Prompts",
        summary: "List stored prompts",
        access: ACTIONS.readPrompts,
        success: { description: "The prompts", content: json("PromptsList") },
      },
      {
        method: "post",
        path,
        tag: "Prompts",
        summary: "Store a prompt",
        access: ACTIONS.managePrompts,
        body: { schema: "PromptCreateRequest" },
        success: { description: "The prompt, version 1", content: json("PromptResource") },
        errors: [413, 422],
      },
    );
  }
  operations.push(
    {
      method: "get",
      path: "/v1/prompts/{prompt_id}",
      tag: "Prompts",
      summary: "A stored prompt, its default version or the one asked",
      access: ACTIONS.readPrompts,
      params: { prompt_id: PROMPT_ID },
      query: VersionQuerySchema,
      success: { description: "The prompt", content: json("PromptResource") },
      errors: [400, 404, 422],
    },
    {
      method: "put",
      path: "/v1/prompts/{prompt_id}",
      tag: "Prompts",
      summary: "Add the next version of a prompt",
      access: ACTIONS.managePrompts,
      params: { prompt_id: PROMPT_ID },
      body: { schema: "PromptUpdateRequest" },
      success: { description: "The new version", content: json("PromptResource") },
      errors: [400, 404, 413, 422],
    },
    {
      method: "delete",
      path: "/v1/prompts/{prompt_id}",
      tag: "Prompts",
      summary: "Delete a prompt (always 200; success says whether it was there)",
      access: ACTIONS.managePrompts,
      params: { prompt_id: PROMPT_ID },
      success: { description: "The outcome", content: json("PromptDeleteResponse") },
    },
  );
  return operations;
}

function a2aOperations(): Operation[] {
  const card = (path: string, access: Operation["access"]): Operation => ({
    method: "get",
    path,
    tag: "A2A",
    summary: "The agent card",
    access,
    success: { description: "The card", content: json("AgentCard") },
  });
  return [
    card("/.well-known/agent-card.json", "public"),
    card("/.well-known/agent.json", "public"),
    card("/a2a", ACTIONS.a2a),
    {
      method: "get",
      path: "/a2a/health",
      tag: "A2A",
      summary: "A2A health",
      access: "public",
      success: { description: "Healthy", content: json("A2AHealth") },
    },
    {
      method: "post",
      path: "/a2a",
      tag: "A2A",
      summary: "A2A JSON-RPC: message/send, message/stream, tasks/*",
      description: "message/stream and tasks/resubscribe answer server-sent events and need `Accept: text/event-stream`.",
      access: ACTIONS.a2a,
      body: { schema: "A2ARequest" },
      success: {
        description: "A JSON-RPC response (errors too are JSON-RPC responses), or for the streaming methods its stream",
        content: [json("A2AResponse"), { kind: "sse", events: "A2AResponse", description: "Lines `data: <JSON-RPC response>`, each result a task, status-update or artifact-update" }],
      },
      errors: [413],
    },
  ];
}

function knowledgeOperations(): Operation[] {
  const store = "/v1/vector-stores/{vector_store_id}";
  const storeParams = { vector_store_id: STORE_ID };
  return [
    {
      method: "get",
      path: "/v1/rags",
      tag: "Knowledge",
      summary: "The knowledge sources",
      access: ACTIONS.listRags,
      success: { description: "Their ids", content: json("RagList") },
      errors: [501, 503],
    },
    {
      method: "get",
      path: "/v1/rags/{rag_id}",
      tag: "Knowledge",
      summary: "One knowledge source",
      access: ACTIONS.getRag,
      params: { rag_id: STORE_ID },
      success: { description: "The source", content: json("RagInfo") },
      errors: [404, 501, 503],
    },
    {
      method: "get",
      path: "/v1/vector-stores",
      tag: "Knowledge",
      summary: "The backend's vector stores",
      access: ACTIONS.readVectorStores,
      success: { description: "The stores", content: json("VectorStoresList") },
      errors: [501, 503],
    },
    {
      method: "post",
      path: "/v1/vector-stores",
      tag: "Knowledge",
      summary: "Create a vector store",
      access: ACTIONS.manageVectorStores,
      body: { schema: "VectorStoreCreateRequest" },
      success: { description: "The store", content: json("VectorStore") },
      errors: [422, 501, 503],
    },
    {
      method: "get",
      path: store,
      tag: "Knowledge",
      summary: "A vector store",
      access: ACTIONS.readVectorStores,
      params: storeParams,
      success: { description: "The store", content: json("VectorStore") },
      errors: [404, 501, 503],
    },
    {
      method: "put",
      path: store,
      tag: "Knowledge",
      summary: "Change a vector store",
      access: ACTIONS.manageVectorStores,
      params: storeParams,
      body: { schema: "VectorStoreUpdateRequest" },
      success: { description: "The store", content: json("VectorStore") },
      errors: [404, 422, 501, 503],
    },
    {
      method: "delete",
      path: store,
      tag: "Knowledge",
      summary: "Delete a vector store",
      access: ACTIONS.manageVectorStores,
      params: storeParams,
      success: { description: "The outcome", content: json("VectorStoreDeleteResponse") },
      errors: [404, 501, 503],
    },
    {
      method: "post",
      path: "/v1/files",
      tag: "Knowledge",
      summary: "Upload a file (streamed to the backend)",
      access: ACTIONS.manageFiles,
      body: { schema: "FileUpload", media: "multipart/form-data" },
      success: { description: "The file", content: json("File") },
      errors: [413, 422, 501, 503],
    },
    {
      method: "post",
      path: `${store}/files`,
      tag: "Knowledge",
      summary: "Add a file to a vector store",
      access: ACTIONS.manageVectorStores,
      params: storeParams,
      body: { schema: "VectorStoreFileAddRequest" },
      success: { description: "The store's file", content: json("VectorStoreFile") },
      errors: [404, 422, 501, 503],
    },
    {
      method: "get",
      path: `${store}/files`,
      tag: "Knowledge",
      summary: "A vector store's files",
      access: ACTIONS.readVectorStores,
      params: storeParams,
      success: { description: "The files", content: json("VectorStoreFilesList") },
      errors: [404, 501, 503],
    },
    {
      method: "get",
      path: `${store}/files/{file_id}`,
      tag: "Knowledge",
      summary: "One of a vector store's files",
      access: ACTIONS.readVectorStores,
      params: { ...storeParams, file_id: "The file's id" },
      success: { description: "The file", content: json("VectorStoreFile") },
      errors: [404, 501, 503],
    },
    {
      method: "delete",
      path: `${store}/files/{file_id}`,
      tag: "Knowledge",
      summary: "Remove a file from a vector store",
      access: ACTIONS.manageVectorStores,
      params: { ...storeParams, file_id: "The file's id" },
      success: { description: "The outcome", content: json("VectorStoreFileDeleteResponse") },
      errors: [404, 501, 503],
    },
  ];
}

function providerOperations(): Operation[] {
  return [
    {
      method: "get",
      path: "/v1/shields",
      tag: "Providers",
      summary: "The configured shields",
      access: ACTIONS.shields,
      success: { description: "The shields", content: json("ShieldsResponse") },
    },
    {
      method: "get",
      path: "/v1/providers",
      tag: "Providers",
      summary: "Providers grouped by API",
      access: ACTIONS.providers,
      success: { description: "The providers", content: json("ProvidersList") },
    },
    {
      method: "get",
      path: "/v1/providers/{provider_id}",
      tag: "Providers",
      summary: "One provider, its configuration redacted, and its health",
      access: ACTIONS.provider,
      params: { provider_id: "The provider's id" },
      success: { description: "The provider", content: json("ProviderResponse") },
      errors: [404],
    },
  ];
}

function mcpOperations(): Operation[] {
  return [
    {
      method: "get",
      path: "/v1/tools",
      tag: "MCP",
      summary: "The tools of every reachable MCP server",
      access: ACTIONS.tools,
      success: { description: "The tools", content: json("ToolsResponse") },
    },
    {
      method: "get",
      path: "/v1/mcp-auth/client-options",
      tag: "MCP",
      summary: "Which MCP servers take the client's credentials, and in which headers",
      access: ACTIONS.tools,
      success: { description: "Servers and header names", content: json("McpClientOptions") },
    },
    {
      method: "get",
      path: "/v1/mcp-servers",
      tag: "MCP",
      summary: "Configured and registered MCP servers",
      access: ACTIONS.listMcpServers,
      success: { description: "The servers", content: json("McpServersList") },
    },
    {
      method: "post",
      path: "/v1/mcp-servers",
      tag: "MCP",
      summary: "Register an MCP server",
      access: ACTIONS.registerMcpServer,
      body: { schema: "McpServerRegistrationRequest" },
      success: { status: 201, description: "Registered", content: json("McpServerRegistrationResponse") },
      errors: [409, 413, 422],
    },
    {
      method: "delete",
      path: "/v1/mcp-servers/{name}",
      tag: "MCP",
      summary: "Unregister an MCP server registered through the API",
      access: ACTIONS.deleteMcpServer,
      params: { name: "The server's name" },
      success: { description: "The outcome", content: json("McpServerDeleteResponse") },
    },
  ];
}

function feedbackOperations(): Operation[] {
  return [
    ...["/v1/feedback", "/feedback"].map(
      (path): Operation => ({
        method: "post",
        path,
        tag: "Feedback",
        summary: "Feedback on an answer",
        access: ACTIONS.feedback,
        body: { schema: "FeedbackRequest" },
        success: { description: "Stored", content: json("FeedbackResponse") },
        errors: [404, 413, 422],
      }),
    ),
    {
      method: "get",
      path: "/v1/feedback/status",
      tag: "Feedback",
      summary: "Whether feedback is accepted",
      access: "public",
      success: { description: "The switch", content: json("FeedbackStatus") },
    },
    {
      method: "put",
      path: "/v1/feedback/status",
      tag: "Feedback",
      summary: "Switch feedback on or off for every instance",
      access: ACTIONS.admin,
      body: { schema: "FeedbackStatusUpdateRequest" },
      success: { description: "The change", content: json("FeedbackStatusUpdateResponse") },
      errors: [409, 422],
    },
  ];
}

function metricsOperations(): Operation[] {
  return ["/metrics", "/v1/metrics"].map((path) => ({
    method: "get",
    path,
    tag: "Metrics",
    summary: "Prometheus metrics of the whole deployment",
    access: ACTIONS.metrics,
    skippable: "metrics",
    success: { description: "Prometheus text exposition format", content: { kind: "text", description: "Prometheus text format 0.0.4" } },
    errors: [503],
  }));
}

/** Every operation, in the order the document lists them. */
export function operations(): Operation[] {
  return [
    ...serviceOperations(),
    ...queryOperations(),
    ...responsesOperations(),
    ...conversationOperations(),
    ...quotaOperations(),
    ...promptOperations(),
    ...knowledgeOperations(),
    ...mcpOperations(),
    ...providerOperations(),
    ...feedbackOperations(),
    ...a2aOperations(),
    ...metricsOperations(),
  ];
}
