// The API described and the pages' files: GET /openapi.json (worker/openapi/document.ts), GET /docs
// (Swagger UI, from swagger-ui-dist), and GET /static/{path}, the scripts and stylesheets of /docs
// and of the playground at /. Pages and files are static assets under config/public/, read through
// the CONFIG_FILES binding, so they are not part of the Worker's script.
import { Hono } from "hono";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { errors } from "../errors.ts";
import { guard } from "../middleware.ts";
import { openApiText } from "../openapi/document.ts";
import { publicFile, publicPage } from "./service.ts";

export const docs = new Hono<AppEnv>();

docs.get("/openapi.json", guard(ACTIONS.info), (c) => c.body(openApiText(), 200, { "Content-Type": "application/json; charset=utf-8" }));

docs.get("/docs", guard(ACTIONS.info), (c) => publicPage(c, "docs.html"));

/**
 * Public: scripts and stylesheets are the same for everyone and carry no data, and a browser
 * fetches them without the credentials an API client would add.
 */
docs.get("/static/:path{.+}", async (c) => {
  const file = await publicFile(c, c.req.param("path"));
  if (!file) throw errors.routeNotFound(c.req.path);
  return file;
});
