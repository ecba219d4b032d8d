import type { Context, MiddlewareHandler } from "hono";
import type { AppEnv } from "./app-env.ts";
import { ACTIONS, type Action } from "./auth/actions.ts";
import { isAllowed, mayActOnOthers, type ConversationOperation } from "./auth/rbac.ts";
import { errors } from "./errors.ts";
import { loadRuntime } from "./runtime.ts";
import { openStore } from "./storage/open-store.ts";

/**
 * Loads the configuration-derived runtime (a configuration that failed to load answers 500) and
 * opens the record store for the request. A Postgres pool cannot outlive its request in workerd;
 * turns that persist after the response has started open their own.
 */
export function runtime(): MiddlewareHandler<AppEnv> {
  return async function runtime(c, next) {
    const result = await loadRuntime(c.env);
    // The keys that failed, never their values (they may hold secrets); the log has the details.
    if (!result.ok) throw errors.configNotLoaded(`configuration has not been initialized: invalid keys ${[...new Set(result.problems.map((problem) => problem.path))].join(", ")}`);
    c.set("rt", result.runtime);
    const store = openStore(c.env, result.runtime.config.database);
    c.set("store", store);
    try {
      await next();
    } finally {
      c.executionCtx.waitUntil(store.close().catch(() => undefined));
    }
  };
}

/** Actions SPEC reports as a missing permission ("perform this action") rather than a closed endpoint. */
const PERMISSION_ACTIONS = new Set<Action>([ACTIONS.readPrompts, ACTIONS.managePrompts]);

/** Which configuration switch lets an endpoint skip authentication (SPEC Authentication rule 4). */
type Skippable = "health_probes" | "metrics";

/**
 * Authenticates the request with the configured module and requires that the user's roles grant
 * `action` (null: authentication only, as /authorized). Probes and metrics skip both when the
 * configuration says so and the request carries no credential (UPSTREAM: a wrong one is refused).
 */
export function guard(action: Action | null, skippable?: Skippable): MiddlewareHandler<AppEnv> {
  return async function guard(c, next) {
    const { config, authenticate } = c.get("rt");
    const settings = config.authentication;
    const skips = (skippable === "health_probes" && settings.skip_for_health_probes) || (skippable === "metrics" && settings.skip_for_metrics);
    // Only a request without a credential skips: one that carries a credential has it checked.
    if (skips && !c.req.header(settings.module === "rh-identity" ? "x-rh-identity" : "authorization")) {
      c.set("auth", { userId: "", username: "", roles: [], skipUserIdCheck: true, token: null });
      return next();
    }
    const auth = await authenticate(c.req.raw);
    c.set("auth", auth);
    if (action !== null && !isAllowed(config.authorization?.access_rules, auth.roles, action)) {
      throw PERMISSION_ACTIONS.has(action)
        ? errors.actionForbidden(`User ${auth.userId} is missing permission ${action}`)
        : errors.endpointForbidden(auth.userId);
    }
    await next();
  };
}

/** True when the authenticated user's roles grant `action`; for checks inside a handler (MODEL_OVERRIDE). */
export function userMay(c: Context<AppEnv>, action: Action): boolean {
  return isAllowed(c.get("rt").config.authorization?.access_rules, c.get("auth").roles, action);
}

/**
 * True when the authenticated user may perform `operation` on conversations other users own (the
 * `*_other_conversations` actions); never without an access rule that grants it.
 */
export function userMayActOnOthers(c: Context<AppEnv>, operation: ConversationOperation): boolean {
  return mayActOnOthers(c.get("rt").config.authorization?.access_rules, c.get("auth").roles, operation);
}
