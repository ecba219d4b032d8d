/**
 * A real MCP server for the gateway's tests: the official SDK's McpServer over streamable HTTP, on
 * 127.0.0.1, plain Node (globalSetup and unit tests can both start it).
 *
 * PATHS (LABEL is any [A-Za-z0-9_-]+ a test picks, so that its server URL, its tool-list cache entry
 * and its counters are its own):
 *   /s/LABEL/mcp         stateless server (a new server and transport per request, as the SDK's
 *                        stateless example); GET and DELETE answer 405.
 *   /stateful/LABEL/mcp  the same tools with sessions (Mcp-Session-Id); DELETE ends a session.
 *   /auth/LABEL/mcp      requires `Authorization: Bearer <TOKEN>` (McpFake.token); otherwise 401 with
 *                        `WWW-Authenticate: Bearer realm="mcp-fake", resource_metadata="<base>/.well-known/oauth-protected-resource"`
 *                        (JSON-RPC error body), before anything else, whatever the method.
 *   /hang/LABEL/mcp      accepts the request and never answers.
 *   /fault/KIND/LABEL/mcp      a stateless server (as /s/) whose tools/call requests misbehave as
 *                              KIND says; everything else (initialize, tools/list) is served.
 *   /fault-all/KIND/LABEL/mcp  every request misbehaves as KIND says (the server is unusable).
 *     KIND: 500, 503, 429   that HTTP status with a JSON-RPC error body;
 *           cut             the connection is dropped once the request has arrived;
 *           garbage         200 application/json whose body is not JSON ("<html>proxy error</html>");
 *           bad-sse         200 text/event-stream with one event whose data is not JSON, then the end;
 *           stall           200 text/event-stream headers at once, then nothing, ever;
 *           slow            the right answer, after 5 s.
 *   GET /__stats/LABEL   {"list": tools/list requests, "call": tools/call requests,
 *                         "initialize": sessions started, "deleted": sessions ended by DELETE,
 *                         "unauthorized": requests answered 401}
 *   McpFake.downUrl      an address nothing listens on.
 *
 * TOOLS (on every server path):
 *   echo {text}          -> text "text".
 *   add {a, b}           -> text "<a+b>".
 *   sleep {ms}           -> waits ms, then text "slept <ms>".
 *   fail {message?}      -> an error result (isError) with text message (default "scripted tool failure").
 *   big {bytes, char?}   -> text of `bytes` repetitions of char (default "x"; may be multi-byte).
 *   headers              -> text: JSON object of the request headers it received (names lower case)
 *                           whose name is authorization or starts with "x-".
 *   measure {text}       -> structured output {length, words} (declared outputSchema), and its JSON as text.
 *   picture              -> a text block "a picture:" and a 1x1 PNG image block.
 * On /auth/LABEL/mcp there is also:
 *   whoami               -> text "authorized".
 */
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";
import { closedPort, listenOn } from "./listen.ts";

export interface McpFake {
  /** http://127.0.0.1:<port> */
  base: string;
  /** The bearer token /auth/LABEL/mcp accepts. */
  token: string;
  /** A URL nothing answers at (connection refused). */
  downUrl: string;
  close(): Promise<void>;
}

export interface McpStats {
  list: number;
  call: number;
  initialize: number;
  deleted: number;
  unauthorized: number;
}

const PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

function buildServer(withAuthTools: boolean): McpServer {
  const server = new McpServer({ name: "parley-test-mcp", version: "1.0.0" });
  server.registerTool(
    "echo",
    { description: "Repeats the text it is given", inputSchema: { text: z.string().describe("What to repeat") } },
    async ({ text }) => ({ content: [{ type: "text", text }] }),
  );
  server.registerTool(
    "add",
    { description: "Adds two numbers", inputSchema: { a: z.number().describe("First addend"), b: z.number().default(0).describe("Second addend") } },
    async ({ a, b }) => ({ content: [{ type: "text", text: String(a + b) }] }),
  );
  server.registerTool(
    "sleep",
    { description: "Waits, then answers", inputSchema: { ms: z.number().int().min(0) } },
    async ({ ms }) => {
      await new Promise((resolve) => setTimeout(resolve, ms));
      return { content: [{ type: "text", text: `slept ${ms}` }] };
    },
  );
  server.registerTool(
    "fail",
    { description: "Always fails", inputSchema: { message: z.string().optional() } },
    async ({ message }) => ({ isError: true, content: [{ type: "text", text: message ?? "scripted tool failure" }] }),
  );
  server.registerTool(
    "big",
    { description: "Answers with a long text", inputSchema: { bytes: z.number().int().min(0), char: z.string().optional() } },
    async ({ bytes, char }) => ({ content: [{ type: "text", text: (char ?? "x").repeat(bytes) }] }),
  );
  server.registerTool("headers", { description: "Shows the request headers it received" }, async (extra) => {
    const received: Record<string, string> = {};
    for (const [name, value] of Object.entries(extra.requestInfo?.headers ?? {})) {
      const key = name.toLowerCase();
      if (key === "authorization" || key.startsWith("x-")) received[key] = Array.isArray(value) ? value.join(", ") : String(value);
    }
    return { content: [{ type: "text", text: JSON.stringify(received) }] };
  });
  server.registerTool(
    "measure",
    {
      description: "Measures a text (structured output)",
      inputSchema: { text: z.string() },
      outputSchema: { length: z.number().int(), words: z.number().int() },
    },
    async ({ text }) => {
      const structuredContent = { length: text.length, words: text.split(/\s+/).filter(Boolean).length };
      return { content: [{ type: "text", text: JSON.stringify(structuredContent) }], structuredContent };
    },
  );
  server.registerTool("picture", { description: "Answers with text and an image" }, async () => ({
    content: [
      { type: "text", text: "a picture:" },
      { type: "image", data: PNG_1X1, mimeType: "image/png" },
    ],
  }));
  if (withAuthTools) {
    server.registerTool("whoami", { description: "Says whether the caller is authorized" }, async () => ({
      content: [{ type: "text", text: "authorized" }],
    }));
  }
  return server;
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  const text = Buffer.concat(chunks).toString("utf8");
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function methodsOf(body: unknown): string[] {
  const messages = Array.isArray(body) ? body : [body];
  return messages.flatMap((message) =>
    message && typeof message === "object" && typeof (message as { method?: unknown }).method === "string"
      ? [(message as { method: string }).method]
      : [],
  );
}

function jsonRpcError(res: ServerResponse, status: number, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "Content-Type": "application/json", ...headers }).end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

export async function startMcpServer(): Promise<McpFake> {
  const token = `mcp-test-token-${randomUUID()}`;
  const stats = new Map<string, McpStats>();
  const statsOf = (label: string) => {
    let entry = stats.get(label);
    if (!entry) stats.set(label, (entry = { list: 0, call: 0, initialize: 0, deleted: 0, unauthorized: 0 }));
    return entry;
  };
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const hanging = new Set<ServerResponse>();
  let base = "";

  async function stateless(req: IncomingMessage, res: ServerResponse, body: unknown, withAuthTools: boolean): Promise<void> {
    if (req.method !== "POST") return jsonRpcError(res, 405, "Method not allowed.");
    const server = buildServer(withAuthTools);
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on("close", () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  }

  async function stateful(req: IncomingMessage, res: ServerResponse, body: unknown, stat: McpStats): Promise<void> {
    const sessionId = req.headers["mcp-session-id"];
    const existing = typeof sessionId === "string" ? sessions.get(sessionId) : undefined;
    if (existing) {
      if (req.method === "DELETE") stat.deleted++;
      return existing.handleRequest(req, res, body);
    }
    if (req.method !== "POST" || !methodsOf(body).includes("initialize")) return jsonRpcError(res, 400, "Bad Request: no valid session");
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, transport),
      onsessionclosed: (id) => void sessions.delete(id),
    });
    await buildServer(false).connect(transport);
    await transport.handleRequest(req, res, body);
  }

  /** How a faulty path answers (see the header's KIND list); `serve` answers properly. */
  async function misbehave(res: ServerResponse, kind: string, serve: () => Promise<void>): Promise<void> {
    switch (kind) {
      case "500":
      case "503":
      case "429":
        return jsonRpcError(res, Number(kind), `scripted status ${kind}`);
      case "cut":
        res.socket?.destroy();
        return;
      case "garbage":
        res.writeHead(200, { "Content-Type": "application/json" }).end("<html>proxy error</html>");
        return;
      case "bad-sse":
        res.writeHead(200, { "Content-Type": "text/event-stream" }).end('event: message\ndata: {"jsonrpc":"2.0","result":\n\n');
        return;
      case "stall":
        res.writeHead(200, { "Content-Type": "text/event-stream" });
        res.flushHeaders();
        hanging.add(res);
        res.on("close", () => hanging.delete(res));
        return;
      default:
        await new Promise((resolve) => setTimeout(resolve, 5_000));
        if (!res.destroyed) await serve();
    }
  }

  const server = createServer((req, res) => {
    void (async () => {
      const path = new URL(req.url ?? "/", "http://localhost").pathname;
      const statsPath = /^\/__stats\/([A-Za-z0-9_-]+)$/.exec(path);
      if (statsPath) return void res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(statsOf(statsPath[1]!)));
      const fault = /^\/(fault|fault-all)\/(500|503|429|cut|garbage|bad-sse|stall|slow)\/([A-Za-z0-9_-]+)\/mcp$/.exec(path);
      if (fault) {
        const [, scope, kind, faultLabel] = fault;
        const stat = statsOf(faultLabel!);
        const body = req.method === "POST" ? await readBody(req) : undefined;
        const methods = methodsOf(body);
        for (const method of methods) {
          if (method === "tools/list") stat.list++;
          if (method === "tools/call") stat.call++;
          if (method === "initialize") stat.initialize++;
        }
        if (scope === "fault-all" || methods.includes("tools/call")) return misbehave(res, kind!, () => stateless(req, res, body, false));
        return stateless(req, res, body, false);
      }
      const match = /^\/(s|stateful|auth|hang)\/([A-Za-z0-9_-]+)\/mcp$/.exec(path);
      if (!match) return jsonRpcError(res, 404, "Not found");
      const [, kind, label] = match;
      const stat = statsOf(label!);
      if (kind === "hang") {
        hanging.add(res);
        res.on("close", () => hanging.delete(res));
        return;
      }
      if (kind === "auth" && req.headers.authorization !== `Bearer ${token}`) {
        stat.unauthorized++;
        req.resume();
        return jsonRpcError(res, 401, "Unauthorized", {
          "WWW-Authenticate": `Bearer realm="mcp-fake", resource_metadata="${base}/.well-known/oauth-protected-resource"`,
        });
      }
      const body = req.method === "POST" ? await readBody(req) : undefined;
      for (const method of methodsOf(body)) {
        if (method === "tools/list") stat.list++;
        if (method === "tools/call") stat.call++;
        if (method === "initialize") stat.initialize++;
      }
      if (kind === "stateful") return stateful(req, res, body, stat);
      return stateless(req, res, body, kind === "auth");
    })().catch((error: unknown) => {
      if (!res.headersSent) jsonRpcError(res, 500, `fake MCP server error: ${String(error)}`);
      else res.end();
    });
  });
  base = `http://127.0.0.1:${await listenOn(server)}`;

  // A port nothing listens on for the whole run, so a connection to it is refused.
  const downPort = await closedPort();

  return {
    base,
    token,
    downUrl: `http://127.0.0.1:${downPort}/mcp`,
    async close() {
      for (const res of hanging) res.destroy();
      await Promise.all([...sessions.values()].map((transport) => transport.close()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
