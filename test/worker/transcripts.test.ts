// writeTranscript inside workerd, against Miniflare's local R2 and D1: SPEC's layout and record,
// idempotence under retries, and failures of R2 or of the record store (nothing half-written is
// taken for done, and a retry after the failure leaves exactly one object and one row).
import { env } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import { beforeEach, describe, expect, it } from "vitest";
import type { UserDataCollectionConfig } from "../../worker/config/schema.ts";
import { transcriptObjectKey, userIdHash, writeTranscript, type TranscriptInput } from "../../worker/data/transcripts.ts";
import { dataObjectsStore } from "../../worker/storage/data-objects-store.ts";
import { d1Runner } from "../../worker/storage/d1-runner.ts";
import type { SqlRunner } from "../../worker/storage/sql-runner.ts";
import { clearData, storedTranscripts } from "./data-helpers.ts";

const HEX48 = "c0ffee".repeat(8);

const collection = (overrides: Partial<UserDataCollectionConfig> = {}): UserDataCollectionConfig => ({
  feedback_enabled: false,
  transcripts_enabled: true,
  transcripts_storage: "/tmp/data/transcripts",
  data_collector: {
    enabled: false,
    collection_interval: 7200,
    cleanup_after_send: true,
    connection_timeout_seconds: 30,
  },
  ...overrides,
});

const turn = (fields: Partial<TranscriptInput> = {}): TranscriptInput => ({
  requestId: crypto.randomUUID(),
  userId: "transcript-user",
  conversationId: HEX48,
  provider: "openai",
  model: "gpt-test",
  query: "How do I restart a pod?",
  response: "Delete it; its controller makes a new one.",
  toolCalls: [{ id: "call_1", name: "kubectl", args: { verb: "get" }, type: "tool_call" }],
  toolResults: [{ id: "call_1", status: "success", content: "pod/x", type: "tool_result", round: 1 }],
  completedAt: "2025-05-01T08:00:00.000Z",
  ...fields,
});

/** The real bucket, counting puts; `failPuts` makes the next puts throw as an unavailable R2 would. */
function countingBucket(failPuts = 0) {
  const counts = { puts: 0, heads: 0 };
  let failures = failPuts;
  const bucket: Pick<R2Bucket, "put" | "head"> = {
    put: (async (...args: Parameters<R2Bucket["put"]>) => {
      counts.puts++;
      if (failures > 0) {
        failures--;
        throw new Error("R2: We encountered an internal error. Please try again.");
      }
      return env.DATA.put(...args);
    }) as R2Bucket["put"],
    head: async (key) => {
      counts.heads++;
      return env.DATA.head(key);
    },
  };
  return { bucket, counts };
}

/** D1, except that inserts into data_objects fail `times` times. */
function flakySql(times: number): SqlRunner {
  const real = d1Runner(env.DB);
  let left = times;
  return {
    ...real,
    query: async (statement) => {
      const text = JSON.stringify(statement.queryChunks);
      if (left > 0 && text.includes("INSERT INTO data_objects")) {
        left--;
        throw new Error("D1_ERROR: Network connection lost.");
      }
      return real.query(statement);
    },
  };
}

const rows = async () => (await env.DB.prepare("SELECT * FROM data_objects ORDER BY key").all()).results;
const objectsUnder = async (prefix: string) => (await env.DATA.list({ prefix })).objects.map((o) => o.key);

beforeEach(clearData);

describe("writeTranscript", () => {
  it("writes SPEC's record at <storage>/<sha256(user)>/<conversation>/<request id>.json and indexes it", async () => {
    const input = turn();
    const result = await writeTranscript({ bucket: env.DATA, sql: d1Runner(env.DB) }, collection(), input);
    const hash = await userIdHash("transcript-user");
    const key = `tmp/data/transcripts/${hash}/${HEX48}/${input.requestId}.json`;
    expect(result).toEqual({ status: "written", key });
    expect(await transcriptObjectKey("/tmp/data/transcripts", input)).toBe(key);
    const object = await env.DATA.get(key);
    expect(object?.httpMetadata?.contentType).toBe("application/json");
    const record = (await object!.json()) as Record<string, unknown>;
    expect(record).toEqual({
      metadata: {
        provider: "openai",
        model: "gpt-test",
        query_provider: "openai",
        query_model: "gpt-test",
        user_id: hash,
        conversation_id: HEX48,
        timestamp: "2025-05-01T08:00:00.000Z",
      },
      redacted_query: "How do I restart a pod?",
      query_is_valid: true,
      llm_response: "Delete it; its controller makes a new one.",
      rag_chunks: [],
      truncated: false,
      attachments: [],
      tool_calls: input.toolCalls,
      tool_results: input.toolResults,
    });
    // The raw user id appears nowhere.
    expect(JSON.stringify(record)).not.toContain("transcript-user");
    expect([...(await storedTranscripts("/tmp/data/transcripts", "transcript-user", HEX48)).keys()]).toEqual([key]);
    expect(await rows()).toEqual([
      { key, kind: "transcript", bytes: object!.size, created_at: "2025-05-01T08:00:00.000Z", sent_at: null, archive: null },
    ]);
  });

  it("for /v1/infer, which keeps no conversation, the request id stands in the conversation's place", async () => {
    const requestId = crypto.randomUUID();
    const result = await writeTranscript({ bucket: env.DATA, sql: d1Runner(env.DB) }, collection(), turn({ requestId, conversationId: requestId }));
    expect(result).toMatchObject({ status: "written", key: `tmp/data/transcripts/${await userIdHash("transcript-user")}/${requestId}/${requestId}.json` });
  });

  it("writes nothing when transcripts are disabled", async () => {
    const { bucket, counts } = countingBucket();
    expect(await writeTranscript({ bucket, sql: d1Runner(env.DB) }, collection({ transcripts_enabled: false }), turn())).toEqual({ status: "disabled" });
    expect(counts.puts).toBe(0);
    expect(await rows()).toEqual([]);
  });

  it("is idempotent: calling it again for the same turn changes nothing", async () => {
    const input = turn();
    const { bucket, counts } = countingBucket();
    const first = await writeTranscript({ bucket, sql: d1Runner(env.DB) }, collection(), input);
    const again = await writeTranscript({ bucket, sql: d1Runner(env.DB) }, collection(), input);
    expect(again).toEqual({ status: "already_written", key: first.status === "written" ? first.key : "" });
    expect(counts.puts).toBe(1);
    expect(await rows()).toHaveLength(1);
    expect(await objectsUnder("tmp/data/transcripts/")).toHaveLength(1);
  });

  it("an R2 failure is thrown, leaves no row, and a retry then writes it once", async () => {
    const input = turn();
    const { bucket, counts } = countingBucket(2);
    const deps = { bucket, sql: d1Runner(env.DB) };
    await expect(writeTranscript(deps, collection(), input)).rejects.toThrow(/internal error/);
    await expect(writeTranscript(deps, collection(), input)).rejects.toThrow(/internal error/);
    expect(await rows()).toEqual([]);
    expect(await writeTranscript(deps, collection(), input)).toMatchObject({ status: "written" });
    expect(await writeTranscript(deps, collection(), input)).toMatchObject({ status: "already_written" });
    expect(counts.puts).toBe(3);
    expect(await rows()).toHaveLength(1);
    expect(await objectsUnder("tmp/data/transcripts/")).toHaveLength(1);
  });

  it("a record-store failure after the object was written is thrown; a retry indexes the same object once", async () => {
    const input = turn();
    const deps = { bucket: env.DATA, sql: flakySql(1) };
    await expect(writeTranscript(deps, collection(), input)).rejects.toThrow(/Network connection lost/);
    expect(await rows()).toEqual([]);
    const retried = await writeTranscript(deps, collection(), input);
    expect(retried.status).toBe("written");
    expect(await rows()).toHaveLength(1);
    expect(await objectsUnder("tmp/data/transcripts/")).toHaveLength(1);
  });

  it("an indexed, unsent transcript whose object is gone is written again; a sent and cleaned-up one is not", async () => {
    const input = turn();
    const deps = { bucket: env.DATA, sql: d1Runner(env.DB) };
    const first = await writeTranscript(deps, collection(), input);
    if (first.status !== "written") throw new Error("not written");
    await env.DATA.delete(first.key);
    expect(await writeTranscript(deps, collection(), input)).toEqual({ status: "already_written", key: first.key });
    expect(await env.DATA.head(first.key)).not.toBeNull();

    await dataObjectsStore(d1Runner(env.DB)).markSent([first.key], "parley-x.tar.gz", new Date());
    await env.DATA.delete(first.key);
    const { bucket, counts } = countingBucket();
    expect(await writeTranscript({ bucket, sql: deps.sql }, collection(), input)).toEqual({ status: "already_written", key: first.key });
    expect(counts.puts).toBe(0);
    expect(await env.DATA.head(first.key)).toBeNull();
  });

  it("refuses ids that would leave SPEC's layout, writing nothing", async () => {
    const deps = { bucket: env.DATA, sql: d1Runner(env.DB) };
    await expect(writeTranscript(deps, collection(), turn({ conversationId: "../../feedback" }))).rejects.toThrow(/not usable in an object key/);
    await expect(writeTranscript(deps, collection(), turn({ requestId: "a/b" }))).rejects.toThrow(/not usable in an object key/);
    expect(await rows()).toEqual([]);
    expect((await d1Runner(env.DB).query(sql`SELECT COUNT(*) AS n FROM data_objects`))[0]).toEqual({ n: 0 });
  });
});
