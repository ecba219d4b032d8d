// The single implementation of Store for both dialects. Every statement here is valid SQLite and
// valid Postgres: ON CONFLICT ... DO UPDATE with `excluded`, RETURNING, COALESCE/NULLIF, TRUE/FALSE.
// Tables are never schema-qualified (Postgres picks the namespace through search_path), and writes
// whose outcome matters RETURN a column, so "did it change" is a row count on either driver.
import { sql } from "drizzle-orm";
import {
  booleanField,
  isoField,
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

      listByUser: async (userId) =>
        (
          await db.query(sql`
            SELECT * FROM conversations WHERE user_id = ${userId}
            ORDER BY last_message_at DESC, id`)
        ).map(conversation),

      recordTurn: async (turn) => {
        const at = toIso(turn.at);
        // One upsert, so concurrent turns serialize on the row instead of racing a read. An empty
        // stored summary is '' or NULL (the spec's default is empty), hence NULLIF before COALESCE.
        // The WHERE refuses to touch another user's row: no row comes back and we throw.
        const upsert = sql`
          INSERT INTO conversations (id, user_id, last_used_model, last_used_provider, created_at,
            last_message_at, message_count, topic_summary, last_response_id)
          VALUES (${turn.id}, ${turn.userId}, ${turn.model}, ${turn.provider}, ${at}, ${at}, 1,
            ${turn.topicSummary ?? null}, ${turn.responseId ?? null})
          ON CONFLICT (id) DO UPDATE SET
            message_count = conversations.message_count + 1,
            last_message_at = excluded.last_message_at,
            last_used_model = excluded.last_used_model,
            last_used_provider = excluded.last_used_provider,
            last_response_id = COALESCE(excluded.last_response_id, conversations.last_response_id),
            topic_summary = COALESCE(NULLIF(conversations.topic_summary, ''), excluded.topic_summary)
          WHERE conversations.user_id = excluded.user_id
          RETURNING *`;
        // The turn's response id is indexed in the same round-trip (one batch, all or nothing).
        const [[row]] = turn.responseId
          ? await db.atomic([upsert, recordResponse({ responseId: turn.responseId, conversationId: turn.id, userId: turn.userId, createdAt: at })])
          : [await db.query(upsert)];
        if (!row) throw new StoreConflictError(`conversation ${turn.id} belongs to another user`);
        return conversation(row);
      },

      setTopicSummary: async (id, summary) =>
        (await db.query(sql`UPDATE conversations SET topic_summary = ${summary} WHERE id = ${id} RETURNING id`))
          .length > 0,

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
      record: async (r) => {
        await db.query(recordResponse(r));
      },
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
          VALUES (${p.promptId}, 1, ${p.prompt}, ${JSON.stringify(p.variables)}, TRUE, ${now()})
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
            COALESCE(${p.variables === undefined ? null : JSON.stringify(p.variables)}, variables),
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
      add: async (u) => {
        await db.query(sql`
          INSERT INTO token_usage (user_id, provider, model, input_tokens, output_tokens, updated_at)
          VALUES (${u.userId}, ${u.provider}, ${u.model}, ${u.inputTokens}, ${u.outputTokens}, ${now()})
          ON CONFLICT (user_id, provider, model) DO UPDATE SET
            input_tokens = token_usage.input_tokens + excluded.input_tokens,
            output_tokens = token_usage.output_tokens + excluded.output_tokens,
            updated_at = excluded.updated_at`);
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
    },

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

/** Response ids are unique; recording one twice (a retried persist) is a no-op. */
function recordResponse(r: ResponseRecord) {
  return sql`
    INSERT INTO responses (response_id, conversation_id, user_id, created_at)
    VALUES (${r.responseId}, ${r.conversationId}, ${r.userId}, ${toIso(r.createdAt)})
    ON CONFLICT (response_id) DO NOTHING`;
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
