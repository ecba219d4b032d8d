// Everything derived from the configuration, built once per isolate and per configuration text:
// the validated config, files it names, the authenticator and the backend client. Building these
// per request would re-parse YAML and re-create clients on the hot path.
import OpenAI from "openai";
import { createAuthenticator } from "./auth/index.ts";
import type { Authenticator } from "./auth/types.ts";
import { parseConfig } from "./config/load.ts";
import { isUnifiedRag, type Config } from "./config/schema.ts";
import { knowledgeSources } from "./rag/knowledge.ts";
import { parseBooleanQuery } from "./rag/solr.ts";

export interface Runtime {
  config: Config;
  authenticate: Authenticator;
  backend: OpenAI;
  /** The configured system prompt (customization.system_prompt or the file it names), if any. */
  systemPrompt: string | null;
  /** The custom profile's prompts by name (customization.custom_profile). */
  profilePrompts: Record<string, string>;
  /** Contents of customization.agent_card_path, parsed, when configured. */
  agentCardFile: unknown;
}

export type RuntimeResult = { ok: true; runtime: Runtime } | { ok: false; problems: string[] };

const BUNDLED_CONFIG = "parley.yaml";
const FILES_ORIGIN = "http://config.invalid/";

let cached: { key: string; result: Promise<RuntimeResult> } | null = null;

/** The runtime for this environment; a configuration that fails to load is reported, never thrown. */
export function loadRuntime(env: Env): Promise<RuntimeResult> {
  const key = env.PARLEY_CONFIG ?? "(bundled)";
  if (cached?.key !== key) cached = { key, result: buildRuntime(env) };
  return cached.result;
}

async function buildRuntime(env: Env): Promise<RuntimeResult> {
  try {
    const text = env.PARLEY_CONFIG ?? (await readConfigFile(env, BUNDLED_CONFIG));
    const parsed = parseConfig(text, env);
    if (!parsed.ok) return report(parsed.problems);
    const config = parsed.config;
    const problems: string[] = [];
    const read = async (field: string, path: string | undefined | null): Promise<string | null> => {
      if (!path) return null;
      try {
        return await readConfigFile(env, path);
      } catch (error) {
        problems.push(`${field}: ${(error as Error).message}`);
        return null;
      }
    };
    const custom = config.customization;
    const systemPrompt = custom?.system_prompt ?? (await read("customization.system_prompt_path", custom?.system_prompt_path));
    const profilePrompts: Record<string, string> = { ...(custom?.custom_profile?.prompts ?? {}) };
    const cardText = await read("customization.agent_card_path", custom?.agent_card_path);
    let agentCardFile: unknown = null;
    if (cardText !== null) {
      try {
        agentCardFile = (await import("yaml")).parse(cardText);
      } catch (error) {
        problems.push(`customization.agent_card_path: ${(error as Error).message}`);
      }
    }
    const chunkFilter = knowledgeSources(config).portal?.chunkFilterQuery;
    if (chunkFilter) {
      const parsed = parseBooleanQuery(chunkFilter);
      const field = config.rag && isUnifiedRag(config.rag) ? "rag.okp.chunk_filter_query" : "portal.chunk_filter_query";
      if (!parsed.ok) problems.push(`${field}: ${parsed.problem}`);
    }
    if (problems.length) return report(problems);
    const backendConfig = config.inference_backend;
    const backend = new OpenAI({
      baseURL: backendConfig.url,
      apiKey: backendConfig.api_key ?? "not-needed",
      timeout: backendConfig.timeout * 1000,
      maxRetries: backendConfig.max_retries,
    });
    return {
      ok: true,
      runtime: {
        config,
        authenticate: createAuthenticator(config.authentication),
        backend,
        systemPrompt: systemPrompt ?? null,
        profilePrompts,
        agentCardFile,
      },
    };
  } catch (error) {
    return report([`document: ${(error as Error).message}`]);
  }
}

function report(problems: string[]): RuntimeResult {
  for (const problem of problems) console.error(`Configuration is not loaded: ${problem}`);
  return { ok: false, problems };
}

/**
 * Reads a file that configuration names. `env:NAME` takes the text of the Worker variable or secret
 * NAME; anything else is a path inside the bundled config/ folder (a leading `config/` or `./` is
 * dropped), served by the CONFIG_FILES assets binding.
 */
export async function readConfigFile(env: Env, path: string): Promise<string> {
  if (path.startsWith("env:")) {
    const value = env[path.slice(4)];
    if (typeof value !== "string") throw new Error(`environment variable ${path.slice(4)} is not set`);
    return value;
  }
  const relative = path.replace(/^\.\//, "").replace(/^config\//, "");
  if (relative.startsWith("/") || relative.split("/").includes("..")) {
    throw new Error(`${path} is not a bundled file: name a file under config/ or env:NAME`);
  }
  const response = await env.CONFIG_FILES.fetch(new URL(relative, FILES_ORIGIN));
  if (!response.ok) throw new Error(`bundled file config/${relative} not found`);
  return response.text();
}
