import { Hono, type MiddlewareHandler } from "hono";
import { METHOD_NAME_ALL } from "hono/router";
import { TrieRouter } from "hono/router/trie-router";
import { cors } from "hono/cors";
import { HTTPException } from "hono/http-exception";
import type { AppEnv } from "./app-env.ts";
import type { Config } from "./config/schema.ts";
import { ApiError, errors, renderError } from "./errors.ts";
import { runtime } from "./middleware.ts";
import { restApiMetrics } from "./metrics/middleware.ts";
import type { Runtime } from "./runtime.ts";
import { a2a } from "./routes/a2a.ts";
import { conversations } from "./routes/conversations.ts";
import { docs } from "./routes/docs.ts";
import { feedback } from "./routes/feedback.ts";
import { infer } from "./routes/infer.ts";
import { knowledge } from "./routes/knowledge.ts";
import { mcp } from "./routes/mcp.ts";
import { metrics } from "./routes/metrics.ts";
import { prompts } from "./routes/prompts.ts";
import { providers } from "./routes/providers.ts";
import { query } from "./routes/query.ts";
import { quotas } from "./routes/quotas.ts";
import { responses } from "./routes/responses.ts";
import { service } from "./routes/service.ts";
import { log } from "./log.ts";

export const app = new Hono<AppEnv>();

// Outermost, so it sees every request and its final status, including a configuration that fails to load.
app.use(restApiMetrics());
// A URL whose percent-escapes are not UTF-8 (or not escapes) is refused before anything reads it.
app.use(async function utf8Url(c, next) {
  const url = c.req.url;
  const start = url.indexOf("/", url.indexOf("//") + 2);
  try {
    decodeURIComponent(url.slice(start).replaceAll("+", " "));
  } catch {
    return renderError(errors.invalidFormat("the URL is not valid percent-encoded UTF-8"));
  }
  return next();
});
app.use(runtime());
/**
 * CORS from service.cors, built once per configuration rather than on every request. A request
 * without an Origin header is not a cross-origin one and gets no CORS headers, as in the original
 * system (Starlette's CORSMiddleware); hono's middleware would add them to every answer, at the
 * price of building each answer's Response three times.
 */
const corsHandlers = new WeakMap<Runtime, MiddlewareHandler<AppEnv>>();
app.use(async function corsFromConfig(c, next) {
  const origin = c.req.raw.headers.get("origin");
  if (origin === null) return next();
  const rt = c.get("rt");
  const refused = c.req.method === "OPTIONS" ? disallowedPreflight(rt.config.service.cors, origin, c.req.raw.headers) : null;
  if (refused) return c.text(refused, 400);
  let handler = corsHandlers.get(rt);
  if (!handler) {
    const settings = rt.config.service.cors;
    handler = cors({
      origin: settings.allow_origins.includes("*") ? "*" : settings.allow_origins,
      credentials: settings.allow_credentials,
      allowMethods: settings.allow_methods.includes("*") ? undefined : settings.allow_methods,
      allowHeaders: settings.allow_headers.includes("*") ? undefined : settings.allow_headers,
    });
    corsHandlers.set(rt, handler);
  }
  return handler(c, next);
});

/**
 * What a preflight asks that service.cors does not allow, in the words of the original system's
 * middleware (Starlette: 400 "Disallowed CORS origin, method"); null when it may go ahead.
 */
function disallowedPreflight(settings: Config["service"]["cors"], origin: string, headers: Headers): string | null {
  const method = headers.get("access-control-request-method");
  if (method === null) return null;
  const allowed = (list: string[], value: string) => list.includes("*") || list.some((item) => item.toLowerCase() === value.toLowerCase());
  const requested = (headers.get("access-control-request-headers") ?? "").split(",").map((name) => name.trim()).filter(Boolean);
  const failures = [
    allowed(settings.allow_origins, origin) ? null : "origin",
    allowed(settings.allow_methods, method) ? null : "method",
    requested.every((name) => allowed(settings.allow_headers, name)) ? null : "headers",
  ].filter((failure) => failure !== null);
  return failures.length > 0 ? `Disallowed CORS ${failures.join(", ")}` : null;
}

app.route("/", service);
app.route("/", docs);
app.route("/", query);
app.route("/", conversations);
app.route("/", responses);
app.route("/", infer);
app.route("/", quotas);
app.route("/", prompts);
app.route("/", a2a);
app.route("/", knowledge);
app.route("/", providers);
app.route("/", mcp);
app.route("/", feedback);
app.route("/", metrics);

/**
 * The methods each route path is served with, for a request no route took: a path served with
 * other methods is a 405 naming them (as the original's FastAPI answers), any other a 404.
 */
let servedMethods: TrieRouter<string> | null = null;
function methodsServing(path: string): string[] {
  if (!servedMethods) {
    servedMethods = new TrieRouter<string>();
    // Middleware registered with use() is method ALL and serves no endpoint.
    for (const route of app.routes) if (route.method !== "ALL") servedMethods.add(METHOD_NAME_ALL, route.path, route.method);
  }
  const methods = new Set(servedMethods.match("GET", path)[0].map(([method]) => method));
  if (methods.has("GET")) methods.add("HEAD");
  return [...methods];
}

app.notFound((c) => {
  const allowed = methodsServing(c.req.path);
  if (allowed.length > 0) return renderError(errors.methodNotAllowed(c.req.method, c.req.path, allowed));
  return renderError(errors.routeNotFound(c.req.path));
});

app.onError((error, c) => {
  if (error instanceof ApiError) return renderError(error);
  if (error instanceof HTTPException) {
    return renderError(new ApiError(error.status === 400 ? 422 : (error.status as ApiError["status"]), "Invalid request format", error.message));
  }
  log.error(`unhandled error on ${c.req.method} ${c.req.path}`, error);
  return renderError(errors.internal());
});
