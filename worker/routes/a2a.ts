// The A2A endpoints: the agent card (unauthenticated at the well-known paths: it is how clients
// learn how to authenticate; at GET /a2a behind a2a_jsonrpc, as the original system has it), the
// JSON-RPC endpoint and its health (public, as the original's). JSON-RPC framing is the SDK's
// JsonRpcTransportHandler; the methods are GatewayRequestHandler's.
import type { JSONRPCErrorResponse, JSONRPCResponse } from "@a2a-js/sdk";
import { A2AError, JsonRpcTransportHandler } from "@a2a-js/sdk/server";
import { Hono, type Context } from "hono";
import { parseAccept } from "hono/utils/accept";
import pkg from "../../package.json";
import type { AppEnv } from "../app-env.ts";
import { A2A_PATH, agentCard } from "../a2a/card.ts";
import { toA2AError } from "../a2a/errors.ts";
import { GatewayRequestHandler } from "../a2a/request-handler.ts";
import { ACTIONS } from "../auth/actions.ts";
import { ApiError } from "../errors.ts";
import { guard } from "../middleware.ts";
import { readText, tooDeep } from "../validation.ts";
import { SERVICE_VERSION } from "../version.ts";
import { planContext, sse, turnBodyLimit } from "./streams.ts";

export const a2a = new Hono<AppEnv>();

for (const path of ["/.well-known/agent-card.json", "/.well-known/agent.json"]) {
  a2a.get(path, (c) => c.json(agentCard(c.get("rt"), c.req.url)));
}
// UPSTREAM §8: a2a_jsonrpc guards GET and POST /a2a alike.
a2a.get(A2A_PATH, guard(ACTIONS.a2a), (c) => c.json(agentCard(c.get("rt"), c.req.url)));

// Says nothing about any user or conversation; public in the original system (UPSTREAM §8).
a2a.get(`${A2A_PATH}/health`, (c) =>
  c.json({
    status: "healthy",
    service: "parley-a2a",
    version: SERVICE_VERSION,
    // Pinned exactly in package.json, so this is the version running.
    a2a_sdk_version: pkg.dependencies["@a2a-js/sdk"],
    timestamp: new Date().toISOString(),
  }),
);

/** Methods answered as an SSE stream; SPEC: they need `Accept: text/event-stream`. */
const STREAMING_METHODS = new Set(["message/stream", "tasks/resubscribe"]);

a2a.post(A2A_PATH, guard(ACTIONS.a2a), turnBodyLimit(), async (c) => {
  let text: string;
  try {
    text = await readText(c);
  } catch (error) {
    // JSON-RPC's own answer to bytes that cannot be parsed (invalid UTF-8 included): -32700.
    if (!(error instanceof ApiError)) throw error;
    return c.json({ jsonrpc: "2.0", id: null, error: A2AError.parseError(error.cause).toJSONRPCError() } satisfies JSONRPCErrorResponse);
  }
  let body: unknown = text;
  let parsed = false;
  try {
    body = JSON.parse(text);
    parsed = true;
  } catch {
    // The transport answers unparseable bodies with -32700 itself.
  }
  const envelope = body && typeof body === "object" ? (body as { jsonrpc?: unknown; id?: unknown; method?: unknown }) : {};
  const id = typeof envelope.id === "string" || typeof envelope.id === "number" ? envelope.id : null;
  const invalid = (message: string) => c.json({ jsonrpc: "2.0", id: null, error: A2AError.invalidRequest(message).toJSONRPCError() } satisfies JSONRPCErrorResponse);
  // JSON that is not a request object is an invalid request (-32600), not a parse error.
  if (parsed && (body === null || typeof body !== "object")) return invalid("The request must be a JSON-RPC request object.");
  // JSON-RPC 2.0 §4: an id is a string, a number or null; one that is not cannot be answered to (§5: null).
  if ("id" in envelope && id === null && envelope.id !== null) return invalid("The request's id must be a string, a number or null.");
  // A notification is a valid request without an id (JSON-RPC 2.0 §4.1): it is carried out, and the
  // HTTP answer is empty. One that is not a valid request is answered as invalid, like any other.
  const notification = parsed && !Array.isArray(body) && !("id" in envelope) && envelope.jsonrpc === "2.0" && typeof envelope.method === "string";
  const deep = tooDeep(body);
  if (deep) return c.json({ jsonrpc: "2.0", id, error: A2AError.invalidRequest(deep).toJSONRPCError() } satisfies JSONRPCErrorResponse);
  if (!notification && typeof envelope.method === "string" && STREAMING_METHODS.has(envelope.method) && !acceptsEventStream(c)) {
    const error = A2AError.invalidRequest(`${envelope.method} streams its answer: send the header Accept: text/event-stream`);
    return c.json({ jsonrpc: "2.0", id, error: error.toJSONRPCError() } satisfies JSONRPCErrorResponse);
  }

  const handler = new GatewayRequestHandler({
    env: c.env,
    rt: c.get("rt"),
    auth: c.get("auth"),
    store: c.get("store"),
    plan: planContext(c, { probeMcpAuth: false }),
    requestUrl: c.req.url,
    waitUntil: (promise) => c.executionCtx.waitUntil(promise),
  });
  const result = await new JsonRpcTransportHandler(handler).handle(body);
  if (notification) {
    // A stream nobody will read is started (its first event opens the task), then no longer
    // followed: the task runs on, as for a client that left. Its failure has nobody to be told to.
    if (Symbol.asyncIterator in result) {
      await result
        .next()
        .catch(() => undefined)
        .finally(() => result.return(undefined));
    }
    return c.body(null, 204);
  }
  if (Symbol.asyncIterator in result) return sse((await eventStream(result, id)).pipeThrough(new TextEncoderStream()));
  return c.json(result);
});

/**
 * Whether the request's Accept header admits an event stream (RFC 9110 §12.5.1): the most specific
 * of text/event-stream, `text/*` and every type (what HTTP clients send by default) that it names
 * decides, by a q above 0. SPEC asks for the header, so a request without one is refused.
 */
function acceptsEventStream(c: Context<AppEnv>): boolean {
  const header = c.req.header("Accept");
  if (!header) return false;
  const ranges = parseAccept(header);
  for (const range of EVENT_STREAM_RANGES) {
    const named = ranges.filter(({ type }) => type.toLowerCase() === range);
    if (named.length > 0) return named.some(({ q }) => q > 0);
  }
  return false;
}

/** The media ranges that cover an event stream, most specific first. */
const EVENT_STREAM_RANGES = ["text/event-stream", "text/*", "*/*"];

/**
 * SSE lines `data: <JSON-RPC response>`. The first response is awaited before answering, so the
 * work that opens the task runs inside this request (its record store closes with it). An error
 * at any point becomes the stream's last line, a JSON-RPC error response.
 */
async function eventStream(responses: AsyncGenerator<JSONRPCResponse, void, undefined>, id: string | number | null): Promise<ReadableStream<string>> {
  const line = (response: JSONRPCResponse) => `data: ${JSON.stringify(response)}\n\n`;
  const failure = (error: unknown): JSONRPCErrorResponse => ({ jsonrpc: "2.0", id, error: toA2AError(error).toJSONRPCError() });
  const next = () => responses.next().catch((error: unknown) => ({ done: true as const, value: undefined, error }));

  let pending: Awaited<ReturnType<typeof next>> | null = await next();
  return new ReadableStream<string>({
    async pull(controller) {
      const step = pending ?? (await next());
      pending = null;
      if ("error" in step) {
        controller.enqueue(line(failure(step.error)));
        controller.close();
      } else if (step.done) {
        controller.close();
      } else {
        controller.enqueue(line(step.value));
      }
    },
    async cancel() {
      // The client went away: stop following the task (the task itself runs on).
      await responses.return(undefined).catch(() => undefined);
    },
  });
}
