// The MCP client module (worker/mcp/client.ts) inside workerd, against the real MCP server of
// test/fakes/mcp-server.ts: calls, failures, the timeout, the output cap, sessions and the cache.
// These are the functions the turn's tool loop uses.
import { env } from "cloudflare:workers";
import { describe, expect, inject, it, vi } from "vitest";
import { ConfigSchema } from "../../worker/config/schema.ts";
import { callTool, clearToolListCache, listTools, type McpTarget } from "../../worker/mcp/client.ts";
import { MCP_OUTPUT_LIMIT_BYTES, MCP_TOOL_LIST_FAILURE_TTL_SECONDS } from "../../worker/mcp/defaults.ts";
import { probeMcpAuth } from "../../worker/mcp/oauth-probe.ts";
import { requestMcpServers } from "../../worker/mcp/servers.ts";
import { mcpServersStore } from "../../worker/storage/mcp-servers-store.ts";
import { openStore } from "../../worker/storage/open-store.ts";

const fake = inject("mcp");
const label = (prefix: string) => `${prefix}-${crypto.randomUUID().slice(0, 8)}`;
const stats = async (name: string) => (await fetch(`${fake.base}/__stats/${name}`)).json<{ list: number; call: number; initialize: number; deleted: number }>();

const target = (fields: Partial<McpTarget> = {}): McpTarget => ({
  name: "fake",
  url: `${fake.base}/s/${label("client")}/mcp`,
  headers: {},
  timeoutMs: 5000,
  allowedTools: null,
  ...fields,
});

describe("callTool", () => {
  it("runs a tool and returns its text", async () => {
    expect(await callTool(target(), "echo", { text: "hello" })).toEqual({ ok: true, output: "hello", truncated: false });
    expect(await callTool(target(), "add", { a: 2, b: 3 })).toEqual({ ok: true, output: "5", truncated: false });
  });

  it("takes the arguments as the JSON text a model writes", async () => {
    expect(await callTool(target(), "add", '{"a": 40, "b": 2}')).toEqual({ ok: true, output: "42", truncated: false });
    expect(await callTool(target(), "headers", "")).toMatchObject({ ok: true });
    expect(await callTool(target(), "add", "{oops")).toEqual({ ok: false, error: "the tool arguments are not valid JSON" });
    expect(await callTool(target(), "add", "[1]")).toEqual({ ok: false, error: "the tool arguments must be a JSON object" });
  });

  it("a tool's error result, an unknown tool and bad arguments are failed results", async () => {
    expect(await callTool(target(), "fail", { message: "it broke" })).toEqual({ ok: false, error: "it broke" });
    const unknown = await callTool(target(), "no-such-tool", {});
    expect(unknown.ok).toBe(false);
    expect(!unknown.ok && unknown.error).toContain("no-such-tool");
    expect(await callTool(target(), "add", { a: "not a number" })).toMatchObject({ ok: false });
  });

  it("a call that outlives the server's timeout is a failed result, in about that time", async () => {
    const started = Date.now();
    const result = await callTool(target({ timeoutMs: 300 }), "sleep", { ms: 5000 });
    expect(result).toEqual({ ok: false, error: "MCP server 'fake' did not finish running tool 'sleep' within 0.3 s" });
    expect(Date.now() - started).toBeLessThan(4000);
  });

  it("the caller's signal cancels a call", async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    expect(await callTool(target(), "sleep", { ms: 5000 }, controller.signal)).toEqual({
      ok: false,
      error: "running tool 'sleep' on MCP server 'fake' was cancelled",
    });
  });

  it("output beyond the limit is cut, with a note saying so", async () => {
    const result = await callTool(target(), "big", { bytes: MCP_OUTPUT_LIMIT_BYTES + 1000 });
    expect(result.ok && result.truncated).toBe(true);
    if (!result.ok) throw new Error("expected output");
    expect(result.output.startsWith("x".repeat(MCP_OUTPUT_LIMIT_BYTES))).toBe(true);
    expect(result.output.slice(MCP_OUTPUT_LIMIT_BYTES)).toBe(
      `\n[output truncated: ${MCP_OUTPUT_LIMIT_BYTES + 1000} bytes, only the first ${MCP_OUTPUT_LIMIT_BYTES} shown]`,
    );
    const multiByte = await callTool(target(), "big", { bytes: MCP_OUTPUT_LIMIT_BYTES, char: "€" });
    expect(multiByte.ok && multiByte.output.split("\n")[0]).toBe("€".repeat(Math.floor(MCP_OUTPUT_LIMIT_BYTES / 3)));
  });

  it("a tool with structured output answers with its text", async () => {
    expect(await callTool(target(), "measure", { text: "two words" })).toEqual({ ok: true, output: '{"length":9,"words":2}', truncated: false });
  });

  it("non-text content is described, not dropped", async () => {
    expect(await callTool(target(), "picture", {})).toEqual({ ok: true, output: "a picture:\n[image image/png, 70 bytes not shown]", truncated: false });
  });

  it("a server that is down, or never answers, is a failed result", async () => {
    const down = await callTool(target({ url: fake.downUrl }), "echo", { text: "x" });
    expect(down.ok).toBe(false);
    expect(!down.ok && down.error).toMatch(/^MCP server 'fake' failed while running tool 'echo': /);
    expect(await callTool(target({ url: `${fake.base}/hang/${label("hang")}/mcp`, timeoutMs: 300 }), "echo", { text: "x" })).toEqual({
      ok: false,
      error: "MCP server 'fake' did not finish running tool 'echo' within 0.3 s",
    });
  });

  it("a server that refuses the credentials is a failed result", async () => {
    const refused = await callTool(target({ url: `${fake.base}/auth/${label("auth")}/mcp` }), "whoami", {});
    expect(refused.ok).toBe(false);
    expect(!refused.ok && refused.error).toContain("HTTP 401");
    const accepted = await callTool(target({ url: `${fake.base}/auth/${label("auth")}/mcp`, headers: { Authorization: `Bearer ${fake.token}` } }), "whoami", {});
    expect(accepted).toEqual({ ok: true, output: "authorized", truncated: false });
  });

  it("a tool outside the server's allowed tools is refused without asking the server", async () => {
    const name = label("allowed");
    const server = target({ url: `${fake.base}/s/${name}/mcp`, allowedTools: ["echo"] });
    expect(await callTool(server, "add", { a: 1 })).toEqual({ ok: false, error: "tool 'add' is not among the allowed tools of MCP server 'fake'" });
    expect((await stats(name)).call).toBe(0);
    expect(await callTool(server, "echo", { text: "ok" })).toMatchObject({ ok: true, output: "ok" });
  });

  it("ends the session it opened on a stateful server", async () => {
    const name = label("session");
    const server = target({ url: `${fake.base}/stateful/${name}/mcp` });
    expect(await callTool(server, "add", { a: 1, b: 1 })).toEqual({ ok: true, output: "2", truncated: false });
    expect(await callTool(server, "echo", { text: "again" })).toMatchObject({ ok: true, output: "again" });
    expect(await stats(name)).toMatchObject({ initialize: 2, call: 2, deleted: 2 });
  });

  it("calls running at the same time do not wait on one another", async () => {
    const server = target();
    const results = await Promise.all([callTool(server, "sleep", { ms: 200 }), callTool(server, "echo", { text: "a" }), callTool(server, "add", { a: 1, b: 2 })]);
    expect(results.map((result) => result.ok && result.output)).toEqual(["slept 200", "a", "3"]);
  });
});

describe("listTools", () => {
  it("lists name, description and input schema, and filters by the server's allowed tools", async () => {
    const listed = await listTools(target());
    if (!listed.ok) throw new Error(listed.error);
    expect(listed.tools.map((tool) => tool.name).sort()).toEqual(["add", "big", "echo", "fail", "headers", "measure", "picture", "sleep"]);
    expect(listed.tools.find((tool) => tool.name === "echo")).toEqual({
      name: "echo",
      description: "Repeats the text it is given",
      inputSchema: expect.objectContaining({ type: "object", properties: { text: { type: "string", description: "What to repeat" } }, required: ["text"] }),
    });
    // Listing compiles the output schemas it meets, with the eval-free validator. This runtime allows
    // code generation; test/system/mcp-tools.test.ts checks the bundle where it is forbidden.
    expect(listed.tools.find((tool) => tool.name === "measure")?.inputSchema).toMatchObject({ properties: { text: { type: "string" } } });
    const some = await listTools(target({ allowedTools: ["echo", "missing"] }));
    expect(some.ok && some.tools.map((tool) => tool.name)).toEqual(["echo"]);
  });

  it("caches per URL and credentials, for a short time, as plain data", async () => {
    const name = label("cache");
    const url = `${fake.base}/auth/${name}/mcp`;
    const withToken = target({ url, headers: { Authorization: `Bearer ${fake.token}` } });
    expect((await listTools(withToken)).ok).toBe(true);
    const again = await listTools(withToken);
    expect(again.ok && again.tools.some((tool) => tool.name === "whoami")).toBe(true);
    expect((await stats(name)).list).toBe(1);
    // Other credentials are another entry: refused here.
    expect((await listTools(target({ url, headers: { Authorization: "Bearer other" } }))).ok).toBe(false);
    // A caller changing what it got does not change the cache.
    if (again.ok) again.tools.length = 0;
    const third = await listTools(withToken);
    expect(third.ok && third.tools.length).toBeGreaterThan(0);
    clearToolListCache();
    await listTools(withToken);
    expect((await stats(name)).list).toBe(2);
  });

  it("remembers a failed listing for a shorter time; then one caller tries again while the others go on at once", async () => {
    const hung = target({ url: `${fake.base}/hang/${label("again")}/mcp`, timeoutMs: 300 });
    const quick = (listing: Promise<unknown>) => Promise.race([listing.then(() => true), new Promise((resolve) => setTimeout(() => resolve(false), 150))]);
    expect((await listTools(hung)).ok).toBe(false);
    expect(await quick(listTools(hung))).toBe(true);
    const now = Date.now();
    const later = vi.spyOn(Date, "now").mockReturnValue(now + MCP_TOOL_LIST_FAILURE_TTL_SECONDS * 1000 + 1);
    try {
      const retry = listTools(hung);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(await quick(listTools(hung))).toBe(true);
      expect(await quick(retry)).toBe(false);
      expect(await retry).toMatchObject({ ok: false });
    } finally {
      later.mockRestore();
    }
  });

  it("a server that is down or hangs is a failed listing, never a throw", async () => {
    expect(await listTools(target({ url: fake.downUrl }))).toMatchObject({ ok: false });
    expect(await listTools(target({ url: `${fake.base}/hang/${label("hang")}/mcp`, timeoutMs: 300 }))).toEqual({
      ok: false,
      error: "MCP server 'fake' did not finish listing its tools within 0.3 s",
    });
  });
});

describe("servers of a request, end to end", () => {
  it("the assembled headers reach the server: client, kubernetes, held and forwarded ones", async () => {
    const name = label("assembled");
    const config = ConfigSchema.parse({
      inference_backend: { url: "http://127.0.0.1:1/v1" },
      // A module that passes the caller's token on, which a kubernetes credential needs.
      authentication: { module: "noop-with-token" },
      mcp_servers: [
        {
          name: "everything",
          url: `${fake.base}/s/${name}/mcp`,
          authorization_headers: { "X-Held": "secrets/held", "X-Cluster": "kubernetes", "X-Client": "client" },
          headers: ["X-Request-Id"],
        },
      ],
    });
    const store = openStore(env, undefined);
    try {
      const { servers, probes } = await requestMcpServers({
        config,
        heldSecrets: new Map([["mcp_servers.0.authorization_headers.X-Held", "held-value"]]),
        registry: mcpServersStore(store.sql),
        request: new Request("http://parley.test/v1/query", {
          headers: { "MCP-HEADERS": JSON.stringify({ everything: { "X-Client": "client-value" } }), "x-request-id": "req-7" },
        }),
        token: "caller-token",
      });
      expect(probes).toEqual([]);
      const result = await callTool(servers.find((server) => server.name === "everything")!, "headers", {});
      // The tool echoes what it received; the credentials the call carried come back redacted, which
      // they are only when the exact value arrived. A forwarded header that is no credential is shown.
      expect(result.ok && JSON.parse(result.output)).toEqual({
        "x-client": "[redacted]",
        "x-held": "[redacted]",
        "x-cluster": "[redacted]",
        "x-request-id": "req-7",
      });
    } finally {
      await store.close();
    }
  });
});

describe("probeMcpAuth", () => {
  it("passes when every server accepts the credentials, or cannot be reached", async () => {
    const url = `${fake.base}/auth/${label("probe")}/mcp`;
    await expect(probeMcpAuth([{ name: "a", url, authorization: fake.token }])).resolves.toBeUndefined();
    await expect(probeMcpAuth([{ name: "down", url: fake.downUrl, authorization: null }])).resolves.toBeUndefined();
    await expect(probeMcpAuth([{ name: "open", url: `${fake.base}/s/${label("probe")}/mcp`, authorization: null }])).resolves.toBeUndefined();
  });

  it("a refusal is the caller's 401 with the server's challenge", async () => {
    const url = `${fake.base}/auth/${label("probe")}/mcp`;
    const error = await probeMcpAuth([
      { name: "fine", url: `${fake.base}/s/${label("probe")}/mcp`, authorization: null },
      { name: "refuses", url, authorization: "Bearer nope" },
    ]).catch((thrown: unknown) => thrown);
    expect(error).toMatchObject({
      status: 401,
      response: "Missing or invalid credentials provided by client",
      cause: `MCP server at ${url} requires OAuth`,
      headers: { "WWW-Authenticate": `Bearer realm="mcp-fake", resource_metadata="${fake.base}/.well-known/oauth-protected-resource"` },
    });
  });
});
