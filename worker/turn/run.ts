// Running one turn (DESIGN "One turn", step 3), in phases the conversation's Durable Object calls in
// order once the turn holds its conversation and is admitted:
//   prepareTurn  choose the model, check the size, run the input shields, retrieve inline context
//   answerTurn   call the backend (or stand in with a refusal), pass its events on, collect them
//   turnOutcome  what is recorded and reported
// The phases know nothing of HTTP or storage; the stateless /v1/infer runs them too.
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import type { ShieldConfig } from "../config/schema.ts";
import { backendInput, type Item, type ModelInfo, type RagChunk, type ReferencedDocument, type StoredTurn, type TokenUsage, type TurnPlan, type TurnStatus } from "../domain/conversation.ts";
import type { TurnMcp } from "../domain/mcp.ts";
import { MCP_DEFAULT_MAX_INFER_ITERS, MCP_DEFAULT_MAX_TOOL_CALLS } from "../mcp/defaults.ts";
export { utf8Bytes } from "../domain/conversation.ts";
import { errors, type ApiError } from "../errors.ts";
import { uniqueDocuments } from "../rag/documents.ts";
import { fileSearchDocuments, inlineRetrieval, withContext, type Retrieval } from "../rag/retrieval.ts";
import { parseSolr } from "../rag/solr.ts";
import type { Runtime } from "../runtime.ts";
import type { TranscriptInput } from "../data/transcripts.ts";
import { recordLlmCall, type MetricsContext } from "../metrics/recorder.ts";
import type { CallRequestOptions } from "../backends/model-request.ts";
import { startModelCall } from "./backend-call.ts";
import { blockedStream, collect, collectShielded, type Collected } from "./collect.ts";
import { chooseModel } from "./models.ts";
import { checksOf, moderate, moderationText, type ShieldVerdict } from "./shields.ts";
import { summarizeTurn } from "./summaries.ts";
import { answerWithTools, openToolbox, type ToolLoop } from "./tool-loop.ts";
import { backendAllowedTools } from "./tools.ts";

const NOTHING_RETRIEVED: Retrieval = { chunks: [], referencedDocuments: [], context: null };

/**
 * Tokens, estimated without a tokenizer: UTF-8 bytes / 4 (close for English text; an over-estimate
 * for most other text and for the JSON around items, which errs on the side of refusing early).
 */
export function estimateTokens(bytes: number): number {
  return Math.ceil(bytes / 4);
}

/** The model that answers a turn, and what its size check and admission need. */
export interface ChosenModel {
  model: ModelInfo;
  requested: boolean;
}

/** SPEC's model order with the conversation's last model in view; 404 when none can be chosen. */
export async function chooseTurnModel(rt: Runtime, plan: TurnPlan, lastUsed: { model: string; provider: string } | null): Promise<ChosenModel> {
  const choice = await chooseModel(rt, plan.model, lastUsed);
  return { model: choice.model, requested: choice.requested };
}

/** The context window configured for a model (inference.context_windows, by id or provider/model). */
export function contextWindow(rt: Runtime, model: ModelInfo): number | undefined {
  const windows = rt.config.inference.context_windows;
  return windows[model.identifier] ?? windows[`${model.provider_id}/${model.provider_resource_id}`] ?? windows[model.provider_resource_id];
}

/** 413 before the model is called when the estimated input exceeds the model's context window. */
export function checkContextWindow(rt: Runtime, model: ModelInfo, inputTokens: number): ApiError | null {
  const window = contextWindow(rt, model);
  if (window === undefined || inputTokens <= window) return null;
  return errors.contextWindowExceeded(`${model.provider_id}/${model.provider_resource_id}`);
}

export interface PreparedTurn {
  model: ChosenModel;
  shields: ReturnType<typeof checksOf>;
  /** The input shields' verdict: the turn is blocked and makes no model call. */
  verdict: ShieldVerdict | null;
  retrieval: Retrieval;
}

/** The shields a plan names (null: every configured one). */
function planShields(rt: Runtime, plan: TurnPlan): ShieldConfig[] {
  if (plan.shields === null) return rt.config.shields;
  return plan.shields.flatMap((name) => rt.config.shields.filter((shield) => shield.name === name));
}

/**
 * Everything before the model call that may stop the turn or feed it: input shields first (the
 * search and the topic summary see the input only once they have let it through), then inline
 * retrieval. Throws ApiError (a shield that cannot run fails the turn: input is never let through
 * unchecked).
 */
export async function prepareTurn(rt: Runtime, plan: TurnPlan, model: ChosenModel): Promise<PreparedTurn> {
  const { input, output } = checksOf(planShields(rt, plan));
  // A turn that only answers approval requests has no question to check or search for.
  const text = moderationText(plan.input);
  const verdict = input.length > 0 && text.trim() !== "" ? await moderate(rt, input, text) : null;
  const retrieval =
    !verdict && plan.retrieval && plan.retrieval.question.trim() !== ""
      ? await inlineRetrieval(rt, { question: plan.retrieval.question, solr: parseSolr(plan.retrieval.solr), vectorStoreIds: plan.retrieval.vectorStoreIds })
      : NOTHING_RETRIEVED;
  return { model, shields: { input, output }, verdict, retrieval };
}

/**
 * This turn's input as the model receives it: the inline context follows the question in the last
 * user message. History keeps the question alone, so later turns are not weighed down by old context.
 */
function withInlineContext(input: Item[], context: string | null): Item[] {
  const index = context === null ? -1 : input.findLastIndex((item) => item.role === "user");
  if (index < 0) return input;
  const message = input[index]!;
  const content =
    typeof message.content === "string"
      ? withContext(message.content, context)
      : [...((message.content ?? []) as Item[]), { type: "input_text", text: context }];
  return input.map((item, i) => (i === index ? { ...message, content } : item));
}

/** A started answer: the backend's events (or the shields' refusal standing in for them). */
export type OpenAnswer = AsyncIterable<ResponseStreamEvent>;

/** What the turn's Durable Object brings to the tool loop (see tool-loop.ts). */
export type AnswerTools = Pick<ToolLoop, "resumed" | "claimApproved" | "ranApproved" | "gated">;

/** The tool loop's bounds when a turn runs approved calls but offers no MCP tools. */
const NO_MCP: TurnMcp = { servers: [], maxInferIters: MCP_DEFAULT_MAX_INFER_ITERS, maxToolCalls: MCP_DEFAULT_MAX_TOOL_CALLS, gate: "end" };

/**
 * Calls the backend with the whole history (or stands in with the shields' refusal); with MCP tools,
 * the gateway's tool loop runs around the model calls. Resolves once the backend has accepted the
 * first call; throws ApiError when it could not start. `call.sent` hears of every model call sent.
 */
export async function openAnswer(rt: Runtime, plan: TurnPlan, prepared: PreparedTurn, history: Item[], call: CallRequestOptions, tools: AnswerTools): Promise<OpenAnswer> {
  const { signal } = call;
  const model = prepared.model.model;
  if (prepared.verdict) return blockedStream(prepared.verdict.refusal, model.identifier, plan.instructions, null);
  const turnInput = withInlineContext(backendInput(plan.input), prepared.retrieval.context);
  const params = { ...plan.params, tool_choice: backendAllowedTools(plan.params.tool_choice), model: model.identifier, instructions: plan.instructions, store: false };
  if (!plan.mcp && tools.resumed.length === 0) return startModelCall(rt, model, { ...params, input: [...history, ...turnInput] as never }, plan.streaming, call);

  const mcp = plan.mcp ?? NO_MCP;
  const own = plan.params.tools ?? [];
  // The loop's model calls share the turn's searches (CallRequestOptions.searches).
  const loopCall = { ...call, searches: new Map() };
  const toolbox = await openToolbox(mcp.servers, new Set(own.flatMap((tool) => (tool.type === "function" ? [tool.name] : []))), signal);
  return answerWithTools(
    ({ resumed, extra }, { offerTools, toolChoice }) => {
      const offered = [...own, ...(offerTools ? toolbox.functions : [])] as NonNullable<typeof params.tools>;
      return startModelCall(
        rt,
        model,
        {
          ...params,
          input: [...history, ...resumed, ...turnInput, ...extra] as never,
          tools: offered.length > 0 ? offered : undefined,
          tool_choice: offered.length > 0 ? (toolChoice as typeof params.tool_choice) : undefined,
        },
        plan.streaming,
        loopCall,
      );
    },
    { ...tools, toolbox, mcp, toolChoice: params.tool_choice, signal },
  );
}

/** Passes an answer's events to `forward` as they arrive (output shields first) and collects it. */
export function readAnswer(
  rt: Runtime,
  plan: TurnPlan,
  prepared: PreparedTurn,
  answer: OpenAnswer,
  signal: AbortSignal,
  forward: (event: ResponseStreamEvent) => Promise<void>,
): Promise<Collected> {
  const blocked = (refusal: string, usage: TokenUsage | null) => blockedStream(refusal, prepared.model.model.identifier, plan.instructions, usage);
  return prepared.shields.output.length > 0 ? collectShielded(rt, prepared.shields.output, blocked, answer, signal, forward) : collect(answer, signal, forward);
}

/** What a finished turn records and reports. */
export interface TurnOutcome {
  turn: Omit<StoredTurn, "turnNumber" | "requestId" | "startedAt">;
  tokens: { input: number; output: number };
  ragChunks: RagChunk[];
  referencedDocuments: ReferencedDocument[];
}

/** Server-deployed tool activity (SPEC responses rule 5): the server's MCP servers, file and web search. */
const SERVER_MCP_ITEMS = new Set(["mcp_call", "mcp_list_tools", "mcp_approval_request"]);

function countsTool(plan: TurnPlan): ((item: Item) => boolean) | undefined {
  const only = plan.countOnly;
  if (!only) return undefined;
  const labels = new Set(only.serverMcpLabels);
  return (item) => (SERVER_MCP_ITEMS.has(String(item.type)) ? labels.has(String(item.server_label)) : item.type === "file_search_call" || item.type === "web_search_call");
}

/** The stores the turn's file_search tool searches (for naming the source of its results). */
function fileSearchStores(plan: TurnPlan): string[] {
  return (plan.params.tools ?? []).flatMap((tool) => (tool.type === "file_search" ? tool.vector_store_ids : []));
}

/**
 * The turn as recorded: the backend's output when it finished (its partial text otherwise), the
 * summary the conversation views show, and its tokens (the backend's usage; estimated when it never
 * reported any, as for an interrupted stream, except for a failed turn: no answer, nothing consumed
 * but what the backend reported, as in the original).
 */
export function turnOutcome(
  rt: Runtime,
  plan: TurnPlan,
  prepared: PreparedTurn,
  status: TurnStatus,
  collected: Collected,
  responseId: string,
  inputBytes: number,
): TurnOutcome {
  const model = prepared.model.model;
  const response = collected.response;
  const output: Item[] =
    response && (status === "completed" || status === "blocked")
      ? (response.output as unknown as Item[])
      : [{ type: "message", role: "assistant", status: "incomplete", content: [{ type: "output_text", text: collected.text, annotations: [] }] }];
  const searched = fileSearchDocuments(rt.config, output, fileSearchStores(plan));
  return {
    turn: {
      status,
      provider: model.provider_id,
      model: model.provider_resource_id,
      responseId: status === "completed" ? responseId : null,
      completedAt: new Date().toISOString(),
      input: plan.input,
      output,
      summary: { user: plan.userText, assistant: collected.text, ...summarizeTurn(plan.input, output, countsTool(plan)) },
    },
    tokens: {
      input: collected.usage?.input ?? (status === "blocked" || status === "failed" ? 0 : estimateTokens(inputBytes)),
      output: collected.usage?.output ?? (status === "failed" ? 0 : collected.deltas),
    },
    ragChunks: [...prepared.retrieval.chunks, ...searched.chunks],
    referencedDocuments: uniqueDocuments([...prepared.retrieval.referencedDocuments, ...searched.referencedDocuments]),
  };
}

/** A committed turn's transcript input (SPEC "Transcript record"). */
export function transcriptOf(plan: TurnPlan, outcome: TurnOutcome): TranscriptInput {
  return {
    requestId: plan.requestId,
    userId: plan.auth.userId,
    conversationId: plan.conversationId,
    provider: outcome.turn.provider,
    model: outcome.turn.model,
    query: plan.userText,
    response: outcome.turn.summary.assistant,
    ragChunks: outcome.ragChunks,
    truncated: false,
    attachments: plan.attachments,
    toolCalls: outcome.turn.summary.tool_calls,
    toolResults: outcome.turn.summary.tool_results,
    completedAt: outcome.turn.completedAt,
  };
}

/**
 * Records the turn's model call for /metrics once it has ended, with the tokens it used when it got
 * that far; its duration runs from when its first request to the backend was sent.
 */
export function modelCallRecorder(env: Env, ctx: MetricsContext, plan: TurnPlan, model: ModelInfo): ModelCallRecorder {
  let sentAt: number | null = null;
  return {
    sent: () => {
      sentAt ??= Date.now();
    },
    record: (ok, tokens) =>
      recordLlmCall(env, ctx, {
        provider: model.provider_id,
        model: model.provider_resource_id,
        endpoint: plan.endpoint,
        ok,
        inputTokens: tokens?.input,
        outputTokens: tokens?.output,
        // A call that never left is counted, not timed.
        durationMs: sentAt === null ? undefined : Date.now() - sentAt,
      }),
  };
}

/** A model call's metrics: its duration runs from `sent` (the request on its way) to `record`. */
export interface ModelCallRecorder {
  sent(): void;
  record(ok: boolean, tokens?: TokenUsage | null): void;
}
