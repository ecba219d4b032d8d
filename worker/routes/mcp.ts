// MCP endpoints (SPEC "Endpoints", REFERENCE "Small resources", UPSTREAM "MCP"): the tools of every
// reachable MCP server (/v1/tools), which servers take client credentials
// (/v1/mcp-auth/client-options), and the servers registered through the API (/v1/mcp-servers),
// kept in the record store so every instance sees them and they outlive a restart.
import { Hono, type Context } from "hono";
import * as z from "zod";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { MCP_CREDENTIAL_KEYWORDS } from "../config/schema.ts";
import { ApiError, errors } from "../errors.ts";
import { NOT_HTTP, serverUrlError } from "../mcp/address-guard.ts";
import { listTools, type McpTool } from "../mcp/client.ts";
import { probeMcpAuth } from "../mcp/oauth-probe.ts";
import { cachedRegistry, isHeaderName, mcpServerDefinitions, requestMcpServers, type McpServer } from "../mcp/servers.ts";
import { guard } from "../middleware.ts";
import { mcpServersStore } from "../storage/mcp-servers-store.ts";
import { readJson, requestBodyLimit } from "../validation.ts";

export const mcp = new Hono<AppEnv>();

const DEFAULT_PROVIDER_ID = "model-context-protocol";

const headerName = () => z.string().refine(isHeaderName, "must be an HTTP header name");

export const RegistrationSchema = z.strictObject({
  name: z.string().min(1, "must not be empty").max(256, "must be at most 256 characters"),
  url: z.string().refine((value) => /^https?:\/\//i.test(value) && URL.canParse(value), NOT_HTTP),
  provider_id: z.string().min(1, "must not be empty").nullish(),
  authorization_headers: z.record(headerName(), z.string()).nullish(),
  headers: z
    .array(headerName())
    .nullish()
    .superRefine((names, ctx) => {
      const seen = new Set<string>();
      names?.forEach((name, index) => {
        if (seen.has(name.toLowerCase())) ctx.addIssue({ code: "custom", message: `duplicate header "${name}"`, path: [index] });
        seen.add(name.toLowerCase());
      });
    }),
  timeout: z.int("must be a whole number of seconds").positive("must be greater than 0").nullish(),
});

function registry(c: Context<AppEnv>) {
  return cachedRegistry(mcpServersStore(c.get("store").sql), c.get("rt").config);
}

/** The servers this request may use, their credentials assembled. */
export function serversOfRequest(c: Context<AppEnv>, callerCredentials = true) {
  const rt = c.get("rt");
  return requestMcpServers({
    config: rt.config,
    heldSecrets: rt.heldSecrets,
    registry: registry(c),
    request: c.req.raw,
    token: c.get("auth").token,
    callerCredentials,
  });
}

/** REFERENCE "Small resources" Tools: one entry per tool, its parameters read from its input schema. */
function presentTool(server: McpServer, tool: McpTool) {
  const schema = tool.inputSchema;
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  const properties = (schema.properties ?? {}) as Record<string, Record<string, unknown> | undefined>;
  return {
    identifier: tool.name,
    description: tool.description ?? "",
    parameters: Object.entries(properties).map(([name, property]) => ({
      name,
      description: typeof property?.description === "string" ? property.description : "",
      parameter_type: parameterType(property?.type),
      required: required.has(name),
      default: property?.default ?? null,
    })),
    provider_id: server.providerId,
    toolgroup_id: server.name,
    server_source: server.url,
    type: "tool",
  };
}

/** A schema type as one word: the first non-null of a list; "string" when the schema names none. */
function parameterType(type: unknown): string {
  if (typeof type === "string") return type;
  if (Array.isArray(type)) return type.find((t): t is string => typeof t === "string" && t !== "null") ?? "string";
  return "string";
}

mcp.get("/v1/tools", guard(ACTIONS.tools), async (c) => {
  const { servers, probes } = await serversOfRequest(c);
  await probeMcpAuth(probes);
  // One server failing (down, slow, refusing) leaves only its own tools out; listTools logs why.
  const lists = await Promise.all(servers.map((server) => listTools(server)));
  const tools = servers.flatMap((server, index) => {
    const listed = lists[index]!;
    return listed.ok ? listed.tools.map((tool) => presentTool(server, tool)) : [];
  });
  return c.json({ tools });
});

mcp.get("/v1/mcp-auth/client-options", guard(ACTIONS.tools), async (c) => {
  const rt = c.get("rt");
  const definitions = await mcpServerDefinitions(rt.config, rt.heldSecrets, registry(c));
  const servers = definitions.flatMap((server) => {
    const names = Object.entries(server.authorizationHeaders)
      .filter(([, kind]) => kind === "client")
      .map(([name]) => name);
    return names.length > 0 ? [{ name: server.name, client_auth_headers: names }] : [];
  });
  return c.json({ servers });
});

mcp.get("/v1/mcp-servers", guard(ACTIONS.listMcpServers), async (c) => {
  const rt = c.get("rt");
  const definitions = await mcpServerDefinitions(rt.config, rt.heldSecrets, registry(c));
  return c.json({
    servers: definitions.map((server) => ({ name: server.name, url: server.url, provider_id: server.providerId, source: server.source })),
  });
});

const KEYWORDS: readonly string[] = MCP_CREDENTIAL_KEYWORDS;

/**
 * The largest registration body (64 KiB, README "MCP tools"): its url, provider id and header names
 * go into one record-store row, which hosted D1 caps at 2,000,000 bytes. Far more than a server's
 * address and headers need.
 */
export const MAX_REGISTRATION_REQUEST_BYTES = 64 * 1024;

const registrationBodyLimit = () => requestBodyLimit(MAX_REGISTRATION_REQUEST_BYTES);

mcp.post("/v1/mcp-servers", guard(ACTIONS.registerMcpServer), registrationBodyLimit(), async (c) => {
  const body = await readJson(c, RegistrationSchema);
  const rt = c.get("rt");
  const authorizationHeaders: Record<string, string> = {};
  for (const [header, value] of Object.entries(body.authorization_headers ?? {})) {
    const kind = value.trim();
    // The value is not repeated back: a caller who sent a credential here should not see it echoed.
    if (!KEYWORDS.includes(kind)) {
      throw errors.invalidValue(
        `Authorization header '${header}' has an unsupported value. Dynamic registration only supports: client, kubernetes, oauth. ` +
          "Credentials held by the deployment (a bundled file or a ${env.NAME} secret) are only supported in the static configuration.",
      );
    }
    authorizationHeaders[header] = kind;
  }
  // A name taken is a conflict whatever the address (SPEC's 409), so it is checked first.
  const conflict = () => errors.conflict("Mcp Server already exists", `Mcp Server with name ${body.name} is already registered`);
  const servers = registry(c);
  if (rt.config.mcp_servers.some((server) => server.name === body.name) || (await servers.get(body.name)) !== null) throw conflict();
  const refused = serverUrlError("url", body.url, rt.config.mcp_security.allowed_internal_hosts);
  if (refused) throw refused;
  const providerId = body.provider_id ?? DEFAULT_PROVIDER_ID;
  const created = await servers.create({
    name: body.name,
    url: body.url,
    providerId,
    authorizationHeaders,
    headers: body.headers ?? [],
    timeout: body.timeout ?? null,
    createdBy: c.get("auth").userId,
  });
  if (created === null) throw conflict();
  return c.json(
    { name: created.name, url: created.url, provider_id: created.providerId, message: `MCP server '${created.name}' registered successfully` },
    201,
  );
});

mcp.delete("/v1/mcp-servers/:name", guard(ACTIONS.deleteMcpServer), async (c) => {
  const name = c.req.param("name");
  if (c.get("rt").config.mcp_servers.some((server) => server.name === name)) {
    throw new ApiError(
      403,
      "Cannot delete statically configured MCP server",
      `MCP server '${name}' is defined in configuration and cannot be removed via the API.`,
    );
  }
  const deleted = await registry(c).delete(name);
  return c.json({ name, deleted, response: deleted ? "MCP server deleted successfully" : "MCP server not found" });
});
