// Conversation transcripts (SPEC "Transcript record", UPSTREAM "Transcripts"): one JSON object per
// answered turn of /v1/query, /v1/streaming_query, /v1/responses with store=true and /v1/infer,
// written to R2 at <transcripts_storage>/<sha256(user id)>/<conversation id>/<unique id>.json when
// user_data_collection.transcripts_enabled is true.
//
// The turn engine calls writeTranscript from the turn's after-phase, with data taken from the
// committed turn, and retries it until it succeeds: the writer is idempotent (the unique id is the
// turn's request id, so a retry names the same object and never makes a second one) and has no
// retries of its own.
import * as z from "zod";
import type { UserDataCollectionConfig } from "../config/schema.ts";
import { dataObjectsStore } from "../storage/data-objects-store.ts";
import { writeDataObject, type DataDeps } from "./data-object-writer.ts";
import { transcriptKey } from "./object-keys.ts";

const JsonObject = z.record(z.string(), z.unknown());

/**
 * What a transcript is built from: plain data of one committed turn. It is also what an outbox
 * keeps between attempts, hence a schema (TranscriptInputSchema.parse on the way back in).
 */
export const TranscriptInputSchema = z.object({
  /**
   * Unique per turn and the same on every attempt: the turn's request id. It is the object's file
   * name, which is what makes a retried write land on the same object.
   */
  requestId: z.string().min(1),
  /** The authenticated user id; the record and the path carry its SHA-256, never the id itself. */
  userId: z.string(),
  /** Normalized conversation id (48 hex). /v1/infer keeps no conversation and passes its request id. */
  conversationId: z.string().min(1),
  /** The model that answered, as resolved by the turn (not what the client sent): provider id and model id. */
  provider: z.string(),
  model: z.string(),
  /** The user's question as received (SPEC's redacted_query: Parley redacts nothing). */
  query: z.string(),
  /** The answer text. */
  response: z.string(),
  /** Chunks of inline retrieval and file_search, as the query response lists them. */
  ragChunks: z
    .array(z.object({ content: z.string(), source: z.string().nullable(), score: z.number().nullable(), attributes: JsonObject.nullable() }))
    .default([]),
  truncated: z.boolean().default(false),
  /** Query attachments; [] for /v1/responses. */
  attachments: z.array(z.object({ attachment_type: z.string(), content_type: z.string(), content: z.string() })).default([]),
  /** Tool activity in the query endpoints' summary shapes: {id, name, args, type} and {id, status, content, type, round}. */
  toolCalls: z.array(JsonObject).default([]),
  toolResults: z.array(JsonObject).default([]),
  /** When the turn was committed (ISO 8601). The record's timestamp, so every attempt writes the same bytes. */
  completedAt: z.iso.datetime({ offset: true }),
});

export type TranscriptInput = z.input<typeof TranscriptInputSchema>;

/** The SHA-256 of a user id, lowercase hex: the user component of the path and metadata.user_id. */
export async function userIdHash(userId: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(userId));
  return Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("");
}

/**
 * The stored record, in the original system's key order. `userHash` is userIdHash(input.userId);
 * it is passed in so that this stays a plain synchronous function.
 */
export function transcriptRecord(input: TranscriptInput, userHash: string) {
  const turn = TranscriptInputSchema.parse(input);
  return {
    metadata: {
      provider: turn.provider,
      model: turn.model,
      // The original system records the resolved values here too, not what the client asked for.
      query_provider: turn.provider,
      query_model: turn.model,
      user_id: userHash,
      conversation_id: turn.conversationId,
      timestamp: new Date(turn.completedAt).toISOString(),
    },
    redacted_query: turn.query,
    query_is_valid: true,
    llm_response: turn.response,
    rag_chunks: turn.ragChunks,
    truncated: turn.truncated,
    attachments: turn.attachments,
    tool_calls: turn.toolCalls,
    tool_results: turn.toolResults,
  };
}

export type TranscriptRecord = ReturnType<typeof transcriptRecord>;

/** The R2 key of a turn's transcript. */
export async function transcriptObjectKey(storage: string, input: Pick<TranscriptInput, "userId" | "conversationId" | "requestId">): Promise<string> {
  return transcriptKey(storage, await userIdHash(input.userId), input.conversationId, input.requestId);
}

export type TranscriptWrite =
  | { status: "disabled" }
  /** The object and its index row were written by this call. */
  | { status: "written"; key: string }
  /** An earlier attempt had already written it (or it was exported since): nothing changed. */
  | { status: "already_written"; key: string };

/**
 * Writes a turn's transcript when transcripts are enabled. Idempotent: calling it again with the
 * same input (after a failure, or twice) leaves exactly one object and one index row. Throws when
 * R2 or the record store fails; nothing is retried here.
 */
export async function writeTranscript(deps: DataDeps, collection: UserDataCollectionConfig, input: TranscriptInput): Promise<TranscriptWrite> {
  if (!collection.transcripts_enabled || collection.transcripts_storage === undefined) return { status: "disabled" };
  const userHash = await userIdHash(input.userId);
  const key = transcriptKey(collection.transcripts_storage, userHash, input.conversationId, input.requestId);
  const indexed = await dataObjectsStore(deps.sql).get(key);
  // An indexed row means an earlier attempt wrote the object. Once sent it may have been cleaned up
  // on purpose; unsent, its object must exist, and is written again if it somehow does not.
  if (indexed && (indexed.sentAt !== null || (await deps.bucket.head(key)) !== null)) return { status: "already_written", key };
  const record = transcriptRecord(input, userHash);
  const inserted = await writeDataObject(deps, { key, kind: "transcript", body: JSON.stringify(record), createdAt: record.metadata.timestamp });
  return inserted ? { status: "written", key } : { status: "already_written", key };
}
