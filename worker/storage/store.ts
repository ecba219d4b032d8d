// The record store: conversation index, response and stream-request lookups, prompts, the quota
// registry, token history and settings, behind one interface over D1 (default) or Postgres.
import { d1Runner } from "./d1-runner.ts";
import { postgresRunner } from "./postgres-runner.ts";
import { createSqlStore } from "./sql-store.ts";

export { StoreConflictError } from "./store-conflict-error.ts";

export interface ConversationRecord {
  id: string;
  userId: string;
  lastUsedModel: string;
  lastUsedProvider: string;
  /** ISO 8601, UTC ("...Z"). */
  createdAt: string;
  lastMessageAt: string;
  messageCount: number;
  topicSummary: string | null;
  lastResponseId: string | null;
}

export interface TurnRecord {
  id: string;
  userId: string;
  model: string;
  provider: string;
  at: string;
  responseId: string | null;
  topicSummary?: string | null;
}

export interface PromptRecord {
  promptId: string;
  version: number;
  prompt: string;
  variables: string[];
  isDefault: boolean;
  createdAt: string;
}

export interface ResponseRecord {
  responseId: string;
  conversationId: string;
  userId: string;
  createdAt: string;
}

export interface StreamRequestRecord {
  requestId: string;
  conversationId: string;
  userId: string;
}

export interface QuotaSubjectRecord {
  limiter: string;
  subject: string;
  /** Unix seconds. */
  nextResetAt: number;
}

export interface TokenUsageRecord {
  userId: string;
  provider: string;
  model: string;
  inputTokens: number;
  outputTokens: number;
  updatedAt: string;
}

export interface Store {
  conversations: {
    get(id: string): Promise<ConversationRecord | null>;
    /** Newest last_message_at first. */
    listByUser(userId: string): Promise<ConversationRecord[]>;
    /**
     * One statement, safe under concurrency: creates the row (message_count 1, created_at = at) or
     * bumps message_count and sets last_message_at, last_used_*, last_response_id (when non-null) and
     * topic_summary (only when given and the stored one is empty). Throws StoreConflictError when
     * the conversation belongs to another user.
     */
    /** Also indexes the turn's response id (responses.get finds it), in the same round-trip. */
    recordTurn(turn: TurnRecord): Promise<ConversationRecord>;
    /** False when there is no such conversation. */
    setTopicSummary(id: string, summary: string): Promise<boolean>;
    /** Also removes its responses and stream requests. */
    delete(id: string): Promise<boolean>;
  };
  /** response id -> conversation, for previous_response_id. */
  responses: {
    record(r: ResponseRecord): Promise<void>;
    get(responseId: string): Promise<ResponseRecord | null>;
  };
  /** Running streams, for interrupt by request id. */
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
    /** Atomic increment (upsert). */
    add(u: { userId: string; provider: string; model: string; inputTokens: number; outputTokens: number }): Promise<void>;
    list(userId?: string): Promise<TokenUsageRecord[]>;
  };
  settings: {
    get(key: string): Promise<string | null>;
    set(key: string, value: string): Promise<void>;
  };
  /** Postgres: ends the pool (the store is opened per request). D1: nothing to do. */
  close(): Promise<void>;
}

export interface PostgresSettings {
  host: string;
  port: number;
  db: string;
  user: string;
  password?: string;
  /** The schema every table lives in (set as the connection's search_path). */
  namespace: string;
  ssl_mode: string;
  gss_encmode: string;
  ca_cert_path?: string;
  /** ws:// or wss:// URL of a WebSocket-to-TCP relay; "/v1?address=host:port" is appended. */
  ws_proxy?: string;
}

/** The `database` section of the configuration, as the config schema produces it. */
export interface DatabaseSettings {
  sqlite?: { db_path: string };
  postgres?: PostgresSettings;
}

export function openStore(env: { DB: D1Database }, database: DatabaseSettings | undefined): Store {
  // `sqlite` settings also mean D1: the Workers runtime has no local file database, and D1 is the
  // SQLite it offers (wrangler dev keeps it under .wrangler/state; db_path has no effect).
  const runner = database?.postgres ? postgresRunner(database.postgres) : d1Runner(env.DB);
  return createSqlStore(runner);
}
