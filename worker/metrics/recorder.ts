// Recording metrics without delaying any answer, from a Worker request or from a Durable Object.
//
//   recordLlmCall(env, ctx, { provider, model, endpoint, ok, inputTokens, outputTokens, durationMs })
//   recordValidationError(env, ctx, endpoint)
//
// In a route: recordLlmCall(c.env, c.executionCtx, ...); in a Durable Object: recordLlmCall(this.env,
// this.ctx, ...). `ctx` is whatever can keep work alive after the answer (both have `waitUntil`).
// Recording is synchronous and never throws: it adds plain numbers to this isolate's sums and, when
// no flush is running in the isolate, starts one in `ctx.waitUntil`. The caller awaits nothing.
//
// What a call counts (LlmCall below): ls_llm_calls_total once per backend call, failed ones
// included, so failures/calls is the failure rate; ls_llm_calls_failures_total when `ok` is false;
// the token counters by the usage the backend reported; ls_llm_inference_duration_seconds with
// result success|failure whenever a duration is given (the original system timed only
// /v1/responses and /v1/infer). A shield refusing a question is one ls_llm_validation_errors_total.
//
// How figures reach /metrics:
// - Each isolate sums what its requests record (plain numbers, never a promise). One flush at a
//   time ("the leader") seals the sums into a numbered batch and sends it to a random MetricsDO
//   shard; while that send is under way, further figures collect for the next batch, which the same
//   leader sends when the first is acknowledged. The leader runs in the waitUntil of the request
//   that started it, only awaits its own I/O, and hands over after LEADER_BUDGET_MS.
// - Flush delay: the leader gathers for GATHER_MS (1 s) before it seals a batch, then sends it: about
//   a second plus one Durable Object round-trip, so a busy isolate sends one batch a second rather
//   than one per request. A scrape sends its own isolate's figures at once before reading.
// - A batch is re-sent (same number, same shard) until a shard acknowledges it, and the shard
//   applies each number once: nothing is counted twice, and a failed send loses nothing while the
//   isolate lives. After a failure the next attempt waits (1 s doubling to 30 s) and starts with
//   the next request that records something.
// - What can be lost: figures an isolate holds when it ends (evicted, crashed, replaced by a
//   deployment) before a shard acknowledged them: those of the last round-trip, more while the
//   shard cannot be reached (a sealed batch waits for its own shard, and newer figures wait behind
//   it, kept in memory). A leader whose waitUntil is cut off loses nothing by itself: its batch stays
//   sealed and the next request of the isolate takes over after STALE_LEADER_MS.
import { FAMILIES } from "./families.ts";
import { SeriesSums, type SeriesBatch } from "./series.ts";
import { metricsNamespace, randomShard, sendBatch, type MetricsEnv, type MetricsNamespace } from "./shards.ts";
import { log } from "../log.ts";

/** What keeps a flush alive after the answer: ExecutionContext or DurableObjectState. */
export interface MetricsContext {
  waitUntil(promise: Promise<unknown>): void;
}

/** One call to the inference backend, as the turn engine saw it. */
export interface LlmCall {
  /** The model's provider id (ModelInfo.provider_id). */
  provider: string;
  /** The model's name at its provider, without the provider prefix (ModelInfo.provider_resource_id). */
  model: string;
  /** The endpoint the turn answers: /v1/query, /v1/streaming_query, /v1/responses, /a2a or /v1/infer. */
  endpoint: string;
  /** False when the call failed (connection, backend error, a failed or cut stream). */
  ok: boolean;
  /** Input tokens the backend reported; omitted or null when it reported no usage. */
  inputTokens?: number | null;
  /** Output tokens the backend reported; omitted or null when it reported no usage. */
  outputTokens?: number | null;
  /** From sending the request to the last byte (or the failure), in milliseconds. */
  durationMs?: number | null;
}

/** A leader that made no progress for this long is presumed cut off; the next request takes over. */
export const STALE_LEADER_MS = 10_000;
/** A leader hands over after this long, well inside the 30 s a waitUntil may outlive its answer. */
export const LEADER_BUDGET_MS = 5_000;
/**
 * A flush gathers this long before it seals a batch, so that one batch carries the figures of every
 * request of that second instead of one Durable Object call per request (the flush delay).
 */
export const GATHER_MS = 1_000;
const FIRST_BACKOFF_MS = 1_000;

/** The flush delay: GATHER_MS, or the Worker variable METRICS_FLUSH_DELAY_MS (0 to 60000 ms). */
function gatherMs(env: MetricsEnv): number {
  const configured = Number((env as { METRICS_FLUSH_DELAY_MS?: unknown }).METRICS_FLUSH_DELAY_MS);
  return Number.isFinite(configured) && configured >= 0 && configured <= 60_000 ? configured : GATHER_MS;
}
const MAX_BACKOFF_MS = 30_000;

// This isolate's state: plain data only (see DESIGN "Style worth copying"); the one promise, the
// leader's, belongs to the request that started it and nobody else awaits it.
// workerd refuses random values at the top level of a module, so the id is drawn on first use.
let sender: string | null = null;
const pending = new SeriesSums();
let sealed: { shard: number; batch: SeriesBatch } | null = null;
let seq = 0;
let leader: { token: number; progressAt: number } | null = null;
let leaders = 0;
let failures = 0;
let retryAt = 0;

/** Counts one answered request (the /metrics middleware). */
export function recordRequest(env: MetricsEnv, ctx: MetricsContext, request: { path: string; status: number; durationMs: number; counted: boolean }): void {
  if (!metricsNamespace(env)) return;
  if (request.counted) pending.count(FAMILIES.restApiCalls, { path: request.path, status_code: String(request.status) });
  pending.observe(FAMILIES.responseDuration, { path: request.path }, request.durationMs / 1000);
  flushSoon(env, ctx);
}

/** Counts one call to the inference backend: calls, failures, tokens and its duration. */
export function recordLlmCall(env: MetricsEnv, ctx: MetricsContext, call: LlmCall): void {
  if (!metricsNamespace(env)) return;
  const labels = { provider: call.provider, model: call.model, endpoint: call.endpoint };
  pending.count(FAMILIES.llmCalls, labels);
  if (!call.ok) pending.count(FAMILIES.llmFailures, labels);
  if (isCount(call.inputTokens)) pending.count(FAMILIES.tokensSent, labels, call.inputTokens);
  if (isCount(call.outputTokens)) pending.count(FAMILIES.tokensReceived, labels, call.outputTokens);
  if (typeof call.durationMs === "number") {
    pending.observe(FAMILIES.inferenceDuration, { ...labels, result: call.ok ? "success" : "failure" }, call.durationMs / 1000);
  }
  flushSoon(env, ctx);
}

/** Counts one question a safety shield refused. */
export function recordValidationError(env: MetricsEnv, ctx: MetricsContext, endpoint: string): void {
  if (!metricsNamespace(env)) return;
  pending.count(FAMILIES.validationErrors, { endpoint });
  flushSoon(env, ctx);
}

/** Counts one failed attempt to deliver what follows a turn (it is retried; the log says why). */
export function recordDeliveryFailure(env: MetricsEnv, ctx: MetricsContext, kind: string): void {
  if (!metricsNamespace(env)) return;
  pending.count(FAMILIES.deliveryFailures, { kind });
  flushSoon(env, ctx);
}

function isCount(value: number | null | undefined): value is number {
  return typeof value === "number" && Number.isFinite(value) && value > 0;
}

/**
 * Sends what this isolate holds and waits for it, taking over from a flush under way (a scrape
 * calls this before reading, so it sees at least its own isolate's figures). Never throws.
 */
export async function flushNow(env: MetricsEnv): Promise<void> {
  const namespace = metricsNamespace(env);
  const token = namespace && claimLeadership(Date.now(), true);
  if (token) await lead(namespace, token, 0);
}

function flushSoon(env: MetricsEnv, ctx: MetricsContext): void {
  const namespace = metricsNamespace(env);
  if (!namespace) return;
  const token = claimLeadership(Date.now(), false);
  if (!token) return;
  try {
    ctx.waitUntil(lead(namespace, token, gatherMs(env)));
  } catch {
    // The context has already ended; the flush runs as long as the isolate lets it.
  }
}

/**
 * A token if the caller may lead a flush now; null while another leads, after a failure, or with
 * nothing to send. A scrape takes over from a leader still gathering or sending (that leader stops
 * at its next step): it wants this isolate's figures now, and a batch sent twice is applied once.
 */
function claimLeadership(now: number, scrape: boolean): number | null {
  if (!scrape && leader && now - leader.progressAt < STALE_LEADER_MS) return null;
  if (!scrape && now < retryAt) return null;
  if (!sealed && pending.size === 0) return null;
  leader = { token: ++leaders, progressAt: now };
  return leader.token;
}

async function lead(namespace: MetricsNamespace, token: number, gatherMs: number): Promise<void> {
  const started = Date.now();
  try {
    while (leader?.token === token && Date.now() - started < LEADER_BUDGET_MS) {
      if (!sealed) {
        if (gatherMs > 0) {
          await new Promise((resolve) => setTimeout(resolve, gatherMs));
          // A scrape that took over meanwhile sends what gathered (and what follows).
          if (leader?.token !== token) break;
          leader.progressAt = Date.now();
        }
        if (pending.size === 0) break;
        sealed = { shard: randomShard(), batch: { sender: (sender ??= crypto.randomUUID()), seq: ++seq, rows: pending.take() } };
      }
      const current = sealed;
      try {
        await sendBatch(namespace, current.shard, current.batch);
      } catch (error) {
        failures += 1;
        const wait = Math.min(MAX_BACKOFF_MS, FIRST_BACKOFF_MS * 2 ** (failures - 1));
        retryAt = Date.now() + wait;
        log.warn(`metrics: shard ${current.shard} did not take batch ${current.batch.seq} (${current.batch.rows.length} rows); kept, next attempt in ${wait} ms`, error);
        break;
      }
      failures = 0;
      retryAt = 0;
      if (sealed === current) sealed = null;
      if (leader?.token === token) leader.progressAt = Date.now();
    }
  } finally {
    if (leader?.token === token) leader = null;
  }
}
