// The turn engine (DESIGN "One turn"): every endpoint that asks the model goes through startTurn.
// It takes the conversation's turn slot in its ConversationDO, calls the backend with the whole
// history, hands the backend's events to the endpoint's adapter as they arrive, and persists the
// turn before its last event, so nothing a client was told is lost. It knows nothing of HTTP.
import type { ResponseCreateParamsStreaming, ResponseStreamEvent, Response as BackendResponse } from "openai/resources/responses/responses";
import type { AuthContext } from "../auth/types.ts";
import type { ShieldConfig } from "../config/schema.ts";
import type { BeginResult, Item, StoredTurn, TurnOutcome, TurnStatus, TurnSummary } from "../../durable-objects/conversation-do.ts";
import { conversationStub, INTERRUPT_SIGNAL } from "../../durable-objects/conversation-do.ts";
import { ApiError, errors } from "../errors.ts";
import type { Runtime } from "../runtime.ts";
import { uniqueDocuments } from "../rag/documents.ts";
import { fileSearchDocuments, inlineRetrieval, withContext, type InlineRetrievalRequest, type RagChunk, type ReferencedDocument, type Retrieval } from "../rag/retrieval.ts";
import { checkQuotas, consumeQuotas, quotaCounters, type AvailableQuotas } from "../quota/quotas.ts";
import { openStore, type ConversationRecord } from "../storage/store.ts";
import { backendError } from "./backend-errors.ts";
import { chooseModel, type ModelChoice, type ModelInfo } from "./models.ts";
import { blockedEvents, moderate, moderationText, type ShieldVerdict } from "./shields.ts";
import { summarizeOutput } from "./summaries.ts";
import { generateTopicSummary } from "./topic-summary.ts";

/** Backend request fields an endpoint may set besides model, input and instructions. */
export type BackendParams = Omit<Partial<ResponseCreateParamsStreaming>, "model" | "input" | "instructions" | "stream" | "conversation">;

export interface TurnRequest {
  auth: AuthContext;
  /** Normalized conversation id; a new one is created when `isNew`. */
  conversationId: string;
  isNew: boolean;
  /** History copied into a new conversation that forks an older response. */
  seed?: StoredTurn[];
  requestId: string;
  /** This turn's new input items. */
  input: Item[];
  /** The user's question as text, for views, summaries and shields. */
  userText: string;
  /** The model the client named, if any; otherwise the conversation's last one or the defaults. */
  model: { model?: string; provider?: string };
  instructions: string;
  params: BackendParams;
  generateTopicSummary: boolean;
  /**
   * Shields selected for this turn (shield_ids); input ones run on the user's input before the model
   * call, output ones on the answer. Omitted: every configured shield.
   */
  shields?: ShieldConfig[];
  /** Inline retrieval for this turn (the question, solr, vector_store_ids); none when omitted. */
  retrieval?: InlineRetrievalRequest;
  /** Which tool items the turn's summaries and storage count; all when omitted. */
  countsTool?: (item: Item) => boolean;
  /** Register the request id so /v1/streaming_query/interrupt can reach this turn. */
  interruptible: boolean;
  /**
   * Whether the caller reads the backend's events as they arrive. JSON answers need only the
   * result, and passing each event through the turn's stream is a cost they need not pay.
   */
  streaming: boolean;
}

export interface TurnResult {
  status: TurnStatus;
  /** The backend's final response object, when it sent one. */
  response: BackendResponse | null;
  text: string;
  inputTokens: number;
  outputTokens: number;
  summary: TurnSummary;
  /** What went wrong, for failed turns. */
  error: ApiError | null;
  /** The conversation record after this turn (null for failed turns, which are not counted). */
  record: ConversationRecord | null;
  /** Tokens left per quota limiter after this turn's consumption. */
  availableQuotas: AvailableQuotas;
  /** Inline chunks, then those of the model's file_search calls. */
  ragChunks: RagChunk[];
  /** Documents of both, deduplicated. */
  referencedDocuments: ReferencedDocument[];
}

export type TurnEvent = { type: "backend"; event: ResponseStreamEvent } | { type: "finished"; result: TurnResult };

export interface RunningTurn {
  conversationId: string;
  requestId: string;
  /** Settles once an interruptible turn's request id can be found by /v1/streaming_query/interrupt. */
  interruptible: Promise<void>;
  /** The model that answers, and whether the client named it. */
  model: ModelChoice;
  /** What inline retrieval found before the model call (nothing for a blocked turn). */
  retrieval: Retrieval;
  events: ReadableStream<TurnEvent>;
}

export interface TurnDeps {
  env: Env;
  rt: Runtime;
  /** Keeps persistence running after the client has gone. */
  waitUntil(promise: Promise<unknown>): void;
}

/**
 * Starts a turn. Resolves once the backend has accepted the request, so that failures before any
 * output (unknown conversation, backend down, quota) are plain HTTP errors; afterwards every
 * outcome arrives as events, ending with exactly one `finished`.
 */
export async function startTurn(deps: TurnDeps, request: TurnRequest): Promise<RunningTurn> {
  const { env, rt } = deps;
  const store = openStore(env, rt.config.database);
  const counters = quotaCounters(rt.config, request.auth.userId);
  const conversation = conversationStub(env.CONVERSATION, request.conversationId);
  // An interruptible turn's request id is registered while the turn begins, not after, so the
  // registration is seldom what its first event waits for.
  const registered = request.interruptible
    ? store.streamRequests.register({ requestId: request.requestId, conversationId: request.conversationId, userId: request.auth.userId })
    : Promise.resolve();
  // A failed registration only means the turn cannot be interrupted; it is not the turn's failure.
  registered.catch((error) => console.error("could not register the stream for interrupts", error));
  const unregister = () => registered.then(() => (request.interruptible ? store.streamRequests.remove(request.requestId) : undefined));
  let begun: Extract<BeginResult, { ok: true }>;
  let choice: ModelChoice;
  try {
    if (counters.length > 0) await checkQuotas(env, store, counters);
    const result = await conversation.beginTurn({
      userId: request.auth.userId,
      requestId: request.requestId,
      create: request.isNew,
      seed: request.seed,
      leaseMs: turnLeaseMs(rt),
      interruptible: request.interruptible,
    });
    if (!result.ok) {
      throw result.reason === "forbidden"
        ? conversationForbidden(request.auth.userId, request.conversationId)
        : errors.notFound("Conversation", request.conversationId);
    }
    begun = result;
  } catch (error) {
    await unregister().catch(() => undefined);
    await store.close().catch(() => undefined);
    throw error;
  }

  const abort = new AbortController();
  const shields = request.shields ?? rt.config.shields;
  const inputShields = shields.filter((shield) => shield.input);
  const outputShields = shields.filter((shield) => shield.output);
  let backendStream: AsyncIterable<ResponseStreamEvent>;
  let topic: Promise<string | null> = Promise.resolve(null);
  let retrieval = NOTHING_RETRIEVED;
  let model: ModelInfo | undefined;
  try {
    // After beginTurn: the conversation's last model is only known once earlier turns have ended.
    choice = await chooseModel(rt, request.model, begun.lastUsed);
    model = choice.model;
    const verdict = inputShields.length > 0 ? await moderate(rt, inputShields, moderationText(request.input)) : null;
    // The summary and the searches see the input only once the shields have let it through.
    if (!verdict && request.isNew && request.generateTopicSummary) {
      topic = generateTopicSummary(rt, model, request.userText);
    }
    if (!verdict && request.retrieval) retrieval = await inlineRetrieval(rt, request.retrieval);
    // A blocked turn makes no model call: the refusal is its answer, recorded like any other.
    const params = {
      ...request.params,
      model: model.identifier,
      instructions: request.instructions,
      input: [...begun.history, ...withInlineContext(request.input, retrieval.context)] as unknown as ResponseCreateParamsStreaming["input"],
      store: false,
    };
    // JSON answers ask the backend for JSON too: parsing a stream costs more than parsing its result.
    backendStream = verdict
      ? blockedStream(verdict.refusal, model.identifier, request.instructions)
      : request.streaming
        ? await rt.backend.responses.create({ ...params, stream: true }, { signal: abort.signal })
        : asFinalEvent(await rt.backend.responses.create({ ...params, stream: false }, { signal: abort.signal }));
  } catch (error) {
    await Promise.allSettled([conversation.abandonTurn(request.requestId), unregister()]);
    await store.close().catch(() => undefined);
    throw backendError(error, model?.identifier);
  }

  const channel = new TransformStream<TurnEvent, TurnEvent>();
  const writer = channel.writable.getWriter();
  if (begun.control) watchForInterrupt(begun.control, abort);

  const run = (async () => {
    let clientGone = false;
    const emit = async (event: TurnEvent) => {
      if (clientGone) return;
      try {
        await writer.write(event);
      } catch {
        clientGone = true;
        abort.abort("client disconnected");
      }
    };
    try {
      const forward = request.streaming ? (event: ResponseStreamEvent) => emit({ type: "backend", event }) : async () => undefined;
      const collected =
        outputShields.length > 0
          ? await collectShielded(rt, outputShields, (refusal) => blockedStream(refusal, model.identifier, request.instructions), backendStream, abort.signal, forward)
          : await collect(backendStream, abort.signal, forward);
      const status: TurnStatus = collected.status ?? (abort.signal.reason === INTERRUPTED ? "interrupted" : "incomplete");
      const outcome = toOutcome(request, model, status, collected);
      const searched = fileSearchDocuments(rt.config, outcome.output, fileSearchStores(request.params));
      const summaryText = await topic.catch(() => null);

      const tokens = outcome.tokens.input + outcome.tokens.output;
      const [kept, recorded, quotas] = await Promise.allSettled([
        conversation.completeTurn(request.requestId, outcome),
        status === "failed" ? Promise.resolve(null) : recordTurn(store, request, outcome, summaryText),
        counters.length > 0 && tokens > 0 ? consumeQuotas(env, store, counters, tokens) : Promise.resolve({}),
        rt.config.quota_handlers.enable_token_history && tokens > 0
          ? store.tokenUsage.add({ userId: request.auth.userId, provider: outcome.provider, model: outcome.model, inputTokens: outcome.tokens.input, outputTokens: outcome.tokens.output })
          : Promise.resolve(),
        unregister(),
      ]);
      // The history and the record are written side by side. A conversation deleted while this turn
      // ran refuses the history; the record the turn may have put back is then removed again.
      const deleted = kept.status === "fulfilled" && !kept.value;
      if (deleted && recorded.status === "fulfilled" && recorded.value) {
        await store.conversations.delete(request.conversationId).catch((error) => console.error("could not remove the record of a deleted conversation", error));
      }
      for (const settled of [kept, recorded, quotas]) if (settled.status === "rejected") console.error("could not persist turn", settled.reason);
      // An answer whose turn could not be saved is not reported as a success: the client is told it
      // failed, and asking again continues the conversation and repairs its record.
      const unsaved = kept.status === "rejected" || recorded.status === "rejected";

      await emit({
        type: "finished",
        result: {
          status: unsaved ? "failed" : status,
          response: collected.response,
          text: collected.text,
          inputTokens: outcome.tokens.input,
          outputTokens: outcome.tokens.output,
          summary: outcome.summary,
          error: unsaved ? errors.internal("the answer could not be saved") : collected.error,
          record: recorded.status === "fulfilled" && !deleted ? recorded.value : null,
          availableQuotas: quotas.status === "fulfilled" ? quotas.value : {},
          ragChunks: [...retrieval.chunks, ...searched.chunks],
          referencedDocuments: uniqueDocuments([...retrieval.referencedDocuments, ...searched.referencedDocuments]),
        },
      });
    } finally {
      await store.close().catch(() => undefined);
      // Whatever happened, the reader sees the end of the turn's events rather than waiting forever.
      await writer.close().catch(() => undefined);
    }
  })();
  deps.waitUntil(run);
  run.catch((error) => console.error("turn failed", error));

  return {
    conversationId: request.conversationId,
    requestId: request.requestId,
    interruptible: registered.catch(() => undefined),
    model: choice,
    retrieval,
    events: channel.readable,
  };
}

/**
 * How long a turn may hold its conversation: the backend's own time-out plus time for the moderation
 * and retrieval calls around it. Only a Worker that died mid-turn ever reaches it.
 */
function turnLeaseMs(rt: Runtime): number {
  return (rt.config.inference_backend.timeout + 120) * 1000;
}

const NOTHING_RETRIEVED: Retrieval = { chunks: [], referencedDocuments: [], context: null };

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

/** The stores the turn's file_search tool searches (for naming the source of its results). */
function fileSearchStores(params: BackendParams): string[] {
  return (params.tools ?? []).flatMap((tool) => (tool.type === "file_search" ? tool.vector_store_ids : []));
}

/** The abort reason of an interrupt requested through /v1/streaming_query/interrupt. */
const INTERRUPTED = "interrupted";

/** Reads the DO's control stream of this turn; an interrupt signal aborts the backend call. */
function watchForInterrupt(control: ReadableStream<Uint8Array>, abort: AbortController): void {
  const reader = control.pipeThrough(new TextDecoderStream()).getReader();
  (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      if (value.includes(INTERRUPT_SIGNAL.trim())) abort.abort(INTERRUPTED);
    }
  })().catch(() => undefined);
}

interface Collected {
  status: TurnStatus | null;
  response: BackendResponse | null;
  text: string;
  deltas: number;
  error: ApiError | null;
  /** Tokens the model used, when the backend reported them (an output-blocked answer keeps its own). */
  usage: { input: number; output: number } | null;
}

/** Forwards the backend's events and keeps what persistence needs: final response, text, status. */
async function collect(
  stream: AsyncIterable<ResponseStreamEvent>,
  signal: AbortSignal,
  forward: (event: ResponseStreamEvent) => Promise<void>,
): Promise<Collected> {
  const result: Collected = { status: null, response: null, text: "", deltas: 0, error: null, usage: null };
  try {
    for await (const event of stream) {
      switch (event.type) {
        case "response.output_text.delta":
          result.text += event.delta;
          result.deltas += 1;
          break;
        case "response.completed":
          result.status = (event.response.status as string) === "blocked" ? "blocked" : "completed";
          result.response = event.response;
          break;
        case "response.incomplete":
          result.status = "incomplete";
          result.response = event.response;
          break;
        case "response.failed":
          result.status = "failed";
          result.response = event.response;
          result.error ??= errors.internal(event.response.error?.message ?? "the inference backend failed");
          break;
        case "error":
          result.status = "failed";
          result.error = errors.internal(event.message || "the inference backend failed");
          break;
      }
      await forward(event);
      if (signal.aborted) break;
    }
  } catch (error) {
    if (!signal.aborted) {
      result.status = "failed";
      result.error = backendError(error);
    }
  }
  if (result.response) {
    result.text = responseText(result.response) || result.text;
    const usage = result.response.usage;
    if (usage) result.usage = { input: usage.input_tokens, output: usage.output_tokens };
  }
  return result;
}

/**
 * Output shields see the whole answer before any of it is released: the backend's events are held
 * until it completes, then either released as they came or replaced by the refusal. A stream can
 * never bypass them; the price is that its first token waits for the last.
 */
async function collectShielded(
  rt: Runtime,
  shields: ShieldConfig[],
  refusalStream: (refusal: string) => AsyncIterable<ResponseStreamEvent>,
  stream: AsyncIterable<ResponseStreamEvent>,
  signal: AbortSignal,
  forward: (event: ResponseStreamEvent) => Promise<void>,
): Promise<Collected> {
  const held: ResponseStreamEvent[] = [];
  const collected = await collect(stream, signal, async (event) => void held.push(event));
  if (collected.status !== "completed") {
    for (const event of held) await forward(event);
    return collected;
  }
  let verdict: ShieldVerdict | null;
  try {
    verdict = await moderate(rt, shields, collected.text);
  } catch (error) {
    return { ...collected, status: "failed", error: backendError(error), text: "" };
  }
  if (!verdict) {
    for (const event of held) await forward(event);
    return collected;
  }
  const refusal = await collect(refusalStream(verdict.refusal), signal, forward);
  return { ...refusal, usage: collected.usage };
}

/** A whole backend response as the one stream event that carries it, so one collector serves both. */
async function* asFinalEvent(response: BackendResponse): AsyncIterable<ResponseStreamEvent> {
  const type = response.status === "incomplete" ? "response.incomplete" : response.status === "failed" ? "response.failed" : "response.completed";
  yield { type, response, sequence_number: 0 } as ResponseStreamEvent;
}

async function* blockedStream(refusal: string, model: string, instructions: string): AsyncIterable<ResponseStreamEvent> {
  yield* blockedEvents(refusal, model, instructions);
}

/** The answer text of a backend response: its output messages' text parts. */
export function responseText(response: Pick<BackendResponse, "output">): string {
  let text = "";
  for (const item of response.output) {
    if (item.type !== "message") continue;
    for (const part of item.content) if (part.type === "output_text") text += part.text;
  }
  return text;
}

type Outcome = TurnOutcome & { tokens: { input: number; output: number } };

function toOutcome(request: TurnRequest, model: ModelInfo, status: TurnStatus, collected: Collected): Outcome {
  const response = collected.response;
  const output: Item[] =
    response && (status === "completed" || status === "blocked")
      ? (response.output as unknown as Item[])
      : [{ type: "message", role: "assistant", status: "incomplete", content: [{ type: "output_text", text: collected.text, annotations: [] }] }];
  return {
    status,
    provider: model.provider_id,
    model: model.provider_resource_id,
    responseId: status === "completed" ? (response?.id ?? null) : null,
    completedAt: new Date().toISOString(),
    input: request.input,
    output,
    summary: { user: request.userText, assistant: collected.text, ...summarizeOutput(output, request.countsTool) },
    tokens: {
      input: collected.usage?.input ?? (status === "blocked" ? 0 : estimateTokens(JSON.stringify(request.input) + request.instructions)),
      output: collected.usage?.output ?? collected.deltas,
    },
  };
}

/** About four characters a token: used only when the backend never reported usage (interrupts). */
function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

async function recordTurn(
  store: ReturnType<typeof openStore>,
  request: TurnRequest,
  outcome: Outcome,
  topicSummary: string | null,
): Promise<ConversationRecord> {
  const record = await store.conversations.recordTurn({
    id: request.conversationId,
    userId: request.auth.userId,
    model: outcome.model,
    provider: outcome.provider,
    at: outcome.completedAt,
    responseId: outcome.responseId,
    topicSummary,
  });
  // Transcripts (user_data_collection.transcripts_enabled) are written here, beside the record.
  return record;
}

export function conversationForbidden(userId: string, conversationId: string): ApiError {
  return errors.actionForbidden(`User ${userId} does not have permission to read conversation with ID ${conversationId}`);
}
