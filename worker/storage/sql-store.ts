// The single implementation of Store for both dialects. Every statement here is valid SQLite and
// valid Postgres: ON CONFLICT ... DO UPDATE with `excluded`, RETURNING, COALESCE/NULLIF, TRUE/FALSE.
// Tables are never schema-qualified (Postgres picks the namespace through search_path), and writes
// whose outcome matters RETURN a column, so "did it change" is a row count on either driver.
// Values of JSON columns are bound with rows.ts jsonValue, never as JSON text made beforehand, and
// values are compared in SQL rather than against what a query returned: the Postgres runner may
// store a value in another form (postgres-runner.ts withoutNul).
import { sql } from "drizzle-orm";
import {
  booleanField,
  isoField,
  jsonValue,
  nullableTextField,
  numberField,
  stringListField,
  textField,
  toIso,
} from "./rows.ts";
import type { Row, SqlRunner } from "./sql-runner.ts";
import { StoreConflictError } from "./store-conflict-error.ts";
import type {
  ConversationRecord,
  PromptRecord,
  QuotaSubjectRecord,
  ResponseRecord,
  Store,
  StreamRequestRecord,
  TokenUsageRecord,
} from "./store.ts";

export function createSqlStore(db: SqlRunner): Store {
  const first = async <T>(rows: Promise<Row[]>, decode: (row: Row) => T): Promise<T | null> => {
    const [row] = await rows;
    return row ? decode(row) : null;
  };
  const now = () => new Date().toISOString();
  const bool = (value: boolean) => sql.raw(value ? "TRUE" : "FALSE");

  return {
    conversations: {
      get: (id) => first(db.query(sql`SELECT * FROM conversations WHERE id = ${id}`), conversation),

      list: async (userId) =>
        (
          await db.query(sql`
            SELECT * FROM conversations ${userId === null ? sql`` : sql`WHERE user_id = ${userId}`}
            ORDER BY last_message_at DESC, id`)
        ).map(conversation),

      upsertSnapshot: async (record) => {
        // One upsert, so concurrent writers serialize on the row. The WHERE keeps a snapshot from
        // going backwards (fewer messages than stored) and refuses to touch another user's row; a
        // refused write of one's own older snapshot is fine, another user's row is a conflict.
        const rows = await db.query(sql`
          INSERT INTO conversations (id, user_id, last_used_model, last_used_provider, created_at,
            last_message_at, message_count, topic_summary, last_response_id)
          VALUES (${record.id}, ${record.userId}, ${record.lastUsedModel}, ${record.lastUsedProvider},
            ${toIso(record.createdAt)}, ${toIso(record.lastMessageAt)}, ${record.messageCount},
            ${record.topicSummary}, ${record.lastResponseId})
          ON CONFLICT (id) DO UPDATE SET
            message_count = excluded.message_count,
            last_message_at = excluded.last_message_at,
            last_used_model = excluded.last_used_model,
            last_used_provider = excluded.last_used_provider,
            last_response_id = excluded.last_response_id,
            topic_summary = excluded.topic_summary
          WHERE conversations.user_id = excluded.user_id AND conversations.message_count <= excluded.message_count
          RETURNING id`);
        if (rows.length > 0) return;
        // Compared in SQL, where the user id is in the form the store keeps.
        const taken = await db.query(sql`SELECT id FROM conversations WHERE id = ${record.id} AND user_id <> ${record.userId}`);
        if (taken.length > 0) throw new StoreConflictError(`conversation ${record.id} belongs to another user`);
      },

      delete: async (id) => {
        // Dependents first and all in one unit, so no response id can outlive its conversation.
        const results = await db.atomic([
          sql`DELETE FROM responses WHERE conversation_id = ${id}`,
          sql`DELETE FROM stream_requests WHERE conversation_id = ${id}`,
          sql`DELETE FROM conversations WHERE id = ${id} RETURNING id`,
        ]);
        return (results[2]?.length ?? 0) > 0;
      },
    },

    responses: {
      get: (responseId) =>
        first(db.query(sql`SELECT * FROM responses WHERE response_id = ${responseId}`), response),
    },

    streamRequests: {
      register: async (r) => {
        // DO NOTHING rather than overwrite: a request id must never be re-pointed at another
        // conversation or user while an interrupt may be looking it up.
        await db.query(sql`
          INSERT INTO stream_requests (request_id, conversation_id, user_id, created_at)
          VALUES (${r.requestId}, ${r.conversationId}, ${r.userId}, ${now()})
          ON CONFLICT (request_id) DO NOTHING`);
      },
      get: (requestId) =>
        first(db.query(sql`SELECT * FROM stream_requests WHERE request_id = ${requestId}`), streamRequest),
      remove: async (requestId) => {
        await db.query(sql`DELETE FROM stream_requests WHERE request_id = ${requestId}`);
      },
    },

    prompts: {
      create: async (p) => {
        const [row] = await db.query(sql`
          INSERT INTO prompts (prompt_id, version, prompt, variables, is_default, created_at)
          VALUES (${p.promptId}, 1, ${p.prompt}, ${jsonValue(p.variables)}, TRUE, ${now()})
          ON CONFLICT (prompt_id, version) DO NOTHING
          RETURNING *`);
        if (!row) throw new StoreConflictError(`prompt ${p.promptId} already exists`);
        return prompt(row);
      },

      get: (promptId, version) =>
        first(
          version === undefined
            ? db.query(sql`
                SELECT * FROM prompts WHERE prompt_id = ${promptId} AND is_default
                ORDER BY version DESC LIMIT 1`)
            : db.query(sql`SELECT * FROM prompts WHERE prompt_id = ${promptId} AND version = ${version}`),
          prompt,
        ),

      list: async () =>
        (
          await db.query(sql`
            SELECT * FROM prompts p
            WHERE p.is_default AND p.version = (
              SELECT MAX(d.version) FROM prompts d WHERE d.prompt_id = p.prompt_id AND d.is_default)
            ORDER BY p.prompt_id`)
        ).map(prompt),

      update: async (p) => {
        const setAsDefault = p.setAsDefault === true;
        // Copy the row named by `version` into version+1. The (prompt_id, version) key does the
        // optimistic check: if `version` is not the latest, version+1 exists and the insert yields
        // nothing; if `version` does not exist there is nothing to copy. Two concurrent updates from
        // the same version cannot both win.
        const [row] = await db.query(sql`
          INSERT INTO prompts (prompt_id, version, prompt, variables, is_default, created_at)
          SELECT prompt_id, version + 1, ${p.prompt},
            COALESCE(${p.variables === undefined ? null : jsonValue(p.variables)}, variables),
            ${bool(setAsDefault)}, ${now()}
          FROM prompts WHERE prompt_id = ${p.promptId} AND version = ${p.version}
          ON CONFLICT (prompt_id, version) DO NOTHING
          RETURNING *`);
        if (!row) {
          const exists = await db.query(sql`SELECT 1 AS one FROM prompts WHERE prompt_id = ${p.promptId} LIMIT 1`);
          return exists.length > 0 ? "version_conflict" : "not_found";
        }
        if (setAsDefault) {
          // Readers take the highest version flagged default, so the new version is already the
          // default; clearing the older flags is tidying, and harmless if it never happens.
          await db.query(sql`
            UPDATE prompts SET is_default = FALSE
            WHERE prompt_id = ${p.promptId} AND version <> ${numberField(row, "version")} AND is_default`);
        }
        return prompt(row);
      },

      delete: async (promptId) =>
        (await db.query(sql`DELETE FROM prompts WHERE prompt_id = ${promptId} RETURNING version`)).length > 0,
    },

    quotaSubjects: {
      register: async (r) => {
        await db.query(sql`
          INSERT INTO quota_subjects (limiter, subject, next_reset_at)
          VALUES (${r.limiter}, ${r.subject}, ${r.nextResetAt})
          ON CONFLICT (limiter, subject) DO NOTHING`);
      },
      due: async (at, limit) =>
        (
          await db.query(sql`
            SELECT * FROM quota_subjects WHERE next_reset_at <= ${at}
            ORDER BY next_reset_at, limiter, subject LIMIT ${limit}`)
        ).map(quotaSubject),
      advance: async (r) =>
        (
          await db.query(sql`
            UPDATE quota_subjects SET next_reset_at = ${r.to}
            WHERE limiter = ${r.limiter} AND subject = ${r.subject} AND next_reset_at = ${r.from}
            RETURNING limiter`)
        ).length > 0,
    },

    tokenUsage: {
      addOnce: async (u) => {
        // The increment happens only while the turn key is unknown, and the key is recorded in the
        // same unit, so a repeated delivery of one turn's usage adds nothing.
        await db.atomic([
          sql`
            INSERT INTO token_usage (user_id, provider, model, input_tokens, output_tokens, updated_at)
            SELECT ${u.userId}, ${u.provider}, ${u.model}, ${u.inputTokens}, ${u.outputTokens}, ${now()}
            WHERE NOT EXISTS (SELECT 1 FROM token_usage_applied WHERE turn_key = ${u.turnKey})
            ON CONFLICT (user_id, provider, model) DO UPDATE SET
              input_tokens = token_usage.input_tokens + excluded.input_tokens,
              output_tokens = token_usage.output_tokens + excluded.output_tokens,
              updated_at = excluded.updated_at`,
          sql`INSERT INTO token_usage_applied (turn_key, created_at) VALUES (${u.turnKey}, ${now()}) ON CONFLICT (turn_key) DO NOTHING`,
        ]);
      },
      pruneApplied: async (before) => {
        await db.query(sql`DELETE FROM token_usage_applied WHERE created_at < ${toIso(before)}`);
      },
      list: async (userId) =>
        (
          await db.query(sql`
            SELECT * FROM token_usage
            ${userId === undefined ? sql`` : sql`WHERE user_id = ${userId}`}
            ORDER BY user_id, provider, model`)
        ).map(tokenUsage),
    },

    settings: {
      get: (key) => first(db.query(sql`SELECT value FROM settings WHERE key = ${key}`), (row) => textField(row, "value")),
      set: async (key, value) => {
        await db.query(sql`
          INSERT INTO settings (key, value, updated_at) VALUES (${key}, ${value}, ${now()})
          ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`);
      },
      clear: async (key, value) =>
        (await db.query(sql`DELETE FROM settings WHERE key = ${key} AND value = ${value} RETURNING key`)).length > 0,
    },

    sql: db,
    close: () => db.close(),
  };
}

function conversation(row: Row): ConversationRecord {
  return {
    id: textField(row, "id"),
    userId: textField(row, "user_id"),
    lastUsedModel: textField(row, "last_used_model"),
    lastUsedProvider: textField(row, "last_used_provider"),
    createdAt: isoField(row, "created_at"),
    lastMessageAt: isoField(row, "last_message_at"),
    messageCount: numberField(row, "message_count"),
    // '' and NULL both mean "no summary yet".
    topicSummary: nullableTextField(row, "topic_summary") || null,
    lastResponseId: nullableTextField(row, "last_response_id"),
  };
}

function response(row: Row): ResponseRecord {
  return {
    responseId: textField(row, "response_id"),
    conversationId: textField(row, "conversation_id"),
    userId: textField(row, "user_id"),
    createdAt: isoField(row, "created_at"),
  };
}

function streamRequest(row: Row): StreamRequestRecord {
  return {
    requestId: textField(row, "request_id"),
    conversationId: textField(row, "conversation_id"),
    userId: textField(row, "user_id"),
  };
}

function prompt(row: Row): PromptRecord {
  return {
    promptId: textField(row, "prompt_id"),
    version: numberField(row, "version"),
    prompt: textField(row, "prompt"),
    variables: stringListField(row, "variables"),
    isDefault: booleanField(row, "is_default"),
    createdAt: isoField(row, "created_at"),
  };
}

function quotaSubject(row: Row): QuotaSubjectRecord {
  return {
    limiter: textField(row, "limiter"),
    subject: textField(row, "subject"),
    nextResetAt: numberField(row, "next_reset_at"),
  };
}

function tokenUsage(row: Row): TokenUsageRecord {
  return {
    userId: textField(row, "user_id"),
    provider: textField(row, "provider"),
    model: textField(row, "model"),
    inputTokens: numberField(row, "input_tokens"),
    outputTokens: numberField(row, "output_tokens"),
    updatedAt: isoField(row, "updated_at"),
  };
}
