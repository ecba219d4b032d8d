// Where the deployment's metrics are kept: METRICS_SHARDS MetricsDO objects, by name. Several
// shards spread the flushes of many isolates so no single object becomes the bottleneck; a scrape
// reads all of them (one subrequest each) and adds them up.
import type { MetricsDO } from "../../durable-objects/metrics-do.ts";
import type { SeriesBatch, SeriesRow } from "./series.ts";

/**
 * Number of shards. Raising it later is safe (old rows stay in the low shards, which are still
 * read); lowering it hides the rows of the dropped shards.
 */
export const METRICS_SHARDS = 8;

export type MetricsNamespace = DurableObjectNamespace<MetricsDO>;

/** A Worker's or Durable Object's env; only its METRICS binding is read (any env type will do). */
export type MetricsEnv = object;

/**
 * The METRICS binding, or null in a Worker built from another wrangler configuration without it
 * (such a Worker records nothing and its /metrics answers 503).
 */
export function metricsNamespace(env: MetricsEnv): MetricsNamespace | null {
  const binding = (env as { METRICS?: unknown } | undefined)?.METRICS;
  return binding ? (binding as MetricsNamespace) : null;
}

function shard(namespace: MetricsNamespace, index: number) {
  return namespace.getByName(`shard-${index}`);
}

export function randomShard(): number {
  return Math.floor(Math.random() * METRICS_SHARDS);
}

export async function sendBatch(namespace: MetricsNamespace, index: number, batch: SeriesBatch): Promise<void> {
  await shard(namespace, index).add(batch);
}

/** Every shard's rows; throws when any shard cannot be read (a partial sum would make counters go down). */
export async function readShards(namespace: MetricsNamespace): Promise<SeriesRow[][]> {
  // (RPC's stub types turn a tuple into an array of unions; the rows arrive exactly as the object returns them.)
  return Promise.all(Array.from({ length: METRICS_SHARDS }, (_, index) => shard(namespace, index).read() as unknown as Promise<SeriesRow[]>));
}
