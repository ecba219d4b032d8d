// The models clients may use, and the selection rules of SPEC (request → conversation → default →
// first LLM).
import { listProviderModels, type ModelsListing } from "../backends/provider-models.ts";
import { errors } from "../errors.ts";
import type { Runtime } from "../runtime.ts";
import { backendError } from "./backend-errors.ts";
import type { ModelInfo } from "../domain/conversation.ts";

export type { ModelInfo } from "../domain/conversation.ts";

/**
 * The models clients may use: every backend's (worker/backends/provider-models.ts). Turns may use a
 * list up to 30 s old; `fresh` asks now (GET /v1/models reflects the backends as they are). Only
 * when no backend could be listed is it a failure (SPEC's 503): a provider that is down fails only
 * its own models.
 */
export async function listModels(rt: Runtime, options: { fresh?: boolean } = {}): Promise<ModelInfo[]> {
  return usableModels(await listProviderModels(rt.backends, options));
}

/** A listing's models; SPEC's 503 when no backend could be listed. */
export function usableModels(listing: ModelsListing): ModelInfo[] {
  if (listing.providers.every((provider) => provider.cause !== null)) throw backendError(listing.providers[0]!.error);
  return listing.models;
}

/**
 * The model a client or the configuration names. With a provider (the query endpoints send both),
 * that provider's model by its name or full id. Without one, `name` is tried as an exact model id
 * first (ids such as meta-llama/Llama-3.1-8B contain a slash themselves), then as `provider/model`
 * split on the first slash, the provider being the one /v1/models reports (so "openai/gpt-4o-mini"
 * finds a backend model listed as "gpt-4o-mini" owned by openai), then as a bare model name.
 */
export function findModel(models: ModelInfo[], provider: string | undefined, name: string): ModelInfo | undefined {
  const named = (m: ModelInfo, model: string, from: string) =>
    m.provider_id === from && (m.provider_resource_id === model || m.identifier === model || m.identifier === `${from}/${model}`);
  if (provider !== undefined) return models.find((m) => named(m, name, provider));
  const exact = models.find((m) => m.identifier === name);
  if (exact) return exact;
  const slash = name.indexOf("/");
  if (slash > 0) {
    const split = models.find((m) => named(m, name.slice(slash + 1), name.slice(0, slash)));
    if (split) return split;
  }
  return models.find((m) => m.provider_resource_id === name);
}

export interface ModelChoice {
  model: ModelInfo;
  /** True when the client named the model; false when the server chose it. */
  requested: boolean;
}

/**
 * SPEC's selection order: the request's model; the conversation's last model if still available;
 * the configured default; the first language model. Nothing usable → 404 "Model not found"; a
 * requested model that is not a language model (an embedding model) → 422.
 */
export async function chooseModel(
  rt: Runtime,
  request: { model?: string; provider?: string },
  lastUsed?: { model: string; provider: string } | null,
): Promise<ModelChoice> {
  const listing = await listProviderModels(rt.backends);
  const models = usableModels(listing);
  /**
   * A model that is not listed: SPEC's 503 when the backend serving the provider it names is down
   * (nothing of it could be listed), else 404. A provider without an endpoint of its own, or no
   * provider at all, is the default backend's (inference_backend).
   */
  const missing = (provider: string | undefined, name: string) => {
    const slash = name.indexOf("/");
    const owner = provider ?? (slash > 0 ? name.slice(0, slash) : undefined);
    const serving = listing.providers.find((listed) => !listed.backend.isDefault && listed.backend.id === owner) ?? listing.providers.find((listed) => listed.backend.isDefault);
    if (serving && serving.cause !== null) return backendError(serving.error);
    return errors.modelNotFound(provider && !name.startsWith(`${provider}/`) ? `${provider}/${name}` : name);
  };
  if (request.model) {
    const found = findModel(models, request.provider, request.model);
    if (!found) throw missing(request.provider, request.model);
    // An embedding model cannot answer: the backend would refuse it as a server fault.
    if (found.model_type !== "llm") throw errors.invalidValue(`Model ${found.identifier} is not a language model (model_type ${found.model_type}) and cannot answer questions.`);
    return { model: found, requested: true };
  }
  const llms = models.filter((m) => m.model_type === "llm");
  const previous = lastUsed && findModel(llms, lastUsed.provider, lastUsed.model);
  if (previous) return { model: previous, requested: false };
  const inference = rt.config.inference;
  if (inference?.default_model) {
    const configured = findModel(models, inference.default_provider, inference.default_model);
    if (!configured) throw missing(inference.default_provider, inference.default_model);
    return { model: configured, requested: false };
  }
  if (!llms[0]) throw errors.noLanguageModel();
  return { model: llms[0], requested: false };
}
