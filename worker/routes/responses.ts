// POST /v1/responses: the OpenAI Responses wire format on the turn engine, so existing OpenAI
// clients work by changing only their base URL and key. SPEC "Responses endpoint rules".
import { Hono, type Context } from "hono";
import type { Response as BackendResponse, ResponseStreamEvent } from "openai/resources/responses/responses";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { USAGE_ESTIMATED_KEY, usageWasEstimated } from "../backends/chat-events.ts";
import type { BackendParams, Item, ModelInfo, RagChunk, TurnEvent, TurnHead, TurnResult, WireError } from "../domain/conversation.ts";
import { responsesEvent, type TelemetryOutcome } from "../data/splunk.ts";
import { errors, type ApiError } from "../errors.ts";
import { log, scrub } from "../log.ts";
import { guard } from "../middleware.ts";
import type { AvailableQuotas } from "../quota/quotas.ts";
import type { Store } from "../storage/store.ts";
import { responseText } from "../turn/backend-call.ts";
import { randomHex } from "../turn/conversation-id.ts";
import { responsesConversation } from "../turn/conversations.ts";
import { planTurn } from "../turn/plan.ts";
import { renderPrompt, type RenderedPrompt } from "../turn/prompt-template.ts";
import { ResponsesRequestSchema, type ResponsesRequest } from "../turn/responses-request.ts";
import { resolveSystemPrompt, type SystemPrompt } from "../turn/system-prompt.ts";
import { backendTools, checkMcpToolChoice, presentTools, resolveTools, type TurnTools } from "../turn/tools.ts";
import type { TextSink, TurnPresenter } from "../turn/presenting.ts";
import { finished, fromWire, presented, startTurn } from "../turn/turn-client.ts";
import { readJson } from "../validation.ts";
import { responseError, responseObject, shownTool, streamedOutput, type ResponseObject, type ShownFields } from "./response-object.ts";
import { planContext, sendTelemetry, sse, turnBodyLimit, turnClient } from "./streams.ts";

export const responses = new Hono<AppEnv>();

/** What the response shows as `instructions` when the server chose the system prompt. */
const SERVER_PROMPT_PLACEHOLDER = "<server prompt applied>";
const MERGE_TOOLS_HEADER = "X-SVC-Merge-Server-Tools";
/** Server MCP items kept out of responses, streamed or not; an approval request never is: the client must answer it. */
const HIDDEN_SERVER_MCP_ITEMS = new Set(["mcp_call", "mcp_list_tools"]);
const TERMINAL_EVENTS = new Set(["response.completed", "response.incomplete", "response.failed"]);

responses.post("/v1/responses", guard(ACTIONS.responses), turnBodyLimit(), async (c) => {
  const rt = c.get("rt");
  const store = c.get("store");
  const body = await readJson(c, ResponsesRequestSchema);
  if (body.reasoning || body.max_output_tokens) {
    log.warn("responses request: reasoning and max_output_tokens are accepted but cleared before the backend call");
  }
  const target = await responsesConversation(store, body);
  const stored = body.prompt ? await storedPrompt(store, body.prompt) : null;
  const prompt: SystemPrompt =
    body.instructions == null && stored ? { text: stored.text, fromClient: true } : resolveSystemPrompt(rt, body.instructions, "instructions");
  const input = inputItems(body.input, stored?.parts ?? []);
  // Approval requests belong to a conversation: a request that names none cannot answer one.
  const answer = input.find((item) => item.type === "mcp_approval_response");
  if (answer && target.create) throw errors.approvalNotFound(String(answer.approval_request_id));
  const merge = c.req.header(MERGE_TOOLS_HEADER)?.toLowerCase() === "true";
  const context = planContext(c);
  const tools = await resolveTools(context, body.tools, merge);
  checkMcpToolChoice(body.tool_choice, tools);
  const userText = lastUserText(input);

  const started = Date.now();
  const report = (outcome: TelemetryOutcome, result?: TurnResult, model?: ModelInfo) =>
    sendTelemetry(c, (config) =>
      responsesEvent(config, {
        outcome,
        inputText: userText,
        conversationId: target.conversationId,
        inferenceTime: (Date.now() - started) / 1000,
        model: model ? `${model.provider_id}/${model.provider_resource_id}` : (body.model ?? ""),
        totalTokens: result ? result.inputTokens + result.outputTokens : 0,
        identity: { orgId: c.get("auth").rhIdentity?.orgId, systemId: c.get("auth").rhIdentity?.systemId },
        userAgent: c.req.header("User-Agent"),
      }),
    );
  /** Telemetry of a finished turn: completed, blocked by a shield, or failed. */
  const reportResult = (result: TurnResult, model: ModelInfo) =>
    report(
      result.status === "failed" ? { kind: "error", error: result.error ? fromWire(result.error) : errors.internal() } : result.status === "blocked" ? { kind: "shield_blocked", refusal: result.text } : { kind: "completed", text: result.text },
      result,
      model,
    );

  const turn = await startTurn(
    c.env,
    planTurn(context, {
      endpoint: "/v1/responses",
      ...target,
      input,
      userText,
      model: body.model ? { model: body.model } : {},
      systemPrompt: prompt,
      params: {
        ...backendTools(rt.config, tools.tools),
        tool_choice: body.tool_choice as BackendParams["tool_choice"],
        include: body.include ?? undefined,
        metadata: body.metadata ?? undefined,
        parallel_tool_calls: body.parallel_tool_calls ?? undefined,
        max_tool_calls: body.max_tool_calls ?? undefined,
        temperature: body.temperature ?? undefined,
        top_p: body.top_p ?? undefined,
        text: (body.text ?? undefined) as BackendParams["text"],
        truncation: body.truncation ?? undefined,
        safety_identifier: body.safety_identifier ?? body.user ?? undefined,
      },
      mcpServers: tools.mcpServers,
      maxInferIters: body.max_infer_iters,
      maxToolCalls: body.max_tool_calls,
      // SPEC rule 5: with merged tools only server-deployed activity counts; client tools pass through.
      countOnly: merge ? { serverMcpLabels: [...tools.serverMcpLabels] } : null,
      shieldIds: body.shield_ids,
      // Stores listed under file_search tools feed inline context too, whatever tool_choice says.
      retrieval: { solr: body.solr, vectorStoreIds: requestedStores(body.tools) },
      generateTopicSummary: body.generate_topic_summary,
      streaming: body.stream,
      transcript: body.store,
    }),
    turnClient(c),
  ).catch((error: unknown) => {
    report({ kind: "error", error });
    throw error;
  });

  const inlineItem = inlineSearchItem(userText, turn.head.inlineChunks);
  const present = presenter(c, body, { head: turn.head, prompt, tools, inlineItem });
  if (!body.stream) {
    const result = await finished(turn);
    reportResult(result, turn.head.model);
    if (result.status === "failed" || !result.response) throw result.error ? fromWire(result.error) : errors.internal();
    return c.json(present(result.response, { quotas: result.availableQuotas }));
  }
  return sse(presented(turn, responsesEvents(present, tools.serverMcpLabels, inlineItem, (result) => reportResult(result, turn.head.model))));
});

async function storedPrompt(store: Store, reference: NonNullable<ResponsesRequest["prompt"]>): Promise<RenderedPrompt> {
  const version = reference.version == null ? undefined : Number(reference.version);
  if (version !== undefined && !Number.isInteger(version)) throw errors.invalidValue(`prompt.version: expected an integer, got ${reference.version}`);
  const record = await store.prompts.get(reference.id, version);
  if (!record) throw errors.promptNotFound(reference.id, version);
  return renderPrompt(record.prompt, record.variables, reference.variables);
}

/** The request's input as items; parts of a stored prompt ride along in the last user message. */
function inputItems(input: ResponsesRequest["input"], extraParts: Item[]): Item[] {
  const items: Item[] =
    typeof input === "string"
      ? [{ type: "message", role: "user", content: input }]
      : input.map((item) => ({ ...item, type: item.type ?? "message" }) as Item);
  if (extraParts.length === 0) return items;
  const index = items.findLastIndex((item) => item.type === "message" && item.role === "user");
  if (index < 0) return [...items, { type: "message", role: "user", content: extraParts }];
  const message = items[index]!;
  const content = typeof message.content === "string" ? [{ type: "input_text", text: message.content }] : (message.content as Item[]);
  items[index] = { ...message, content: [...content, ...extraParts] };
  return items;
}

/** The stores the client's file_search tools name (client ids); null when it names none. */
function requestedStores(tools: ResponsesRequest["tools"]): string[] | null {
  const stores = (tools ?? []).flatMap((tool) => (tool.type === "file_search" ? tool.vector_store_ids : []));
  return stores.length > 0 ? stores : null;
}

function lastUserText(items: Item[]): string {
  const message = items.findLast((item) => item.type === "message" && item.role === "user");
  if (!message) return "";
  if (typeof message.content === "string") return message.content;
  return (message.content as Item[])
    .filter((part) => part.type === "input_text")
    .map((part) => String(part.text))
    .join("\n");
}

/**
 * Shows a response. `final` is given for the finished response, once the turn is persisted: it
 * carries the quotas left and the inline retrieval's file_search_call item ahead of the output.
 */
type Presenter = (response: Partial<BackendResponse>, final?: { quotas: AvailableQuotas }) => ResponseObject & { available_quotas?: AvailableQuotas };

/** The backend's response object as this endpoint shows it (SPEC "Responses response"). */
function presenter(
  c: Context<AppEnv>,
  body: ResponsesRequest,
  turn: { head: TurnHead; prompt: SystemPrompt; tools: TurnTools; inlineItem: Item | null },
): Presenter {
  const config = c.get("rt").config;
  const shown: ShownFields = {
    model: (turn.head.modelRequested ? body.model : undefined) ?? turn.head.model.provider_resource_id,
    instructions: turn.prompt.fromClient ? turn.prompt.text : SERVER_PROMPT_PLACEHOLDER,
    tools: presentTools(config, turn.tools).map(shownTool),
    tool_choice: body.tool_choice as ShownFields["tool_choice"],
    previous_response_id: body.previous_response_id ?? null,
    prompt: (body.prompt ?? null) as ShownFields["prompt"],
    store: body.store,
    metadata: body.metadata ?? {},
    safety_identifier: body.safety_identifier ?? null,
    // SPEC "Conversation identifiers" rule 1: returned normalized (the request may give either form).
    conversation: turn.head.conversationId,
  };
  return (response, final) => {
    // The same items in a JSON answer as in a stream's events (UPSTREAM "MCP": always stripped).
    const output = (response.output ?? []).filter((item) => !isHiddenItem(item as unknown as Item, turn.tools.serverMcpLabels));
    const shownOutput = final && turn.inlineItem ? [turn.inlineItem as unknown as (typeof output)[number], ...output] : output;
    // Parley's own response id: it names the conversation, so previous_response_id finds it at once.
    // A usage the backend did not report and the chat translation estimated says so (README "Providers").
    const fields = usageWasEstimated(response) ? { ...shown, metadata: { ...shown.metadata, [USAGE_ESTIMATED_KEY]: "true" } } : shown;
    const object = responseObject({ ...response, id: turn.head.responseId, output: shownOutput }, fields, responseText({ output }));
    return final ? { ...object, available_quotas: final.quotas } : object;
  };
}

/**
 * Inline retrieval's chunks as a file_search_call output item: the responses format has no
 * rag_chunks, so SPEC puts them inside file_search_call items, as the model's own searches are.
 */
function inlineSearchItem(question: string, chunks: RagChunk[]): Item | null {
  if (chunks.length === 0) return null;
  return {
    type: "file_search_call",
    id: `fs_inline_${randomHex(16)}`,
    status: "completed",
    queries: [question],
    results: chunks.map((chunk) => ({
      file_id: chunk.attributes.document_id,
      filename: String(chunk.attributes.title ?? chunk.attributes.document_id),
      score: chunk.score,
      text: chunk.content,
      attributes: chunk.attributes,
      vector_store_id: chunk.source,
    })),
  };
}

/**
 * SPEC "Responses stream": the backend's events as they arrive, server MCP activity hidden, `[DONE]`
 * last. The inline retrieval item comes first among the output items. The terminal event
 * (completed, incomplete, failed) waits until the turn is persisted, so that it carries the quotas
 * left after this answer and a client that saw it finds the turn stored. Events are renumbered:
 * hidden and added ones must not leave holes in sequence numbers or output indexes.
 */
function responsesEvents(
  present: Presenter,
  serverMcpLabels: Set<string>,
  inlineItem: Item | null,
  onFinished: (result: TurnResult) => void,
): TurnPresenter {
  const hiddenItems = new Set<string>();
  const hiddenIndexes: number[] = [];
  const shift = inlineItem ? 1 : 0;
  let inlinePending = inlineItem !== null;
  let sequence = 0;
  let terminal: (ResponseStreamEvent & Record<string, unknown>) | null = null;
  /** The response as last announced (created, in progress), the base of a failure the gateway reports. */
  let latest: Partial<BackendResponse> = {};
  const frame = (data: Record<string, unknown>) =>
    `event: ${String(data.type)}\ndata: ${JSON.stringify({ ...data, sequence_number: sequence++ })}\n\n`;
  const withResponse = (data: ResponseStreamEvent & Record<string, unknown>, final?: { quotas: AvailableQuotas }) => {
    const response = present(data.response as BackendResponse, final);
    return { ...data, response, conversation: response.conversation, ...(final ? { available_quotas: final.quotas } : {}) };
  };
  let finished = false;
  /**
   * A failure after the stream began (the backend stalled, dropped, failed; the turn could not be
   * saved): an `error` event and then `response.failed`, as OpenAI's own streams end, so SDK clients
   * see a failed response rather than a stream that stops.
   */
  const endWithFailure = (out: TextSink, error: WireError | null, quotas: AvailableQuotas) => {
    const failure = error ?? errors.internal("the response ended early");
    const reported = responseError(failure);
    out.enqueue(frame({ type: "error", code: reported.code, message: reported.message, param: null }));
    closeUnfinished(out);
    const failed = { ...latest, output: shown.output() as unknown as BackendResponse["output"], status: "failed" as const, error: reported, completed_at: null };
    out.enqueue(frame(withResponse({ type: "response.failed", response: failed } as unknown as ResponseStreamEvent & Record<string, unknown>, { quotas })));
  };
  /** What the stream has shown of the output, so that a failure still reports it (see streamedOutput). */
  const shown = streamedOutput();
  const closeUnfinished = (out: TextSink) => {
    for (const { index, item } of shown.closeUnfinished()) out.enqueue(frame({ type: "response.output_item.done", output_index: index, item }));
  };
  const flushInline = (out: TextSink) => {
    if (!inlinePending) return;
    inlinePending = false;
    out.enqueue(frame({ type: "response.output_item.added", output_index: 0, item: { ...inlineItem, status: "in_progress" } }));
    out.enqueue(frame({ type: "response.output_item.done", output_index: 0, item: inlineItem }));
  };

  return {
    transform(event, out) {
      if (event.type === "finished") {
        onFinished(event.result);
        const { status, error, availableQuotas } = event.result;
        // A completed response is only announced when the turn was saved; a backend failure is its own.
        if (terminal && (status !== "failed" || terminal.type === "response.failed")) {
          flushInline(out);
          if (terminal.type === "response.failed") closeUnfinished(out);
          out.enqueue(frame(withResponse(terminal, { quotas: availableQuotas })));
        } else {
          endWithFailure(out, error, availableQuotas);
        }
        finished = true;
        out.enqueue("data: [DONE]\n\n");
        return;
      }
      if (event.type !== "backend") return;
      const data = { ...event.event } as ResponseStreamEvent & Record<string, unknown>;
      if (hidesServerMcp(data, serverMcpLabels, hiddenItems, hiddenIndexes)) return;
      if (typeof data.output_index === "number") {
        const index = data.output_index;
        data.output_index = index - hiddenIndexes.filter((hidden) => hidden < index).length + shift;
      }
      if (TERMINAL_EVENTS.has(data.type)) {
        // Shown once the turn is saved; its output lists what the stream showed (the presenter strips the rest).
        terminal = data;
        return;
      }
      if (data.type === "error") {
        // Backends differ in what their error events carry; clients parse OpenAI's ResponseErrorEvent.
        const { code, message, param } = data as { code?: unknown; message?: unknown; param?: unknown };
        out.enqueue(frame({ type: "error", code: typeof code === "string" ? code : null, message: scrub(String(message ?? "the inference backend failed")), param: typeof param === "string" ? param : null }));
        return;
      }
      if (data.type === "response.created") {
        latest = data.response as BackendResponse;
        out.enqueue(frame(withResponse(data)));
        return;
      }
      if (data.type === "response.in_progress") {
        latest = data.response as BackendResponse;
        // SPEC "Events": an empty available_quotas on the in-progress response (the original sets it on
        // the response object), and on the event as on the terminal ones. Not the final presentation:
        // the inline retrieval item is announced by its own events.
        const event = withResponse(data);
        out.enqueue(frame({ ...event, response: { ...event.response, available_quotas: {} }, available_quotas: {} }));
        return;
      }
      flushInline(out);
      shown.see(data);
      out.enqueue(frame(data));
    },
    flush(out) {
      if (finished) return;
      endWithFailure(out, null, {});
      out.enqueue("data: [DONE]\n\n");
    },
  };
}

/** A server MCP item a response does not show, streamed or not (SPEC rule 5, UPSTREAM "MCP"). */
function isHiddenItem(item: Item | undefined, serverMcpLabels: Set<string>): item is Item {
  return !!item && HIDDEN_SERVER_MCP_ITEMS.has(String(item.type)) && serverMcpLabels.has(String(item.server_label));
}

/** True for events of server-deployed MCP items, which SPEC keeps out of client streams. */
function hidesServerMcp(
  event: Record<string, unknown>,
  serverMcpLabels: Set<string>,
  hiddenItems: Set<string>,
  hiddenIndexes: number[],
): boolean {
  const item = event.item as Item | undefined;
  if (isHiddenItem(item, serverMcpLabels)) {
    hiddenItems.add(String(item.id));
    if (event.type === "response.output_item.added" && typeof event.output_index === "number") hiddenIndexes.push(event.output_index);
    return true;
  }
  return typeof event.item_id === "string" && hiddenItems.has(event.item_id);
}
