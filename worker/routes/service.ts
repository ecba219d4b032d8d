// Service-level endpoints: the landing page, info, models, probes, configuration and /authorized.
import { APIConnectionError } from "openai";
import { Hono, type Context } from "hono";
import * as z from "zod";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { redactConfig } from "../config/redact.ts";
import { errors } from "../errors.ts";
import { readiness } from "../metrics/readiness.ts";
import { guard } from "../middleware.ts";
import type { Runtime } from "../runtime.ts";
import { healthOf, listProviderModels } from "../backends/provider-models.ts";
import { usableModels } from "../turn/models.ts";
import { parseWith } from "../validation.ts";
import { SERVICE_VERSION } from "../version.ts";

export const service = new Hono<AppEnv>();

service.get("/", guard(ACTIONS.info), (c) => {
  const { config } = c.get("rt");
  return publicPage(c, "index.html", { name: config.name, version: SERVICE_VERSION, environment: config.deployment_environment });
});

service.get("/v1/info", guard(ACTIONS.info), async (c) => {
  const rt = c.get("rt");
  return c.json({ name: rt.config.name, service_version: SERVICE_VERSION, backend_version: await backendVersion(rt) });
});

// Not strict: under the noop modules the caller names itself with ?user_id=, which is not this route's.
// An empty model_type is a type like any unknown one (REFERENCE: it gives []), not a malformed query.
export const modelsQuery = z.object({ model_type: z.string().optional() });

service.get("/v1/models", guard(ACTIONS.models), async (c) => {
  const { model_type } = parseWith(modelsQuery, c.req.query());
  const rt = c.get("rt");
  const listing = await listProviderModels(rt.backends, { fresh: true });
  const usable = usableModels(listing);
  const models = model_type === undefined ? usable : usable.filter((m) => m.model_type === model_type);
  // Extension, with several backends: which provider answered (a provider that is down lists nothing).
  return c.json({ models, ...(rt.backends.all.length > 1 ? { providers: healthOf(listing) } : {}) });
});

for (const path of ["/readiness", "/v1/readiness"]) {
  service.get(path, guard(ACTIONS.info, "health_probes"), async (c) => {
    const { status, body } = await readiness(c.get("rt"));
    return c.json(body, status);
  });
}

for (const path of ["/liveness", "/v1/liveness"]) {
  service.get(path, guard(ACTIONS.info, "health_probes"), (c) => c.json({ alive: true }));
}

service.get("/v1/config", guard(ACTIONS.config), (c) => c.json({ configuration: redactConfig(c.get("rt").config, c.get("rt").secrets) }));

service.post("/authorized", guard(null), (c) => {
  const auth = c.get("auth");
  return c.json({ user_id: auth.userId, username: auth.username, skip_userid_check: auth.skipUserIdCheck });
});

/** Llama Stack serves /v1/version; other OpenAI-compatible servers do not, which is not an error. */
async function backendVersion(rt: Runtime): Promise<string> {
  try {
    const body = (await rt.backend.get("/version")) as { version?: unknown };
    return typeof body?.version === "string" ? body.version : "unknown";
  } catch (error) {
    if (error instanceof APIConnectionError) throw errors.backendUnavailable();
    return "unknown";
  }
}

// ---------------------------------------------------------------------------------------------
// Pages: the playground at / and the pages of routes/docs.ts are static files under config/public/,
// served through the CONFIG_FILES assets binding (only that folder is reachable from here).
// ---------------------------------------------------------------------------------------------

const PUBLIC_ORIGIN = "http://config.invalid/public/";

/** File names a page may load: scripts, stylesheets and images, in config/public/ or below it. */
const PUBLIC_FILE = /^[A-Za-z0-9_-]+(\/[A-Za-z0-9_-]+)*(\.[A-Za-z0-9_-]+)*\.(js|css|png|svg)$/;

/**
 * The pages send nothing but what they load from here and the API's answers: no other origin, no
 * inline script, and no framing (the playground answers tool approvals, which must not be clickjacked).
 */
const PAGE_SECURITY_HEADERS: Record<string, string> = {
  "Content-Security-Policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "X-Frame-Options": "DENY",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Cache-Control": "no-cache",
};

/** Reads config/public/<path>; the assets binding answers a page's .html name with a redirect, which is followed. */
async function fetchPublic(c: Context<AppEnv>, path: string, conditional: boolean): Promise<Response | null> {
  const headers = new Headers();
  const etag = c.req.header("If-None-Match");
  if (conditional && etag) headers.set("If-None-Match", etag);
  let url = new URL(path, PUBLIC_ORIGIN);
  for (let hops = 0; hops < 3; hops++) {
    const response = await c.env.CONFIG_FILES.fetch(new Request(url, { headers }));
    const location = response.headers.get("Location");
    if (response.status >= 300 && response.status < 400 && response.status !== 304 && location) {
      url = new URL(location, url);
      if (!url.href.startsWith(PUBLIC_ORIGIN)) return null;
      continue;
    }
    return response.status === 404 ? null : response;
  }
  return null;
}

/** A script, stylesheet or image of the pages (304 when the browser's copy is current), or null. */
export async function publicFile(c: Context<AppEnv>, path: string): Promise<Response | null> {
  if (!PUBLIC_FILE.test(path)) return null;
  const found = await fetchPublic(c, path, true);
  if (!found) return null;
  const response = new Response(found.body, found);
  response.headers.set("X-Content-Type-Options", "nosniff");
  response.headers.set("Cache-Control", "no-cache");
  return response;
}

/**
 * An HTML page of config/public/, with `data-fill="<key>"` elements given the text of `fill[key]`
 * (escaped by HTMLRewriter, so a configured name cannot inject markup).
 */
export async function publicPage(c: Context<AppEnv>, name: string, fill: Record<string, string> = {}): Promise<Response> {
  const found = await fetchPublic(c, name, false);
  if (!found || !found.ok) throw errors.internal(`the page config/public/${name} is missing from the deployment`);
  const rewriter = new HTMLRewriter().on("[data-fill]", {
    element(element) {
      const key = element.getAttribute("data-fill") ?? "";
      element.removeAttribute("data-fill");
      if (Object.hasOwn(fill, key)) element.setInnerContent(fill[key]!);
    },
  });
  return new Response(rewriter.transform(found).body, {
    status: 200,
    headers: { "Content-Type": "text/html; charset=utf-8", ...PAGE_SECURITY_HEADERS },
  });
}
