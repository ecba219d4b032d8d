// Every provider's models and health. Each backend's /v1/models is asked on its own: a provider that
// is down contributes no models and reports why, the others still list theirs. Models of a provider
// with its own endpoint are named `<provider>/<the backend's id>` (two servers may both serve
// "llama3"); the default backend's keep the names it gives them, as before.
import { APIConnectionError, APIConnectionTimeoutError, APIError } from "openai";
import { DEFAULT_BACKEND_ID } from "../config/schema.ts";
import type { ModelInfo } from "../domain/conversation.ts";
import { checkedModelList, MalformedAnswer } from "./answer-shapes.ts";
import type { Backend, Backends } from "./providers.ts";
import { log } from "../log.ts";

/** Models change rarely; re-reading them on every turn would add a round-trip per backend to each. */
const MODELS_TTL_MS = 30_000;
/**
 * With several backends a failed listing is remembered for a while, so a provider that hangs does
 * not hold up every turn for the others' models (a fresh listing, as /v1/models and readiness ask
 * for, looks again at once). With one backend nothing else could answer, so a failure is never
 * remembered (a recovered backend is used at once, as before).
 */
const FAILURE_TTL_MS = 15_000;
/**
 * A listing's bound when it must not wait for one backend: probes, and listings across several
 * backends. A lone backend is listed with its client's own time-out and retries, as before.
 */
export const LIST_TIMEOUT_MS = 5_000;

export interface ProviderListing {
  backend: Backend;
  models: ModelInfo[];
  /** Why the backend could not be listed (safe to show), or null. */
  cause: string | null;
  /** The failure itself, for callers that map it (e.g. to SPEC's 503). */
  error: unknown;
}

export interface ModelsListing {
  /** The models of every backend that answered, the default backend's first. */
  models: ModelInfo[];
  providers: ProviderListing[];
}

/** A failure as plain data (what it was, not the error object): re-created for each request that reads it. */
interface Failure {
  at: number;
  cause: string;
  /** The status the backend answered; null when it did not answer (or its answer could not be read). */
  status: number | null;
  /** It answered, with a listing that could not be read. */
  malformed: boolean;
}

type Entry = { at: number; models: ModelInfo[] } | Failure;

// Settled, plain data only (keyed by the runtime's backends): a request never awaits another's fetch.
const cache = new WeakMap<Backends, Map<string, Entry>>();
/** Configurations already told about shadowed models (once per loaded configuration, not per listing). */
const warned = new WeakSet<Backends>();

/**
 * Every backend's models. Up to 30 s old unless `fresh` (GET /v1/models, readiness); `probe`
 * bounds each listing as a health probe (5 s, no retries). Never throws: see `providers` for the
 * backends that failed (all of them failed when every listing has a cause).
 */
export async function listProviderModels(backends: Backends, options: { fresh?: boolean; probe?: boolean } = {}): Promise<ModelsListing> {
  let entries = cache.get(backends);
  if (!entries) cache.set(backends, (entries = new Map()));
  const known = entries;
  const several = backends.all.length > 1;
  const listings = await Promise.all(
    backends.all.map(async (backend): Promise<ProviderListing> => {
      const hit = known.get(backend.id);
      const fresh = hit && !options.fresh && Date.now() - hit.at < ("models" in hit ? MODELS_TTL_MS : FAILURE_TTL_MS);
      if (fresh && "models" in hit) return { backend, models: hit.models, cause: null, error: null };
      if (fresh && "cause" in hit && several) return { backend, models: [], cause: hit.cause, error: recreate(hit) };
      try {
        const raw = await listRaw(backend, several || options.probe === true);
        const models = raw.map((entry) => (backend.isDefault ? defaultModel(entry, backend) : ownModel(entry, backend))).filter((model) => allowed(backend, model));
        known.set(backend.id, { at: Date.now(), models });
        return { backend, models, cause: null, error: null };
      } catch (error) {
        const cause = failureCause(error);
        if (several) {
          const status = error instanceof APIError && typeof error.status === "number" ? error.status : null;
          known.set(backend.id, { at: Date.now(), cause, status, malformed: error instanceof MalformedAnswer });
        } else {
          known.delete(backend.id);
        }
        return { backend, models: [], cause, error };
      }
    }),
  );
  const [first, ...others] = listings;
  const owned = new Set(others.map((listing) => listing.backend.id));
  // A provider with its own endpoint owns its id: the default backend's models reported under the
  // same provider id would make `provider/model` lead to two backends.
  const shadowed = first!.models.filter((model) => owned.has(model.provider_id));
  if (shadowed.length > 0 && !warned.has(backends)) {
    warned.add(backends);
    log.warn(`models of inference_backend reported under provider ids of other providers are not listed: ${[...new Set(shadowed.map((m) => m.identifier))].join(", ")}`);
  }
  const defaults = first!.models.filter((model) => !shadowed.includes(model) && defaultFilterAllows(backends, model));
  return { models: [...defaults, ...others.flatMap((listing) => listing.models)], providers: [{ ...first!, models: defaults }, ...others] };
}

/** A remembered failure as an error of the kind it was (a connection failure, the status answered, a listing unread). */
function recreate(failure: Failure): Error {
  if (failure.malformed) return new MalformedAnswer(failure.cause);
  if (failure.status === null) return new APIConnectionError({ message: failure.cause });
  return APIError.generate(failure.status, undefined, failure.cause, new Headers());
}

/** GET /models as the SDK sends it, its answer checked (the SDK's page reads a listing without a list as empty). */
async function listRaw(backend: Backend, bounded: boolean): Promise<Array<Record<string, unknown>>> {
  return checkedModelList(await backend.client.get("/models", bounded ? { timeout: Math.min(LIST_TIMEOUT_MS, backend.timeoutMs), maxRetries: 0 } : undefined));
}

/** A short, safe reason for a failed listing or probe (the backend's own texts may carry internals). */
export function failureCause(error: unknown): string {
  if (error instanceof APIConnectionTimeoutError) return "the backend did not answer in time";
  if (error instanceof APIConnectionError) return "Connection error while trying to reach backend service.";
  if (error instanceof APIError) return error.status ? `the backend answered ${error.status}` : "the backend failed";
  if (error instanceof MalformedAnswer) return error.message;
  return "the backend could not be reached";
}

/** The original filter: providers without a url narrow the default backend's models of their id. */
function defaultFilterAllows(backends: Backends, model: ModelInfo): boolean {
  const only = backends.defaultFilters.get(model.provider_id);
  return !only || only.includes(model.provider_resource_id) || only.includes(model.identifier);
}

function allowed(backend: Backend, model: ModelInfo): boolean {
  const only = backend.allowedModels;
  return !only || only.includes(model.provider_resource_id) || only.includes(model.identifier);
}

/**
 * A model as the default backend lists it. Llama Stack reports provider and type in
 * custom_metadata; plain OpenAI-compatible servers do not. When a provider entry names this backend
 * (same url), its models are that provider's.
 */
function defaultModel(raw: Record<string, unknown>, backend: Backend): ModelInfo {
  const model = modelInfo(raw);
  return backend.id === DEFAULT_BACKEND_ID ? model : { ...model, provider_id: backend.id };
}

/** A model of a provider with its own endpoint: `<provider>/<id>`, sent to the backend as `<id>`. */
function ownModel(raw: Record<string, unknown>, backend: Backend): ModelInfo {
  const model = modelInfo(raw);
  const id = String(raw.id);
  return { ...model, identifier: `${backend.id}/${id}`, provider_id: backend.id, provider_resource_id: id };
}

function modelInfo(raw: Record<string, unknown>): ModelInfo {
  const id = String(raw.id);
  const meta = (raw.custom_metadata ?? raw.metadata ?? {}) as Record<string, unknown>;
  const slash = id.indexOf("/");
  const provider = typeof meta.provider_id === "string" ? meta.provider_id : slash > 0 ? id.slice(0, slash) : String(raw.owned_by ?? "backend");
  const resource = typeof meta.provider_resource_id === "string" ? meta.provider_resource_id : slash > 0 ? id.slice(slash + 1) : id;
  const modelType = typeof meta.model_type === "string" ? meta.model_type : /embed/i.test(id) ? "embedding" : "llm";
  const metadata = Object.fromEntries(Object.entries(meta).filter(([key]) => !["provider_id", "provider_resource_id", "model_type"].includes(key)));
  return { identifier: id, metadata, api_model_type: modelType, provider_id: provider, type: "model", provider_resource_id: resource, model_type: modelType };
}

export interface ProviderHealth {
  provider_id: string;
  status: "ok" | "error";
  message: string;
}

/** Each backend's health now (its /v1/models, bounded), for readiness, /v1/providers and the up gauge. */
export async function probeProviders(backends: Backends): Promise<ProviderHealth[]> {
  return healthOf(await listProviderModels(backends, { fresh: true, probe: true }));
}

/** Each backend's health as a listing found it. */
export function healthOf({ providers }: ModelsListing): ProviderHealth[] {
  return providers.map((listing) => ({
    provider_id: listing.backend.id,
    status: listing.cause === null ? "ok" : "error",
    message: listing.cause ?? `${listing.backend.wire === "chat" ? "Chat Completions" : "Responses"} backend reachable, ${listing.models.length} model${listing.models.length === 1 ? "" : "s"}`,
  }));
}
