// The models clients may use: the backend's /v1/models, narrowed by configured providers'
// allowed_models, and the selection rules of SPEC (request → conversation → default → first LLM).
import { errors } from "../errors.ts";
import type { Runtime } from "../runtime.ts";
import { backendError } from "./backend-errors.ts";

export interface ModelInfo {
  identifier: string;
  metadata: Record<string, unknown>;
  api_model_type: string;
  provider_id: string;
  type: "model";
  provider_resource_id: string;
  model_type: string;
}

/** Models change rarely; re-reading them on every turn would add a backend round-trip to each. */
const MODELS_TTL_MS = 30_000;
const cache = new WeakMap<Runtime, { at: number; models: Promise<ModelInfo[]> }>();

export function listModels(rt: Runtime): Promise<ModelInfo[]> {
  const hit = cache.get(rt);
  if (hit && Date.now() - hit.at < MODELS_TTL_MS) return hit.models;
  const models = fetchModels(rt);
  cache.set(rt, { at: Date.now(), models });
  models.catch(() => cache.delete(rt));
  return models;
}

async function fetchModels(rt: Runtime): Promise<ModelInfo[]> {
  let data: Array<Record<string, unknown>>;
  try {
    const page = await rt.backend.models.list();
    data = page.data as unknown as Array<Record<string, unknown>>;
  } catch (error) {
    throw backendError(error);
  }
  const allowed = new Map<string, string[]>();
  for (const provider of rt.config.inference?.providers ?? []) {
    if (provider.allowed_models) allowed.set(provider.type, provider.allowed_models);
  }
  return data.map(toModelInfo).filter((model) => {
    const only = allowed.get(model.provider_id);
    return !only || only.includes(model.provider_resource_id) || only.includes(model.identifier);
  });
}

/** Llama Stack reports provider and type in custom_metadata; plain OpenAI-compatible servers do not. */
function toModelInfo(raw: Record<string, unknown>): ModelInfo {
  const id = String(raw.id);
  const meta = (raw.custom_metadata ?? raw.metadata ?? {}) as Record<string, unknown>;
  const slash = id.indexOf("/");
  const provider = typeof meta.provider_id === "string" ? meta.provider_id : slash > 0 ? id.slice(0, slash) : String(raw.owned_by ?? "backend");
  const resource =
    typeof meta.provider_resource_id === "string" ? meta.provider_resource_id : slash > 0 ? id.slice(slash + 1) : id;
  const modelType = typeof meta.model_type === "string" ? meta.model_type : /embed/i.test(id) ? "embedding" : "llm";
  const metadata = Object.fromEntries(
    Object.entries(meta).filter(([key]) => !["provider_id", "provider_resource_id", "model_type"].includes(key)),
  );
  return {
    identifier: id,
    metadata,
    api_model_type: modelType,
    provider_id: provider,
    type: "model",
    provider_resource_id: resource,
    model_type: modelType,
  };
}

/** Finds a model by provider and name; the name may be the provider's resource id or the full identifier. */
export function findModel(models: ModelInfo[], provider: string | undefined, name: string): ModelInfo | undefined {
  return models.find(
    (m) =>
      (provider === undefined || m.provider_id === provider) &&
      (m.identifier === name || m.provider_resource_id === name || m.identifier === `${provider}/${name}`),
  );
}

export interface ModelChoice {
  model: ModelInfo;
  /** True when the client named the model; false when the server chose it. */
  requested: boolean;
}

/**
 * SPEC's selection order: the request's model; the conversation's last model if still available;
 * the configured default; the first language model. Nothing usable → 404 "Model not found".
 */
export async function chooseModel(
  rt: Runtime,
  request: { model?: string; provider?: string },
  lastUsed?: { model: string; provider: string } | null,
): Promise<ModelChoice> {
  const models = await listModels(rt);
  if (request.model) {
    const found = findModel(models, request.provider, request.model);
    if (!found) throw errors.modelNotFound(request.provider ? `${request.provider}/${request.model}` : request.model);
    return { model: found, requested: true };
  }
  const llms = models.filter((m) => m.model_type === "llm");
  const previous = lastUsed && findModel(llms, lastUsed.provider, lastUsed.model);
  if (previous) return { model: previous, requested: false };
  const inference = rt.config.inference;
  if (inference?.default_model) {
    const configured = findModel(models, inference.default_provider, inference.default_model);
    if (!configured) throw errors.modelNotFound(`${inference.default_provider}/${inference.default_model}`);
    return { model: configured, requested: false };
  }
  if (!llms[0]) throw errors.modelNotFound("(no language model is available)");
  return { model: llms[0], requested: false };
}
