// Talking to MCP servers with the official SDK client over streamable HTTP. The API the turn uses:
//
//   listTools(server, signal?)              -> { ok: true, tools: [{ name, description, inputSchema }] }
//                                            | { ok: false, error }
//   callTool(server, name, args, signal?)   -> { ok: true, output, truncated } | { ok: false, error }
//   approvalRequired(server, toolName)      -> boolean            (approval-policy.ts)
//   requestMcpServers(...), clientMcpServer (servers.ts) make the `server` these take;
//   probeMcpAuth(probes)                    (oauth-probe.ts) runs before a request uses the tools.
//
// Neither function throws: an unreachable server, an HTTP or protocol error, a tool's own error
// result and a timeout all come back as { ok: false, error } with a sentence the model (or the
// operator's log) can read. Each call is bounded by the server's timeout (MCP_DEFAULT_TIMEOUT_SECONDS
// when it names none), connection included; the caller's signal cancels it as well. A tool's output
// is cut at MCP_OUTPUT_LIMIT_BYTES with a note saying so.
//
// Every call opens its own client and session and closes it before returning: nothing of one
// request's I/O is ever awaited by another (workerd binds I/O to the request that started it). Only
// tool lists are kept across requests, as plain data, for MCP_TOOL_LIST_TTL_SECONDS per server URL
// and credentials (a hash of the headers; the credentials themselves are not kept), and a failed
// listing for MCP_TOOL_LIST_FAILURE_TTL_SECONDS.
import { Client } from "@modelcontextprotocol/sdk/client";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError, type CallToolResult, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import { log, scrub } from "../log.ts";
import { SERVICE_VERSION } from "../version.ts";
import {
  MCP_OUTPUT_LIMIT_BYTES,
  MCP_TOOL_LIST_CACHE_ENTRIES,
  MCP_TOOL_LIST_FAILURE_TTL_SECONDS,
  MCP_TOOL_LIST_MAX_PAGES,
  MCP_TOOL_LIST_TTL_SECONDS,
} from "./defaults.ts";
import type { McpServer } from "./servers.ts";

export { approvalRequired } from "./approval-policy.ts";

/** A tool as the model is offered it. */
export type McpTool = Pick<Tool, "name" | "description" | "inputSchema">;

export type ListToolsResult = { ok: true; tools: McpTool[] } | { ok: false; error: string };

export type CallToolOutcome = { ok: true; output: string; truncated: boolean } | { ok: false; error: string };

/** What listTools and callTool need of a server (an McpServer has all of it). */
export type McpTarget = Pick<McpServer, "name" | "url" | "headers" | "timeoutMs" | "allowedTools">;

// ---------------------------------------------------------------------------------------------
// Listing
// ---------------------------------------------------------------------------------------------

// Settled plain data only (see the file header). Map order is insertion order: the first key is the oldest.
// A failed listing is kept too, for MCP_TOOL_LIST_FAILURE_TTL_SECONDS: a server that is down or
// hangs then costs one request per period its time-out, not every request of every user.
const toolLists = new Map<string, { expiresAt: number; listed: ListToolsResult }>();

/** The server's tools (only its allowedTools when it names some); from the per-isolate cache when fresh. */
export async function listTools(server: McpTarget, signal?: AbortSignal): Promise<ListToolsResult> {
  const key = await cacheKey(server);
  const cached = toolLists.get(key);
  let listed: ListToolsResult;
  if (cached && cached.expiresAt > Date.now()) {
    listed = structuredClone(cached.listed);
  } else {
    // One request tries a failed server again; until it knows, the others go on with the failure
    // rather than each waiting as well. Its listing is its own: workerd binds I/O to the request
    // that started it, so another request cannot await it.
    if (cached && !cached.listed.ok) cached.expiresAt = Date.now() + server.timeoutMs;
    listed = await listAll(server, signal);
    if (!listed.ok) log.warn(`MCP server '${server.name}' (${server.url}): tools could not be listed: ${listed.error}`);
    // A listing this request gave up on says nothing about the server.
    if (listed.ok || !signal?.aborted) remember(key, listed);
    listed = structuredClone(listed);
  }
  if (!listed.ok) return listed;
  const allowed = server.allowedTools;
  return { ok: true, tools: allowed === null ? listed.tools : listed.tools.filter((tool) => allowed.includes(tool.name)) };
}

async function listAll(server: McpTarget, signal: AbortSignal | undefined): Promise<ListToolsResult> {
  const listed = await bounded(server, signal, "listing its tools", async (client, options) => {
    const all: McpTool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < MCP_TOOL_LIST_MAX_PAGES; page++) {
      const result = await client.listTools(cursor === undefined ? undefined : { cursor }, options);
      for (const tool of result.tools) all.push({ name: tool.name, description: tool.description, inputSchema: tool.inputSchema });
      cursor = result.nextCursor;
      if (!cursor) break;
    }
    return all;
  });
  return listed.ok ? { ok: true, tools: listed.value } : listed;
}

function remember(key: string, listed: ListToolsResult): void {
  const seconds = listed.ok ? MCP_TOOL_LIST_TTL_SECONDS : MCP_TOOL_LIST_FAILURE_TTL_SECONDS;
  toolLists.delete(key);
  toolLists.set(key, { expiresAt: Date.now() + seconds * 1000, listed });
  while (toolLists.size > MCP_TOOL_LIST_CACHE_ENTRIES) toolLists.delete(toolLists.keys().next().value!);
}

/** Forgets every cached tool list (tests, and anyone who must see a change at once). */
export function clearToolListCache(): void {
  toolLists.clear();
}

/**
 * The credential values a call to `server` carries: each header value (the forwarded headers too:
 * which of them hold credentials is the deployment's business), and the token after its scheme.
 */
function credentialsOf(server: McpTarget): string[] {
  return Object.values(server.headers).flatMap((value) => {
    const token = /^\S+\s+(\S.*)$/.exec(value)?.[1];
    return token ? [value, token] : [value];
  });
}

async function cacheKey(server: McpTarget): Promise<string> {
  const headers = Object.entries(server.headers)
    .map(([name, value]) => [name.toLowerCase(), value])
    .sort(([a], [b]) => (a! < b! ? -1 : a! > b! ? 1 : 0));
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(JSON.stringify([server.url, headers])));
  return [...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("");
}

// ---------------------------------------------------------------------------------------------
// Calling
// ---------------------------------------------------------------------------------------------

/**
 * Runs tool `name` with `args` (an object, or the JSON text of one as a model writes it). A tool
 * outside the server's allowedTools is refused without contacting the server.
 */
export async function callTool(server: McpTarget, name: string, args: unknown, signal?: AbortSignal): Promise<CallToolOutcome> {
  const parsed = toolArguments(args);
  if (!parsed.ok) return parsed;
  if (server.allowedTools !== null && !server.allowedTools.includes(name)) {
    return { ok: false, error: `tool '${name}' is not among the allowed tools of MCP server '${server.name}'` };
  }
  const called = await bounded(server, signal, `running tool '${name}'`, (client, options) =>
    client.callTool({ name, arguments: parsed.value }, undefined, options),
  );
  if (!called.ok) return called;
  const result = called.value as CallToolResult;
  // A tool that echoes what it was sent must not hand the credentials Parley added to the model or the client.
  const { text, truncated } = capOutput(scrub(resultText(result), credentialsOf(server)));
  if (result.isError) return { ok: false, error: text || `tool '${name}' reported an error` };
  return { ok: true, output: text, truncated };
}

function toolArguments(args: unknown): { ok: true; value: Record<string, unknown> } | { ok: false; error: string } {
  let value = args;
  if (value === undefined || value === null || value === "") return { ok: true, value: {} };
  if (typeof value === "string") {
    try {
      value = JSON.parse(value);
    } catch {
      return { ok: false, error: "the tool arguments are not valid JSON" };
    }
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { ok: false, error: "the tool arguments must be a JSON object" };
  return { ok: true, value: value as Record<string, unknown> };
}

/** A tool result as text: its text blocks, a mention of anything else, or its structured content. */
function resultText(result: CallToolResult): string {
  const parts: string[] = [];
  for (const block of result.content ?? []) {
    switch (block.type) {
      case "text":
        parts.push(block.text);
        break;
      case "image":
      case "audio":
        parts.push(`[${block.type} ${block.mimeType}, ${base64Bytes(block.data)} bytes not shown]`);
        break;
      case "resource":
        parts.push("text" in block.resource && typeof block.resource.text === "string" ? block.resource.text : `[resource ${block.resource.uri}]`);
        break;
      case "resource_link":
        parts.push(`[resource ${block.uri}${block.name ? ` (${block.name})` : ""}]`);
        break;
    }
  }
  if (parts.length === 0 && result.structuredContent !== undefined) return JSON.stringify(result.structuredContent);
  return parts.join("\n");
}

function base64Bytes(data: string): number {
  const padding = data.endsWith("==") ? 2 : data.endsWith("=") ? 1 : 0;
  return Math.floor((data.length * 3) / 4) - padding;
}

/** `text` cut to MCP_OUTPUT_LIMIT_BYTES of UTF-8 (never inside a character), with a note when cut. */
export function capOutput(text: string, limit = MCP_OUTPUT_LIMIT_BYTES): { text: string; truncated: boolean } {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length <= limit) return { text, truncated: false };
  let end = limit;
  // Back up over UTF-8 continuation bytes so the cut falls between characters.
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  const kept = new TextDecoder().decode(bytes.subarray(0, end));
  return { text: `${kept}\n[output truncated: ${bytes.length} bytes, only the first ${end} shown]`, truncated: true };
}

// ---------------------------------------------------------------------------------------------
// One bounded session
// ---------------------------------------------------------------------------------------------

type RequestOptions = { signal: AbortSignal; timeout: number };

/**
 * Connects a fresh client, runs `work`, closes the session; all within the server's timeout and
 * the caller's signal. Every failure becomes { ok: false, error }.
 */
async function bounded<T>(
  server: McpTarget,
  signal: AbortSignal | undefined,
  doing: string,
  work: (client: Client, options: RequestOptions) => Promise<T>,
): Promise<{ ok: true; value: T } | { ok: false; error: string }> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new DOMException("timed out", "TimeoutError")), server.timeoutMs);
  const stop = signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal;
  let transport: StreamableHTTPClientTransport | undefined;
  let client: Client | undefined;
  try {
    transport = new StreamableHTTPClientTransport(new URL(server.url), {
      requestInit: { headers: server.headers },
      // The transport's own fetches (the message POSTs, the event stream GET) end with the deadline too.
      fetch: (url, init) => fetch(url, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, stop]) : stop }),
    });
    client = new Client(
      { name: "parley", version: SERVICE_VERSION },
      // The SDK's default validator compiles schemas with new Function, which workerd forbids.
      { jsonSchemaValidator: new CfWorkerJsonSchemaValidator() },
    );
    const options = { signal: stop, timeout: server.timeoutMs };
    const connected = client;
    const running = (async () => {
      await connected.connect(transport!, options);
      return work(connected, options);
    })();
    // The loser of the race below must not surface later as an unhandled rejection.
    running.catch(() => undefined);
    const value = await Promise.race([running, aborted(stop)]);
    return { ok: true, value };
  } catch (error) {
    if (deadline.signal.aborted) return { ok: false, error: `MCP server '${server.name}' did not finish ${doing} within ${server.timeoutMs / 1000} s` };
    if (signal?.aborted) return { ok: false, error: `${doing} on MCP server '${server.name}' was cancelled` };
    return { ok: false, error: `MCP server '${server.name}' failed while ${doing}: ${describe(error)}` };
  } finally {
    // Ending the session is bounded by what is left of the same deadline.
    await Promise.race([close(client, transport), aborted(stop)]).catch(() => undefined);
    clearTimeout(timer);
  }
}

function aborted(signal: AbortSignal): Promise<never> {
  return new Promise((_, reject) => {
    if (signal.aborted) reject(signal.reason);
    else signal.addEventListener("abort", () => reject(signal.reason), { once: true });
  });
}

async function close(client: Client | undefined, transport: StreamableHTTPClientTransport | undefined): Promise<void> {
  try {
    // A stateful server keeps a session until told otherwise; a stateless one has none to end.
    if (transport?.sessionId) await transport.terminateSession();
  } catch {
    // The server may already be gone; nothing to undo.
  }
  try {
    await client?.close();
  } catch {
    // As above.
  }
}

const MAX_ERROR_TEXT = 500;

/** One line about `error`, without secrets, short enough for a log line or a tool result. */
function describe(error: unknown): string {
  let text: string;
  if (error instanceof McpError) text = error.message;
  else if (error instanceof StreamableHTTPError) text = error.code ? `HTTP ${error.code}: ${error.message}` : error.message;
  else if (error instanceof Error) text = error.message || error.name;
  else text = String(error);
  text = scrub(text.replace(/\s+/g, " ").trim());
  // workerd's words for a fetch that found no host or connection: say what they mean.
  if (/^internal error; reference = \w+$/.test(text)) text = `the server could not be reached (no such host, or the connection failed; workerd: ${text})`;
  return text.length > MAX_ERROR_TEXT ? `${text.slice(0, MAX_ERROR_TEXT)}…` : text;
}
