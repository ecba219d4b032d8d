// The files a configuration names: customization.system_prompt_path, customization.agent_card_path
// and the credentials held by the deployment (MCP authorization_headers, splunk.token_path). Each is
// a path inside the bundled config/ folder, or env:NAME for the text of a Worker variable or secret.
// The Worker reads the folder through its CONFIG_FILES assets binding and `npm run deploy` from the
// checkout, both through this code, so the helper refuses what the Worker would, in the same words.
import { AgentCardConfigSchema, type AgentCardConfig } from "./agent-card.ts";
import { describeError, readDocument, type ConfigProblem } from "./load.ts";
import { MCP_CREDENTIAL_KEYWORDS, type Config } from "./schema.ts";

/** The bundled config/ folder: the text of a file by its path inside it, or null when there is none. */
export type BundledFiles = (relative: string) => Promise<string | null>;

/** The sections that name files. */
export type FileSections = Pick<Config, "customization" | "mcp_servers" | "splunk">;

export interface ConfiguredFiles {
  /** customization.system_prompt, else the text of the file system_prompt_path names, if any. */
  systemPrompt: string | null;
  /** The card customization.agent_card_path names, when it names one. */
  agentCardFile: AgentCardConfig | null;
  /**
   * Credentials held by the deployment, by the dotted path of the field naming them: read from the
   * file the field names, or the field's own value when it was written as a `${env.NAME}` reference.
   */
  heldSecrets: Map<string, string>;
  problems: ConfigProblem[];
  /** An MCP server's credential that could not be read: the server is skipped, the rest loads. */
  warnings: string[];
}

/**
 * Reads the files `sections` name; a section left out (one that is not valid) names none.
 * `fromEnvironment` holds the dotted paths of values written as one whole `${env.NAME}` reference
 * (parseConfig says which): a held credential given so is the secret itself.
 */
export async function readConfiguredFiles(
  sections: Partial<FileSections>,
  fromEnvironment: ReadonlySet<string>,
  env: Record<string, unknown>,
  bundled: BundledFiles,
): Promise<ConfiguredFiles> {
  const problems: ConfigProblem[] = [];
  const warnings: string[] = [];
  const read = async (field: string, path: string | undefined): Promise<string | null> => {
    if (!path) return null;
    try {
      return await readConfigFile(path, env, bundled);
    } catch (error) {
      problems.push({ path: field, message: (error as Error).message });
      return null;
    }
  };
  const custom = sections.customization;
  const systemPrompt = custom?.system_prompt ?? (await read("customization.system_prompt_path", custom?.system_prompt_path));
  const cardText = await read("customization.agent_card_path", custom?.agent_card_path);
  let agentCardFile: AgentCardConfig | null = null;
  if (cardText !== null) {
    const card = readAgentCard(cardText);
    if (card.ok) agentCardFile = card.card;
    else problems.push({ path: "customization.agent_card_path", message: `${custom?.agent_card_path} is not a valid agent card: ${card.problem}` });
  }
  const heldSecrets = new Map<string, string>();
  for (const { path, value } of heldSecretFields(sections)) {
    if (fromEnvironment.has(path)) {
      heldSecrets.set(path, value);
      continue;
    }
    try {
      heldSecrets.set(path, (await readConfigFile(value, env, bundled)).trim());
    } catch (error) {
      const message = `${(error as Error).message}; ship the file under config/ or give the secret itself as \${env.NAME} (a Worker secret)`;
      // One MCP server's credential (the original's configurations name files such as
      // /tmp/mcp-token) does not take the gateway down: that server is skipped, as one whose held
      // credential is empty is; the others and everything else work.
      if (path.startsWith("mcp_servers.")) warnings.push(`${path}: ${message}; the server is not used until it can be read`);
      else problems.push({ path, message });
    }
  }
  return { systemPrompt, agentCardFile, heldSecrets, problems, warnings };
}

/** An agent card file (YAML or JSON), checked as the inline card is. */
function readAgentCard(text: string): { ok: true; card: AgentCardConfig } | { ok: false; problem: string } {
  const document = readDocument(text);
  if (!document.ok) return { ok: false, problem: document.message };
  const card = AgentCardConfigSchema.safeParse(document.value);
  return card.success ? { ok: true, card: card.data } : { ok: false, problem: describeError(card.error).join("; ") };
}

/**
 * The fields whose value says where a credential is held: a file shipped with the deployment (the
 * Workers equivalent of the original system's file paths) or, written as `${env.NAME}`, the secret
 * itself. Each is read once, when the configuration loads; one that cannot be read fails the load,
 * except an MCP server's, which leaves that server out (ConfiguredFiles.warnings).
 */
function heldSecretFields(sections: Partial<FileSections>): Array<{ path: string; value: string }> {
  const fields: Array<{ path: string; value: string }> = [];
  sections.mcp_servers?.forEach((server, index) => {
    for (const [header, value] of Object.entries(server.authorization_headers)) {
      if (!(MCP_CREDENTIAL_KEYWORDS as readonly string[]).includes(value)) fields.push({ path: `mcp_servers.${index}.authorization_headers.${header}`, value });
    }
  });
  if (sections.splunk?.enabled && sections.splunk.token_path) fields.push({ path: "splunk.token_path", value: sections.splunk.token_path });
  return fields;
}

/**
 * Reads a file that configuration names. `env:NAME` takes the text of the Worker variable or secret
 * NAME; anything else is a path inside the bundled config/ folder (a leading `config/` or `./` is
 * dropped).
 */
export async function readConfigFile(path: string, env: Record<string, unknown>, bundled: BundledFiles): Promise<string> {
  if (path.startsWith("env:")) {
    const value = env[path.slice(4)];
    if (typeof value !== "string") throw new Error(`environment variable ${path.slice(4)} is not set`);
    return value;
  }
  const relative = path.replace(/^\.\//, "").replace(/^config\//, "");
  if (relative.startsWith("/") || relative.split("/").includes("..")) {
    throw new Error(`${path} is not a bundled file: name a file under config/ or env:NAME`);
  }
  const text = await bundled(relative);
  if (text === null) throw new Error(`bundled file config/${relative} not found`);
  return text;
}
