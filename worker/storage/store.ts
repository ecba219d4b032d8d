// The record store: the conversation index (fed from the conversations' Durable Objects), legacy
// response and stream-request lookups, prompts, the quota registry, token history and settings,
// behind one interface over D1 (default) or Postgres. Record shapes are the drizzle tables' own
// (schema-d1.ts); the SQL is sql-store.ts's and works on both dialects.
import type { PostgresConfig } from "../config/schema.ts";
import type * as tables from "./schema-d1.ts";
import type { SqlRunner } from "./sql-runner.ts";

export { StoreConflictError } from "./store-conflict-error.ts";

export type ConversationRecord = typeof tables.conversations.$inferSelect;
export type ResponseRecord = typeof tables.responses.$inferSelect;
export type StreamRequestRecord = Omit<typeof tables.streamRequests.$inferSelect, "createdAt">;
export type PromptRecord = typeof tables.prompts.$inferSelect;
export type QuotaSubjectRecord = typeof tables.quotaSubjects.$inferSelect;
export type TokenUsageRecord = typeof tables.tokenUsage.$inferSelect;
export type PostgresSettings = PostgresConfig;

export interface Store {
  conversations: {
    get(id: string): Promise<ConversationRecord | null>;
    /** A user's conversations (null: everyone's), newest last_message_at first. */
    list(userId: string | null): Promise<ConversationRecord[]>;
    /**
     * Writes the conversation's record as its Durable Object knows it (the whole record, latest state
     * wins): idempotent, and a snapshot older than the stored one (fewer messages) changes nothing.
     * Throws StoreConflictError when the id belongs to another user.
     */
    upsertSnapshot(record: ConversationRecord): Promise<void>;
    /** Also removes its responses and stream requests. */
    delete(id: string): Promise<boolean>;
  };
  /** Response id -> conversation for responses of earlier releases, whose ids carried no conversation. */
  responses: {
    get(responseId: string): Promise<ResponseRecord | null>;
  };
  /** Running streams of conversations whose ids carry no locator (created by earlier releases). */
  streamRequests: {
    register(r: StreamRequestRecord): Promise<void>;
    get(requestId: string): Promise<StreamRequestRecord | null>;
    remove(requestId: string): Promise<void>;
  };
  prompts: {
    /** Version 1, the default. Throws StoreConflictError when the prompt id exists. */
    create(p: { promptId: string; prompt: string; variables: string[] }): Promise<PromptRecord>;
    /** Without a version: the default version. */
    get(promptId: string, version?: number): Promise<PromptRecord | null>;
    /** The default version of each prompt, by prompt id. */
    list(): Promise<PromptRecord[]>;
    /**
     * `version` must be the current latest; creates latest+1, keeping the variables when omitted.
     * The default moves to the new version only when setAsDefault is true.
     */
    update(p: {
      promptId: string;
      version: number;
      prompt: string;
      variables?: string[];
      setAsDefault?: boolean;
    }): Promise<PromptRecord | "not_found" | "version_conflict">;
    /** All versions. */
    delete(promptId: string): Promise<boolean>;
  };
  /** The registry the cron scheduler scans for quota resets. */
  quotaSubjects: {
    /** Insert if absent; an existing nextResetAt is left alone. */
    register(r: QuotaSubjectRecord): Promise<void>;
    /** Subjects with nextResetAt <= now, soonest first. */
    due(now: number, limit: number): Promise<QuotaSubjectRecord[]>;
    /** Compare-and-set: moves nextResetAt only if it still equals `from`, so a reset never applies twice. */
    advance(r: { limiter: string; subject: string; from: number; to: number }): Promise<boolean>;
  };
  tokenUsage: {
    /** Adds one turn's tokens, once: a repeat with the same turn key changes nothing. */
    addOnce(u: { turnKey: string; userId: string; provider: string; model: string; inputTokens: number; outputTokens: number }): Promise<void>;
    list(userId?: string): Promise<TokenUsageRecord[]>;
    /** Forgets turn keys older than `before` (ISO 8601): repeats arrive within minutes, not days. */
    pruneApplied(before: string): Promise<void>;
  };
  settings: {
    get(key: string): Promise<string | null>;
    set(key: string, value: string): Promise<void>;
    /**
     * Removes the setting if it still holds `value` (what the caller read), so that a write racing
     * in between is kept; true when it removed it.
     */
    clear(key: string, value: string): Promise<boolean>;
  };
  /**
   * The dialect-neutral SQL runner underneath, for repositories kept beside the features they serve
   * (registered MCP servers, the exported-data index, leases). They follow sql-store.ts's rules.
   */
  sql: SqlRunner;
  /** Postgres: ends the pool (the store is opened per request). D1: nothing to do. */
  close(): Promise<void>;
}

/** The `database` section of the configuration, as the config schema produces it. */
export interface DatabaseSettings {
  sqlite?: { db_path: string };
  postgres?: PostgresSettings;
}
