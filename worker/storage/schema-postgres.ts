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

export const settings = pgTable("settings", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  updatedAt: timestamptz("updated_at").notNull().defaultNow(),
});
