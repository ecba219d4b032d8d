// The gateway as a deployment runs it, for tests that need real, separate requests: the bundle
// `wrangler deploy` would upload, in Miniflare, reached over HTTP on loopback. Tests through the
// Worker's own fetch (test/worker) share one request context, so they cannot see what only happens
// between requests, such as one request waiting forever on another's I/O.
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { applyMigrations, buildBundle, GATEWAY_CONFIG, ROOT, startMiniflare, type Bundle } from "../../bench/targets.ts";

let bundle: Promise<Bundle> | null = null;

/** The gateway bundle, built once per test file (a few seconds). */
function gatewayBundle(): Promise<Bundle> {
  bundle ??= buildBundle(join(ROOT, "bench/out", `system-${process.pid}`), { config: GATEWAY_CONFIG });
  return bundle;
}

export interface RunningGateway {
  url: string;
  stop(): Promise<void>;
}

export interface GatewayOptions {
  /**
   * Keep D1, Durable Objects and R2 in this folder instead of in memory: a gateway started again on
   * the same folder finds everything the previous one stored, as after a restart of `npm start`.
   * D1 is migrated on the first start only.
   */
  persistTo?: string;
}

/** Marks a persistence folder whose D1 has been migrated. */
const MIGRATED_MARK = "parley-d1-migrated";

/**
 * Starts the gateway, D1 migrated, state in memory (or in `options.persistTo`): with a configuration
 * document (PARLEY_CONFIG), or with the bundled config/parley.yaml and the backend at
 * `vars.PARLEY_BACKEND_URL`.
 */
export async function startGateway(
  setup: { config: Record<string, unknown> } | { vars: Record<string, string> },
  options: GatewayOptions = {},
): Promise<RunningGateway> {
  const { file } = await gatewayBundle();
  const vars = "config" in setup ? { PARLEY_CONFIG: JSON.stringify(setup.config) } : setup.vars;
  const persist = options.persistTo;
  const target = await startMiniflare("gateway", GATEWAY_CONFIG, file, vars, persist ? { resourcePersistencePath: persist } : {});
  const mark = persist && join(persist, MIGRATED_MARK);
  if (!mark || !existsSync(mark)) {
    await applyMigrations(target);
    if (mark) await writeFile(mark, "");
  }
  return { url: target.url, stop: target.stop };
}
