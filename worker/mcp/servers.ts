// The MCP servers one request may use: the static ones of the configuration and those registered
// through the API (read from the record store, so every instance sees the same set), each with the
// headers assembled for this caller, and client-provided `mcp` tools turned into the same form.
//
// Header assembly (UPSTREAM "Header assembly per server"; names compare case-insensitively and the
// first source to supply a name wins):
//   1. the client's `MCP-HEADERS` request header: JSON {"<server name>": {"Header": "value"}};
//   2. credentials held by the deployment (a bundled file or a `${env.NAME}` secret);
//   3. `kubernetes`: "Bearer <the caller's own token>", when the auth module passes one on;
//   4. the server's `headers` list: those request headers, under the configured spelling.
// `client` and `oauth` credentials only ever come from MCP-HEADERS. An Authorization value without a
// scheme (a bare access token) is sent as "Bearer <value>". A server still missing one of its
// configured authorization headers is left out of the request (with a warning).
//
// Everything returned is plain data, so a turn can hand it to a Durable Object unchanged.
import { MCP_CREDENTIAL_KEYWORDS, type Config, type McpServerConfig } from "../config/schema.ts";
import { errors } from "../errors.ts";
import { log } from "../log.ts";
import type { McpServersStore, RegisteredMcpServer } from "../storage/mcp-servers-store.ts";
import { serverUrlError } from "./address-guard.ts";
import { MCP_DEFAULT_TIMEOUT_SECONDS, MCP_REGISTRY_TTL_SECONDS } from "./defaults.ts";
import type { ApprovalPolicy, McpServer, McpServerSource } from "../domain/mcp.ts";

export type { ApprovalPolicy, McpServer, McpServerSource };
export type CredentialKeyword = (typeof MCP_CREDENTIAL_KEYWORDS)[number];

/** A server as configured or registered, before this request's credentials are filled in. */
export interface McpServerDefinition {
  name: string;
  url: string;
  providerId: string;
  source: "config" | "api";
  /** Header name -> a credential keyword, or "held" for a credential the deployment holds. */
  authorizationHeaders: Record<string, CredentialKeyword | "held">;
  /** The held credentials, by header name (static servers only). */
  held: Record<string, string>;
  /** Request headers forwarded to the server. */
  headers: string[];
  requireApproval: ApprovalPolicy;
  /** Seconds; null: MCP_DEFAULT_TIMEOUT_SECONDS. */
  timeout: number | null;
}

// The configuration's form of require_approval is the one turns carry.
type SamePolicy<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const POLICY_FORMS_MATCH: SamePolicy<McpServerConfig["require_approval"], ApprovalPolicy> = true;
void POLICY_FORMS_MATCH;

/** A server the OAuth probe (oauth-probe.ts) checks before the request uses MCP tools. */
export interface AuthProbeTarget {
  name: string;
  url: string;
  /** The Authorization value the caller supplied for it, if any. */
  authorization: string | null;
}

export interface SkippedServer {
  name: string;
  /** Configured authorization headers nobody supplied. */
  missing: string[];
}

export interface RequestMcpServers {
  /** Servers whose credentials are complete, static ones first. */
  servers: McpServer[];
  /** Servers left out of this request for want of a credential. */
  skipped: SkippedServer[];
  /** Servers whose credentials the caller answers for (oauth, or an Authorization from the caller). */
  probes: AuthProbeTarget[];
}

/** What the caller brings that header assembly reads. */
export interface CallerCredentials {
  /** Parsed MCP-HEADERS (parseMcpHeaders). */
  mcpHeaders: Record<string, Record<string, string>>;
  /** The incoming request's headers (for a server's `headers` list). */
  requestHeaders: Headers;
  /** The caller's bearer token when the auth module passes it on (AuthContext.token). */
  token: string | null;
}

const KEYWORDS: readonly string[] = MCP_CREDENTIAL_KEYWORDS;

/**
 * The auth modules whose caller token a `kubernetes` credential carries to an MCP server (UPSTREAM:
 * a cluster token is meant for in-cluster servers; another module's token, such as an identity
 * provider's JWT, is never handed to them).
 */
const TOKEN_FORWARDING_MODULES: ReadonlySet<string> = new Set(["k8s", "noop-with-token"]);

function forwardsCallerToken(config: Config): boolean {
  return TOKEN_FORWARDING_MODULES.has(config.authentication.module);
}

/**
 * The static servers that need the caller's token (a `kubernetes` credential) under an auth module
 * that does not pass one on: left out altogether, as the original leaves them out at start-up, and
 * named in the load's warnings.
 */
export function unusableKubernetesServers(config: Config): Array<{ index: number; name: string }> {
  if (forwardsCallerToken(config)) return [];
  return config.mcp_servers.flatMap((server, index) => (Object.values(server.authorization_headers).includes("kubernetes") ? [{ index, name: server.name }] : []));
}

/** The static servers, with the credentials the deployment holds for them (Runtime.heldSecrets). */
export function staticServerDefinitions(config: Config, heldSecrets: ReadonlyMap<string, string>): McpServerDefinition[] {
  const unusable = new Set(unusableKubernetesServers(config).map((server) => server.index));
  return config.mcp_servers.flatMap((server, index) => {
    if (unusable.has(index)) return [];
    const authorizationHeaders: McpServerDefinition["authorizationHeaders"] = {};
    const held: Record<string, string> = {};
    for (const [header, value] of Object.entries(server.authorization_headers)) {
      if (KEYWORDS.includes(value)) {
        authorizationHeaders[header] = value as CredentialKeyword;
        continue;
      }
      authorizationHeaders[header] = "held";
      const secret = heldSecrets.get(`mcp_servers.${index}.authorization_headers.${header}`);
      // A held credential that is empty is as good as missing: the server is then skipped.
      if (secret) held[header] = secret;
    }
    return [
      {
        name: server.name,
        url: server.url,
        providerId: server.provider_id,
        source: "config" as const,
        authorizationHeaders,
        held,
        headers: server.headers,
        requireApproval: server.require_approval,
        timeout: server.timeout ?? null,
      },
    ];
  });
}

/** A registered server. Registration accepts only the keywords; anything else stored is treated as missing. */
export function registeredServerDefinition(record: RegisteredMcpServer): McpServerDefinition {
  const authorizationHeaders: McpServerDefinition["authorizationHeaders"] = {};
  for (const [header, value] of Object.entries(record.authorizationHeaders)) {
    authorizationHeaders[header] = KEYWORDS.includes(value) ? (value as CredentialKeyword) : "held";
  }
  return {
    name: record.name,
    url: record.url,
    providerId: record.providerId,
    source: "api",
    authorizationHeaders,
    held: {},
    headers: record.headers,
    // Registration does not take a policy (as in the original system).
    requireApproval: "never",
    timeout: record.timeout,
  };
}

// Settled plain data only: the registry's list per configuration, for MCP_REGISTRY_TTL_SECONDS.
const registryLists = new WeakMap<object, { expiresAt: number; records: RegisteredMcpServer[] }>();

/**
 * The registry as every request reads it: its list is kept per isolate (and configuration, `owner`)
 * for MCP_REGISTRY_TTL_SECONDS, so a turn does not read the record store for it each time. A
 * registration or removal through this isolate shows at once; through another, within that time.
 */
export function cachedRegistry(registry: McpServersStore, owner: object): McpServersStore {
  const forget = <T>(result: T) => {
    registryLists.delete(owner);
    return result;
  };
  return {
    list: async () => {
      const cached = registryLists.get(owner);
      if (cached && cached.expiresAt > Date.now()) return structuredClone(cached.records);
      const records = await registry.list();
      registryLists.set(owner, { expiresAt: Date.now() + MCP_REGISTRY_TTL_SECONDS * 1000, records: structuredClone(records) });
      return records;
    },
    get: (name) => registry.get(name),
    create: async (server) => forget(await registry.create(server)),
    delete: async (name) => forget(await registry.delete(name)),
  };
}

/** Static servers, then registered ones; a registered name that a static server now uses is ignored. */
export async function mcpServerDefinitions(
  config: Config,
  heldSecrets: ReadonlyMap<string, string>,
  registry: McpServersStore,
): Promise<McpServerDefinition[]> {
  const statics = staticServerDefinitions(config, heldSecrets);
  const names = new Set(statics.map((server) => server.name));
  const registered: McpServerDefinition[] = [];
  for (const record of await registry.list()) {
    if (names.has(record.name)) {
      log.warn(`MCP server '${record.name}' is registered through the API and also configured; the configured one is used`);
      continue;
    }
    registered.push(registeredServerDefinition(record));
  }
  return [...statics, ...registered];
}

const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;

/** True when `name` can be sent as an HTTP header name. */
export function isHeaderName(name: string): boolean {
  return HEADER_NAME.test(name);
}

/**
 * The `MCP-HEADERS` request header: JSON {"<server name>": {"Header": "value"}}. Absent: {}. As in
 * the original, what cannot be read is ignored with a warning rather than refused: a header that is
 * not a JSON object counts as none, and an entry that is not a header (a bad name, a value that is
 * not a string or holds a line break) is left out. The warning names the part, never its values.
 * The servers that needed what was left out are then skipped like any server missing a credential.
 */
export function parseMcpHeaders(value: string | null): Record<string, Record<string, string>> {
  if (value === null || value.trim() === "") return {};
  const ignored = (why: string) => log.warn(`MCP-HEADERS: ${why}; ignored (expected a JSON object of server names to objects of header names and values)`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    parsed = undefined;
  }
  if (!isPlainObject(parsed)) {
    ignored(parsed === undefined ? "not valid JSON" : "not a JSON object");
    return {};
  }
  const result: Record<string, Record<string, string>> = {};
  for (const [server, headers] of Object.entries(parsed)) {
    if (!isPlainObject(headers)) {
      ignored(`the entry for server '${server}' is not an object`);
      continue;
    }
    const entry: Record<string, string> = {};
    for (const [name, headerValue] of Object.entries(headers)) {
      if (!isHeaderName(name)) ignored(`'${name}' (server '${server}') is not a valid header name`);
      else if (typeof headerValue !== "string" || /[\r\n\0]/.test(headerValue)) ignored(`the value of '${name}' (server '${server}') is not a valid header value`);
      else entry[name] = headerValue.trim();
    }
    result[server] = entry;
  }
  return result;
}

export interface AssembledHeaders {
  headers: Record<string, string>;
  /** Configured authorization headers that no source supplied. */
  missing: string[];
  /** The Authorization header came from the caller (MCP-HEADERS, the caller's token, or forwarded from its request). */
  callerAuthorization: boolean;
}

/** The headers `server` gets for this caller (the order of sources is in this file's header). */
export function assembleHeaders(server: McpServerDefinition, caller: CallerCredentials): AssembledHeaders {
  const headers: Record<string, string> = {};
  const present = new Set<string>();
  let callerAuthorization = false;
  const add = (name: string, value: string, fromCaller: boolean) => {
    const key = name.toLowerCase();
    if (present.has(key) || value === "") return;
    present.add(key);
    // An OAuth client typically holds a bare access token; the server expects a scheme.
    headers[name] = key === "authorization" ? withScheme(value) : value;
    if (key === "authorization" && fromCaller) callerAuthorization = true;
  };
  for (const [name, value] of Object.entries(caller.mcpHeaders[server.name] ?? {})) add(name, value, true);
  for (const [name, value] of Object.entries(server.held)) add(name, value, false);
  if (caller.token) {
    for (const [name, kind] of Object.entries(server.authorizationHeaders)) {
      if (kind === "kubernetes") add(name, `Bearer ${caller.token}`, true);
    }
  }
  // Forwarded from the caller's own request: an Authorization among them is the caller's too.
  for (const name of server.headers) {
    const value = caller.requestHeaders.get(name);
    if (value !== null) add(name, value, true);
  }
  const missing = Object.keys(server.authorizationHeaders).filter((name) => !present.has(name.toLowerCase()));
  return { headers, missing, callerAuthorization };
}

/** The servers of `definitions` usable by this caller, those left out, and those to probe. */
export function serversForCaller(definitions: McpServerDefinition[], caller: CallerCredentials): RequestMcpServers {
  const result: RequestMcpServers = { servers: [], skipped: [], probes: [] };
  for (const definition of definitions) {
    const assembled = assembleHeaders(definition, caller);
    const hasOauth = Object.values(definition.authorizationHeaders).includes("oauth");
    if (hasOauth || assembled.callerAuthorization) {
      result.probes.push({ name: definition.name, url: definition.url, authorization: headerValue(assembled.headers, "authorization") });
    }
    if (assembled.missing.length > 0) {
      // In the original's words, which its operators' log searches look for.
      const required = Object.keys(definition.authorizationHeaders);
      const resolved = required.filter((name) => !assembled.missing.includes(name));
      log.warn(`Skipping MCP server '${definition.name}': Required: ${required.join(", ")} | Resolved: ${resolved.join(", ") || "none"} | Missing: ${assembled.missing.join(", ")}`);
      result.skipped.push({ name: definition.name, missing: assembled.missing });
      continue;
    }
    result.servers.push({
      name: definition.name,
      url: definition.url,
      providerId: definition.providerId,
      source: definition.source,
      headers: assembled.headers,
      timeoutMs: (definition.timeout ?? MCP_DEFAULT_TIMEOUT_SECONDS) * 1000,
      requireApproval: definition.requireApproval,
      allowedTools: null,
    });
  }
  return result;
}

/** Everything a request needs to know about its MCP servers, in one call. */
export async function requestMcpServers(input: {
  config: Config;
  heldSecrets: ReadonlyMap<string, string>;
  registry: McpServersStore;
  request: Request;
  /** AuthContext.token */
  token: string | null;
  /**
   * False: only the request's propagated headers reach the servers, not the caller's token or
   * MCP-HEADERS (UPSTREAM "/v1/infer"), so servers that need either are skipped.
   */
  callerCredentials?: boolean;
}): Promise<RequestMcpServers> {
  const credentials = input.callerCredentials ?? true;
  const caller: CallerCredentials = {
    mcpHeaders: credentials ? parseMcpHeaders(input.request.headers.get("MCP-HEADERS")) : {},
    requestHeaders: input.request.headers,
    token: credentials && forwardsCallerToken(input.config) ? input.token : null,
  };
  // A record store that cannot be read does not stop a turn: it goes on with the configured servers.
  const registry: McpServersStore = {
    ...input.registry,
    list: () =>
      input.registry.list().catch((error: unknown) => {
        log.error("the MCP servers registered through the API could not be read; only the configured ones are used", error);
        return [];
      }),
  };
  return serversForCaller(await mcpServerDefinitions(input.config, input.heldSecrets, registry), caller);
}

/** The fields of a client-provided `mcp` tool (SPEC "Responses request", tools) that matter here. */
export interface ClientMcpTool {
  server_label: string;
  server_url: string;
  headers?: Record<string, string> | null;
  authorization?: string | null;
  require_approval?: unknown;
  allowed_tools?: unknown;
}

/**
 * A client-provided `mcp` tool as a server the gateway runs, or a 422 when its URL is refused by
 * the internal-address rule (`field` names it in the error, e.g. "tools[1].server_url").
 * Unset require_approval means "never", as in the original system.
 */
export function clientMcpServer(tool: ClientMcpTool, allowedInternalHosts: readonly string[], field = "server_url"): McpServer {
  const refused = serverUrlError(field, tool.server_url, allowedInternalHosts);
  if (refused) throw refused;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(tool.headers ?? {})) {
    if (!isHeaderName(name) || /[\r\n\0]/.test(value)) throw errors.invalidValue(`${field.replace(/server_url$/, "headers")}: '${name}' is not a valid header`);
    headers[name] = value;
  }
  if (tool.authorization && headerValue(headers, "authorization") === null) {
    headers.Authorization = withScheme(tool.authorization);
  }
  return {
    name: tool.server_label,
    url: tool.server_url,
    providerId: "model-context-protocol",
    source: "client",
    headers,
    timeoutMs: MCP_DEFAULT_TIMEOUT_SECONDS * 1000,
    requireApproval: clientApprovalPolicy(tool.require_approval),
    allowedTools: toolNames(tool.allowed_tools),
  };
}

/** The Responses API form ({always: {tool_names}, never: {tool_names}}) in the configuration's form. */
function clientApprovalPolicy(value: unknown): ApprovalPolicy {
  if (value === "always" || value === "never") return value;
  if (!isPlainObject(value)) return "never";
  return { always: toolNames(value.always) ?? [], never: toolNames(value.never) ?? [] };
}

function toolNames(value: unknown): string[] | null {
  if (Array.isArray(value)) return value.filter((name): name is string => typeof name === "string");
  if (isPlainObject(value) && Array.isArray(value.tool_names)) return toolNames(value.tool_names);
  return null;
}

/** An Authorization value with a scheme; a bare token becomes a bearer token. */
export function withScheme(authorization: string): string {
  const value = authorization.trim();
  return /^[A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*\s+\S/.test(value) ? value : `Bearer ${value}`;
}

/** A header's value by case-insensitive name, or null. */
export function headerValue(headers: Record<string, string>, name: string): string | null {
  const wanted = name.toLowerCase();
  for (const [key, value] of Object.entries(headers)) if (key.toLowerCase() === wanted) return value;
  return null;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
