// The OAuth 401 probe (UPSTREAM "OAuth / 401 probe"): before a request uses MCP tools, every server
// whose credentials the caller answers for (an `oauth` header, or an Authorization the caller sent
// through MCP-HEADERS or as its own token for `kubernetes`) is asked, in parallel, whether it accepts
// them. A server that answers 401 turns the whole request into a 401 for the caller, carrying the
// server's WWW-Authenticate challenge, so that a client can run the OAuth flow that server asks for
// and come back with a token. Runs on /v1/tools and on the endpoints whose turns use MCP tools.
//
// Unlike the original system, a server that cannot be reached or does not answer in time is not
// reported as a 401 (the caller's credentials were never judged); it is just left without tools.
import { ApiError } from "../errors.ts";
import { log } from "../log.ts";
import { MCP_AUTH_PROBE_TIMEOUT_SECONDS } from "./defaults.ts";
import { withScheme, type AuthProbeTarget } from "./servers.ts";

type ProbeResult = { status: "ok" } | { status: "unauthorized"; challenge: string | null } | { status: "unreachable" };

/** Throws the 401 for the first (in the given order) server that refused the caller's credentials. */
export async function probeMcpAuth(targets: AuthProbeTarget[], signal?: AbortSignal): Promise<void> {
  if (targets.length === 0) return;
  const results = await Promise.all(targets.map((target) => probe(target, signal)));
  results.forEach((result, index) => {
    if (result.status === "unreachable") log.warn(`MCP server '${targets[index]!.name}' did not answer the authorization probe`);
  });
  const refused = results.findIndex((result) => result.status === "unauthorized");
  if (refused === -1) return;
  const result = results[refused] as Extract<ProbeResult, { status: "unauthorized" }>;
  throw new ApiError(
    401,
    "Missing or invalid credentials provided by client",
    `MCP server at ${targets[refused]!.url} requires OAuth`,
    result.challenge === null ? {} : { "WWW-Authenticate": result.challenge },
  );
}

async function probe(target: AuthProbeTarget, signal?: AbortSignal): Promise<ProbeResult> {
  const timeout = AbortSignal.timeout(MCP_AUTH_PROBE_TIMEOUT_SECONDS * 1000);
  const headers: Record<string, string> = { Accept: "application/json, text/event-stream" };
  if (target.authorization) headers.Authorization = withScheme(target.authorization);
  try {
    const response = await fetch(target.url, {
      method: "GET",
      headers,
      // A redirect is the server's business, not a place the gateway follows a credential to.
      redirect: "manual",
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    });
    // Only the status line matters; a server that opens an event stream must not keep us waiting.
    await response.body?.cancel().catch(() => undefined);
    if (response.status !== 401) return { status: "ok" };
    return { status: "unauthorized", challenge: response.headers.get("WWW-Authenticate") };
  } catch {
    return { status: "unreachable" };
  }
}
