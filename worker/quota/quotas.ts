// Token quotas (SPEC quota_handlers, REFERENCE "Quota"): every configured limiter applies to every
// turn. A turn is admitted when it really starts (its conversation's turn slot taken) only while
// every counter has tokens left beyond what running turns have reserved, and it reserves an estimate
// of its own tokens until it settles with what it used. Counters live in QuotaDOs; a registry in the
// record store lets the cron scheduler find the counters whose period has elapsed.
//
// Bound (README "Token quotas"): a turn is admitted only when what is left (beyond other turns'
// reservations) covers its estimated input, and it reserves that input plus an allowance for its
// answer. Turns that stay within their reservations never overdraw a limit together; a turn that
// uses more (a longer answer, the further model calls of a tool loop) overdraws it by at most the
// difference, so a limit is exceeded by at most what the turns running at once used beyond their
// reservations (one turn's excess when they run one after another).
import type { Config, QuotaLimiterConfig } from "../config/schema.ts";
import { quotaSubject } from "../domain/quota-periods.ts";
import { errors, type ApiError } from "../errors.ts";
import type { Store } from "../storage/store.ts";
import type { Admission, QuotaDO, QuotaReading } from "../../durable-objects/quota-do.ts";

export interface QuotaCounter {
  spec: QuotaLimiterConfig;
  subject: string;
}

/** Limiter name → tokens left (never below zero as shown to clients). */
export type AvailableQuotas = Record<string, number>;

/**
 * What a turn reserves beyond its input: its answer's length is unknown when it starts. A turn that
 * answers longer than this may overdraw a counter by the difference.
 */
export const OUTPUT_RESERVATION_TOKENS = 1024;

/** The counters that apply to a user's turn. */
export function quotaCounters(config: Config, userId: string): QuotaCounter[] {
  return config.quota_handlers.limiters.map((spec) => ({ spec, subject: quotaSubject(spec, userId) }));
}

export function quotaStub(namespace: DurableObjectNamespace<QuotaDO>, counter: QuotaCounter) {
  return namespace.getByName(`${counter.spec.name}:${counter.subject}`);
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

export interface Admitted {
  /** Tokens each limiter had for this turn when it was admitted. */
  admitted: AvailableQuotas;
  /** Counters touched for the first time: to be registered for the scheduler. */
  created: Array<{ limiter: string; subject: string; nextResetAt: number }>;
}

/**
 * Admits a turn on every counter, needing `inputTokens` there and reserving them plus the output
 * reservation under `reservationId`; a 429 when one has not enough left (the reservations already
 * made are released then).
 */
export async function admitQuotas(env: Env, counters: QuotaCounter[], reservationId: string, inputTokens: number): Promise<Admitted | ApiError> {
  const now = nowSeconds();
  const needed = Math.max(1, inputTokens);
  const results = await Promise.all(
    counters.map((counter) => quotaStub(env.QUOTA, counter).admit(counter.spec, reservationId, needed, needed + OUTPUT_RESERVATION_TOKENS, now)),
  );
  const refused = counters.findIndex((_, index) => !results[index]!.ok);
  if (refused >= 0) {
    await settleQuotas(env, counters.filter((_, index) => results[index]!.ok), reservationId, 0);
    const { available: left, needed: wanted, held } = results[refused] as Extract<Admission, { ok: false }>;
    const counter = counters[refused]!;
    const who = whose(counter);
    // Tokens that turns in progress hold come back as they end: worth a retry soon when they would
    // be enough (the counter itself covers what is needed), unlike a spent quota.
    if (held > 0 && left + held >= wanted) {
      return errors.quotaExceeded(`${who} has ${left} tokens, but ${wanted} tokens are needed: ${held} are held by answers in progress; try again once they end`, 1);
    }
    return left <= 0 ? noTokensLeft(counter) : errors.quotaExceeded(`${who} has ${left} tokens, but ${wanted} tokens are needed`);
  }
  const admitted: AvailableQuotas = {};
  const created: Admitted["created"] = [];
  counters.forEach((counter, index) => {
    const result = results[index]!;
    if (!result.ok) return;
    admitted[counter.spec.name] = result.admitted;
    if (result.created) created.push({ limiter: counter.spec.name, subject: counter.subject, nextResetAt: result.nextResetAt });
  });
  return { admitted, created };
}

/** How a refusal names a counter's subject. */
function whose(counter: QuotaCounter): string {
  return counter.spec.type === "cluster_limiter" ? "Cluster" : `User ${counter.subject}`;
}

function noTokensLeft(counter: QuotaCounter): ApiError {
  return errors.quotaExceeded(`${whose(counter)} has no available tokens`);
}

/**
 * The original's check before a turn: a 429 when a counter has no tokens left at all (turns in
 * progress aside), without reserving anything. For work a turn does before its admission that
 * costs a model call of its own (compaction's summary), so a caller without tokens does not cause it.
 */
export async function spentQuota(env: Env, counters: QuotaCounter[]): Promise<ApiError | null> {
  const spent = (await readQuotas(env, counters)).find((counter) => counter.reading.available <= 0);
  return spent ? noTokensLeft(spent) : null;
}

/** Settles a turn's reservation on every counter with the tokens it used. Idempotent. */
export async function settleQuotas(env: Env, counters: QuotaCounter[], reservationId: string, tokens: number): Promise<void> {
  const now = nowSeconds();
  await Promise.all(counters.map((counter) => quotaStub(env.QUOTA, counter).settle(counter.spec, reservationId, tokens, now)));
}

/** What the answer reports: what each limiter admitted the turn with, minus the turn's use. */
export function remaining(admitted: AvailableQuotas, tokens: number): AvailableQuotas {
  return Object.fromEntries(Object.entries(admitted).map(([name, left]) => [name, Math.max(0, left - tokens)]));
}

/** Reads counters without changing them (beyond bringing their period up to date). */
export async function readQuotas(env: Env, counters: QuotaCounter[]): Promise<Array<QuotaCounter & { reading: QuotaReading }>> {
  const readings = await Promise.all(counters.map((counter) => quotaStub(env.QUOTA, counter).read(counter.spec, nowSeconds())));
  return counters.map((counter, index) => ({ ...counter, reading: readings[index]! }));
}

/** How many due counters one scheduler run brings up to date at most. */
const SCHEDULER_BATCH = 500;

/**
 * The scheduler (cron): applies the elapsed periods of every registered counter that is due. The
 * counter itself decides what is due, so a run that overlaps another, or a touch by a request in
 * between, never applies a period twice; the registry only moves its bookmark forward.
 */
export async function refreshDueQuotas(env: Env, config: Config, store: Store): Promise<number> {
  const limiters = new Map(config.quota_handlers.limiters.map((spec) => [spec.name, spec]));
  if (limiters.size === 0) return 0;
  const due = await store.quotaSubjects.due(nowSeconds(), SCHEDULER_BATCH);
  let refreshed = 0;
  await Promise.all(
    due.map(async (entry) => {
      const spec = limiters.get(entry.limiter);
      if (!spec) return;
      const reading = await quotaStub(env.QUOTA, { spec, subject: entry.subject }).read(spec, nowSeconds());
      if (await store.quotaSubjects.advance({ limiter: entry.limiter, subject: entry.subject, from: entry.nextResetAt, to: reading.nextResetAt })) refreshed++;
    }),
  );
  return refreshed;
}
