// Service-level endpoints: the landing page, info, models, probes, configuration and /authorized.
import { APIConnectionError } from "openai";
import { Hono } from "hono";
import { z } from "zod";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { redactConfig } from "../config/redact.ts";
import { errors } from "../errors.ts";
import { guard } from "../middleware.ts";
import type { Runtime } from "../runtime.ts";
import { probeBackend } from "../turn/backend-errors.ts";
import { listModels } from "../turn/models.ts";
import { parseWith } from "../validation.ts";
import { SERVICE_VERSION } from "../version.ts";

export const service = new Hono<AppEnv>();

service.get("/", guard(ACTIONS.root), (c) => {
  const { config } = c.get("rt");
  return c.html(landingPage(config.name, config.deployment_environment));
});

service.get("/v1/info", guard(ACTIONS.info), async (c) => {
  const rt = c.get("rt");
  return c.json({ name: rt.config.name, service_version: SERVICE_VERSION, backend_version: await backendVersion(rt) });
});

const modelsQuery = z.strictObject({ model_type: z.string().min(1).optional() });

service.get("/v1/models", guard(ACTIONS.models), async (c) => {
  const { model_type } = parseWith(modelsQuery, c.req.query());
  const models = await listModels(c.get("rt"));
  return c.json({ models: model_type ? models.filter((m) => m.model_type === model_type) : models });
});

for (const path of ["/readiness", "/v1/readiness"]) {
  service.get(path, guard(ACTIONS.probes, "health_probes"), async (c) => {
    const status = await backendStatus(c.get("rt"));
    const ready = status.status === "ok";
    return c.json(
      {
        ready,
        reason: ready ? "Service is ready" : "Providers not healthy",
        overall_status: ready ? "ok" : "error",
        providers: ready ? [] : [status],
        impacts: ready ? null : ["query", "streaming_query", "responses", "a2a", "infer"],
      },
      ready ? 200 : 503,
    );
  });
}

for (const path of ["/liveness", "/v1/liveness"]) {
  service.get(path, guard(ACTIONS.probes, "health_probes"), (c) => c.json({ alive: true }));
}

service.get("/v1/config", guard(ACTIONS.config), (c) => c.json({ configuration: redactConfig(c.get("rt").config) }));

service.post("/authorized", guard(ACTIONS.authorized), (c) => {
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

async function backendStatus(rt: Runtime): Promise<{ provider_id: string; status: "ok" | "error"; message: string }> {
  const probe = await probeBackend(rt);
  return { provider_id: "inference_backend", status: probe.ok ? "ok" : "error", message: probe.ok ? "reachable" : probe.cause };
}

function landingPage(name: string, environment: string): string {
  const escape = (text: string) => text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${escape(name)}</title></head>
<body>
<h1>${escape(name)}</h1>
<p>Parley ${escape(SERVICE_VERSION)}, a conversational inference gateway (${escape(environment)}).</p>
<ul>
<li><a href="/v1/info">/v1/info</a> service and backend versions</li>
<li><a href="/v1/models">/v1/models</a> available models</li>
<li><a href="/readiness">/readiness</a> and <a href="/liveness">/liveness</a> probes</li>
<li>POST /v1/query, /v1/streaming_query, /v1/responses to ask questions</li>
</ul>
</body></html>`;
}
