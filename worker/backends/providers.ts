// The backends a gateway talks to, built once per configuration (README "Providers"): the default
// backend (inference_backend) and one per inference provider that names its own endpoint in
// `extra.url`, each with its client, wire API (Responses or Chat Completions) and credential, plus
// which backend serves the APIs besides the model call (moderations, vector stores, files).
//
// A provider whose url is inference_backend's url is that backend under the provider's name: its
// wire, credential and settings apply to it and its models are listed once, as that provider's.
// Providers without a url keep their original meaning, a filter (allowed_models) on the default
// backend's models of that provider id; they may also choose the wire their models are called with.
import OpenAI from "openai";
import {
  DEFAULT_BACKEND_ID,
  isModeration,
  PROVIDER_APIS,
  PROVIDER_EXTRA_KEYS,
  type Config,
  type InferenceProviderConfig,
  type ProviderApi,
  type ProviderWire,
} from "../config/schema.ts";
import type { ConfigProblem } from "../config/load.ts";
import type { ModelInfo } from "../domain/conversation.ts";
import { ApiError } from "../errors.ts";
import { knowledgeSources } from "../rag/knowledge.ts";

/** How calls to a model are made. */
export interface CallSettings {
  wire: ProviderWire;
  /** Chat Completions: send stream_options.include_usage on streamed calls. */
  includeUsage: boolean;
  timeoutMs: number;
}

export interface Backend extends CallSettings {
  /** The provider id: "inference_backend", or the provider's type. */
  id: string;
  /** inference_backend (whether or not a provider entry names it). */
  isDefault: boolean;
  /** Base URL as configured (for views and messages; never carries the key). */
  url: string;
  client: OpenAI;
  /** The provider's allowed_models (providers with their own endpoint); null: every model. */
  allowedModels: string[] | null;
}

export interface Backends {
  default: Backend;
  /** Every backend, the default first. */
  all: Backend[];
  /** Call settings of providers without a url, whose models the default backend serves, by provider id. */
  viaDefault: ReadonlyMap<string, CallSettings>;
  /** allowed_models of providers without a url, by provider id (the original filter). */
  defaultFilters: ReadonlyMap<string, string[]>;
  /** The backend serving each API, or null when none does (apiBackend then refuses with 501). */
  apis: Readonly<Record<ProviderApi, Backend | null>>;
}

export type BuildResult =
  | { ok: true; backends: Backends; warnings: string[]; secrets: string[] }
  | { ok: false; problems: ConfigProblem[] };

/**
 * A backend's base URL as the OpenAI client takes it, with its API path (/v1). The original
 * system's configurations name the server alone (`http://localhost:8321`: its client added the
 * path), so a URL without a path gets /v1; one with a path is taken as it is.
 */
export function backendBaseUrl(url: string): string {
  const trimmed = url.replace(/\/+$/, "");
  return new URL(trimmed).pathname === "/" ? `${trimmed}/v1` : trimmed;
}

/**
 * The backends of a configuration. `env` supplies the keys api_key_env names (Worker secrets); an
 * unset one, or a configuration needing an API no backend serves, fails the load naming the key.
 */
export function buildBackends(config: Config, env: Record<string, unknown>): BuildResult {
  const problems: ConfigProblem[] = [];
  const warnings: string[] = [];
  const secrets: string[] = [];
  const base = config.inference_backend;
  const providers = config.inference.providers;
  const defaultUrl = backendBaseUrl(base.url);

  const keyOf = (provider: InferenceProviderConfig, index: number): string | undefined => {
    if (!provider.api_key_env) return undefined;
    const value = env[provider.api_key_env];
    if (typeof value !== "string" || value === "") {
      problems.push({ path: `inference.providers.${index}.api_key_env`, message: `environment variable ${provider.api_key_env} is not set` });
      return undefined;
    }
    secrets.push(value);
    return value;
  };
  const settingsOf = (provider: InferenceProviderConfig | undefined): CallSettings => ({
    wire: provider?.extra?.wire ?? "responses",
    includeUsage: provider?.extra?.stream_usage ?? true,
    timeoutMs: (provider?.extra?.timeout ?? base.timeout) * 1000,
  });
  // No call is retried: max_retries is SPEC's start-up connection attempts, and a Worker has no
  // start-up (a retried call would hold its request for the SDK's backoff while the backend is down).
  const client = (url: string, apiKey: string | undefined, timeoutMs: number) =>
    new OpenAI({ baseURL: url, apiKey: apiKey ?? "not-needed", timeout: timeoutMs, maxRetries: 0 });

  providers.forEach((provider, index) => {
    const ignored = Object.keys(provider.extra ?? {}).filter((key) => !PROVIDER_EXTRA_KEYS.includes(key));
    if (ignored.length > 0) {
      warnings.push(`inference.providers.${index}.extra: ${ignored.join(", ")} ha${ignored.length === 1 ? "s" : "ve"} no effect (README "Providers")`);
    }
    if (provider.api_key_env && provider.extra?.url === undefined) {
      warnings.push(`inference.providers.${index}.api_key_env has no effect: the provider has no url of its own, inference_backend.api_key is used`);
    }
  });

  const namedDefault = providers.findIndex((provider) => provider.extra?.url !== undefined && backendBaseUrl(provider.extra.url) === defaultUrl);
  const defaultEntry = namedDefault >= 0 ? providers[namedDefault]! : undefined;
  let defaultKey = base.api_key;
  if (defaultEntry?.api_key_env) {
    if (base.api_key !== undefined) {
      problems.push({
        path: `inference.providers.${namedDefault}.api_key_env`,
        message: "this provider is inference_backend (same url), whose api_key is already set: give the key once",
      });
    }
    defaultKey = keyOf(defaultEntry, namedDefault);
  }
  const defaultSettings = settingsOf(defaultEntry);
  const defaultBackend: Backend = {
    id: defaultEntry?.type ?? DEFAULT_BACKEND_ID,
    isDefault: true,
    url: defaultUrl,
    client: client(defaultUrl, defaultKey, defaultSettings.timeoutMs),
    allowedModels: defaultEntry?.allowed_models ?? null,
    ...defaultSettings,
  };

  const all: Backend[] = [defaultBackend];
  const viaDefault = new Map<string, CallSettings>();
  const defaultFilters = new Map<string, string[]>();
  providers.forEach((provider, index) => {
    if (index === namedDefault) return;
    const url = provider.extra?.url === undefined ? undefined : backendBaseUrl(provider.extra.url);
    if (url === undefined) {
      if (provider.extra?.wire !== undefined || provider.extra?.timeout !== undefined) viaDefault.set(provider.type, settingsOf(provider));
      if (provider.allowed_models) defaultFilters.set(provider.type, provider.allowed_models);
      return;
    }
    const settings = settingsOf(provider);
    all.push({
      id: provider.type,
      isDefault: false,
      url,
      client: client(url, keyOf(provider, index), settings.timeoutMs),
      allowedModels: provider.allowed_models ?? null,
      ...settings,
    });
  });

  const apis = {} as Record<ProviderApi, Backend | null>;
  for (const api of PROVIDER_APIS) apis[api] = servingBackend(config, all, api);
  problems.push(...unservedNeeds(config, apis, defaultBackend));
  if (problems.length > 0) return { ok: false, problems };
  return { ok: true, backends: { default: defaultBackend, all, viaDefault, defaultFilters, apis }, warnings, secrets };
}

/**
 * The provider listing `api` under extra.serves (vector stores and files go together: a file is
 * attached to a store on the backend holding both); otherwise the default backend, unless it speaks
 * Chat Completions (such servers rarely have these APIs: a provider must say it serves them).
 */
function servingBackend(config: Config, all: Backend[], api: ProviderApi): Backend | null {
  const partner: ProviderApi | null = api === "files" ? "vector_stores" : api === "vector_stores" ? "files" : null;
  const providers = config.inference.providers;
  const listed = providers.find((provider) => provider.extra?.serves?.includes(api)) ?? (partner ? providers.find((provider) => provider.extra?.serves?.includes(partner)) : undefined);
  if (listed) return all.find((backend) => backend.id === listed.type) ?? null;
  const fallback = all[0]!;
  return fallback.wire === "responses" ? fallback : null;
}

/** Settings that need an API no backend serves: refused when the configuration loads, not at the first turn. */
function unservedNeeds(config: Config, apis: Record<ProviderApi, Backend | null>, fallback: Backend): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const why = `inference_backend speaks Chat Completions (provider "${fallback.id}")`;
  const ownProvider = (shield: { provider_id?: string }) => shield.provider_id !== undefined && config.inference.providers.some((p) => p.type === shield.provider_id && p.extra?.url !== undefined);
  if (apis.moderations === null && config.shields.some((shield) => isModeration(shield) && !ownProvider(shield))) {
    problems.push({
      path: "shields",
      message: `shields run through a moderation endpoint and no backend serves one: ${why}; list "moderations" under extra.serves of a provider that has one, or name such a provider in the shield's provider_id`,
    });
  }
  if (apis.vector_stores === null && knowledgeSources(config).stores.length > 0) {
    const section = config.rag !== undefined ? "rag" : config.byok_rag.length > 0 ? "byok_rag" : "portal";
    problems.push({
      path: section,
      message: `knowledge stores are searched through a vector store API and no backend serves one: ${why}; list "vector_stores" under extra.serves of a provider that has one`,
    });
  }
  return problems;
}

/** A model's backend and the name the backend knows it by. */
export interface ModelRoute extends CallSettings {
  backend: Backend;
  /** The model id to send: the backend's own id for it. */
  model: string;
}

/**
 * Which backend serves a model listed by listProviderModels: the provider with its own endpoint that
 * the model belongs to, else the default backend (with the call settings of its provider entry).
 */
export function routeModel(backends: Backends, model: Pick<ModelInfo, "identifier" | "provider_id" | "provider_resource_id">): ModelRoute {
  const own = backends.all.find((backend) => !backend.isDefault && backend.id === model.provider_id);
  if (own) return { backend: own, model: model.provider_resource_id, wire: own.wire, includeUsage: own.includeUsage, timeoutMs: own.timeoutMs };
  const backend = backends.default;
  const settings = backends.viaDefault.get(model.provider_id) ?? backend;
  return { backend, model: model.identifier, wire: settings.wire, includeUsage: settings.includeUsage, timeoutMs: settings.timeoutMs };
}

const API_NAMES: Record<ProviderApi, string> = { moderations: "moderations", vector_stores: "vector stores", files: "files" };

/** The error for an API no configured backend serves (the request cannot be served as configured). */
export function notServed(api: ProviderApi, detail?: string): ApiError {
  return new ApiError(
    501,
    "Not implemented by the configured providers",
    detail ?? `No configured provider serves ${API_NAMES[api]}: list "${api}" under extra.serves of a provider that has them`,
  );
}

/**
 * The backend serving `api`. Shields may name a provider with its own endpoint in provider_id; that
 * provider then serves their moderation whatever extra.serves says.
 */
export function apiBackend(backends: Backends, api: ProviderApi, providerId?: string): Backend {
  if (providerId !== undefined) {
    const named = backends.all.find((backend) => !backend.isDefault && backend.id === providerId);
    if (named) return named;
  }
  const backend = backends.apis[api];
  if (!backend) throw notServed(api);
  return backend;
}

/**
 * A failure of a call to `api` that means the backend does not have that API (405, 501, or a 404
 * for the route itself: OpenAI's "Invalid URL", FastAPI's {"detail":"Not Found"}, a plain-text 404
 * page), as the clear error clients get instead of a 500. Null for any other failure, including a
 * 404 for a store or file that does not exist: map those as usual.
 */
export function unservedApiError(error: unknown, api: ProviderApi, backend: Backend): ApiError | null {
  if (!(error instanceof OpenAI.APIError) || !routeMissing(error)) return null;
  return notServed(api, `Provider "${backend.id}" does not serve ${API_NAMES[api]} (it answered ${error.status}); list "${api}" under extra.serves of a provider that has them`);
}

/** Whether a failed call means the backend has no such route (the API itself is missing). */
export function routeMissing(error: InstanceType<typeof OpenAI.APIError>): boolean {
  if (error.status === 405 || error.status === 501) return true;
  if (error.status !== 404) return false;
  const body = error.error as { message?: unknown; detail?: unknown } | undefined;
  if (body === undefined || body === null) return true;
  if (body.detail === "Not Found") return true;
  return typeof body.message === "string" && /^(invalid url|not found$|404 page not found)/i.test(body.message.trim());
}
