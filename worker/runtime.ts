// Everything derived from the configuration, built once per isolate and per configuration text:
// the validated config, files it names, the authenticator and the backend client. Building these
// per request would re-parse YAML and re-create clients on the hot path.
import type OpenAI from "openai";
import { createAuthenticator } from "./auth/index.ts";
import { buildBackends, type Backends } from "./backends/providers.ts";
import type { Authenticator } from "./auth/types.ts";
import { inertSettings } from "./config/inert.ts";
import { parseConfig, readDocument, type ConfigProblem } from "./config/load.ts";
import { isUnifiedRag, MCP_CREDENTIAL_KEYWORDS, type Config } from "./config/schema.ts";
import { knowledgeSources } from "./rag/knowledge.ts";
import { parseBooleanQuery } from "./rag/solr.ts";
import { log, rememberSecrets } from "./log.ts";

export interface Runtime {
  config: Config;
  authenticate: Authenticator;
  /** The default backend's client (inference_backend): backends.default.client. */
  backend: OpenAI;
  /** Every backend (inference_backend and providers with their own url), the APIs each serves. */
  backends: Backends;
  /** The configured system prompt (customization.system_prompt or the file it names), if any. */
  systemPrompt: string | null;
  /** The custom profile's prompts by name (customization.custom_profile). */
  profilePrompts: Record<string, string>;
  /** Contents of customization.agent_card_path, parsed, when configured. */
  agentCardFile: unknown;
  /** Values of the fields the schema declares secret (/v1/config hides them). */
  secrets: string[];
  /**
   * Credentials held by the deployment, by the dotted path of the field naming them (see
   * heldSecretFields): read from the bundled file the field names, or the field's own value when it
   * was written as a `${env.NAME}` reference.
   */
  heldSecrets: ReadonlyMap<string, string>;
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
    const text = env.PARLEY_CONFIG ?? (await readConfigFile(env, BUNDLED_CONFIG));
    const parsed = parseConfig(text, env);
    if (!parsed.ok) return report(parsed.problems);
    const config = parsed.config;
    rememberSecrets(parsed.secrets);
    const problems: ConfigProblem[] = [];
    const read = async (field: string, path: string | undefined | null): Promise<string | null> => {
      if (!path) return null;
      try {
        return await readConfigFile(env, path);
      } catch (error) {
        problems.push({ path: field, message: (error as Error).message });
        return null;
      }
    };
    const custom = config.customization;
    const systemPrompt = custom?.system_prompt ?? (await read("customization.system_prompt_path", custom?.system_prompt_path));
    const profilePrompts: Record<string, string> = { ...(custom?.custom_profile?.prompts ?? {}) };
    const cardText = await read("customization.agent_card_path", custom?.agent_card_path);
    let agentCardFile: unknown = null;
    if (cardText !== null) {
      const card = readDocument(cardText);
      if (card.ok) agentCardFile = card.value;
      else problems.push({ path: "customization.agent_card_path", message: card.message });
    }
    const chunkFilter = knowledgeSources(config).portal?.chunkFilterQuery;
    if (chunkFilter) {
      const parsed = parseBooleanQuery(chunkFilter);
      const field = config.rag && isUnifiedRag(config.rag) ? "rag.okp.chunk_filter_query" : "portal.chunk_filter_query";
      if (!parsed.ok) problems.push({ path: field, message: parsed.problem });
    }
    const heldSecrets = new Map<string, string>();
    for (const { path, value } of heldSecretFields(config)) {
      if (parsed.fromEnvironment.has(path)) {
        heldSecrets.set(path, value);
        continue;
      }
      try {
        heldSecrets.set(path, (await readConfigFile(env, value)).trim());
      } catch (error) {
        problems.push({
          path,
          message: `${(error as Error).message}; ship the file under config/ or give the secret itself as \${env.NAME} (a Worker secret)`,
        });
      }
    }
    rememberSecrets(heldSecrets.values());
    const built = buildBackends(config, env);
    if (!built.ok) problems.push(...built.problems);
    if (problems.length || !built.ok) return report(problems);
    rememberSecrets(built.secrets);
    const inert = inertSettings(config);
    if (inert.length > 0) log.warn(`Configuration loaded; these settings have no effect in this release: ${inert.join(", ")}`);
    for (const warning of built.warnings) log.warn(`Configuration loaded; ${warning}`);
    return {
      ok: true,
      runtime: {
        config,
        authenticate: createAuthenticator(config.authentication),
        backend: built.backends.default.client,
        backends: built.backends,
        systemPrompt: systemPrompt ?? null,
        profilePrompts,
        agentCardFile,
        secrets: parsed.secrets,
        heldSecrets,
      },
    };
  } catch (error) {
    return report([{ path: "document", message: (error as Error).message }]);
  }
}

/**
 * The fields whose value says where a credential is held: a file shipped with the deployment (the
 * Workers equivalent of the original system's file paths) or, written as `${env.NAME}`, the secret
 * itself. Each is read once, when the configuration loads; one that cannot be read fails the load.
 */
function heldSecretFields(config: Config): Array<{ path: string; value: string }> {
  const fields: Array<{ path: string; value: string }> = [];
  config.mcp_servers.forEach((server, index) => {
    for (const [header, value] of Object.entries(server.authorization_headers)) {
      if (!(MCP_CREDENTIAL_KEYWORDS as readonly string[]).includes(value)) fields.push({ path: `mcp_servers.${index}.authorization_headers.${header}`, value });
    }
  });
  if (config.splunk.enabled && config.splunk.token_path) fields.push({ path: "splunk.token_path", value: config.splunk.token_path });
  return fields;
}

function report(problems: ConfigProblem[]): RuntimeResult {
  for (const { path, message } of problems) log.error(`Configuration is not loaded: ${path}: ${message}`);
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
