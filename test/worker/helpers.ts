// How the Worker tests talk to the gateway: through the Worker's own fetch handler, as a client
// would, with the configuration document of the test (PARLEY_CONFIG) and the fakes of globalSetup.
import { createExecutionContext, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import OpenAI from "openai";
import { afterEach, inject } from "vitest";
import worker from "../../worker/index.ts";

type Json = Record<string, unknown>;

/**
 * A configuration document: the test defaults (scripted backend, noop auth) deep-merged with
 * `overrides`. In the "chat" wire mode the default backend is declared a Chat Completions provider
 * (serving moderations, vector stores and files itself, as the scripted backend does).
 */
export function testConfig(overrides: Json = {}): string {
  // A conversation_cache type, as the bundled configuration has: the /v2 conversation views answer.
  const base = { name: "Parley test", inference_backend: { url: inject("backendUrl") }, authentication: { module: "noop" }, conversation_cache: { type: "memory", memory: {} } };
  const config = merge(base, overrides);
  return JSON.stringify(inject("wireMode") === "chat" ? speakingChat(config) : config);
}

/** The configuration with its default backend spoken to through Chat Completions. */
function speakingChat(config: Json): Json {
  const url = String((config.inference_backend as Json).url);
  const inference = (config.inference ?? {}) as Json;
  const providers = ((inference.providers ?? []) as Json[]).filter((provider) => (provider.extra as Json | undefined)?.url !== url);
  const own = { type: "scripted", extra: { url, wire: "chat", serves: ["moderations", "vector_stores", "files"] } };
  return { ...config, inference: { ...inference, providers: [own, ...providers] } };
}

/** The wire the tests' default backend speaks. */
export const wireMode = () => inject("wireMode");

/**
 * Output items or tool calls other than searches. With no rag list configured, the server's
 * file_search covers every store the backend has (REFERENCE), and for a Chat Completions backend
 * Parley makes those searches itself before each model call, each shown as an item (README
 * "Providers"): for tests about something else.
 */
export const unlessSearch = <T extends { type?: unknown; name?: unknown }>(items: T[]) =>
  items.filter((item) => item.type !== "file_search_call" && item.name !== "file_search");

/** The scripted backend's record of requests whose path ends with `suffix` and whose JSON body matches. */
export async function backendRequests<Body = Record<string, unknown>>(suffix: string, match: (body: Body) => boolean): Promise<Array<{ method: string; path: string; body: Body }>> {
  const root = inject("backendUrl").replace(/\/v1$/, "");
  const all = (await (await fetch(`${root}/__requests`)).json()) as Array<{ method: string; path: string; body: Body | null }>;
  return all.filter((entry) => entry.path.endsWith(suffix) && entry.body !== null && match(entry.body)) as Array<{ method: string; path: string; body: Body }>;
}

function merge(base: Json, overrides: Json): Json {
  const out: Json = { ...base };
  for (const [key, value] of Object.entries(overrides)) {
    const current = out[key];
    out[key] =
      value && typeof value === "object" && !Array.isArray(value) && current && typeof current === "object" && !Array.isArray(current)
        ? merge(current as Json, value as Json)
        : value;
  }
  return out;
}

export interface CallOptions extends Omit<RequestInit, "body"> {
  /** The configuration document; the bundled config/parley.yaml when omitted. */
  config?: string;
  /** JSON body (sets the content type). */
  json?: unknown;
  body?: BodyInit;
  /** noop auth: the user id (?user_id=). */
  user?: string;
  /** Authorization: Bearer <token>. */
  token?: string;
}

const pending: ExecutionContext[] = [];

/** Waits for the work that requests so far left running in waitUntil (persistence after a stream). */
export async function settle(): Promise<void> {
  await Promise.all(pending.splice(0).map((ctx) => waitOnExecutionContext(ctx)));
}
afterEach(settle);

/** Sends one request to the Worker. Work it left in waitUntil is awaited after the test. */
export async function call(path: string, options: CallOptions = {}): Promise<Response> {
  const { config, json, user, token, headers, body, ...init } = options;
  const url = new URL(path, "http://parley.test");
  if (user) url.searchParams.set("user_id", user);
  const allHeaders = new Headers(headers);
  if (json !== undefined) allHeaders.set("Content-Type", "application/json");
  if (token) allHeaders.set("Authorization", `Bearer ${token}`);
  const request = new Request(url, {
    ...init,
    method: init.method ?? (json !== undefined || body !== undefined ? "POST" : "GET"),
    headers: allHeaders,
    body: json !== undefined ? JSON.stringify(json) : body,
  });
  const ctx = createExecutionContext();
  pending.push(ctx);
  return worker.fetch(request, config === undefined ? env : { ...env, PARLEY_CONFIG: config }, ctx);
}

/** The official openai client, its requests sent to the Worker through `call` (noop auth: as `user`). */
export function openaiClient(options: { user?: string; config?: string; headers?: Record<string, string> } = {}): OpenAI {
  return new OpenAI({
    baseURL: "http://parley.test/v1",
    apiKey: "unused-with-noop-auth",
    maxRetries: 0,
    defaultHeaders: options.headers,
    fetch: (input, init) => {
      const url = new URL(String(input instanceof Request ? input.url : input));
      return call(`${url.pathname}${url.search}`, { ...(init as RequestInit), body: (init?.body ?? undefined) as BodyInit | undefined, user: options.user, config: options.config });
    },
  });
}

/** Sends a request and parses the JSON answer, returning status and body. */
export async function callJson<T = Json>(path: string, options: CallOptions = {}): Promise<{ status: number; body: T }> {
  const response = await call(path, options);
  return { status: response.status, body: (await response.json()) as T };
}

/**
 * Retries `check` until it passes or `timeoutMs` runs out, then throws its last failure. For what a
 * conversation's Durable Object feeds after the answer (the record store's list views), which lags
 * by an outbox delivery (README "Conversations").
 */
export async function eventually<T>(check: () => Promise<T>, timeoutMs = 5_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await check();
    } catch (error) {
      if (Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/** Parses an SSE body into its `data:` payloads (JSON where possible), with `event:` names when present. */
export async function readSse(response: Response): Promise<Array<{ event?: string; data: unknown }>> {
  const text = await response.text();
  return text
    .split("\n\n")
    .filter((block) => block.trim())
    .map((block) => {
      let event: string | undefined;
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) event = line.slice(7);
        else if (line.startsWith("data: ")) data.push(line.slice(6));
      }
      const raw = data.join("\n");
      let parsed: unknown = raw;
      try {
        parsed = JSON.parse(raw);
      } catch {
        // [DONE] and plain text stay strings
      }
      return { event, data: parsed };
    });
}

/** A backend request as the tests read it: the Responses API's fields, whichever wire carried it. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- echoed JSON, read by tests as they please
type Loose = any;
export interface EchoedRequest {
  model: string;
  instructions?: string;
  input: Loose[];
  tools: Loose;
  [key: string]: Loose;
}

/**
 * What the scripted backend received, from its #echo-request answer (`text` may have words before
 * the JSON). A Chat Completions body is read back into Responses terms: the leading system message
 * is the instructions, messages and tool calls the input items, function tools flattened.
 */
export function echoedRequest(text: string): EchoedRequest {
  const body = JSON.parse(text.slice(text.indexOf("{"))) as Record<string, unknown>;
  if (!Array.isArray(body.messages)) return body as EchoedRequest;
  const { messages, tools, ...rest } = body as { messages: Array<Record<string, unknown>>; tools?: Array<Record<string, unknown>> };
  const [first, ...others] = messages;
  const system = first?.role === "system" ? String(first.content) : undefined;
  const input: Array<Record<string, unknown>> = [];
  for (const message of system === undefined ? messages : others) {
    if (message.role === "tool") {
      input.push({ type: "function_call_output", call_id: message.tool_call_id, output: message.content });
      continue;
    }
    if (message.content !== null && message.content !== undefined && message.content !== "") input.push({ type: "message", role: message.role, content: message.content });
    for (const call of (message.tool_calls ?? []) as Array<{ id: string; function: { name: string; arguments: string } }>) {
      input.push({ type: "function_call", call_id: call.id, name: call.function.name, arguments: call.function.arguments });
    }
  }
  const flat = tools?.map((tool) => (tool.type === "function" ? { type: "function", ...(tool.function as object) } : tool));
  const echoed: EchoedRequest = { ...rest, model: String(body.model), input, tools: flat };
  if (system !== undefined) echoed.instructions = system;
  if (flat === undefined) delete echoed.tools;
  return echoed;
}

/** Whether a request the scripted backend recorded was a model call, in either wire. */
export const isModelCall = (path: string) => path === "/v1/responses" || path === "/v1/chat/completions";

/**
 * The largest value (UTF-8 bytes) a Durable Object keeps in its own SQLite tables. Cloudflare holds
 * at most 2 MB in one, where workerd takes more locally: a test of large questions and answers
 * checks with this that nothing it stored would fail once deployed.
 */
export async function largestStoredValue(stub: DurableObjectStub): Promise<number> {
  return runInDurableObject(stub, (_instance, state) => {
    const sql = state.storage.sql;
    const tables = sql.exec<{ name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'").toArray();
    const encoder = new TextEncoder();
    let largest = 0;
    for (const { name } of tables) {
      for (const row of sql.exec(`SELECT * FROM "${name}"`)) {
        for (const value of Object.values(row)) {
          const size = typeof value === "string" ? encoder.encode(value).length : value instanceof ArrayBuffer ? value.byteLength : 0;
          largest = Math.max(largest, size);
        }
      }
    }
    return largest;
  });
}

/** The most one value of a Durable Object's SQLite storage holds on Cloudflare. */
export const MAX_STORED_VALUE = 2_000_000;
