// Everything derived from the configuration, built once per isolate and per configuration text:
// the validated config, files it names, the authenticator and the backend client. Building these
// per request would re-parse YAML and re-create clients on the hot path.
import type OpenAI from "openai";
import { createAuthenticator } from "./auth/index.ts";
import type { Authenticator } from "./auth/types.ts";
import { readConfigFile, type BundledFiles } from "./config/files.ts";
import type { ConfigProblem } from "./config/load.ts";
import { loadConfiguration, type LoadedConfiguration } from "./configuration.ts";
import { log, rememberSecrets } from "./log.ts";

export interface Runtime extends Pick<LoadedConfiguration, "config" | "secrets" | "systemPrompt" | "agentCard" | "heldSecrets" | "backends"> {
  authenticate: Authenticator;
  /** The default backend's client (inference_backend): backends.default.client. */
  backend: OpenAI;
  /** The custom profile's prompts by name (customization.custom_profile). */
  profilePrompts: Record<string, string>;
}

export type RuntimeResult = { ok: true; runtime: Runtime } | { ok: false; problems: ConfigProblem[] };

const BUNDLED_CONFIG = "parley.yaml";
const FILES_ORIGIN = "http://config.invalid/";

// Only a finished build is kept: a request never waits on a build another request started, since
// workerd ties that build's I/O (reading config files) to the request that began it. Requests that
// arrive before the first build ends each build their own; the last one to finish is kept.
let cached: { key: string; result: RuntimeResult } | null = null;

/** The runtime for this environment; a configuration that fails to load is reported, never thrown. */
export async function loadRuntime(env: Env): Promise<RuntimeResult> {
  const key = env.PARLEY_CONFIG ?? "(bundled)";
  if (cached?.key === key) return cached.result;
  const result = await buildRuntime(env);
  cached = { key, result };
  return result;
}

async function buildRuntime(env: Env): Promise<RuntimeResult> {
  try {
    const files = bundledFiles(env);
    const text = env.PARLEY_CONFIG ?? (await readConfigFile(BUNDLED_CONFIG, env, files));
    const result = await loadConfiguration(text, env, files);
    rememberSecrets(result.scrubbed);
    if (!result.ok) return report(result.problems);
    const { loaded } = result;
    for (const warning of loaded.warnings) log.warn(`Configuration loaded; ${warning}`);
    return {
      ok: true,
      runtime: {
        config: loaded.config,
        authenticate: createAuthenticator(loaded.config.authentication),
        backend: loaded.backends.default.client,
        backends: loaded.backends,
        systemPrompt: loaded.systemPrompt,
        profilePrompts: { ...(loaded.config.customization.custom_profile?.prompts ?? {}) },
        agentCard: loaded.agentCard,
        secrets: loaded.secrets,
        heldSecrets: loaded.heldSecrets,
      },
    };
  } catch (error) {
    return report([{ path: "document", message: (error as Error).message }]);
  }
}

function report(problems: ConfigProblem[]): RuntimeResult {
  for (const { path, message } of problems) log.error(`Configuration is not loaded: ${path}: ${message}`);
  return { ok: false, problems };
}

/** The bundled config/ folder, served to the Worker by the CONFIG_FILES assets binding (never to clients). */
function bundledFiles(env: Env): BundledFiles {
  return async (relative) => {
    const response = await env.CONFIG_FILES.fetch(new URL(relative, FILES_ORIGIN));
    return response.ok ? response.text() : null;
  };
}
