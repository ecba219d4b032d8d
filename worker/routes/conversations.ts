// Conversation views (SPEC "Conversation views", REFERENCE "Conversations"): v1 and v3 read the
// records and history, v2 is the cache form. Only the owner sees or changes a conversation.
import { Hono, type Context } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { errors } from "../errors.ts";
import { guard } from "../middleware.ts";
import type { ConversationRecord } from "../storage/store.ts";
import { isNormalizedId } from "../turn/conversation-id.ts";
import { ownedConversation } from "../turn/conversations.ts";
import { conversationForbidden } from "../turn/engine.ts";
import { readJson } from "../validation.ts";
import { conversationStub, type StoredTurn } from "../../durable-objects/conversation-do.ts";

export const conversations = new Hono<AppEnv>();

function listItem(record: ConversationRecord) {
  return {
    conversation_id: record.id,
    created_at: record.createdAt,
    last_message_at: record.lastMessageAt,
    message_count: record.messageCount,
    last_used_model: record.lastUsedModel,
    last_used_provider: record.lastUsedProvider,
    topic_summary: record.topicSummary ?? "",
  };
}

function chatTurn(turn: StoredTurn) {
  return {
    messages: [
      { content: turn.summary.user, type: "user" },
      { content: turn.summary.assistant, type: "assistant" },
    ],
    tool_calls: turn.summary.tool_calls,
    tool_results: turn.summary.tool_results,
    provider: turn.provider,
    model: turn.model,
    started_at: turn.startedAt,
    completed_at: turn.completedAt,
    status: turn.status,
  };
}

/** The path id, checked for format (400) and ownership (404/403). */
async function pathConversation(c: Context<AppEnv>): Promise<ConversationRecord> {
  const id = c.req.param("id") ?? "";
  if (!isNormalizedId(id)) throw errors.invalidConversationId(id);
  return ownedConversation(c.get("store"), c.get("auth"), id);
}

async function chatHistory(c: Context<AppEnv>, record: ConversationRecord) {
  const turns = (await conversationStub(c.env.CONVERSATION, record.id).history(record.userId)) ?? [];
  return turns.filter((turn) => turn.status !== "failed").map(chatTurn);
}

const UpdateSchema = z.strictObject({ topic_summary: z.string().min(1).max(1000) });

for (const version of ["v1", "v2", "v3"]) {
  conversations.get(`/${version}/conversations`, guard(ACTIONS.listConversations), async (c) => {
    const records = await c.get("store").conversations.listByUser(c.get("auth").userId);
    if (version !== "v2") return c.json({ conversations: records.map(listItem) });
    return c.json({
      conversations: records.map((record) => ({
        conversation_id: record.id,
        topic_summary: record.topicSummary || null,
        last_message_timestamp: Date.parse(record.lastMessageAt) / 1000,
      })),
    });
  });

  conversations.get(`/${version}/conversations/:id`, guard(ACTIONS.getConversation), async (c) => {
    const record = await pathConversation(c);
    const chat_history = await chatHistory(c, record);
    if (version === "v3") return c.json({ conversation_id: record.id, created_at: record.createdAt, chat_history });
    return c.json({ conversation_id: record.id, chat_history });
  });

  if (version === "v3") continue;

  conversations.delete(`/${version}/conversations/:id`, guard(ACTIONS.deleteConversation), async (c) => {
    const id = c.req.param("id");
    if (!isNormalizedId(id)) throw errors.invalidConversationId(id);
    const store = c.get("store");
    const auth = c.get("auth");
    const record = await store.conversations.get(id);
    if (record && record.userId !== auth.userId) throw conversationForbidden(auth.userId, id);
    if (record) await Promise.all([conversationStub(c.env.CONVERSATION, id).destroy(), store.conversations.delete(id)]);
    return c.json({
      conversation_id: id,
      deleted: record !== null,
      success: true,
      response: record ? "Conversation deleted successfully" : "Conversation not found",
    });
  });

  conversations.put(`/${version}/conversations/:id`, guard(ACTIONS.updateConversation), async (c) => {
    const record = await pathConversation(c);
    const { topic_summary } = await readJson(c, UpdateSchema);
    await c.get("store").conversations.setTopicSummary(record.id, topic_summary);
    return c.json({ conversation_id: record.id, success: true, message: "Topic summary updated successfully" });
  });
}
