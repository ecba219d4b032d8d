import { Hono, type MiddlewareHandler } from "hono";
import { cors } from "hono/cors";
import { HTTPException } from "hono/http-exception";
import type { AppEnv } from "./app-env.ts";
import { ApiError, errors, renderError } from "./errors.ts";
import { runtime } from "./middleware.ts";
import type { Runtime } from "./runtime.ts";
import { a2a } from "./routes/a2a.ts";
import { conversations } from "./routes/conversations.ts";
import { knowledge } from "./routes/knowledge.ts";
import { prompts } from "./routes/prompts.ts";
import { providers } from "./routes/providers.ts";
import { query } from "./routes/query.ts";
import { quotas } from "./routes/quotas.ts";
import { responses } from "./routes/responses.ts";
import { service } from "./routes/service.ts";

export const app = new Hono<AppEnv>();

app.use(runtime());
/** CORS from service.cors, built once per configuration rather than on every request. */
const corsHandlers = new WeakMap<Runtime, MiddlewareHandler<AppEnv>>();
app.use(async function corsFromConfig(c, next) {
  const rt = c.get("rt");
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

app.route("/", service);
app.route("/", query);
app.route("/", conversations);
app.route("/", responses);
app.route("/", quotas);
app.route("/", prompts);
app.route("/", a2a);
app.route("/", knowledge);
app.route("/", providers);

app.notFound((c) => renderError(errors.routeNotFound(c.req.path)));

app.onError((error, c) => {
  if (error instanceof ApiError) return renderError(error);
  if (error instanceof HTTPException) {
    return renderError(new ApiError(error.status === 400 ? 422 : (error.status as ApiError["status"]), "Invalid request format", error.message));
  }
  console.error(`unhandled error on ${c.req.method} ${c.req.path}`, error);
  return renderError(errors.internal());
});
