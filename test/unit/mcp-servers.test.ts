// Which MCP servers a request may use and with which headers (worker/mcp/servers.ts), the approval
// policy and the output cap: the pure parts of the MCP module.
import { describe, expect, it, vi } from "vitest";
import { ConfigSchema, type Config } from "../../worker/config/schema.ts";
import { approvalRequired } from "../../worker/mcp/approval-policy.ts";
import { capOutput } from "../../worker/mcp/client.ts";
import { MCP_DEFAULT_TIMEOUT_SECONDS, MCP_OUTPUT_LIMIT_BYTES } from "../../worker/mcp/defaults.ts";
import {
  assembleHeaders,
  clientMcpServer,
  parseMcpHeaders,
  registeredServerDefinition,
  serversForCaller,
  staticServerDefinitions,
  unusableKubernetesServers,
  withScheme,
  type CallerCredentials,
  type McpServerDefinition,
} from "../../worker/mcp/servers.ts";

/** What each auth module needs besides its name, for the modules the tests name. */
const MODULE_SETTINGS: Record<string, Record<string, unknown>> = {
  k8s: { k8s_cluster_api: "https://cluster.example.com", k8s_service_account_token: "service-token" },
  "jwk-token": { jwk_config: { url: "https://keys.example.com/jwks.json" } },
};

function config(mcpServers: unknown[], module = "noop-with-token"): Config {
  return ConfigSchema.parse({ inference_backend: { url: "http://127.0.0.1:1/v1" }, authentication: { module, ...MODULE_SETTINGS[module] }, mcp_servers: mcpServers });
}

const caller = (fields: Partial<CallerCredentials> = {}): CallerCredentials => ({
  mcpHeaders: {},
  requestHeaders: new Headers(),
  token: null,
  ...fields,
});

const definition = (fields: Partial<McpServerDefinition>): McpServerDefinition => ({
  name: "srv",
  url: "https://mcp.example.com/mcp",
  providerId: "model-context-protocol",
  source: "config",
  authorizationHeaders: {},
  held: {},
  headers: [],
  requireApproval: "never",
  timeout: null,
  ...fields,
});

describe("staticServerDefinitions", () => {
  it("reads keywords as they are and takes held credentials from the loaded secrets by field path", () => {
    const cfg = config([
      { name: "a", url: "https://a.example.com/mcp" },
      {
        name: "b",
        url: "https://b.example.com/mcp",
        authorization_headers: { Authorization: "secrets/b-token", "X-User": "client", "X-K8s": "kubernetes", "X-OAuth": "oauth" },
        headers: ["X-Request-Id"],
        require_approval: { always: ["danger"] },
        timeout: 5,
      },
    ]);
    const held = new Map([["mcp_servers.1.authorization_headers.Authorization", "Bearer held-secret"]]);
    const [a, b] = staticServerDefinitions(cfg, held);
    expect(a).toEqual(definition({ name: "a", url: "https://a.example.com/mcp" }));
    expect(b).toEqual(
      definition({
        name: "b",
        url: "https://b.example.com/mcp",
        authorizationHeaders: { Authorization: "held", "X-User": "client", "X-K8s": "kubernetes", "X-OAuth": "oauth" },
        held: { Authorization: "Bearer held-secret" },
        headers: ["X-Request-Id"],
        requireApproval: { always: ["danger"], never: [] },
        timeout: 5,
      }),
    );
  });

  it("leaves a held credential out when the loaded value is missing or empty", () => {
    const cfg = config([{ name: "a", url: "https://a.example.com/mcp", authorization_headers: { Authorization: "f" } }]);
    expect(staticServerDefinitions(cfg, new Map([["mcp_servers.0.authorization_headers.Authorization", ""]]))[0]!.held).toEqual({});
  });
});

describe("registeredServerDefinition", () => {
  it("registered servers never need approval and keep their keywords", () => {
    const result = registeredServerDefinition({
      name: "r",
      url: "https://r.example.com/mcp",
      providerId: "p",
      authorizationHeaders: { Authorization: "client" },
      headers: ["X-Trace"],
      timeout: 7,
      createdBy: "u",
      createdAt: "2025-01-01T00:00:00.000Z",
    });
    expect(result).toEqual(
      definition({
        name: "r",
        url: "https://r.example.com/mcp",
        providerId: "p",
        source: "api",
        authorizationHeaders: { Authorization: "client" },
        headers: ["X-Trace"],
        timeout: 7,
      }),
    );
  });
});

describe("servers needing the caller's token", () => {
  const servers = [
    { name: "cluster", url: "https://c.example.com/mcp", authorization_headers: { "X-K8s": " kubernetes " } },
    { name: "plain", url: "https://p.example.com/mcp", authorization_headers: { Authorization: " client " } },
  ];

  it("are used only under the modules that pass a token on (k8s, noop-with-token), their values read stripped", () => {
    for (const module of ["k8s", "noop-with-token"]) {
      expect(staticServerDefinitions(config(servers, module), new Map()).map((server) => [server.name, server.authorizationHeaders])).toEqual([
        ["cluster", { "X-K8s": "kubernetes" }],
        ["plain", { Authorization: "client" }],
      ]);
    }
    for (const module of ["noop", "jwk-token"]) {
      const cfg = config(servers, module);
      expect(staticServerDefinitions(cfg, new Map()).map((server) => server.name)).toEqual(["plain"]);
      expect(unusableKubernetesServers(cfg)).toEqual([{ index: 0, name: "cluster" }]);
    }
  });
});

describe("parseMcpHeaders", () => {
  it("absent or empty is no headers", () => {
    expect(parseMcpHeaders(null)).toEqual({});
    expect(parseMcpHeaders("  ")).toEqual({});
  });

  it("reads server name -> header -> value", () => {
    expect(parseMcpHeaders('{"a": {"Authorization": " Bearer x "}, "b": {}}')).toEqual({ a: { Authorization: "Bearer x" }, b: {} });
  });

  it.each([
    ["{not json", "not valid JSON", {}],
    ["[1]", "not a JSON object", {}],
    ['"x"', "not a JSON object", {}],
    ['{"a": "Bearer x", "b": {"X": "kept"}}', "the entry for server 'a' is not an object", { b: { X: "kept" } }],
    ['{"a": {"Bad Header": "Bearer x", "X": "kept"}}', "'Bad Header' (server 'a') is not a valid header name", { a: { X: "kept" } }],
    ['{"a": {"X": 5}}', "the value of 'X' (server 'a') is not a valid header value", { a: {} }],
    ['{"a": {"X": "line\\nbreak Bearer x"}}', "the value of 'X' (server 'a') is not a valid header value", { a: {} }],
  ])("%s: what cannot be read is left out with a warning (%s) that never repeats a value", (text, why, kept) => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    try {
      expect(parseMcpHeaders(text)).toEqual(kept);
      const warned = warn.mock.calls.map((call) => call.map(String).join(" ")).join("\n");
      expect(warned).toContain(why);
      expect(warned).not.toContain("Bearer x");
    } finally {
      warn.mockRestore();
    }
  });
});

describe("assembleHeaders", () => {
  it("takes MCP-HEADERS first, then held credentials, then the caller's token, then forwarded headers", () => {
    const server = definition({
      authorizationHeaders: { Authorization: "held", "X-Cluster": "kubernetes", "X-Client": "client" },
      held: { Authorization: "Bearer held" },
      headers: ["X-Request-Id", "X-Client", "x-cluster"],
    });
    const result = assembleHeaders(
      server,
      caller({
        mcpHeaders: { srv: { "x-client": "from-client", "X-Extra": "extra" }, other: { "X-Other": "no" } },
        requestHeaders: new Headers({ "x-request-id": "req-1", "X-Client": "forwarded-loses", "X-Cluster": "forwarded-loses" }),
        token: "caller-token",
      }),
    );
    expect(result).toEqual({
      headers: {
        "x-client": "from-client",
        "X-Extra": "extra",
        Authorization: "Bearer held",
        "X-Cluster": "Bearer caller-token",
        // Forwarded under the configured spelling.
        "X-Request-Id": "req-1",
      },
      missing: [],
      callerAuthorization: false,
    });
  });

  it("a client's Authorization beats the held one, compared case-insensitively, and is the caller's", () => {
    const server = definition({ authorizationHeaders: { Authorization: "held" }, held: { Authorization: "Bearer held" } });
    const result = assembleHeaders(server, caller({ mcpHeaders: { srv: { authorization: "Bearer mine" } } }));
    expect(result.headers).toEqual({ authorization: "Bearer mine" });
    expect(result.callerAuthorization).toBe(true);
  });

  it("kubernetes needs the caller's token; client and oauth only come from MCP-HEADERS", () => {
    const server = definition({ authorizationHeaders: { Authorization: "kubernetes", "X-Client": "client", "X-OAuth": "oauth" } });
    const none = assembleHeaders(server, caller({ requestHeaders: new Headers({ "X-Client": "header-is-not-enough" }) }));
    expect(none.missing).toEqual(["Authorization", "X-Client", "X-OAuth"]);
    const all = assembleHeaders(server, caller({ token: "t0k", mcpHeaders: { srv: { "X-Client": "c", "X-OAuth": "o" } } }));
    expect(all.missing).toEqual([]);
    expect(all.headers).toEqual({ "X-Client": "c", "X-OAuth": "o", Authorization: "Bearer t0k" });
    expect(all.callerAuthorization).toBe(true);
  });

  it("an empty value supplies nothing", () => {
    const server = definition({ authorizationHeaders: { "X-Client": "client" } });
    expect(assembleHeaders(server, caller({ mcpHeaders: { srv: { "X-Client": "" } } })).missing).toEqual(["X-Client"]);
  });
});

describe("serversForCaller", () => {
  const definitions = [
    definition({ name: "open", timeout: 2.5 }),
    definition({ name: "held", authorizationHeaders: { Authorization: "held" }, held: { Authorization: "Bearer h" } }),
    definition({ name: "needs-client", authorizationHeaders: { "X-Key": "client" } }),
    definition({ name: "oauth", authorizationHeaders: { Authorization: "oauth" }, source: "api" }),
    definition({ name: "k8s", authorizationHeaders: { Authorization: "kubernetes" } }),
  ];

  it("leaves out servers missing a credential and probes the ones whose credentials the caller answers for", () => {
    const result = serversForCaller(definitions, caller());
    expect(result.servers.map((s) => s.name)).toEqual(["open", "held"]);
    expect(result.skipped).toEqual([
      { name: "needs-client", missing: ["X-Key"] },
      { name: "oauth", missing: ["Authorization"] },
      { name: "k8s", missing: ["Authorization"] },
    ]);
    // The oauth server is probed without credentials: its 401 tells the client where to get them.
    expect(result.probes).toEqual([{ name: "oauth", url: "https://mcp.example.com/mcp", authorization: null }]);
    expect(result.servers[0]).toEqual({
      name: "open",
      url: "https://mcp.example.com/mcp",
      providerId: "model-context-protocol",
      source: "config",
      headers: {},
      timeoutMs: 2500,
      requireApproval: "never",
      allowedTools: null,
    });
    expect(result.servers[1]!.timeoutMs).toBe(MCP_DEFAULT_TIMEOUT_SECONDS * 1000);
  });

  it("logs each server left out in the original's words", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    try {
      serversForCaller([definitions[2]!], caller());
      expect(warn.mock.calls.map((call) => String(call[0]))).toEqual([
        expect.stringContaining("Skipping MCP server 'needs-client': Required: X-Key | Resolved: none | Missing: X-Key"),
      ]);
    } finally {
      warn.mockRestore();
    }
  });

  it("with the caller's credentials every server is usable, and the caller-supplied ones are probed", () => {
    const result = serversForCaller(
      definitions,
      caller({ token: "tok", mcpHeaders: { "needs-client": { "X-Key": "k" }, oauth: { Authorization: "Bearer o" } } }),
    );
    expect(result.servers.map((s) => s.name)).toEqual(["open", "held", "needs-client", "oauth", "k8s"]);
    expect(result.skipped).toEqual([]);
    expect(result.probes).toEqual([
      { name: "oauth", url: "https://mcp.example.com/mcp", authorization: "Bearer o" },
      { name: "k8s", url: "https://mcp.example.com/mcp", authorization: "Bearer tok" },
    ]);
  });
});

describe("clientMcpServer", () => {
  it("turns a client's mcp tool into a server the gateway runs", () => {
    const server = clientMcpServer(
      {
        server_label: "docs",
        server_url: "https://docs.example.com/mcp",
        headers: { "X-Api-Key": "k" },
        authorization: "tok",
        require_approval: { always: { tool_names: ["write"] }, never: { tool_names: ["read"] } },
        allowed_tools: { tool_names: ["read", "write"] },
      },
      [],
    );
    expect(server).toEqual({
      name: "docs",
      url: "https://docs.example.com/mcp",
      providerId: "model-context-protocol",
      source: "client",
      headers: { "X-Api-Key": "k", Authorization: "Bearer tok" },
      timeoutMs: MCP_DEFAULT_TIMEOUT_SECONDS * 1000,
      requireApproval: { always: ["write"], never: ["read"] },
      allowedTools: ["read", "write"],
    });
  });

  it("defaults: no approval, every tool; an Authorization header wins over the authorization field", () => {
    const server = clientMcpServer(
      { server_label: "x", server_url: "https://x.example.com/", headers: { authorization: "Basic abc" }, authorization: "tok", allowed_tools: ["a"] },
      [],
    );
    expect(server.requireApproval).toBe("never");
    expect(server.allowedTools).toEqual(["a"]);
    expect(server.headers).toEqual({ authorization: "Basic abc" });
  });

  it("refuses internal addresses unless allowed, naming the request's field", () => {
    const tool = { server_label: "x", server_url: "http://127.0.0.1:9/mcp" };
    expect(() => clientMcpServer(tool, [], "tools[2].server_url")).toThrow(/tools\[2\]\.server_url: names a loopback address/);
    expect(clientMcpServer(tool, ["127.0.0.1"]).url).toBe("http://127.0.0.1:9/mcp");
  });

  it("refuses headers that cannot be sent", () => {
    expect(() => clientMcpServer({ server_label: "x", server_url: "https://x.example.com/", headers: { "a b": "v" } }, [], "tools[0].server_url")).toThrow(
      /tools\[0\]\.headers: 'a b' is not a valid header/,
    );
  });
});

describe("withScheme", () => {
  it("adds Bearer to a bare token only", () => {
    expect(withScheme("abc.def")).toBe("Bearer abc.def");
    expect(withScheme("Bearer abc")).toBe("Bearer abc");
    expect(withScheme("bearer abc")).toBe("bearer abc");
    expect(withScheme("Basic dXNlcg==")).toBe("Basic dXNlcg==");
  });
});

describe("approvalRequired", () => {
  it("always / never speak for every tool", () => {
    expect(approvalRequired({ requireApproval: "always" }, "x")).toBe(true);
    expect(approvalRequired({ requireApproval: "never" }, "x")).toBe(false);
  });

  it("with lists, a tool in neither list needs approval", () => {
    const server = { requireApproval: { always: ["write"], never: ["read"] } };
    expect(approvalRequired(server, "write")).toBe(true);
    expect(approvalRequired(server, "read")).toBe(false);
    expect(approvalRequired(server, "other")).toBe(true);
  });
});

describe("capOutput", () => {
  it("leaves output within the limit alone", () => {
    expect(capOutput("hello")).toEqual({ text: "hello", truncated: false });
    const exact = "x".repeat(MCP_OUTPUT_LIMIT_BYTES);
    expect(capOutput(exact)).toEqual({ text: exact, truncated: false });
  });

  it("cuts at the byte limit, never inside a character, and says so", () => {
    const { text, truncated } = capOutput("é".repeat(10), 5);
    expect(truncated).toBe(true);
    expect(text).toBe("éé\n[output truncated: 20 bytes, only the first 4 shown]");
  });
});
