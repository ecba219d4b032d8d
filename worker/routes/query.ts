// The query endpoints: POST /query and /streaming_query (under /v1, /v2 and unversioned: SPEC, the
// conversations guide and the data collection guide name all three) and the interrupt of a running
// stream. Thin adapters from their wire format to the turn and back.
import { Hono, type Context } from "hono";
import * as z from "zod";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import type { StreamPresentation, TurnPlan, TurnResult } from "../domain/conversation.ts";
import { ApiError, errors } from "../errors.ts";
import { guard } from "../middleware.ts";
import { AttachmentSchema, userMessage } from "../turn/attachments.ts";
import { conversationOfRequest } from "../turn/conversation-id.ts";
import { targetConversation } from "../turn/conversations.ts";
import { refusedStream } from "../turn/presenting.ts";
import { planTurn } from "../turn/plan.ts";
import { resolveSystemPrompt } from "../turn/system-prompt.ts";
import { serverTools } from "../turn/tools.ts";
import { conversationStub, finished, fromWire, passedOn, startTurn } from "../turn/turn-client.ts";
import { readJson } from "../validation.ts";
import { planContext, sse, textStream, turnBodyLimit, turnClient } from "./streams.ts";

const optional = <T extends z.ZodType>(schema: T) => schema.nullish();

export const QueryRequestSchema = z
  .strictObject({
    // As in the original (a plain string): an empty question is asked as it is.
    query: z.string(),
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

// SPEC's paths, the conversations guide's /v2 ones and the data collection guide's unversioned ones.
for (const prefix of ["/v1", "/v2", ""]) {
  query.post(`${prefix}/query`, guard(ACTIONS.query), turnBodyLimit(), async (c) => {
    const turn = await startTurn(c.env, await planQueryTurn(c, await readJson(c, QueryRequestSchema), false), turnClient(c));
    const result = await finished(turn);
    if (result.status === "failed") throw result.error ? fromWire(result.error) : errors.internal();
    return c.json(queryResponse(turn.head.conversationId, result));
  });

  // The conversation's Durable Object sends the stream in its wire form (turn/presenting.ts): its
  // bytes pass through here as they are.
  query.post(`${prefix}/streaming_query`, guard(ACTIONS.streamingQuery), turnBodyLimit(), async (c) => {
    const body = await readJson(c, QueryRequestSchema);
    const plan = await planQueryTurn(c, body, true);
    const presentation = presentationOf(body);
    let stream: ReadableStream<Uint8Array>;
    try {
      stream = passedOn(await startTurn(c.env, plan, turnClient(c)), presentation);
    } catch (error) {
      // A question too long for the model (or for its conversation) is told inside the stream, as
      // the original's is (presenting.ts refusedStream); every other refusal is the status itself.
      if (!(error instanceof ApiError && error.status === 413)) throw error;
      stream = new Blob([refusedStream(presentation, plan, error)]).stream();
    }
    return presentation === "query-text" ? textStream(stream) : sse(stream);
  });
}

export const InterruptSchema = z.strictObject({ request_id: z.uuid() });

query.post("/v1/streaming_query/interrupt", guard(ACTIONS.streamingQuery), async (c) => {
  const { request_id } = await readJson(c, InterruptSchema);
  const auth = c.get("auth");
  // Request ids of new conversations lead to them; older ones are registered in the record store.
  const conversationId = conversationOfRequest(request_id) ?? (await c.get("store").streamRequests.get(request_id))?.conversationId;
  const outcome = conversationId ? await conversationStub(c.env, conversationId).interrupt(request_id, auth.userId) : "not_found";
  if (outcome === "not_found") throw streamNotFound(request_id);
  if (outcome === "forbidden") {
    throw errors.actionForbidden(`User ${auth.userId} does not have permission to interrupt request with ID ${request_id}`);
  }
  return c.json({ request_id, interrupted: true, message: "Streaming request interrupted" });
});

function streamNotFound(requestId: string): ApiError {
  return new ApiError(404, "Streaming Request not found", `Streaming Request with ID ${requestId} does not exist`);
}

/** The query endpoints' turn: their fields in the terms every endpoint's turn is planned in. */
async function planQueryTurn(c: Context<AppEnv>, body: QueryRequest, streaming: boolean): Promise<TurnPlan> {
  const rt = c.get("rt");
  const target = targetConversation(body.conversation_id);
  const context = planContext(c);
  const tools = await serverTools(context, body.vector_store_ids, { fileSearch: !body.no_tools, mcp: !body.no_tools });
  return planTurn(context, {
    endpoint: streaming ? "/v1/streaming_query" : "/v1/query",
    ...target,
    input: [userMessage(body.query, body.attachments ?? [])],
    userText: body.query,
    model: { model: body.model ?? undefined, provider: body.provider ?? undefined },
    systemPrompt: resolveSystemPrompt(rt, body.system_prompt, "system_prompt"),
    params: tools.params,
    mcpServers: tools.mcpServers,
    shieldIds: body.shield_ids,
    retrieval: { solr: body.solr, vectorStoreIds: body.vector_store_ids ?? null },
    generateTopicSummary: body.generate_topic_summary ?? true,
    streaming,
    presentation: presentationOf(body),
    transcript: true,
    attachments: body.attachments ?? [],
  });
}

/** The wire form of a streamed answer: `media_type: text/plain` is the answer text alone. */
const presentationOf = (body: QueryRequest): StreamPresentation => (body.media_type === "text/plain" ? "query-text" : "query-sse");

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
