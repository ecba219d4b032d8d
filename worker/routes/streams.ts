// What every turn endpoint shares: the context its turns are planned in, the size limit of a turn's
// request, and its answer sent as a streamed body.
import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { userMay, userMayActOnOthers } from "../middleware.ts";
import type { Config } from "../config/schema.ts";
import { sendSplunkEvent, type SplunkEvent } from "../data/splunk.ts";
import { probeMcpAuth } from "../mcp/oauth-probe.ts";
import type { RequestMcpServers } from "../mcp/servers.ts";
import type { PlanContext } from "../turn/plan.ts";
import type { TurnClient } from "../turn/turn-client.ts";
import { errors } from "../errors.ts";
import { requestBodyLimit } from "../validation.ts";
import { serversOfRequest } from "./mcp.ts";

/**
 * The largest request body a turn endpoint takes (2 MiB, README "Limits"): a larger question is
 * refused with 413 before anything runs. Beyond most models' context windows, and far below what a
 * conversation's Durable Object can store or receive in one call.
 */
export const MAX_TURN_REQUEST_BYTES = 2 * 1024 * 1024;

/** A question over the limit is SPEC's 413 in SPEC's words (the limit itself is in README "Limits"). */
export function turnBodyLimit(): MiddlewareHandler<AppEnv> {
  return requestBodyLimit(MAX_TURN_REQUEST_BYTES, () => errors.promptTooLong());
}

/**
 * Who plans a turn for this request, with which permissions. Before a turn uses the server's MCP
 * tools, the caller's credentials for them are probed (a 401 that a client can answer with an OAuth
 * flow), on the endpoints UPSTREAM probes on; `probeMcpAuth: false` (/v1/infer, A2A, whose clients
 * run no such flow) leaves a server without credentials out of the turn instead.
 * `callerCredentials: false` (/v1/infer, as in the original) hands the servers neither the caller's
 * token nor MCP-HEADERS, only the request headers they propagate.
 */
export function planContext(c: Context<AppEnv>, options: { probeMcpAuth: boolean; callerCredentials?: boolean } = { probeMcpAuth: true }): PlanContext {
  let mcpServers: Promise<RequestMcpServers> | null = null;
  return {
    env: c.env,
    rt: c.get("rt"),
    auth: c.get("auth"),
    mayOverrideModel: userMay(c, ACTIONS.modelOverride),
    mayUseOthers: userMayActOnOthers(c, "continue"),
    mcpServers: () =>
      (mcpServers ??= (async () => {
        const servers = await serversOfRequest(c, options.callerCredentials ?? true);
        if (options.probeMcpAuth) await probeMcpAuth(servers.probes);
        return servers;
      })()),
  };
}

/** The client of a turn's request (see startTurn): its disconnect reaches the turn. */
export function turnClient(c: Context<AppEnv>): TurnClient {
  return { signal: c.req.raw.signal, waitUntil: (promise) => c.executionCtx.waitUntil(promise) };
}

/** A Splunk event, sent after the answer when splunk is enabled (never on the client's wait path). */
export function sendTelemetry(c: Context<AppEnv>, event: (config: Config) => SplunkEvent): void {
  const rt = c.get("rt");
  if (!rt.config.splunk.enabled) return;
  c.executionCtx.waitUntil(sendSplunkEvent(rt, event(rt.config)));
}

export function sse(body: ReadableStream<Uint8Array>): Response {
  return new Response(body, {
    headers: { "Content-Type": "text/event-stream", "Cache-Control": "no-cache", Connection: "keep-alive" },
  });
}

export function textStream(body: ReadableStream<Uint8Array>): Response {
  return new Response(body, { headers: { "Content-Type": "text/plain; charset=utf-8" } });
}
