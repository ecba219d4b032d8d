// The MCP endpoints through the Worker, against the real MCP server of test/fakes/mcp-server.ts:
// /v1/tools (listing, each credential kind, the OAuth 401 probe, servers that are down or hang),
// /v1/mcp-auth/client-options and the registration of servers (/v1/mcp-servers).
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, inject, it, vi } from "vitest";
import worker from "../../worker/index.ts";
import { callJson, testConfig, type CallOptions } from "./helpers.ts";

const fake = inject("mcp");
/** A fake server path of its own (its own cache entry and counters). */
const label = (prefix: string) => `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
const url = (kind: "s" | "stateful" | "auth" | "hang", name: string) => `${fake.base}/${kind}/${name}/mcp`;
const stats = async (name: string) => (await fetch(`${fake.base}/__stats/${name}`)).json<{ list: number; unauthorized: number }>();

/** Tests reach the fake on 127.0.0.1, which callers may only name when the operator allows it. */
const ALLOW_LOOPBACK = { mcp_security: { allowed_internal_hosts: ["127.0.0.1"] } };

const configWith = (mcpServers: unknown[], extra: Record<string, unknown> = {}) => testConfig({ mcp_servers: mcpServers, ...ALLOW_LOOPBACK, ...extra });

interface ToolEntry {
  identifier: string;
  description: string;
  parameters: Array<{ name: string; description: string; parameter_type: string; required: boolean; default: unknown }>;
  provider_id: string;
  toolgroup_id: string;
  server_source: string;
  type: string;
}

type ToolsBody = { tools: ToolEntry[] };

const toolNames = (body: ToolsBody, server: string) =>
  body.tools
    .filter((tool) => tool.toolgroup_id === server)
    .map((tool) => tool.identifier)
    .sort();

const PUBLIC_TOOLS = ["add", "big", "echo", "fail", "headers", "measure", "picture", "sleep"];

/** A request with extra Worker variables (for `${env.NAME}` secrets), waiting for its leftover work. */
async function callWithEnv(path: string, options: CallOptions & { vars: Record<string, string> }) {
  const { config, vars, headers } = options;
  const ctx = createExecutionContext();
  const response = await worker.fetch(new Request(new URL(path, "http://parley.test"), { headers }), { ...env, PARLEY_CONFIG: config, ...vars }, ctx);
  const body = await response.json();
  await waitOnExecutionContext(ctx);
  return { status: response.status, body };
}

describe("GET /v1/tools", () => {
  it("lists a server's tools in the tools shape, parameters read from each input schema", async () => {
    const name = label("list");
    const config = configWith([{ name: "public", url: url("s", name), provider_id: "mcp-provider" }]);
    const { status, body } = await callJson<ToolsBody>("/v1/tools", { config });
    expect(status).toBe(200);
    expect(toolNames(body, "public")).toEqual(PUBLIC_TOOLS);
    expect(body.tools.find((tool) => tool.identifier === "add")).toEqual({
      identifier: "add",
      description: "Adds two numbers",
      parameters: [
        { name: "a", description: "First addend", parameter_type: "number", required: true, default: null },
        { name: "b", description: "Second addend", parameter_type: "number", required: false, default: 0 },
      ],
      provider_id: "mcp-provider",
      toolgroup_id: "public",
      server_source: url("s", name),
      type: "tool",
    });
    expect(body.tools.find((tool) => tool.identifier === "headers")?.parameters).toEqual([]);
  });

  it("one server down, one that never answers: the others' tools are still listed", async () => {
    const name = label("mixed");
    const config = configWith([
      { name: "down", url: fake.downUrl },
      { name: "hangs", url: url("hang", name), timeout: 1 },
      { name: "good", url: url("s", name) },
    ]);
    const { status, body } = await callJson<ToolsBody>("/v1/tools", { config });
    expect(status).toBe(200);
    expect(new Set(body.tools.map((tool) => tool.toolgroup_id))).toEqual(new Set(["good"]));
    expect(toolNames(body, "good")).toEqual(PUBLIC_TOOLS);
  });

  it("no servers: an empty list", async () => {
    expect(await callJson("/v1/tools", { config: testConfig() })).toEqual({ status: 200, body: { tools: [] } });
  });

  it("a stateful server (sessions) is listed as well", async () => {
    const name = label("stateful");
    const { body } = await callJson<ToolsBody>("/v1/tools", { config: configWith([{ name: "sessions", url: url("stateful", name) }]) });
    expect(toolNames(body, "sessions")).toEqual(PUBLIC_TOOLS);
  });

  it("keeps a server's tool list for a short while instead of asking again", async () => {
    const name = label("cached");
    const config = configWith([{ name: "cached", url: url("s", name) }]);
    await callJson("/v1/tools", { config });
    const { body } = await callJson<ToolsBody>("/v1/tools", { config });
    expect(toolNames(body, "cached")).toEqual(PUBLIC_TOOLS);
    expect((await stats(name)).list).toBe(1);
  });

  it("a malformed MCP-HEADERS is ignored with a warning that never shows its values, as in the original", async () => {
    const name = label("bad-headers");
    const config = configWith([
      { name: "public", url: url("s", name) },
      { name: "by-client", url: url("auth", name), authorization_headers: { Authorization: "client" } },
    ]);
    const warn = vi.spyOn(console, "warn");
    try {
      for (const header of ["not json", "[]", '{"by-client": "Bearer secret-value"}', '{"by-client": {"Authorization": 42, "Bad Name": "secret-value"}}']) {
        const { status, body } = await callJson<ToolsBody>("/v1/tools", { config, headers: { "MCP-HEADERS": header } });
        // The question is answered; the server that needed the unreadable credential is left out.
        expect(status).toBe(200);
        expect(toolNames(body, "public")).toEqual(PUBLIC_TOOLS);
        expect(toolNames(body, "by-client")).toEqual([]);
      }
      const warned = warn.mock.calls.map((call) => call.map(String).join(" ")).filter((line) => line.includes("MCP-HEADERS"));
      expect(warned.length).toBeGreaterThanOrEqual(4);
      expect(warned.join("\n")).not.toContain("secret-value");
    } finally {
      warn.mockRestore();
    }
    // What can be read of it still counts.
    const partly = await callJson<ToolsBody>("/v1/tools", {
      config,
      headers: { "MCP-HEADERS": JSON.stringify({ "by-client": { Authorization: `Bearer ${fake.token}`, "Bad Name": "x" }, other: "not an object" }) },
    });
    expect(toolNames(partly.body, "by-client")).toContain("whoami");
  });
});

/** A server whose Authorization is `credential` beside one that needs none: /v1/tools answers with the second's tools only. */
async function expectLeftOut(name: string, credential: string): Promise<void> {
  const config = configWith([
    { name: "guarded", url: url("auth", name), authorization_headers: { Authorization: credential } },
    { name: "public", url: url("s", name) },
  ]);
  const { status, body } = await callJson<ToolsBody>("/v1/tools", { config });
  expect(status).toBe(200);
  expect(toolNames(body, "guarded")).toEqual([]);
  expect(toolNames(body, "public")).toEqual(PUBLIC_TOOLS);
}

describe("credentials", () => {
  it("held by the deployment as a ${env.NAME} secret", async () => {
    const name = label("held");
    const config = configWith([{ name: "held", url: url("auth", name), authorization_headers: { Authorization: "${env.MCP_TEST_CREDENTIAL}" } }]);
    const { status, body } = await callWithEnv("/v1/tools", { config, vars: { MCP_TEST_CREDENTIAL: `Bearer ${fake.token}` } });
    expect(status).toBe(200);
    expect(toolNames(body as ToolsBody, "held")).toEqual([...PUBLIC_TOOLS, "whoami"].sort());
  });

  it("held by the deployment as a file that is not bundled: that server is left out, the others and the gateway answer", async () => {
    await expectLeftOut(label("nofile"), "secrets/no-such-file");
  });

  it("kubernetes: the caller's own bearer token is passed on", async () => {
    const name = label("k8s");
    const config = configWith([{ name: "cluster", url: url("auth", name), authorization_headers: { Authorization: "kubernetes" } }], {
      authentication: { module: "noop-with-token" },
    });
    const { status, body } = await callJson<ToolsBody>("/v1/tools", { config, token: fake.token });
    expect(status).toBe(200);
    expect(toolNames(body, "cluster")).toContain("whoami");
  });

  it("kubernetes: a token the server refuses answers the caller 401 with the server's challenge", async () => {
    const config = configWith([{ name: "cluster", url: url("auth", label("k8s-bad")), authorization_headers: { Authorization: "kubernetes" } }], {
      authentication: { module: "noop-with-token" },
    });
    const response = await callJson<{ detail: unknown }>("/v1/tools", { config, token: "not-the-token" });
    expect(response.status).toBe(401);
  });

  it("kubernetes under jwk-token: the user's identity token is never handed to the server, which is not used (UPSTREAM)", async () => {
    const name = label("k8s-jwk");
    const config = configWith(
      [
        { name: "cluster", url: url("auth", name), authorization_headers: { Authorization: " kubernetes " } },
        { name: "public", url: url("s", name) },
      ],
      { authentication: { module: "jwk-token", jwk_config: { url: inject("jwksUrl") } } },
    );
    const warn = vi.spyOn(console, "warn");
    try {
      const { status, body } = await callJson<ToolsBody>("/v1/tools", { config, token: inject("tokens").good });
      expect(status).toBe(200);
      expect(toolNames(body, "cluster")).toEqual([]);
      expect(toolNames(body, "public")).toEqual(PUBLIC_TOOLS);
      expect(await stats(name)).toMatchObject({ unauthorized: 0 });
      expect(warn.mock.calls.map((call) => call.map(String).join(" ")).join("\n")).toContain(
        "mcp_servers.0 ('cluster'): a kubernetes credential is the caller's own token, which authentication.module 'jwk-token' does not pass on",
      );
    } finally {
      warn.mockRestore();
    }
    const listed = await callJson<{ servers: Array<{ name: string }> }>("/v1/mcp-servers", { config, token: inject("tokens").good });
    expect(listed.body.servers.map((server) => server.name)).not.toContain("cluster");
  });

  it("kubernetes under an auth module that passes no token: the server is left out", async () => {
    const name = label("k8s-none");
    await expectLeftOut(name, "kubernetes");
    expect((await stats(name)).unauthorized).toBe(0);
  });

  it("client: taken from MCP-HEADERS by server name; without it the server is left out", async () => {
    const name = label("client");
    const config = configWith([{ name: "by-client", url: url("auth", name), authorization_headers: { Authorization: "client" } }]);
    const without = await callJson<ToolsBody>("/v1/tools", { config });
    expect(without).toEqual({ status: 200, body: { tools: [] } });
    const withHeader = await callJson<ToolsBody>("/v1/tools", {
      config,
      headers: { "MCP-HEADERS": JSON.stringify({ "by-client": { Authorization: `Bearer ${fake.token}` }, unknown: { X: "y" } }) },
    });
    expect(withHeader.status).toBe(200);
    expect(toolNames(withHeader.body, "by-client")).toContain("whoami");
  });

  it("oauth: without a token the caller gets 401 and the server's WWW-Authenticate challenge", async () => {
    const name = label("oauth");
    const serverUrl = url("auth", name);
    const config = configWith([
      { name: "by-oauth", url: serverUrl, authorization_headers: { Authorization: "oauth" } },
      { name: "public", url: url("s", name) },
    ]);
    const ctx = createExecutionContext();
    const response = await worker.fetch(new Request("http://parley.test/v1/tools"), { ...env, PARLEY_CONFIG: config }, ctx);
    await waitOnExecutionContext(ctx);
    expect(response.status).toBe(401);
    expect(response.headers.get("WWW-Authenticate")).toBe(`Bearer realm="mcp-fake", resource_metadata="${fake.base}/.well-known/oauth-protected-resource"`);
    expect(await response.json()).toEqual({
      detail: { response: "Missing or invalid credentials provided by client", cause: `MCP server at ${serverUrl} requires OAuth` },
    });
  });

  it("oauth: with the token in MCP-HEADERS the server's tools are listed; a wrong one is a 401", async () => {
    const name = label("oauth-ok");
    const config = configWith([{ name: "by-oauth", url: url("auth", name), authorization_headers: { Authorization: "oauth" } }]);
    const good = await callJson<ToolsBody>("/v1/tools", { config, headers: { "MCP-HEADERS": JSON.stringify({ "by-oauth": { Authorization: fake.token } }) } });
    // A bare token is sent as a bearer token.
    expect(good.status).toBe(200);
    expect(toolNames(good.body, "by-oauth")).toContain("whoami");
    const bad = await callJson("/v1/tools", { config, headers: { "MCP-HEADERS": JSON.stringify({ "by-oauth": { Authorization: "Bearer wrong" } }) } });
    expect(bad.status).toBe(401);
  });

  it("oauth: a server that is down is left out rather than blamed on the caller's credentials", async () => {
    const config = configWith([{ name: "by-oauth", url: fake.downUrl, authorization_headers: { Authorization: "oauth" } }]);
    expect(await callJson("/v1/tools", { config, headers: { "MCP-HEADERS": JSON.stringify({ "by-oauth": { Authorization: "Bearer x" } }) } })).toEqual({
      status: 200,
      body: { tools: [] },
    });
  });

  it("headers: named request headers are forwarded to the server", async () => {
    const name = label("forward");
    const config = configWith([{ name: "forwarding", url: url("auth", name), headers: ["authorization"] }]);
    const forwarded = await callJson<ToolsBody>("/v1/tools", { config, headers: { Authorization: `Bearer ${fake.token}` } });
    expect(toolNames(forwarded.body, "forwarding")).toContain("whoami");
    // Without the header the server refuses the listing; that server alone is missing.
    expect(await callJson("/v1/tools", { config })).toEqual({ status: 200, body: { tools: [] } });
    // A forwarded Authorization is the caller's: one the server refuses answers the caller 401 with its challenge.
    const refused = await callJson<{ detail: { cause: string } }>("/v1/tools", { config, headers: { Authorization: "Bearer wrong" } });
    expect([refused.status, refused.body.detail.cause]).toEqual([401, `MCP server at ${url("auth", name)} requires OAuth`]);
  });
});

describe("GET /v1/mcp-auth/client-options", () => {
  it("names the servers and headers that take client credentials (oauth ones are not among them)", async () => {
    const name = label("options");
    const config = configWith([
      { name: "a", url: url("s", name), authorization_headers: { Authorization: "client", "X-Team": "client", "X-K": "kubernetes" } },
      { name: "b", url: url("s", name), authorization_headers: { Authorization: "oauth" } },
      { name: "c", url: url("s", name) },
    ], { authentication: { module: "noop-with-token" } });
    const registered = `reg-${name}`;
    expect((await callJson("/v1/mcp-servers", { config, token: "a-token", json: { name: registered, url: url("s", name), authorization_headers: { "X-Key": "client" } } })).status).toBe(201);
    const { status, body } = await callJson<{ servers: Array<{ name: string; client_auth_headers: string[] }> }>("/v1/mcp-auth/client-options", { config, token: "a-token" });
    expect(status).toBe(200);
    expect(body.servers.filter((server) => ["a", "b", "c", registered].includes(server.name))).toEqual([
      { name: "a", client_auth_headers: ["Authorization", "X-Team"] },
      { name: registered, client_auth_headers: ["X-Key"] },
    ]);
  });
});

describe("/v1/mcp-servers", () => {
  it("registers a server: 201, listed with its source beside the static ones, its tools in /v1/tools", async () => {
    const name = label("reg");
    const config = configWith([{ name: "static-one", url: url("s", name) }]);
    const registration = await callJson("/v1/mcp-servers", { config, json: { name, url: url("stateful", name), timeout: 5 } });
    expect(registration).toEqual({
      status: 201,
      body: { name, url: url("stateful", name), provider_id: "model-context-protocol", message: `MCP server '${name}' registered successfully` },
    });
    const list = await callJson<{ servers: Array<Record<string, string>> }>("/v1/mcp-servers", { config });
    expect(list.status).toBe(200);
    expect(list.body.servers[0]).toEqual({ name: "static-one", url: url("s", name), provider_id: "model-context-protocol", source: "config" });
    expect(list.body.servers).toContainEqual({ name, url: url("stateful", name), provider_id: "model-context-protocol", source: "api" });
    const tools = await callJson<ToolsBody>("/v1/tools", { config });
    expect(toolNames(tools.body, name)).toEqual(PUBLIC_TOOLS);
  });

  it("a registration is kept in the record store: another configuration (another instance) sees it", async () => {
    const name = label("persist");
    expect((await callJson("/v1/mcp-servers", { config: configWith([]), json: { name, url: url("s", name), provider_id: "p1" } })).status).toBe(201);
    const elsewhere = configWith([], { name: "another instance" });
    const list = await callJson<{ servers: Array<Record<string, string>> }>("/v1/mcp-servers", { config: elsewhere });
    expect(list.body.servers).toContainEqual({ name, url: url("s", name), provider_id: "p1", source: "api" });
  });

  it("a registered server's client credential comes from MCP-HEADERS", async () => {
    const name = label("reg-client");
    const config = configWith([]);
    await callJson("/v1/mcp-servers", { config, json: { name, url: url("auth", name), authorization_headers: { Authorization: "client" } } });
    expect(toolNames((await callJson<ToolsBody>("/v1/tools", { config })).body, name)).toEqual([]);
    const tools = await callJson<ToolsBody>("/v1/tools", { config, headers: { "MCP-HEADERS": JSON.stringify({ [name]: { Authorization: `Bearer ${fake.token}` } }) } });
    expect(toolNames(tools.body, name)).toContain("whoami");
  });

  it("a duplicate name is 409, whether registered or static", async () => {
    const name = label("dup");
    const config = configWith([{ name: "static-dup", url: url("s", name) }]);
    expect((await callJson("/v1/mcp-servers", { config, json: { name, url: url("s", name) } })).status).toBe(201);
    expect(await callJson("/v1/mcp-servers", { config, json: { name, url: url("s", "other") } })).toEqual({
      status: 409,
      body: { detail: { response: "Mcp Server already exists", cause: `Mcp Server with name ${name} is already registered` } },
    });
    expect((await callJson("/v1/mcp-servers", { config, json: { name: "static-dup", url: url("s", name) } })).status).toBe(409);
    // A name taken is the conflict, whatever the address (one the guard would refuse too).
    expect((await callJson("/v1/mcp-servers", { config, json: { name, url: "http://mock-mcp:3000" } })).status).toBe(409);
  });

  it("refuses a URL that is not http(s)", async () => {
    const { status, body } = await callJson<{ detail: { response: string; cause: string } }>("/v1/mcp-servers", {
      config: configWith([]),
      json: { name: label("ftp"), url: "ftp://mcp.example.com/mcp" },
    });
    expect(status).toBe(422);
    expect(body.detail).toEqual({ response: "Invalid attribute value", cause: "url: must be an http or https URL (scheme http:// or https://)" });
  });

  it("refuses an internal address unless the operator allows that host", async () => {
    const strict = testConfig({ mcp_servers: [] });
    for (const address of ["http://127.0.0.1:1/mcp", "http://localhost/mcp", "http://169.254.169.254/", "http://[::ffff:10.0.0.1]/", "http://metadata.google.internal/"]) {
      const { status, body } = await callJson<{ detail: { cause: string } }>("/v1/mcp-servers", { config: strict, json: { name: label("internal"), url: address } });
      expect(status, address).toBe(422);
      expect(body.detail.cause).toContain("mcp_security.allowed_internal_hosts");
    }
    expect((await callJson("/v1/mcp-servers", { config: configWith([]), json: { name: label("allowed"), url: "http://127.0.0.1:1/mcp" } })).status).toBe(201);
  });

  it("refuses credential kinds other than client, kubernetes and oauth, without repeating the value", async () => {
    const { status, body } = await callJson<{ detail: { response: string; cause: string } }>("/v1/mcp-servers", {
      config: configWith([]),
      json: { name: label("kind"), url: "https://mcp.example.com/mcp", authorization_headers: { Authorization: "Bearer sk-live-123456789" } },
    });
    expect(status).toBe(422);
    expect(body.detail.cause).toBe(
      "Authorization header 'Authorization' has an unsupported value. Dynamic registration only supports: client, kubernetes, oauth. " +
        "Credentials held by the deployment (a bundled file or a ${env.NAME} secret) are only supported in the static configuration.",
    );
  });

  it("refuses malformed bodies with 422", async () => {
    const config = configWith([]);
    const post = (json: unknown) => callJson<{ detail: { response: string; cause: string } }>("/v1/mcp-servers", { config, json });
    expect((await post({ url: "https://x.example.com/" })).body.detail).toEqual({ response: "Missing required attributes", cause: "name" });
    expect((await post({ name: "", url: "https://x.example.com/" })).status).toBe(422);
    expect((await post({ name: "x".repeat(257), url: "https://x.example.com/" })).status).toBe(422);
    expect((await post({ name: "x", url: "https://x.example.com/", require_approval: "always" })).body.detail.cause).toContain("unknown field(s): require_approval");
    expect((await post({ name: "x", url: "https://x.example.com/", timeout: 0 })).status).toBe(422);
    expect((await post({ name: "x", url: "https://x.example.com/", headers: ["X-A", "x-a"] })).body.detail.cause).toContain('duplicate header "x-a"');
    expect((await post({ name: "x", url: "https://x.example.com/", headers: ["bad header"] })).status).toBe(422);
  });

  it("refuses a registration body over 64 KiB with 413 before storing it", async () => {
    // Its url, provider_id and header names go into one record-store row, which hosted D1 caps at 2,000,000 bytes.
    const config = configWith([]);
    const name = label("big");
    const tooLarge = { name, url: `https://mcp.example.com/${"a".repeat(64 * 1024)}` };
    const { status, body } = await callJson<{ detail: { response: string; cause: string } }>("/v1/mcp-servers", { config, json: tooLarge });
    expect(status).toBe(413);
    expect(body.detail).toEqual({ response: "Prompt is too long", cause: "The request exceeds the maximum size of 65536 bytes." });
    const list = await callJson<{ servers: Array<{ name: string }> }>("/v1/mcp-servers", { config });
    expect(list.body.servers.map((server) => server.name)).not.toContain(name);

    const fits = { name, url: "https://mcp.example.com/" };
    fits.url += "b".repeat(64 * 1024 - JSON.stringify(fits).length);
    expect((await callJson("/v1/mcp-servers", { config, json: fits })).status).toBe(201);
  });

  it("DELETE: a registered server once, an unknown one is deleted:false, a static one 403", async () => {
    const name = label("del");
    const config = configWith([{ name: "fixed", url: url("s", name) }]);
    await callJson("/v1/mcp-servers", { config, json: { name, url: url("s", name) } });
    expect(await callJson(`/v1/mcp-servers/${name}`, { config, method: "DELETE" })).toEqual({
      status: 200,
      body: { name, deleted: true, response: "MCP server deleted successfully" },
    });
    expect(await callJson(`/v1/mcp-servers/${name}`, { config, method: "DELETE" })).toEqual({
      status: 200,
      body: { name, deleted: false, response: "MCP server not found" },
    });
    expect(await callJson("/v1/mcp-servers/fixed", { config, method: "DELETE" })).toEqual({
      status: 403,
      body: {
        detail: {
          response: "Cannot delete statically configured MCP server",
          cause: "MCP server 'fixed' is defined in configuration and cannot be removed via the API.",
        },
      },
    });
    const list = await callJson<{ servers: Array<{ name: string }> }>("/v1/mcp-servers", { config });
    expect(list.body.servers.map((server) => server.name)).not.toContain(name);
  });

  it("each operation needs its action", async () => {
    const config = configWith([], { authorization: { access_rules: [{ role: "*", actions: ["list_mcp_servers"] }] } });
    expect((await callJson("/v1/mcp-servers", { config })).status).toBe(200);
    expect((await callJson("/v1/mcp-servers", { config, json: { name: label("rbac"), url: "https://x.example.com/" } })).status).toBe(403);
    expect((await callJson("/v1/mcp-servers/x", { config, method: "DELETE" })).status).toBe(403);
    expect((await callJson("/v1/tools", { config })).status).toBe(403);
    expect((await callJson("/v1/mcp-auth/client-options", { config })).status).toBe(403);
  });
});

describe("with Postgres as the record store", () => {
  it("registers, lists, serves the tools of and deletes a server", async () => {
    const name = label("pg");
    const config = configWith([], { database: { postgres: inject("postgres") } });
    const registration = await callJson("/v1/mcp-servers", {
      config,
      json: { name, url: url("s", name), authorization_headers: { "X-Key": "client" }, headers: ["X-Trace"], timeout: 3 },
    });
    expect(registration.status).toBe(201);
    const list = await callJson<{ servers: Array<Record<string, string>> }>("/v1/mcp-servers", { config });
    expect(list.body.servers).toContainEqual({ name, url: url("s", name), provider_id: "model-context-protocol", source: "api" });
    const options = await callJson<{ servers: unknown[] }>("/v1/mcp-auth/client-options", { config });
    expect(options.body.servers).toContainEqual({ name, client_auth_headers: ["X-Key"] });
    const tools = await callJson<ToolsBody>("/v1/tools", { config, headers: { "MCP-HEADERS": JSON.stringify({ [name]: { "X-Key": "k" } }) } });
    expect(toolNames(tools.body, name)).toEqual(PUBLIC_TOOLS);
    expect((await callJson("/v1/mcp-servers", { config, json: { name, url: url("s", name) } })).status).toBe(409);
    expect((await callJson<{ deleted: boolean }>(`/v1/mcp-servers/${name}`, { config, method: "DELETE" })).body.deleted).toBe(true);
  });
});
