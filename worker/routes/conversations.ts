// Conversation views (SPEC "Conversation views", REFERENCE "Conversations"): v1 and v3 read the
// records and history, v2 is the cache form. A conversation's own Durable Object answers for it (its
// owner, its history, its deletion); lists come from the record store it feeds. Only the owner sees
// or changes a conversation, unless an access rule grants the *_other_conversations actions.
import { Hono, type Context } from "hono";
import { createMiddleware } from "hono/factory";
import * as z from "zod";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import type { StoredTurn } from "../domain/conversation.ts";
import { errors } from "../errors.ts";
import { guard, userMayActOnOthers } from "../middleware.ts";
import type { ConversationRecord } from "../storage/store.ts";
import { isUuid, normalizeAnyForm } from "../turn/conversation-id.ts";
import { conversationStub } from "../turn/turn-client.ts";
import { readJson } from "../validation.ts";

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

/**
 * The path's conversation id in its normalized form. Both of SPEC's forms are accepted (the
 * responses endpoint hands out the backend form), and a UUID, which the original system also takes
 * and no conversation here has, is one that is not found (null); anything else is a 400.
 */
function pathId(c: Context<AppEnv>): string | null {
  const raw = c.req.param("conversation_id") ?? "";
  const id = normalizeAnyForm(raw);
  if (id !== null) return id;
  if (isUuid(raw)) return null;
  throw errors.invalidConversationId(raw);
}

/** The answer of the conversation's Durable Object about access, as SPEC's errors. */
function accessError(c: Context<AppEnv>, access: "not_found" | "forbidden", id: string, operation: "read" | "update" | "delete") {
  return access === "not_found" ? errors.notFound("Conversation", id) : errors.conversationForbidden(c.get("auth").userId, id, operation);
}

/**
 * The v2 views are the original's cache-backed ones (SPEC "Versioning"): they answer only when the
 * configuration names a conversation_cache type, else SPEC's 500. They read the conversations
 * themselves, whatever the type (README "Configuration reference").
 */
const cacheConfigured = createMiddleware<AppEnv>(async (c, next) => {
  if (c.get("rt").config.conversation_cache?.type === undefined) throw errors.cacheNotConfigured();
  await next();
});
const anyConfiguration = createMiddleware<AppEnv>((_c, next) => next());

export const UpdateSchema = z.strictObject({ topic_summary: z.string().min(1).max(1000) });

for (const version of ["v1", "v2", "v3"]) {
  // Checked after the caller's permission, as the original does.
  const backing = version === "v2" ? cacheConfigured : anyConfiguration;
  conversations.get(`/${version}/conversations`, guard(ACTIONS.listConversations), backing, async (c) => {
    // The list comes from the record store, fed after each answer (README "Conversations": lag).
    const everyone = userMayActOnOthers(c, "list");
    const records = await c.get("store").conversations.list(everyone ? null : c.get("auth").userId);
    if (version !== "v2") return c.json({ conversations: records.map(listItem) });
    return c.json({
      conversations: records.map((record) => ({
        conversation_id: record.id,
        topic_summary: record.topicSummary || null,
        last_message_timestamp: Date.parse(record.lastMessageAt) / 1000,
      })),
    });
  });

  conversations.get(`/${version}/conversations/:conversation_id`, guard(ACTIONS.getConversation), backing, async (c) => {
    const id = pathId(c);
    if (id === null) throw errors.notFound("Conversation", c.req.param("conversation_id"));
    // The conversation's own Durable Object answers, so a turn just answered is already there.
    const found = await conversationStub(c.env, id).describe(c.get("auth").userId, userMayActOnOthers(c, "read"));
    if (typeof found === "string") throw accessError(c, found, id, "read");
    const chat_history = found.turns.filter((turn) => turn.status !== "failed").map(chatTurn);
    if (version === "v3") return c.json({ conversation_id: id, created_at: found.createdAt, chat_history });
    return c.json({ conversation_id: id, chat_history });
  });

  if (version === "v3") continue;

  conversations.delete(`/${version}/conversations/:conversation_id`, guard(ACTIONS.deleteConversation), backing, async (c) => {
    const id = pathId(c);
    let deleted = false;
    if (id !== null) {
      // The object removes the record too, through its outbox, once it no longer feeds it.
      const outcome = await conversationStub(c.env, id).destroy(id, c.get("auth").userId, userMayActOnOthers(c, "delete"));
      if (outcome === "forbidden") throw accessError(c, outcome, id, "delete");
      deleted = outcome === "ok";
    }
    return c.json({
      conversation_id: id ?? c.req.param("conversation_id"),
      deleted,
      success: true,
      response: deleted ? "Conversation deleted successfully" : "Conversation not found",
    });
  });

  conversations.put(`/${version}/conversations/:conversation_id`, guard(ACTIONS.updateConversation), backing, async (c) => {
    const id = pathId(c);
    const { topic_summary } = await readJson(c, UpdateSchema);
    if (id === null) throw errors.notFound("Conversation", c.req.param("conversation_id"));
    const outcome = await conversationStub(c.env, id).setTopicSummary(id, c.get("auth").userId, userMayActOnOthers(c, "update"), topic_summary);
    if (outcome !== "ok") throw accessError(c, outcome, id, "update");
    return c.json({ conversation_id: id, success: true, message: "Topic summary updated successfully" });
  });
}
