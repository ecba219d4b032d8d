// The query endpoints: POST /v1|v2/query (JSON), /v1|v2/streaming_query (SSE or plain text) and
// the interrupt of a running stream. Thin adapters from their wire format to the turn engine.
import { Hono, type Context } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { ApiError, errors } from "../errors.ts";
import { guard, userMay } from "../middleware.ts";
import { AttachmentSchema, userMessage } from "../turn/attachments.ts";
import { targetConversation } from "../turn/conversations.ts";
import { serverToolParams } from "../turn/tools.ts";
import { startTurn, type RunningTurn, type TurnEvent, type TurnResult } from "../turn/engine.ts";
import { finished, sse, textStream } from "./streams.ts";
import { toolCall, toolResult } from "../turn/summaries.ts";
import { parseSolr } from "../rag/solr.ts";
import { selectShields } from "../turn/shields.ts";
import { resolveSystemPrompt } from "../turn/system-prompt.ts";
import { readJson } from "../validation.ts";
import { conversationStub, type Item } from "../../durable-objects/conversation-do.ts";

const optional = <T extends z.ZodType>(schema: T) => schema.nullish();

export const QueryRequestSchema = z
  .strictObject({
    query: z.string().min(1),
    conversation_id: optional(z.string()),
    model: optional(z.string().min(1)),
    provider: optional(z.string().min(1)),
    system_prompt: optional(z.string()),
    attachments: optional(z.array(AttachmentSchema)),
    no_tools: optional(z.boolean()),
    vector_store_ids: optional(z.array(z.string())),
    generate_topic_summary: optional(z.boolean()),
    shield_ids: optional(z.array(z.string())),
    solr: optional(z.record(z.string(), z.unknown())),
    media_type: optional(z.enum(["application/json", "text/plain"])),
  })
  .superRefine((body, ctx) => {
    if (body.provider && !body.model) {
      ctx.addIssue({ code: "custom", path: ["model"], message: "Model must be specified if provider is specified" });
    }
    if (body.model && !body.provider) {
      ctx.addIssue({ code: "custom", path: ["provider"], message: "Provider must be specified if model is specified" });
    }
  });
export type QueryRequest = z.output<typeof QueryRequestSchema>;

export const query = new Hono<AppEnv>();

for (const version of ["v1", "v2"]) {
  query.post(`/${version}/query`, guard(ACTIONS.query), async (c) => {
    const turn = await beginQueryTurn(c, await readJson(c, QueryRequestSchema), false);
    const result = await finished(turn.events);
    if (result.status === "failed") throw result.error ?? errors.internal();
    return c.json(queryResponse(turn.conversationId, result));
  });

  query.post(`/${version}/streaming_query`, guard(ACTIONS.streamingQuery), async (c) => {
    const body = await readJson(c, QueryRequestSchema);
    const turn = await beginQueryTurn(c, body, true);
    if (body.media_type === "text/plain") {
      return textStream(turn.events.pipeThrough(plainTextStream()));
    }
    return sse(turn.events.pipeThrough(queryEventStream(turn)));
  });
}

const InterruptSchema = z.strictObject({ request_id: z.uuid() });

query.post("/v1/streaming_query/interrupt", guard(ACTIONS.interrupt), async (c) => {
  const { request_id } = await readJson(c, InterruptSchema);
  const auth = c.get("auth");
  const running = await c.get("store").streamRequests.get(request_id);
  if (!running) throw streamNotFound(request_id);
  if (running.userId !== auth.userId) {
    throw errors.actionForbidden(`User ${auth.userId} does not have permission to interrupt request with ID ${request_id}`);
  }
  const interrupted = await conversationStub(c.env.CONVERSATION, running.conversationId).interrupt(request_id);
  if (!interrupted) throw streamNotFound(request_id);
  return c.json({ request_id, interrupted: true, message: "Streaming request interrupted" });
});

function streamNotFound(requestId: string): ApiError {
  return new ApiError(404, "Streaming Request not found", `Streaming Request with ID ${requestId} does not exist`);
}

/** Everything the query endpoints share before the backend call: conversation, model, prompt, input. */
async function beginQueryTurn(c: Context<AppEnv>, body: QueryRequest, streaming: boolean): Promise<RunningTurn> {
  const rt = c.get("rt");
  const auth = c.get("auth");
  if ((body.model || body.provider) && !userMay(c, ACTIONS.modelOverride)) throw errors.modelOverrideForbidden();
  const solr = parseSolr(body.solr);
  const conversation = targetConversation(body.conversation_id);
  const prompt = resolveSystemPrompt(rt, body.system_prompt, "system_prompt");
  return startTurn(
    { env: c.env, rt, waitUntil: (p) => c.executionCtx.waitUntil(p) },
    {
      auth,
      conversationId: conversation.id,
      isNew: conversation.isNew,
      requestId: crypto.randomUUID(),
      input: [userMessage(body.query, body.attachments ?? [])],
      userText: body.query,
      model: { model: body.model ?? undefined, provider: body.provider ?? undefined },
      instructions: prompt.text,
      params: body.no_tools ? {} : serverToolParams(rt.config, body.vector_store_ids),
      generateTopicSummary: body.generate_topic_summary ?? true,
      shields: selectShields(rt, body.shield_ids),
      retrieval: { question: body.query, solr, vectorStoreIds: body.vector_store_ids },
      // A stream can be interrupted by its request id; a JSON answer cannot.
      interruptible: streaming,
      streaming,
    },
  );
}

function queryResponse(conversationId: string, result: TurnResult) {
  return {
    conversation_id: conversationId,
    response: result.text,
    rag_chunks: result.ragChunks,
    tool_calls: result.summary.tool_calls,
    tool_results: result.summary.tool_results,
    referenced_documents: result.referencedDocuments,
    truncated: false,
    input_tokens: result.inputTokens,
    output_tokens: result.outputTokens,
    available_quotas: result.availableQuotas,
  };
}

/** REFERENCE's streaming_query events: `data: {"event", "data"}` lines, no `event:` line. */
function queryEventStream(turn: RunningTurn): TransformStream<TurnEvent, string> {
  let tokenId = 0;
  let finished = false;
  const line = (event: string, data: unknown, extra: Record<string, unknown> = {}) =>
    `data: ${JSON.stringify({ event, data, ...extra })}\n\n`;
  const error = (failure: ApiError) => line("error", { status_code: failure.status, response: failure.response, cause: failure.cause });
  return new TransformStream<TurnEvent, string>({
    async start(controller) {
      // A client may interrupt as soon as it reads the request id: it must be findable by then.
      await turn.interruptible;
      controller.enqueue(line("start", { conversation_id: turn.conversationId, request_id: turn.requestId }));
    },
    transform(event, controller) {
      if (event.type === "backend") {
        const backend = event.event;
        if (backend.type === "response.output_text.delta") {
          controller.enqueue(line("token", { id: tokenId++, token: backend.delta }));
        } else if (backend.type === "response.output_item.done") {
          const item = backend.item as unknown as Item;
          const call = toolCall(item);
          if (call) controller.enqueue(line("tool_call", call));
          const result = toolResult(item);
          if (result) controller.enqueue(line("tool_result", result));
        }
        return;
      }
      const result = event.result;
      finished = true;
      if (result.status === "interrupted") {
        controller.enqueue(line("interrupted", { request_id: turn.requestId }));
        return;
      }
      if (result.status === "failed") {
        controller.enqueue(error(result.error ?? errors.internal()));
        return;
      }
      controller.enqueue(line("turn_complete", { id: tokenId, token: result.text }));
      controller.enqueue(
        line(
          "end",
          { referenced_documents: result.referencedDocuments, truncated: false, input_tokens: result.inputTokens, output_tokens: result.outputTokens },
          { available_quotas: result.availableQuotas },
        ),
      );
    },
    flush(controller) {
      if (!finished) controller.enqueue(error(errors.internal("the answer ended early")));
    },
  });
}

/** `media_type: text/plain`: the answer text itself, as it is generated. */
function plainTextStream(): TransformStream<TurnEvent, string> {
  return new TransformStream<TurnEvent, string>({
    transform(event, controller) {
      if (event.type === "backend" && event.event.type === "response.output_text.delta") controller.enqueue(event.event.delta);
      if (event.type === "finished" && event.result.status === "failed") {
        controller.enqueue(`\n\n[error: ${event.result.error?.response ?? "Internal server error"}]`);
      }
    },
  });
}
