// Token quotas (SPEC quota_handlers, REFERENCE "Quota"): every configured limiter applies to every
// turn. Before the model call each counter must have tokens left (429 otherwise); after the answer
// its input + output tokens are consumed from each. Counters live in QuotaDOs; a registry in the
// record store lets the cron scheduler find the counters whose period has elapsed.
import type { Config } from "../config/schema.ts";
import { errors } from "../errors.ts";
import type { Store } from "../storage/store.ts";
import { quotaSubject, type LimiterSpec } from "./periods.ts";
import type { QuotaDO, QuotaReading } from "../../durable-objects/quota-do.ts";

export interface QuotaCounter {
  spec: LimiterSpec;
  subject: string;
}

/** Limiter name → tokens left (never below zero as shown to clients). */
export type AvailableQuotas = Record<string, number>;

/** The counters that apply to a user's turn. */
export function quotaCounters(config: Config, userId: string): QuotaCounter[] {
  return config.quota_handlers.limiters.map((spec) => ({ spec, subject: quotaSubject(spec, userId) }));
}

export function quotaStub(namespace: DurableObjectNamespace<QuotaDO>, counter: Pick<QuotaCounter, "subject"> & { spec: Pick<LimiterSpec, "name"> }) {
  return namespace.getByName(`${counter.spec.name}:${counter.subject}`);
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

/** Throws 429 when any counter is exhausted; otherwise returns what is left. */
export async function checkQuotas(env: Env, store: Store, counters: QuotaCounter[]): Promise<AvailableQuotas> {
  const readings = await Promise.all(counters.map((counter) => quotaStub(env.QUOTA, counter).read(counter.spec, nowSeconds())));
  await register(store, counters, readings);
  counters.forEach((counter, index) => {
    if (readings[index]!.available > 0) return;
    throw errors.quotaExceeded(
      counter.spec.type === "cluster_limiter" ? "Cluster has no available tokens" : `User ${counter.subject} has no available tokens`,
    );
  });
  return shown(counters, readings);
}

/** Consumes an answer's tokens from every counter and returns what is left. */
export async function consumeQuotas(env: Env, store: Store, counters: QuotaCounter[], tokens: number): Promise<AvailableQuotas> {
  const readings = await Promise.all(counters.map((counter) => quotaStub(env.QUOTA, counter).consume(counter.spec, tokens, nowSeconds())));
  await register(store, counters, readings);
  return shown(counters, readings);
}

/** Reads counters without changing them (beyond bringing their period up to date). */
export async function readQuotas(env: Env, counters: QuotaCounter[]): Promise<Array<QuotaCounter & { reading: QuotaReading }>> {
  const readings = await Promise.all(counters.map((counter) => quotaStub(env.QUOTA, counter).read(counter.spec, nowSeconds())));
  return counters.map((counter, index) => ({ ...counter, reading: readings[index]! }));
}

function shown(counters: QuotaCounter[], readings: QuotaReading[]): AvailableQuotas {
  return Object.fromEntries(counters.map((counter, index) => [counter.spec.name, Math.max(0, readings[index]!.available)]));
}

/** New counters join the registry the scheduler scans. */
async function register(store: Store, counters: QuotaCounter[], readings: QuotaReading[]): Promise<void> {
  await Promise.all(
    counters.flatMap((counter, index) =>
      readings[index]!.created
        ? [store.quotaSubjects.register({ limiter: counter.spec.name, subject: counter.subject, nextResetAt: readings[index]!.nextResetAt })]
        : [],
    ),
  );
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
