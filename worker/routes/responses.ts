// POST /v1/responses: the OpenAI Responses wire format on the turn engine, so existing OpenAI
// clients work by changing only their base URL and key. SPEC "Responses endpoint rules".
import { Hono, type Context } from "hono";
import type { Response as BackendResponse, ResponseStreamEvent } from "openai/resources/responses/responses";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { errors, type ApiError } from "../errors.ts";
import { guard, userMay } from "../middleware.ts";
import type { Store } from "../storage/store.ts";
import { newConversationId, normalizeAnyForm, randomHex, toBackendId } from "../turn/conversation-id.ts";
import { ownedConversation, type ConversationTarget } from "../turn/conversations.ts";
import type { Retrieval } from "../rag/retrieval.ts";
import { conversationForbidden, responseText, startTurn, type BackendParams, type TurnEvent } from "../turn/engine.ts";
import type { ModelChoice } from "../turn/models.ts";
import { renderPrompt, type RenderedPrompt } from "../turn/prompt-template.ts";
import { ResponsesRequestSchema, type ResponsesRequest } from "../turn/responses-request.ts";
import { parseSolr } from "../rag/solr.ts";
import { selectShields } from "../turn/shields.ts";
import { resolveSystemPrompt, type SystemPrompt } from "../turn/system-prompt.ts";
import { presentTools, resolveTools, type TurnTools } from "../turn/tools.ts";
import { readJson } from "../validation.ts";
import type { AvailableQuotas } from "../quota/quotas.ts";
import { conversationStub, type Item, type StoredTurn } from "../../durable-objects/conversation-do.ts";
import { finished, sse } from "./streams.ts";

export const responses = new Hono<AppEnv>();

/** What the response shows as `instructions` when the server chose the system prompt. */
const SERVER_PROMPT_PLACEHOLDER = "<server prompt applied>";
const MERGE_TOOLS_HEADER = "X-SVC-Merge-Server-Tools";
const SERVER_MCP_ITEMS = new Set(["mcp_call", "mcp_list_tools", "mcp_approval_request"]);
const TERMINAL_EVENTS = new Set(["response.completed", "response.incomplete", "response.failed"]);

responses.post("/v1/responses", guard(ACTIONS.responses), async (c) => {
  const rt = c.get("rt");
  const store = c.get("store");
  const body = await readJson(c, ResponsesRequestSchema);
  if (body.reasoning || body.max_output_tokens) {
    console.warn("responses request: reasoning and max_output_tokens are accepted but cleared before the backend call");
  }
  if (body.model && !userMay(c, ACTIONS.modelOverride)) throw errors.modelOverrideForbidden();

  const shields = selectShields(rt, body.shield_ids);
  const solr = parseSolr(body.solr);
  const target = await responsesConversation(c, store, body);
  const stored = body.prompt ? await storedPrompt(store, body.prompt) : null;
  const prompt: SystemPrompt =
    body.instructions == null && stored ? { text: stored.text, fromClient: true } : resolveSystemPrompt(rt, body.instructions, "instructions");
  const merge = c.req.header(MERGE_TOOLS_HEADER)?.toLowerCase() === "true";
  const tools = resolveTools(rt.config, body.tools, merge);
  const input = inputItems(body.input, stored?.parts ?? []);

  const turn = await startTurn(
    { env: c.env, rt, waitUntil: (p) => c.executionCtx.waitUntil(p) },
    {
      auth: c.get("auth"),
      conversationId: target.id,
      isNew: target.isNew,
      seed: target.seed,
      requestId: crypto.randomUUID(),
      input,
      userText: lastUserText(input),
      model: body.model ? { model: body.model } : {},
      instructions: prompt.text,
      params: {
        tools: tools.tools as NonNullable<BackendParams["tools"]>,
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
      generateTopicSummary: body.generate_topic_summary,
      shields,
      // Stores listed under file_search tools feed inline context too, whatever tool_choice says.
      retrieval: { question: lastUserText(input), solr, vectorStoreIds: requestedStores(body.tools) },
      // SPEC rule 5: with merged tools only server-deployed activity counts; client tools pass through.
      countsTool: merge ? (item) => isServerDeployed(item, tools.serverMcpLabels) : undefined,
      interruptible: false,
      streaming: body.stream,
    },
  );

  const inlineItem = inlineSearchItem(lastUserText(input), turn.retrieval);
  const present = presenter(c, body, { conversationId: target.id, choice: turn.model, prompt, tools, inlineItem });
  if (!body.stream) {
    const result = await finished(turn.events);
    if (result.status === "failed" || !result.response) throw result.error ?? errors.internal();
    return c.json(present(result.response, { quotas: result.availableQuotas }));
  }
  return sse(turn.events.pipeThrough(responsesEventStream(present, tools.serverMcpLabels, inlineItem)));
});

/** SPEC "Conversation continuity (responses endpoint)". */
async function responsesConversation(
  c: Context<AppEnv>,
  store: Store,
  body: ResponsesRequest,
): Promise<ConversationTarget & { seed?: StoredTurn[] }> {
  const auth = c.get("auth");
  if (body.conversation) {
    // Either form; whether it exists and is this user's, its Durable Object answers.
    const id = normalizeAnyForm(body.conversation);
    if (!id) throw errors.notFound("Conversation", body.conversation);
    return { id, isNew: false };
  }
  if (body.previous_response_id) {
    const previous = await store.responses.get(body.previous_response_id);
    if (!previous) throw errors.notFound("Response", body.previous_response_id);
    if (previous.userId !== auth.userId) throw conversationForbidden(auth.userId, previous.conversationId);
    const record = await ownedConversation(store, auth, previous.conversationId);
    if (record.lastResponseId === previous.responseId) return { id: record.id, isNew: false };
    // An older response: the new turn starts a new conversation holding the history up to it.
    const history = (await conversationStub(c.env.CONVERSATION, record.id).history(auth.userId)) ?? [];
    const upTo = history.findIndex((turn) => turn.responseId === previous.responseId);
    return { id: newConversationId(), isNew: true, seed: history.slice(0, upTo + 1) };
  }
  return { id: newConversationId(), isNew: true };
}

async function storedPrompt(store: Store, reference: NonNullable<ResponsesRequest["prompt"]>): Promise<RenderedPrompt> {
  const version = reference.version == null ? undefined : Number(reference.version);
  if (version !== undefined && !Number.isInteger(version)) throw errors.invalidValue(`prompt.version: expected an integer, got ${reference.version}`);
  const record = await store.prompts.get(reference.id, version);
  if (!record) throw errors.notFound("Prompt", reference.id);
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
type Presenter = (response: BackendResponse, final?: { quotas: AvailableQuotas }) => Record<string, unknown>;

/** The backend's response object as this endpoint shows it (SPEC "Responses response"). */
function presenter(
  c: Context<AppEnv>,
  body: ResponsesRequest,
  turn: { conversationId: string; choice: ModelChoice; prompt: SystemPrompt; tools: TurnTools; inlineItem: Item | null },
): Presenter {
  const config = c.get("rt").config;
  const shown = {
    model: turn.choice.requested ? body.model : turn.choice.model.provider_resource_id,
    instructions: turn.prompt.fromClient ? turn.prompt.text : SERVER_PROMPT_PLACEHOLDER,
    tools: presentTools(config, turn.tools),
    tool_choice: body.tool_choice,
    previous_response_id: body.previous_response_id ?? null,
    prompt: body.prompt ?? null,
    store: body.store,
    max_output_tokens: null,
    reasoning: null,
    metadata: body.metadata ?? {},
    safety_identifier: body.safety_identifier ?? null,
    conversation: toBackendId(turn.conversationId),
  };
  return (response, final) => ({
    ...response,
    ...shown,
    ...(final
      ? { output: turn.inlineItem ? [turn.inlineItem, ...response.output] : response.output, available_quotas: final.quotas }
      : {}),
    output_text: responseText(response),
  });
}

/**
 * Inline retrieval's chunks as a file_search_call output item: the responses format has no
 * rag_chunks, so SPEC puts them inside file_search_call items, as the model's own searches are.
 */
function inlineSearchItem(question: string, retrieval: Retrieval): Item | null {
  if (retrieval.chunks.length === 0) return null;
  return {
    type: "file_search_call",
    id: `fs_inline_${randomHex(16)}`,
    status: "completed",
    queries: [question],
    results: retrieval.chunks.map((chunk) => ({
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
function responsesEventStream(present: Presenter, serverMcpLabels: Set<string>, inlineItem: Item | null): TransformStream<TurnEvent, string> {
  const hiddenItems = new Set<string>();
  const hiddenIndexes: number[] = [];
  const shift = inlineItem ? 1 : 0;
  let inlinePending = inlineItem !== null;
  let sequence = 0;
  let terminal: (ResponseStreamEvent & Record<string, unknown>) | null = null;
  const frame = (data: Record<string, unknown>) =>
    `event: ${String(data.type)}\ndata: ${JSON.stringify({ ...data, sequence_number: sequence++ })}\n\n`;
  const withResponse = (data: ResponseStreamEvent & Record<string, unknown>, final?: { quotas: AvailableQuotas }) => {
    const response = present(data.response as BackendResponse, final);
    return { ...data, response, conversation: response.conversation, ...(final ? { available_quotas: final.quotas } : {}) };
  };
  let finished = false;
  const endWithError = (controller: TransformStreamDefaultController<string>, error: ApiError | null) => {
    const failure = error ?? errors.internal("the response ended early");
    controller.enqueue(frame({ type: "error", code: String(failure.status), message: `${failure.response}: ${failure.cause}`, param: null }));
  };
  const flushInline = (controller: TransformStreamDefaultController<string>) => {
    if (!inlinePending) return;
    inlinePending = false;
    controller.enqueue(frame({ type: "response.output_item.added", output_index: 0, item: { ...inlineItem, status: "in_progress" } }));
    controller.enqueue(frame({ type: "response.output_item.done", output_index: 0, item: inlineItem }));
  };

  return new TransformStream<TurnEvent, string>({
    transform(event, controller) {
      if (event.type === "finished") {
        const { status, error, availableQuotas } = event.result;
        // A completed response is only announced when the turn was saved; a backend failure is its own.
        if (terminal && (status !== "failed" || terminal.type === "response.failed")) {
          flushInline(controller);
          controller.enqueue(frame(withResponse(terminal, { quotas: availableQuotas })));
        } else {
          endWithError(controller, error);
        }
        finished = true;
        controller.enqueue("data: [DONE]\n\n");
        return;
      }
      const data = { ...event.event } as ResponseStreamEvent & Record<string, unknown>;
      if (hidesServerMcp(data, serverMcpLabels, hiddenItems, hiddenIndexes)) return;
      if (typeof data.output_index === "number") {
        const index = data.output_index;
        data.output_index = index - hiddenIndexes.filter((hidden) => hidden < index).length + shift;
      }
      if (TERMINAL_EVENTS.has(data.type)) {
        terminal = data;
        return;
      }
      if (data.type === "response.created") {
        controller.enqueue(frame(withResponse(data)));
        return;
      }
      if (data.type === "response.in_progress") {
        controller.enqueue(frame({ ...withResponse(data), available_quotas: {} }));
        return;
      }
      flushInline(controller);
      controller.enqueue(frame(data));
    },
    flush(controller) {
      if (finished) return;
      endWithError(controller, null);
      controller.enqueue("data: [DONE]\n\n");
    },
  });
}

/** Server-deployed tool activity: the server's MCP servers, file search and web search. */
function isServerDeployed(item: Item, serverMcpLabels: Set<string>): boolean {
  if (SERVER_MCP_ITEMS.has(String(item.type))) return serverMcpLabels.has(String(item.server_label));
  return item.type === "file_search_call" || item.type === "web_search_call";
}

/** True for events of server-deployed MCP items, which SPEC keeps out of client streams. */
function hidesServerMcp(
  event: Record<string, unknown>,
  serverMcpLabels: Set<string>,
  hiddenItems: Set<string>,
  hiddenIndexes: number[],
): boolean {
  const item = event.item as Item | undefined;
  if (item && SERVER_MCP_ITEMS.has(String(item.type)) && serverMcpLabels.has(String(item.server_label))) {
    hiddenItems.add(String(item.id));
    if (event.type === "response.output_item.added" && typeof event.output_index === "number") hiddenIndexes.push(event.output_index);
    return true;
  }
  return typeof event.item_id === "string" && hiddenItems.has(event.item_id);
}
