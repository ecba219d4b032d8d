// Table definitions for Postgres. drizzle-kit reads them to generate migrations/postgres; the store's
// queries are dialect-neutral SQL (sql-store.ts), so these must keep the same table and column names
// as schema-d1.ts (a unit test compares the two).
// No pgSchema: the configured namespace is chosen per connection through search_path, so one set of
// migrations serves any namespace and the SQL never names a schema.
import { bigint, boolean, index, integer, jsonb, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

const timestamptz = (name: string) => timestamp(name, { withTimezone: true, mode: "string" });

export const conversations = pgTable(
  "conversations",
  {
    id: text("id").primaryKey(),
    userId: text("user_id").notNull(),
    lastUsedModel: text("last_used_model").notNull(),
    lastUsedProvider: text("last_used_provider").notNull(),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
    lastMessageAt: timestamptz("last_message_at").notNull().defaultNow(),
    messageCount: integer("message_count").notNull().default(0),
    topicSummary: text("topic_summary"),
    lastResponseId: text("last_response_id"),
  },
  // (user_id, last_message_at) serves listByUser's filter and its newest-first order.
  (t) => [index("conversations_user_id_idx").on(t.userId, t.lastMessageAt)],
);

export const responses = pgTable(
  "responses",
  {
    responseId: text("response_id").primaryKey(),
    conversationId: text("conversation_id").notNull(),
    userId: text("user_id").notNull(),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (t) => [index("responses_conversation_id_idx").on(t.conversationId)],
);

export const streamRequests = pgTable(
  "stream_requests",
  {
    requestId: text("request_id").primaryKey(),
    conversationId: text("conversation_id").notNull(),
    userId: text("user_id").notNull(),
    // Lets an operator sweep entries left behind by an isolate that died mid-stream.
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (t) => [index("stream_requests_conversation_id_idx").on(t.conversationId)],
);

export const prompts = pgTable(
  "prompts",
  {
    promptId: text("prompt_id").notNull(),
    version: integer("version").notNull(),
    prompt: text("prompt").notNull(),
    variables: jsonb("variables").$type<string[]>().notNull(),
    isDefault: boolean("is_default").notNull().default(false),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.promptId, t.version] })],
);

export const quotaSubjects = pgTable(
  "quota_subjects",
  {
    limiter: text("limiter").notNull(),
    subject: text("subject").notNull(),
    nextResetAt: bigint("next_reset_at", { mode: "number" }).notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.limiter, t.subject] }),
    index("quota_subjects_next_reset_at_idx").on(t.nextResetAt),
  ],
);

export const tokenUsage = pgTable(
  "token_usage",
  {
    userId: text("user_id").notNull(),
    provider: text("provider").notNull(),
    model: text("model").notNull(),
    // bigint: lifetime sums per user and model outgrow 32 bits.
    inputTokens: bigint("input_tokens", { mode: "number" }).notNull().default(0),
    outputTokens: bigint("output_tokens", { mode: "number" }).notNull().default(0),
    updatedAt: timestamptz("updated_at").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.provider, t.model] })],
);

/** Turns whose tokens token_usage already counts, so that a repeated delivery adds nothing. */
export const tokenUsageApplied = pgTable("token_usage_applied", {
  turnKey: text("turn_key").primaryKey(),
  createdAt: timestamptz("created_at").notNull().defaultNow(),
});

export const settings = pgTable("settings", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  updatedAt: timestamptz("updated_at").notNull().defaultNow(),
});

/** MCP servers registered through POST /v1/mcp-servers (static ones live in the configuration). */
export const mcpServers = pgTable("mcp_servers", {
  name: text("name").primaryKey(),
  url: text("url").notNull(),
  providerId: text("provider_id").notNull(),
  /** Header name -> client | kubernetes | oauth. */
  authorizationHeaders: jsonb("authorization_headers").$type<Record<string, string>>().notNull(),
  /** Request header names forwarded to the server. */
  headers: jsonb("headers").$type<string[]>().notNull(),
  /** Seconds; null: the documented default. */
  timeout: integer("timeout"),
  createdBy: text("created_by").notNull(),
  createdAt: timestamptz("created_at").notNull().defaultNow(),
});

/**
 * Feedback and transcript objects kept in R2, so the exporter can find those not yet sent (R2 cannot
 * flag an object in place). `archive` names the batch an object goes in from just before its upload
 * (so a batch whose upload may have arrived is sent again as it was); `sent_at` is set once the
 * ingress server accepted it.
 */
export const dataObjects = pgTable(
  "data_objects",
  {
    key: text("key").primaryKey(),
    /** feedback | transcript */
    kind: text("kind").notNull(),
    bytes: integer("bytes").notNull(),
    createdAt: timestamptz("created_at").notNull().defaultNow(),
    sentAt: timestamptz("sent_at"),
    archive: text("archive"),
  },
  (t) => [index("data_objects_unsent_idx").on(t.sentAt, t.createdAt)],
);

/** Named leases so that periodic work (the exporter) never runs twice at once across instances. */
export const leases = pgTable("leases", {
  name: text("name").primaryKey(),
  holder: text("holder").notNull(),
  /** A lease past it may be taken over (its holder died). */
  expiresAt: timestamptz("expires_at").notNull(),
});
