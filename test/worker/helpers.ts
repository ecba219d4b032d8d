// How the Worker tests talk to the gateway: through the Worker's own fetch handler, as a client
// would, with the configuration document of the test (PARLEY_CONFIG) and the fakes of globalSetup.
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, inject } from "vitest";
import worker from "../../worker/index.ts";

type Json = Record<string, unknown>;

/** A configuration document: the test defaults (scripted backend, noop auth) deep-merged with `overrides`. */
export function testConfig(overrides: Json = {}): string {
  return JSON.stringify(merge({ name: "Parley test", inference_backend: { url: inject("backendUrl") }, authentication: { module: "noop" } }, overrides));
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

/** Sends a request and parses the JSON answer, returning status and body. */
export async function callJson<T = Json>(path: string, options: CallOptions = {}): Promise<{ status: number; body: T }> {
  const response = await call(path, options);
  return { status: response.status, body: (await response.json()) as T };
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
