// GET /metrics: the deployment's Prometheus metrics (worker/metrics/). The original system also
// answers /v1/metrics; both are served.
import { Hono } from "hono";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { scrape } from "../metrics/scrape.ts";
import { PROMETHEUS_CONTENT_TYPE } from "../metrics/text-format.ts";
import { guard } from "../middleware.ts";

export const metrics = new Hono<AppEnv>();

for (const path of ["/metrics", "/v1/metrics"]) {
  metrics.get(path, guard(ACTIONS.metrics, "metrics"), async (c) => {
    const text = await scrape(c.env, c.get("rt"));
    return c.body(text, 200, { "Content-Type": PROMETHEUS_CONTENT_TYPE });
  });
}
