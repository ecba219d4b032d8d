// The providers view and the shields list: what serves inference (the backend and the configured
// inference providers), what serves safety (the shields, through the backend's moderation API).
import { Hono } from "hono";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { redactConfig } from "../config/redact.ts";
import { errors } from "../errors.ts";
import { guard } from "../middleware.ts";
import type { Runtime } from "../runtime.ts";
import { probeBackend } from "../turn/backend-errors.ts";
import { listModels } from "../turn/models.ts";

export const providers = new Hono<AppEnv>();

/** The moderation provider shields use when their configuration names none. */
const BACKEND_SAFETY_PROVIDER = "backend-moderation";
const BACKEND_PROVIDER = "inference_backend";

providers.get("/v1/shields", guard(ACTIONS.shields), (c) => {
  const shields = c.get("rt").config.shields.map((shield) => ({
    identifier: shield.name,
    params: { input: shield.input, output: shield.output, ...(shield.model ? { model: shield.model } : {}) },
    provider_id: shield.provider_id ?? BACKEND_SAFETY_PROVIDER,
    provider_resource_id: shield.model ?? shield.name,
    type: "shield",
  }));
  return c.json({ shields });
});

interface ProviderEntry {
  api: "inference" | "safety";
  provider_id: string;
  provider_type: string;
  config: unknown;
}

/** Every provider, by id: the backend, configured inference providers, the backends' own model providers, and shield providers. */
async function providerEntries(rt: Runtime): Promise<ProviderEntry[]> {
  const { config } = rt;
  const redacted = redactConfig(config) as { inference_backend: unknown; inference: { providers: unknown[] } };
  const entries = new Map<string, ProviderEntry>();
  const add = (entry: ProviderEntry) => entries.has(entry.provider_id) || entries.set(entry.provider_id, entry);
  add({ api: "inference", provider_id: BACKEND_PROVIDER, provider_type: "remote::openai-compatible", config: redacted.inference_backend });
  config.inference.providers.forEach((provider, index) => {
    add({ api: "inference", provider_id: provider.type, provider_type: `remote::${provider.type}`, config: redacted.inference.providers[index] });
  });
  for (const model of await listModels(rt).catch(() => [])) {
    add({ api: "inference", provider_id: model.provider_id, provider_type: `remote::${model.provider_id}`, config: {} });
  }
  for (const shield of config.shields) {
    const id = shield.provider_id ?? BACKEND_SAFETY_PROVIDER;
    add({ api: "safety", provider_id: id, provider_type: "remote::openai-moderation", config: { shields: config.shields.filter((s) => (s.provider_id ?? BACKEND_SAFETY_PROVIDER) === id).map((s) => s.name) } });
  }
  return [...entries.values()];
}

providers.get("/v1/providers", guard(ACTIONS.providers), async (c) => {
  const grouped: Record<string, Array<{ provider_id: string; provider_type: string }>> = {};
  for (const entry of await providerEntries(c.get("rt"))) {
    (grouped[entry.api] ??= []).push({ provider_id: entry.provider_id, provider_type: entry.provider_type });
  }
  return c.json({ providers: grouped });
});

providers.get("/v1/providers/:id", guard(ACTIONS.provider), async (c) => {
  const rt = c.get("rt");
  const id = c.req.param("id");
  const entry = (await providerEntries(rt)).find((candidate) => candidate.provider_id === id);
  if (!entry) throw errors.notFound("Provider", id);
  const probe = await probeBackend(rt);
  const health = probe.ok ? { status: "OK", message: "the inference backend is reachable" } : { status: "Error", message: probe.cause };
  return c.json({ api: entry.api, config: entry.config, health, provider_id: entry.provider_id, provider_type: entry.provider_type });
});
