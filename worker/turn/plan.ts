// Planning a turn (DESIGN "One turn", step 2), in one place for every endpoint: each endpoint's
// adapter parses its wire body into a TurnIntent, and planTurn decides the rest the same way for all
// of them (permission to name a model, shields, retrieval, request id), producing the TurnPlan the
// conversation's Durable Object runs.
import type { AuthContext } from "../auth/types.ts";
import type { BackendParams, Item, StreamPresentation, TurnEndpoint, TurnPlan } from "../domain/conversation.ts";
import type { ApprovalAnswer, McpServer } from "../domain/mcp.ts";
import { MCP_DEFAULT_MAX_INFER_ITERS, MCP_DEFAULT_MAX_TOOL_CALLS } from "../mcp/defaults.ts";
import type { RequestMcpServers } from "../mcp/servers.ts";
import { errors } from "../errors.ts";
import { parseSolr } from "../rag/solr.ts";
import type { Runtime } from "../runtime.ts";
import { newRequestId } from "./conversation-id.ts";
import { isRedaction } from "../config/schema.ts";
import { redact, redactedInput, selectShields } from "./shields.ts";
import type { SystemPrompt } from "./system-prompt.ts";

/** What an endpoint's request asks of a turn, in the endpoint-neutral terms planTurn takes. */
export interface TurnIntent {
  endpoint: TurnEndpoint;
  conversationId: string;
  create: boolean;
  previousResponseId?: string | null;
  input: Item[];
  /** The user's question as text. */
  userText: string;
  /** What the client named, if anything. */
  model: { model?: string; provider?: string };
  systemPrompt: SystemPrompt;
  params: BackendParams;
  /** With merged tools, the server MCP labels whose activity alone counts. */
  countOnly?: { serverMcpLabels: string[] } | null;
  /** The MCP servers whose tools the gateway runs in this turn (none when omitted). */
  mcpServers?: McpServer[];
  /** The request's bounds of the tool loop (documented defaults otherwise). */
  maxInferIters?: number | null;
  maxToolCalls?: number | null;
  /** The request's shield_ids (omitted/null: every configured shield). */
  shieldIds?: string[] | null;
  /** Inline retrieval: the request's solr and vector_store_ids; null for none. */
  retrieval: { solr?: unknown; vectorStoreIds?: string[] | null } | null;
  generateTopicSummary: boolean;
  streaming: boolean;
  /** The stream's wire form when the conversation's Durable Object presents it (none when omitted). */
  presentation?: StreamPresentation | null;
  transcript: boolean;
  attachments?: TurnPlan["attachments"];
}

export interface PlanContext {
  env: Env;
  rt: Runtime;
  auth: AuthContext;
  /** The user holds model_override. */
  mayOverrideModel: boolean;
  /** The user holds read_other_conversations (continues other users' conversations). */
  mayUseOthers: boolean;
  /** The MCP servers of the configuration and the registry this caller can use (once per request, probed). */
  mcpServers(): Promise<RequestMcpServers>;
}

/**
 * Whether a request chooses its model against the configured default (UPSTREAM "MODEL_OVERRIDE"):
 * it names a provider, or a model as provider/model. A bare model name (what every OpenAI client
 * sends on /v1/responses) is not an override. The query endpoints take model and provider only
 * together, so a model there is always one.
 */
function overridesModel(model: TurnIntent["model"]): boolean {
  return Boolean(model.provider) || Boolean(model.model?.includes("/"));
}

export function planTurn(context: PlanContext, intent: TurnIntent): TurnPlan {
  const { env, rt, auth } = context;
  if (overridesModel(intent.model) && !context.mayOverrideModel) throw errors.modelOverrideForbidden();
  const shields = selectShields(rt, intent.shieldIds);
  // Redaction shields rewrite the user's text before anything reads it (model, other shields, history).
  const redactions = shields.filter(isRedaction);
  // Checked here, so that a bad filter is the client's 422 before anything runs.
  if (intent.retrieval) parseSolr(intent.retrieval.solr);
  return {
    configText: env.PARLEY_CONFIG ?? null,
    endpoint: intent.endpoint,
    auth: { userId: auth.userId, username: auth.username, token: auth.token, mayUseOthers: context.mayUseOthers },
    conversationId: intent.conversationId,
    create: intent.create,
    previousResponseId: intent.previousResponseId ?? null,
    requestId: newRequestId(intent.conversationId),
    input: redactedInput(redactions, intent.input),
    userText: redact(redactions, intent.userText),
    model: intent.model,
    instructions: intent.systemPrompt.text,
    params: intent.params,
    generateTopicSummary: intent.generateTopicSummary,
    shields: intent.shieldIds === null || intent.shieldIds === undefined ? null : shields.map((shield) => shield.name),
    retrieval: intent.retrieval
      ? { question: redact(redactions, intent.userText), solr: intent.retrieval.solr ?? null, vectorStoreIds: intent.retrieval.vectorStoreIds ?? null }
      : null,
    countOnly: intent.countOnly ?? null,
    mcp:
      intent.mcpServers && intent.mcpServers.length > 0
        ? {
            servers: intent.mcpServers,
            maxInferIters: intent.maxInferIters ?? MCP_DEFAULT_MAX_INFER_ITERS,
            maxToolCalls: intent.maxToolCalls ?? MCP_DEFAULT_MAX_TOOL_CALLS,
            // Only a responses client can answer an approval request in the turn's own response.
            gate: intent.endpoint === "/v1/responses" ? "end" : "continue",
          }
        : null,
    approvals: approvalAnswers(intent.input),
    streaming: intent.streaming,
    presentation: intent.streaming ? (intent.presentation ?? null) : null,
    transcript: intent.transcript,
    attachments: intent.attachments ?? [],
  };
}

/**
 * The input's answers to approval requests. An approval answered twice in one input is the client's
 * 422: two different answers cannot both hold, and even alike ones say the client lost track.
 */
function approvalAnswers(input: Item[]): ApprovalAnswer[] {
  const answers = new Map<string, ApprovalAnswer>();
  for (const item of input) {
    if (item.type !== "mcp_approval_response") continue;
    const id = String(item.approval_request_id);
    if (answers.has(id)) throw errors.invalidValue(`input: approval request ${id} is answered more than once; answer it once`);
    answers.set(id, { id, approve: item.approve === true, reason: typeof item.reason === "string" ? item.reason : null });
  }
  return [...answers.values()];
}
