// Readiness and degraded mode. A Worker has no start-up to fail, so what the original system decided
// once at start-up (backend reachable? degraded?) is judged each time readiness is asked and each
// time /metrics is scraped. With inference_backend.allow_degraded_mode the gateway keeps answering
// what does not need the model while the backend is unreachable and readiness says so (200,
// "degraded"); without it readiness is 503. Turns fail with 503 either way while the backend is down.
import * as z from "zod";
import { ApiError } from "../errors.ts";
import type { Runtime } from "../runtime.ts";
import { probeProviders } from "../backends/provider-models.ts";
import { findModel, listModels } from "../turn/models.ts";

/** Llama Stack's provider list is asked with the probe's own bounds, so readiness never hangs. */
const PROVIDERS_TIMEOUT_MS = 5_000;

const ProviderHealthSchema = z.object({ provider_id: z.string(), status: z.string(), message: z.string() });
export type ProviderHealth = z.output<typeof ProviderHealthSchema>;

export const ReadinessSchema = z.object({
  ready: z.boolean(),
  reason: z.string(),
  overall_status: z.enum(["healthy", "degraded", "unhealthy"]),
  impacts: z.array(z.string()).nullable(),
  providers: z.array(ProviderHealthSchema),
});
export type Readiness = z.output<typeof ReadinessSchema>;

export const DEGRADED_IMPACTS = ["LLM inference unavailable", "RAG functionality unavailable", "Agent tools unavailable"];

/**
 * Whether the default backend answers now, and whether the gateway therefore serves in degraded
 * mode; with every backend's health (the default backend's first).
 */
export async function backendState(
  rt: Runtime,
): Promise<({ reachable: true } | { reachable: false; cause: string; degraded: boolean }) & { health: ProviderHealth[] }> {
  const health = await probeProviders(rt.backends);
  const first = health[0]!;
  if (first.status === "ok") return { reachable: true, health };
  return { reachable: false, cause: first.message, degraded: rt.config.inference_backend.allow_degraded_mode, health };
}

/** The readiness answer (UPSTREAM "Readiness") and its status code. */
export async function readiness(rt: Runtime): Promise<{ status: 200 | 503; body: Readiness }> {
  const [backend, reported] = await Promise.all([backendState(rt), providersHealth(rt)]);
  if (!backend.reachable) {
    const entry: ProviderHealth = { provider_id: backend.health[0]!.provider_id, status: "error", message: backend.cause };
    // Degraded is ready, and its answer lists no provider (UPSTREAM): a probe that fails on any
    // provider in error would otherwise take a pod that serves in degraded mode out.
    if (backend.degraded) {
      return {
        status: 200,
        body: { ready: true, reason: "Service running in degraded mode", overall_status: "degraded", impacts: DEGRADED_IMPACTS, providers: [] },
      };
    }
    return {
      status: 503,
      body: {
        ready: false,
        reason: "Cannot connect to backend service",
        overall_status: "unhealthy",
        impacts: ["LLM inference unavailable", "Provider health checks unavailable"],
        providers: [entry],
      },
    };
  }
  // Another provider that is down: its models fail, the others' still answer; readiness names it (SPEC).
  const unhealthy = [...backend.health.slice(1), ...reported].filter((provider) => provider.status === "error");
  if (unhealthy.length > 0) {
    return {
      status: 503,
      body: {
        ready: false,
        reason: `Providers not healthy: ${unhealthy.map((provider) => provider.provider_id).join(", ")}`,
        overall_status: "unhealthy",
        impacts: unhealthy.map((provider) => `Provider ${provider.provider_id}: ${provider.message}`),
        providers: unhealthy,
      },
    };
  }
  const missing = await defaultModelProblem(rt);
  if (missing) {
    return {
      status: 503,
      body: { ready: false, reason: missing, overall_status: "unhealthy", impacts: ["Default model not available in registry"], providers: [] },
    };
  }
  return { status: 200, body: { ready: true, reason: "All providers are healthy", overall_status: "healthy", impacts: null, providers: [] } };
}

/** Why the configured default model cannot be used, or null (also when none is configured). */
async function defaultModelProblem(rt: Runtime): Promise<string | null> {
  const { default_model: model, default_provider: provider } = rt.config.inference;
  if (!model || !provider) return null;
  try {
    // The turns' own list (up to 30 s old): readiness reports what a turn would find.
    return findModel(await listModels(rt), provider, model) ? null : `Model ${provider}/${model} not found in model registry`;
  } catch (error) {
    return error instanceof ApiError ? error.cause : "the backend's models could not be listed";
  }
}

const LlamaStackProvidersSchema = z.looseObject({
  data: z.array(
    z.looseObject({
      provider_id: z.string(),
      health: z.looseObject({ status: z.string().optional(), message: z.string().optional() }).nullish(),
    }),
  ),
});

/**
 * The backend's own providers and their health, where the backend reports them (Llama Stack's
 * GET /v1/providers); other OpenAI-compatible servers have no such list, which is not a problem.
 */
async function providersHealth(rt: Runtime): Promise<ProviderHealth[]> {
  let body: unknown;
  try {
    body = await rt.backend.get("/providers", { timeout: PROVIDERS_TIMEOUT_MS, maxRetries: 0 });
  } catch {
    return [];
  }
  return parseProvidersHealth(body);
}

/** Llama Stack's provider list as readiness entries; its "OK", "Error", "Not Implemented" become ok, error, not_implemented. */
export function parseProvidersHealth(body: unknown): ProviderHealth[] {
  const parsed = LlamaStackProvidersSchema.safeParse(body);
  if (!parsed.success) return [];
  return parsed.data.data.map((provider) => ({
    provider_id: provider.provider_id,
    status: provider.health?.status ? provider.health.status.trim().toLowerCase().replace(/\s+/g, "_") : "unknown",
    message: provider.health?.message ?? "",
  }));
}
