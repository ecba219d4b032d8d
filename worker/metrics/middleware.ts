// ls_rest_api_calls_total and ls_response_duration_seconds for every request, counted after the
// answer is ready and sent off in waitUntil, so no answer waits for them.
import type { Context, MiddlewareHandler } from "hono";
import { matchedRoutes } from "hono/route";
import type { AppEnv } from "../app-env.ts";
import { recordRequest, type MetricsContext } from "./recorder.ts";

/**
 * The `path` of requests no route serves (unknown paths, a method the path does not serve, CORS
 * preflights answered by the CORS middleware): one label for all of them, so probing random paths
 * cannot grow the number of series.
 */
export const UNMATCHED_PATH = "(unmatched)";

/** Scrapes are not counted in ls_rest_api_calls_total (as in the original system); their duration is. */
const SCRAPE_PATHS: ReadonlySet<string> = new Set(["/metrics", "/v1/metrics"]);

/**
 * Records every request under its route template (`/v1/conversations/{conversation_id}`) and its
 * final status, errors included: it runs outside every other middleware, and app.onError has set
 * the error answer by the time `next()` returns. The duration is until the answer's head is ready
 * (a stream's body goes on after it).
 */
export function restApiMetrics(): MiddlewareHandler<AppEnv> {
  return async function restApiMetrics(c, next) {
    const started = Date.now();
    // Stays 500 only when something other than an Error was thrown, which Hono lets through.
    let status = 500;
    try {
      await next();
      status = c.res.status;
    } finally {
      const path = routeTemplate(c);
      let ctx: MetricsContext | null = null;
      try {
        ctx = c.executionCtx;
      } catch {
        // No execution context (app.request in a plain test): nothing can be flushed, nothing is recorded.
      }
      if (ctx) recordRequest(c.env, ctx, { path, status, durationMs: Date.now() - started, counted: !SCRAPE_PATHS.has(path) });
    }
  };
}

/** The template of the route that served the request, in the `{param}` notation of SPEC's paths. */
function routeTemplate(c: Context<AppEnv>): string {
  // Routes registered with app.use (method ALL) are the global middleware, not an endpoint.
  const route = matchedRoutes(c).findLast((candidate) => candidate.method !== "ALL");
  return route ? templateOf(route.path) : UNMATCHED_PATH;
}

/** Templates of the app's route paths, worked out once each (there are as many as routes). */
const templates = new Map<string, string>();

/** `/v1/rags/:rag_id` → `/v1/rags/{rag_id}` (a parameter's pattern and optional mark dropped). */
export function templateOf(path: string): string {
  let template = templates.get(path);
  if (template === undefined) {
    template = path.replace(/:([A-Za-z0-9_]+)(\{[^}]*\})?\??/g, "{$1}");
    templates.set(path, template);
  }
  return template;
}
