// Table definitions for D1 (SQLite). drizzle-kit reads them to generate migrations/d1; the store's
// queries are dialect-neutral SQL (sql-store.ts), so these must keep the same table and column names
// as schema-postgres.ts (a unit test compares the two).
// Timestamps are ISO 8601 UTC strings ("2025-01-01T00:00:00.000Z"): one fixed-width format, so
// text order is time order and ORDER BY last_message_at is correct.
import { sql } from "drizzle-orm";
import { index, integer, primaryKey, sqliteTable, text } from "drizzle-orm/sqlite-core";

const isoNow = sql`(strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))`;

export const conversations = sqliteTable(
  "conversations",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    lastUsedModel: text("last_used_model").notNull(),
    lastUsedProvider: text("last_used_provider").notNull(),
    createdAt: text("created_at").notNull().default(isoNow),
    lastMessageAt: text("last_message_at").notNull().default(isoNow),
    messageCount: integer("message_count").notNull().default(0),
    topicSummary: text("topic_summary"),
    lastResponseId: text("last_response_id"),
  },
  // (user_id, last_message_at) serves listByUser's filter and its newest-first order.
  (t) => [index("conversations_user_id_idx").on(t.userId, t.lastMessageAt)],
);

export const responses = sqliteTable(
  "responses",
  {
    responseId: text("response_id").primaryKey(),
    conversationId: text("conversation_id").notNull(),
    userId: text("user_id").notNull(),
    createdAt: text("created_at").notNull().default(isoNow),
  },
  (t) => [index("responses_conversation_id_idx").on(t.conversationId)],
);

export const streamRequests = sqliteTable(
  "stream_requests",
  {
    requestId: text("request_id").primaryKey(),
    conversationId: text("conversation_id").notNull(),
    userId: text("user_id").notNull(),
    // Lets an operator sweep entries left behind by an isolate that died mid-stream.
    createdAt: text("created_at").notNull().default(isoNow),
  },
  (t) => [index("stream_requests_conversation_id_idx").on(t.conversationId)],
);

export const prompts = sqliteTable(
  "prompts",
  {
    promptId: text("prompt_id").notNull(),
    version: integer("version").notNull(),
    prompt: text("prompt").notNull(),
    variables: text("variables", { mode: "json" }).$type<string[]>().notNull(),
    isDefault: integer("is_default", { mode: "boolean" }).notNull().default(false),
    createdAt: text("created_at").notNull().default(isoNow),
  },
  (t) => [primaryKey({ columns: [t.promptId, t.version] })],
);

export const quotaSubjects = sqliteTable(
  "quota_subjects",
  {
    limiter: text("limiter").notNull(),
    subject: text("subject").notNull(),
    nextResetAt: integer("next_reset_at").notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.limiter, t.subject] }),
    index("quota_subjects_next_reset_at_idx").on(t.nextResetAt),
  ],
);

export const tokenUsage = sqliteTable(
  "token_usage",
  {
    userId: text("user_id").notNull(),
    provider: text("provider").notNull(),
    model: text("model").notNull(),
    inputTokens: integer("input_tokens").notNull().default(0),
    outputTokens: integer("output_tokens").notNull().default(0),
    updatedAt: text("updated_at").notNull().default(isoNow),
  },
  (t) => [primaryKey({ columns: [t.userId, t.provider, t.model] })],
);

/** Turns whose tokens token_usage already counts, so that a repeated delivery adds nothing. */
export const tokenUsageApplied = sqliteTable("token_usage_applied", {
  turnKey: text("turn_key").primaryKey(),
  createdAt: text("created_at").notNull().default(isoNow),
});

export const settings = sqliteTable("settings", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  updatedAt: text("updated_at").notNull().default(isoNow),
});

/** MCP servers registered through POST /v1/mcp-servers (static ones live in the configuration). */
export const mcpServers = sqliteTable("mcp_servers", {
  name: text("name").primaryKey(),
  url: text("url").notNull(),
  providerId: text("provider_id").notNull(),
  /** Header name -> client | kubernetes | oauth (JSON object). */
  authorizationHeaders: text("authorization_headers", { mode: "json" }).$type<Record<string, string>>().notNull(),
  /** Request header names forwarded to the server (JSON array). */
  headers: text("headers", { mode: "json" }).$type<string[]>().notNull(),
  /** Seconds; null: the documented default. */
  timeout: integer("timeout"),
  createdBy: text("created_by").notNull(),
  createdAt: text("created_at").notNull().default(isoNow),
});

/**
 * Feedback and transcript objects kept in R2, so the exporter can find those not yet sent (R2 cannot
 * flag an object in place). `archive` names the batch an object goes in from just before its upload
 * (so a batch whose upload may have arrived is sent again as it was); `sent_at` is set once the
 * ingress server accepted it.
 */
export const dataObjects = sqliteTable(
  "data_objects",
  {
    key: text("key").primaryKey(),
    /** feedback | transcript */
    kind: text("kind").notNull(),
    bytes: integer("bytes").notNull(),
    createdAt: text("created_at").notNull().default(isoNow),
    sentAt: text("sent_at"),
    archive: text("archive"),
  },
  (t) => [index("data_objects_unsent_idx").on(t.sentAt, t.createdAt)],
);

/** Named leases so that periodic work (the exporter) never runs twice at once across instances. */
export const leases = sqliteTable("leases", {
  name: text("name").primaryKey(),
  holder: text("holder").notNull(),
  /** ISO 8601; a lease past it may be taken over (its holder died). */
  expiresAt: text("expires_at").notNull(),
});
