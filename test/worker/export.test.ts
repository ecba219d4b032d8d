// The data exporter end to end: the cron handler (scheduled()) packs what feedback and transcripts
// left in R2 into gzip tarballs and uploads them to the fake ingress server
// (test/fakes/ingress-server.ts), which unpacks every upload; the tests compare each file with what
// was stored. Also: failures and retries, the interval, the lease, bounded batches, lost objects.
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { sql } from "drizzle-orm";
import { beforeAll, beforeEach, describe, expect, inject, it, vi } from "vitest";
import type { UserDataCollectionConfig } from "../../worker/config/schema.ts";
import { archiveName } from "../../worker/data/archive.ts";
import { EXPORT_LEASE, runDataExport, type ExportLimits } from "../../worker/data/export.ts";
import { storeFeedback, FeedbackRequestSchema } from "../../worker/data/feedback.ts";
import { userIdHash, writeTranscript } from "../../worker/data/transcripts.ts";
import worker from "../../worker/index.ts";
import { loadRuntime } from "../../worker/runtime.ts";
import { d1Runner } from "../../worker/storage/d1-runner.ts";
import type { SqlRunner } from "../../worker/storage/sql-runner.ts";
import { openStore } from "../../worker/storage/open-store.ts";
import type { IngressUpload } from "../fakes/ingress-server.ts";
import { clearData } from "./data-helpers.ts";
import { callJson, testConfig } from "./helpers.ts";

const INTERVAL = 600;
const T0 = Date.UTC(2030, 0, 1, 0, 0, 0);
const minutes = (n: number) => n * 60_000;
const TOKEN = "ingress-token-0123456789";

const ingress = inject("ingressUrl");

interface Setup {
  tenant: string;
  config: string;
  collection: UserDataCollectionConfig;
}

async function setup(collector: Record<string, unknown> = {}): Promise<Setup> {
  const tenant = `t${crypto.randomUUID().replaceAll("-", "")}`;
  const config = testConfig({
    user_data_collection: {
      feedback_enabled: true,
      feedback_storage: "/tmp/data/feedback",
      transcripts_enabled: true,
      transcripts_storage: "/tmp/data/transcripts",
      data_collector: {
        enabled: true,
        ingress_server_url: `${ingress}/upload/${tenant}`,
        ingress_server_auth_token: TOKEN,
        ingress_content_service_name: "parley",
        collection_interval: INTERVAL,
        cleanup_after_send: true,
        connection_timeout_seconds: 1,
        ...collector,
      },
    },
  });
  const loaded = await loadRuntime({ ...env, PARLEY_CONFIG: config });
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  return { tenant, config, collection: loaded.runtime.config.user_data_collection };
}

async function cron(config: string, at: number): Promise<void> {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ scheduledTime: at, cron: "* * * * *" }), { ...env, PARLEY_CONFIG: config }, ctx);
  await waitOnExecutionContext(ctx);
}

const uploadsOf = async (s: Setup) => (await (await fetch(`${ingress}/__uploads/${s.tenant}`)).json()) as IngressUpload[];
const setMode = (s: Setup, mode: string, extra: Record<string, unknown> = {}) =>
  fetch(`${ingress}/__mode/${s.tenant}`, { method: "PUT", body: JSON.stringify({ mode, ...extra }) });

const deps = () => ({ bucket: env.DATA, sql: d1Runner(env.DB) });

let seq = 0;
/** A transcript of a made-up turn; returns its key. */
async function transcript(s: Setup, fields: { userId?: string; completedAt?: string; response?: string } = {}): Promise<string> {
  const requestId = crypto.randomUUID();
  const result = await writeTranscript(deps(), s.collection, {
    requestId,
    userId: fields.userId ?? "export-user",
    conversationId: "ab".repeat(24),
    provider: "openai",
    model: "gpt-test",
    query: `question ${++seq}`,
    response: fields.response ?? `answer ${seq}`,
    completedAt: fields.completedAt ?? new Date(Date.UTC(2025, 0, 1) + seq * 1000).toISOString(),
  });
  if (result.status !== "written") throw new Error(`transcript not written: ${result.status}`);
  return result.key;
}

async function feedbackObject(s: Setup, at = new Date(Date.UTC(2025, 0, 1) + ++seq * 1000)): Promise<string> {
  const request = FeedbackRequestSchema.parse({ conversation_id: "cd".repeat(24), user_question: "q", llm_response: "a", sentiment: 1 });
  return storeFeedback(deps(), s.collection.feedback_storage!, "export-user", request, at);
}

/** Every stored object's text, by key. */
async function contents(keys: string[]): Promise<Map<string, string>> {
  const map = new Map<string, string>();
  for (const key of keys) map.set(key, await (await env.DATA.get(key))!.text());
  return map;
}

const rows = async () =>
  (await env.DB.prepare("SELECT key, sent_at, archive FROM data_objects ORDER BY key").all<{ key: string; sent_at: string | null; archive: string | null }>()).results;

beforeEach(async () => {
  await clearData();
  vi.restoreAllMocks();
});

describe("the cron export", () => {
  let conversationId: string;
  beforeAll(async () => {
    // A conversation to give feedback on, made without transcripts so that its own does not join
    // the exports below (transcripts of real turns are covered in transcripts.test.ts).
    const answer = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "export me" }, user: "export-user", config: testConfig() });
    conversationId = answer.body.conversation_id;
  });

  it("uploads feedback and transcripts as one multipart gzip tarball whose every file is what was stored", async () => {
    const s = await setup();
    for (const sentiment of [1, -1]) {
      const posted = await callJson("/v1/feedback", {
        json: { conversation_id: conversationId, user_question: "q", llm_response: "a", sentiment },
        user: "export-user",
        config: s.config,
      });
      expect(posted.status).toBe(200);
    }
    const transcripts = [await transcript(s), await transcript(s, { userId: "another-user" })];
    const feedbackKeys = (await env.DATA.list({ prefix: "tmp/data/feedback/" })).objects.map((o) => o.key);
    const stored = await contents([...feedbackKeys, ...transcripts]);

    await cron(s.config, T0);

    const uploads = await uploadsOf(s);
    expect(uploads).toHaveLength(1);
    const [upload] = uploads;
    expect(upload).toMatchObject({
      answer: 202,
      problem: null,
      authorization: `Bearer ${TOKEN}`,
      fields: ["file"],
      partType: "application/vnd.redhat.parley.periodic+tar",
      filename: await archiveName([...stored.keys()]),
    });
    expect(upload!.userAgent).toMatch(/^Parley\/\d+\.\d+\.\d+ user-data-collection$/);
    const expectedFiles = [
      ...feedbackKeys.map((key) => ({ name: `feedback/${key.split("/").at(-1)}`, content: stored.get(key) })),
      ...transcripts.map((key) => ({ name: `transcripts/${key.split("/").slice(-3).join("/")}`, content: stored.get(key) })),
    ];
    const byName = (a: { name: string }, b: { name: string }) => a.name.localeCompare(b.name);
    expect([...upload!.files].sort(byName)).toEqual(expectedFiles.sort(byName));
    const otherHash = await userIdHash("another-user");
    expect(upload!.files.find((f) => f.name.includes(otherHash))).toBeDefined();

    // cleanup_after_send: the objects are gone, their rows say where they went.
    expect((await env.DATA.list({ prefix: "tmp/data/" })).objects).toEqual([]);
    for (const row of await rows()) expect(row).toMatchObject({ sent_at: expect.any(String), archive: upload!.filename });
  });

  it("without cleanup_after_send keeps the objects, marks them sent, and never sends them again", async () => {
    const s = await setup({ cleanup_after_send: false });
    const first = [await transcript(s), await feedbackObject(s)];
    await cron(s.config, T0);
    await cron(s.config, T0 + INTERVAL * 1000);
    expect((await uploadsOf(s)).map((u) => u.files.length)).toEqual([2]);
    for (const key of first) expect(await env.DATA.head(key)).not.toBeNull();
    expect((await rows()).every((row) => row.sent_at !== null)).toBe(true);

    const later = await transcript(s);
    await cron(s.config, T0 + 2 * INTERVAL * 1000);
    const uploads = await uploadsOf(s);
    expect(uploads).toHaveLength(2);
    expect(uploads[1]!.files.map((f) => f.name)).toEqual([`transcripts/${later.split("/").slice(-3).join("/")}`]);
  });

  it("runs once per collection_interval, whatever the cron's pace", async () => {
    const s = await setup();
    await transcript(s);
    await cron(s.config, T0);
    await transcript(s);
    for (let minute = 1; minute < INTERVAL / 60; minute++) await cron(s.config, T0 + minutes(minute));
    expect(await uploadsOf(s)).toHaveLength(1);
    await cron(s.config, T0 + INTERVAL * 1000);
    expect(await uploadsOf(s)).toHaveLength(2);
  });

  it("sends nothing, and writes no state, while the collector is disabled", async () => {
    const s = await setup({ enabled: false });
    await transcript(s);
    await cron(s.config, T0);
    expect(await uploadsOf(s)).toEqual([]);
    expect((await rows())[0]!.sent_at).toBeNull();
    expect(await env.DB.prepare("SELECT value FROM settings WHERE key = 'data_export.state'").first()).toBeNull();
  });

  for (const [mode, extra, answer] of [
    ["error", { status: 503 }, 503],
    ["error", { status: 200 }, 200],
    ["stall", {}, "stalled"],
    ["cut", {}, "cut"],
    // Received, but the 202 comes after connection_timeout_seconds (1 s here): the acknowledgement is lost.
    ["slow", { delayMs: 2500 }, "slow"],
  ] as const) {
    const what = { error: `answers ${answer}`, stall: "never answers", cut: "drops the connection", slow: "answers too late" }[mode];
    it(`loses nothing when the ingress server ${what}: the same archive is retried later, before anything newer`, async () => {
      const s = await setup();
      const keys = [await transcript(s), await feedbackObject(s)];
      const stored = await contents(keys);
      await setMode(s, mode, { ...extra, times: 1 });
      const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);

      await cron(s.config, T0);
      let uploads = await uploadsOf(s);
      expect(uploads.map((u) => u.answer)).toEqual([answer]);
      expect(warn.mock.calls.flat().join(" ")).toMatch(/ingress server did not accept parley-[0-9a-f]{32}\.tar\.gz \(2 object\(s\)\)/);
      expect((await rows()).every((row) => row.sent_at === null)).toBe(true);
      for (const key of keys) expect(await env.DATA.head(key)).not.toBeNull();

      // Written while the first upload's outcome is unknown: it must not change that batch.
      const later = await feedbackObject(s);

      // Not before the retry delay (300 s, shorter than the interval) ...
      await cron(s.config, T0 + minutes(4));
      expect(await uploadsOf(s)).toHaveLength(1);
      // ... then the same batch under the same name (a receiver that got it drops the repeat), and
      // what came since in an archive of its own.
      await cron(s.config, T0 + minutes(5));
      uploads = await uploadsOf(s);
      expect(uploads.map((u) => u.answer)).toEqual([answer, 202, 202]);
      expect(uploads[0]!.filename).toBe(await archiveName(keys));
      expect(uploads[1]!.filename).toBe(uploads[0]!.filename);
      expect(uploads[1]!.files.map((f) => f.content).sort()).toEqual([...stored.values()].sort());
      expect(uploads[2]!.filename).toBe(await archiveName([later]));
      expect(uploads[2]!.files.map((f) => f.name)).toEqual([`feedback/${later.split("/").at(-1)}`]);
      expect((await rows()).every((row) => row.sent_at !== null)).toBe(true);
    });
  }

  it("does not run while another run holds the lease, and takes over a lease whose holder died", async () => {
    const s = await setup();
    await transcript(s);
    await env.DB.prepare("INSERT INTO leases (name, holder, expires_at) VALUES (?, 'elsewhere', ?)")
      .bind(EXPORT_LEASE, new Date(T0 + minutes(3)).toISOString())
      .run();
    await cron(s.config, T0);
    expect(await uploadsOf(s)).toEqual([]);
    await cron(s.config, T0 + minutes(3));
    expect(await uploadsOf(s)).toHaveLength(1);
    // The run gave its lease back.
    expect(await env.DB.prepare("SELECT * FROM leases").all().then((r) => r.results)).toEqual([]);
  });

  it("two runs started together send the data once", async () => {
    const s = await setup();
    await transcript(s);
    await transcript(s);
    await Promise.all([cron(s.config, T0), cron(s.config, T0), cron(s.config, T0)]);
    expect((await uploadsOf(s)).map((u) => u.files.length)).toEqual([2]);
  });

  it("drops indexed objects that R2 no longer has, with a warning, and sends the rest", async () => {
    const s = await setup();
    const kept = await transcript(s);
    const lost = await transcript(s);
    await env.DATA.delete(lost);
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    await cron(s.config, T0);
    expect(warn.mock.calls.flat().join(" ")).toContain(`no longer exist in R2 and are dropped from the index: ${lost}`);
    const uploads = await uploadsOf(s);
    expect(uploads.map((u) => u.files.map((f) => f.name))).toEqual([[`transcripts/${kept.split("/").slice(-3).join("/")}`]]);
    expect((await rows()).map((r) => r.key)).toEqual([kept]);
  });
});

describe("runDataExport's bounds", () => {
  const store = () => openStore(env, undefined);

  it("packs at most maxObjects per tarball and maxBatches per run, and continues at the next tick", async () => {
    const s = await setup({ cleanup_after_send: false });
    const keys: string[] = [];
    for (let i = 0; i < 7; i++) keys.push(await transcript(s, { completedAt: new Date(Date.UTC(2025, 0, 1, 0, i)).toISOString() }));
    const limits: ExportLimits = { maxObjects: 3, maxBytes: 1 << 20, maxBatches: 2 };

    const first = await runDataExport({ bucket: env.DATA, store: store() }, s.collection, new Date(T0), limits);
    expect(first).toMatchObject({ status: "ran", outcome: "more" });
    const second = await runDataExport({ bucket: env.DATA, store: store() }, s.collection, new Date(T0 + minutes(1)), limits);
    expect(second).toMatchObject({ status: "ran", outcome: "drained" });
    const third = await runDataExport({ bucket: env.DATA, store: store() }, s.collection, new Date(T0 + minutes(2)), limits);
    expect(third.status).toBe("not_due");

    const uploads = await uploadsOf(s);
    expect(uploads.map((u) => u.files.length)).toEqual([3, 3, 1]);
    // Oldest first, each archive named after its own objects.
    const batches = [keys.slice(0, 3), keys.slice(3, 6), keys.slice(6)];
    for (const [i, batch] of batches.entries()) {
      expect(uploads[i]!.filename).toBe(await archiveName(batch));
      expect(uploads[i]!.files.map((f) => f.name).sort()).toEqual(batch.map((k) => `transcripts/${k.split("/").slice(-3).join("/")}`).sort());
    }
  });

  it("keeps a tarball's JSON within maxBytes; an object larger than that goes alone", async () => {
    const s = await setup();
    const small = [await transcript(s, { response: "x".repeat(100) }), await transcript(s, { response: "y".repeat(100) })];
    const big = await transcript(s, { response: "z".repeat(5000) });
    const last = await transcript(s, { response: "w".repeat(100) });
    const sizes = await Promise.all([...small, big, last].map(async (k) => (await env.DATA.head(k))!.size));
    const limits: ExportLimits = { maxObjects: 100, maxBytes: sizes[0]! + sizes[1]! + 10, maxBatches: 10 };
    const run = await runDataExport({ bucket: env.DATA, store: store() }, s.collection, new Date(T0), limits);
    expect(run).toMatchObject({ status: "ran", outcome: "drained" });
    expect((await uploadsOf(s)).map((u) => u.files.length)).toEqual([2, 1, 1]);
    if (run.status === "ran") expect(run.batches.map((b) => b.bytes)).toEqual([sizes[0]! + sizes[1]!, sizes[2]!, sizes[3]!]);
  });

  it("a crash between the 202 and the mark re-sends the batch under the same name, so the receiver can drop it", async () => {
    const s = await setup();
    const keys = [await transcript(s), await transcript(s)];
    const real = d1Runner(env.DB);
    // The record store fails exactly when the objects would be marked sent.
    const failingMark: SqlRunner = {
      ...real,
      atomic: async (statements) => {
        if (JSON.stringify(statements[0]!.queryChunks).includes("UPDATE data_objects SET sent_at")) throw new Error("D1_ERROR: connection reset");
        return real.atomic(statements);
      },
    };
    const crashed = { sql: failingMark, settings: openStore(env, undefined).settings };
    await expect(runDataExport({ bucket: env.DATA, store: crashed }, s.collection, new Date(T0))).rejects.toThrow(/connection reset/);
    const later = await transcript(s);
    // The lease was released and no state recorded, so the next tick tries again.
    await runDataExport({ bucket: env.DATA, store: store() }, s.collection, new Date(T0 + minutes(1)));
    const uploads = await uploadsOf(s);
    expect(uploads.map((u) => u.answer)).toEqual([202, 202, 202]);
    expect(uploads[0]!.filename).toBe(uploads[1]!.filename);
    expect(uploads[0]!.filename).toBe(await archiveName(keys));
    expect(uploads[2]!.filename).toBe(await archiveName([later]));
    expect((await rows()).every((row) => row.sent_at !== null)).toBe(true);
    expect((await real.query(sql`SELECT COUNT(*) AS n FROM leases`))[0]).toEqual({ n: 0 });
  });

  it("with cleanup_after_send, prunes the rows of objects sent over a week ago (deleting any object left behind)", async () => {
    const s = await setup();
    const key = await transcript(s);
    await runDataExport({ bucket: env.DATA, store: store() }, s.collection, new Date(T0));
    // As if the delete after the send had failed.
    await env.DATA.put(key, "left behind");
    await runDataExport({ bucket: env.DATA, store: store() }, s.collection, new Date(T0 + 6 * 86_400_000));
    expect(await rows()).toHaveLength(1);
    await runDataExport({ bucket: env.DATA, store: store() }, s.collection, new Date(T0 + 8 * 86_400_000));
    expect(await rows()).toEqual([]);
    expect(await env.DATA.head(key)).toBeNull();
  });
});
