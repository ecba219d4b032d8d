// The providers view and the shields list: what serves inference (every backend, the configured
// inference providers, the providers the backends report), what serves safety (the shields,
// through a moderation API).
import { Hono } from "hono";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { redactConfig } from "../config/redact.ts";
import { errors } from "../errors.ts";
import { guard } from "../middleware.ts";
import type { Runtime } from "../runtime.ts";
import { probeProviders } from "../backends/provider-models.ts";
import { listModels } from "../turn/models.ts";
import { isModeration, type ShieldConfig } from "../config/schema.ts";

export const providers = new Hono<AppEnv>();

/** The moderation provider shields use when their configuration names none. */
const BACKEND_SAFETY_PROVIDER = "backend-moderation";
const BACKEND_PROVIDER = "inference_backend";

providers.get("/v1/shields", guard(ACTIONS.shields), (c) => {
  // A moderation shield in REFERENCE's shape; the original's own kinds as its newer release lists them.
  // Redacted as /v1/config shows it (a Granite Guardian api_key), with the same shape.
  const { shields: configured } = redactConfig(c.get("rt").config, c.get("rt").secrets) as { shields: ShieldConfig[] };
  const shields = configured.map((shield) =>
    isModeration(shield)
      ? {
          identifier: shield.name,
          params: { input: shield.input, output: shield.output, ...(shield.model ? { model: shield.model } : {}) },
          provider_id: shield.provider_id ?? BACKEND_SAFETY_PROVIDER,
          provider_resource_id: shield.model ?? shield.name,
          type: "shield",
        }
      : { name: shield.name, provider_id: shield.provider_id, type: "shield", config: shield.config },
  );
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
  const redacted = redactConfig(config, rt.secrets) as { inference_backend: unknown; inference: { providers: unknown[] } };
  const entries = new Map<string, ProviderEntry>();
  const add = (entry: ProviderEntry) => entries.has(entry.provider_id) || entries.set(entry.provider_id, entry);
  // Every backend first, with where it is and the wire it speaks (never its key).
  for (const backend of rt.backends.all) {
    const index = config.inference.providers.findIndex((provider) => provider.type === backend.id);
    const entry = (index >= 0 ? redacted.inference.providers[index] : redacted.inference_backend) as object;
    const type = backend.id === BACKEND_PROVIDER ? "remote::openai-compatible" : `remote::${backend.id}`;
    add({ api: "inference", provider_id: backend.id, provider_type: type, config: { ...entry, url: backend.url, wire: backend.wire } });
  }
  config.inference.providers.forEach((provider, index) => {
    add({ api: "inference", provider_id: provider.type, provider_type: `remote::${provider.type}`, config: redacted.inference.providers[index] });
  });
  for (const model of await listModels(rt).catch(() => [])) {
    add({ api: "inference", provider_id: model.provider_id, provider_type: `remote::${model.provider_id}`, config: {} });
  }
  const safetyProvider = (shield: ShieldConfig) => (isModeration(shield) ? (shield.provider_id ?? BACKEND_SAFETY_PROVIDER) : shield.provider_id);
  for (const shield of config.shields) {
    const id = safetyProvider(shield);
    const type = isModeration(shield) ? "remote::openai-moderation" : `inline::${id}`;
    add({ api: "safety", provider_id: id, provider_type: type, config: { shields: config.shields.filter((s) => safetyProvider(s) === id).map((s) => s.name) } });
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

providers.get("/v1/providers/:provider_id", guard(ACTIONS.provider), async (c) => {
  const rt = c.get("rt");
  const id = c.req.param("provider_id");
  const entry = (await providerEntries(rt)).find((candidate) => candidate.provider_id === id);
  if (!entry) throw errors.notFound("Provider", id);
  // A backend's own health; anything else (shield providers, providers the default backend serves) is the default backend's.
  const probes = await probeProviders(rt.backends);
  const probe = probes.find((candidate) => candidate.provider_id === id) ?? probes[0]!;
  const health = probe.status === "ok" ? { status: "OK", message: probe.message } : { status: "Error", message: probe.message };
  return c.json({ api: entry.api, config: entry.config, health, provider_id: entry.provider_id, provider_type: entry.provider_type });
});
