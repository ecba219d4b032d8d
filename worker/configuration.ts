// The configuration as the Worker loads it, whatever its text and files come from: the document
// validated, the files it names read, the checks that need more than the schema made (the portal's
// chunk filter, the backends). The Worker (runtime.ts) loads it with its bindings and `npm run deploy`
// with the checkout's config/ directory, so a document the helper passes is one the Worker loads.
import { roleRuleWarnings } from "./auth/role-rules.ts";
import { unusableKubernetesServers } from "./mcp/servers.ts";
import { templateProblem } from "./turn/jinja.ts";
import { buildBackends, type Backends } from "./backends/providers.ts";
import type { AgentCardConfig } from "./config/agent-card.ts";
import { readConfiguredFiles, type BundledFiles } from "./config/files.ts";
import { inertSettings } from "./config/inert.ts";
import { urlCredentials } from "./config/redact.ts";
import { parseConfig, type ConfigProblem } from "./config/load.ts";
import { isLoopback, isUnifiedRag, type Config } from "./config/schema.ts";
import { knowledgeSources } from "./rag/knowledge.ts";
import { parseBooleanQuery } from "./rag/solr.ts";

export interface LoadedConfiguration {
  config: Config;
  /** Values of the fields the schema declares secret (/v1/config hides them). */
  secrets: string[];
  /** customization.system_prompt, else the text of the file system_prompt_path names, if any. */
  systemPrompt: string | null;
  /** The agent card: customization.agent_card_config, else the card agent_card_path names, if any. */
  agentCard: AgentCardConfig | null;
  /** Credentials held by the deployment, by the dotted path of the field naming them (config/files.ts). */
  heldSecrets: ReadonlyMap<string, string>;
  backends: Backends;
  /** What an operator should know of a configuration that loads, a line each: settings that do nothing here, the backends' notes. */
  warnings: string[];
}

/**
 * The loaded configuration, or what is wrong with it. `scrubbed`, either way: every secret value met
 * while loading (the schema's secret fields, held credentials, backend keys), which logs and error
 * texts must not show.
 */
export type LoadResult =
  | { ok: true; loaded: LoadedConfiguration; scrubbed: string[] }
  | { ok: false; problems: ConfigProblem[]; scrubbed: string[] };

/**
 * Loads the configuration document `text` with the Worker variables `env` and the bundled files.
 * Problems with the document and with the files it names come back together (the files of the
 * sections that are valid are read even when others are not); the checks that need the whole
 * configuration (the portal filter, the backends) follow once it is valid.
 */
export async function loadConfiguration(text: string, env: Record<string, unknown>, bundled: BundledFiles): Promise<LoadResult> {
  const parsed = parseConfig(text, env);
  const files = await readConfiguredFiles(parsed.ok ? parsed.config : parsed.sections, parsed.fromEnvironment, env, bundled);
  const scrubbed = [...parsed.secrets, ...files.heldSecrets.values()];
  if (!parsed.ok) return { ok: false, problems: [...parsed.problems, ...files.problems], scrubbed };
  const config = parsed.config;
  scrubbed.push(...urlCredentials(config));
  const problems = [...files.problems];
  const warnings = [...files.warnings, ...roleRuleWarnings(config.authentication.jwk_config?.jwt_configuration.role_rules ?? [])];
  // /v1/infer renders the system prompt as a Jinja2 template, as the original does: say now what it cannot render.
  const promptProblem = files.systemPrompt === null ? null : templateProblem(files.systemPrompt);
  if (promptProblem) warnings.push(`customization.system_prompt: not a valid Jinja2 template (${promptProblem}); POST /v1/infer answers 500 while it is set`);
  for (const { index, name } of unusableKubernetesServers(config)) {
    warnings.push(
      `mcp_servers.${index} ('${name}'): a kubernetes credential is the caller's own token, which authentication.module '${config.authentication.module}' does not pass on (only k8s and noop-with-token do); the server is not used`,
    );
  }
  const chunkFilter = knowledgeSources(config).portal?.chunkFilterQuery;
  if (chunkFilter) {
    const filter = parseBooleanQuery(chunkFilter);
    const field = config.rag && isUnifiedRag(config.rag) ? "rag.okp.chunk_filter_query" : "portal.chunk_filter_query";
    // Valid Solr (the original takes it) that the backend's vector store filters cannot express:
    // the portal is not searched without its filter (it may exist to hide documents), the rest
    // of the gateway works, and the operator is told.
    if (!filter.ok && filter.unsupported) warnings.push(`${field}: ${filter.problem}; the portal store is skipped in every search while it is set`);
    else if (!filter.ok) problems.push({ path: field, message: filter.problem });
  }
  const built = buildBackends(config, env);
  if (!built.ok) problems.push(...built.problems);
  if (problems.length > 0 || !built.ok) return { ok: false, problems, scrubbed };
  const inert = inertSettings(config);
  const agentCard = config.customization.agent_card_config ?? files.agentCardFile;
  return {
    ok: true,
    scrubbed: [...scrubbed, ...built.secrets],
    loaded: {
      config,
      secrets: parsed.secrets,
      systemPrompt: files.systemPrompt,
      agentCard,
      heldSecrets: files.heldSecrets,
      backends: built.backends,
      warnings: [
        ...warnings,
        ...(inert.length > 0 ? [`these settings have no effect in this release: ${inert.join(", ")}`] : []),
        // A server of the operator's own is not reached without a relay (README "Postgres instead of D1").
        ...(config.database.postgres && config.database.postgres.ws_proxy === undefined && isLoopback(config.database.postgres.host)
          ? [`database.postgres: without ws_proxy the store is reached at wss://${config.database.postgres.host}/v2 (Neon's endpoint), which a PostgreSQL server does not serve: set ws_proxy to a WebSocket relay in front of it`]
          : []),
        // Served as configured, over a card the gateway completes (README "A2A"): a signature made
        // over the configured card verifies only when it already holds what the gateway sets.
        ...(agentCard?.signatures?.length
          ? ["the agent card's signatures are served as configured, but the card is served with its url, capabilities.streaming true, capabilities.pushNotifications false and defaults for name, description, version and additionalInterfaces: sign the card as GET /.well-known/agent-card.json serves it"]
          : []),
        ...built.warnings,
      ],
    },
  };
}
