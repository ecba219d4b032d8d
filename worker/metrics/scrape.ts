// One scrape: this isolate's own figures flushed, every shard read and added up, and the gauges the
// original system set at start-up (model configuration, degraded mode) computed now.
import { ApiError } from "../errors.ts";
import type { Runtime } from "../runtime.ts";
import { findModel, listModels } from "../turn/models.ts";
import { FAMILIES } from "./families.ts";
import { backendState } from "./readiness.ts";
import { flushNow } from "./recorder.ts";
import { encodeLabels, SeriesSums, type SeriesRow } from "./series.ts";
import { metricsNamespace, readShards, type MetricsEnv } from "./shards.ts";
import { renderExposition } from "./text-format.ts";
import { log } from "../log.ts";

const metricsUnavailable = (cause: string) => new ApiError(503, "Metrics are unavailable", cause);

/** The exposition text of the whole deployment. */
export async function scrape(env: MetricsEnv, rt: Runtime): Promise<string> {
  const namespace = metricsNamespace(env);
  if (!namespace) throw metricsUnavailable("this deployment has no METRICS Durable Object binding");
  await flushNow(env);
  const [shards, gauges] = await Promise.all([
    readShards(namespace).catch((error: unknown) => {
      log.error("metrics: a shard could not be read", error);
      throw metricsUnavailable("the metrics store could not be read; try again");
    }),
    gaugeRows(rt),
  ]);
  const sums = new SeriesSums();
  for (const rows of shards) sums.addRows(rows);
  sums.addRows(gauges);
  return renderExposition(Object.values(FAMILIES), sums.list());
}

/**
 * ls_started_in_degraded_mode, and ls_provider_model_configuration for each language model the
 * backend serves (none while it is unreachable, as the original system skipped them in degraded mode).
 */
async function gaugeRows(rt: Runtime): Promise<SeriesRow[]> {
  const backend = await backendState(rt);
  const degraded = FAMILIES.degraded;
  const rows: SeriesRow[] = [[degraded.name, encodeLabels(degraded, {}), "", !backend.reachable && backend.degraded ? 1 : 0]];
  const up = FAMILIES.providerUp;
  for (const provider of backend.health) rows.push([up.name, encodeLabels(up, { provider: provider.provider_id }), "", provider.status === "ok" ? 1 : 0]);
  if (!backend.reachable) return rows;
  let models;
  try {
    models = await listModels(rt);
  } catch {
    return rows;
  }
  const { default_model: model, default_provider: provider } = rt.config.inference;
  const chosen = model && provider ? findModel(models, provider, model) : undefined;
  const family = FAMILIES.providerModel;
  for (const candidate of models) {
    if (candidate.model_type !== "llm") continue;
    rows.push([family.name, encodeLabels(family, { provider: candidate.provider_id, model: candidate.identifier }), "", candidate === chosen ? 1 : 0]);
  }
  return rows;
}
