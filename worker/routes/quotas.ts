// An extension operators ask for most: reading quotas. A user reads their own counters; an admin
// action reads any subject's. Token history (quota_handlers.enable_token_history) comes along.
import { Hono } from "hono";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { errors } from "../errors.ts";
import { guard } from "../middleware.ts";
import { quotaCounters, readQuotas, type QuotaCounter } from "../quota/quotas.ts";

export const quotas = new Hono<AppEnv>();

function view(entries: Awaited<ReturnType<typeof readQuotas>>) {
  return entries.map(({ spec, subject, reading }) => ({
    limiter: spec.name,
    type: spec.type,
    subject,
    available: Math.max(0, reading.available),
    next_reset_at: new Date(reading.nextResetAt * 1000).toISOString(),
    period_seconds: spec.period,
    initial_quota: spec.initial_quota,
    quota_increase: spec.quota_increase,
  }));
}

quotas.get("/v1/quotas", guard(ACTIONS.readQuotas), async (c) => {
  const { config } = c.get("rt");
  const userId = c.get("auth").userId;
  const history = config.quota_handlers.enable_token_history ? await c.get("store").tokenUsage.list(userId) : [];
  return c.json({
    quotas: view(await readQuotas(c.env, quotaCounters(config, userId))),
    token_history: history.map((row) => ({
      provider: row.provider,
      model: row.model,
      input_tokens: row.inputTokens,
      output_tokens: row.outputTokens,
      updated_at: row.updatedAt,
    })),
  });
});

quotas.get("/v1/quotas/:limiter/:subject", guard(ACTIONS.readAnyQuota), async (c) => {
  const spec = c.get("rt").config.quota_handlers.limiters.find((limiter) => limiter.name === c.req.param("limiter"));
  if (!spec) throw errors.notFound("Quota limiter", c.req.param("limiter"));
  const counter: QuotaCounter = { spec, subject: c.req.param("subject") };
  return c.json({ quotas: view(await readQuotas(c.env, [counter])) });
});
