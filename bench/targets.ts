// What the benchmark measures against: the scripted backend, the gateway and the floor, each under
// Miniflare driven directly or under `wrangler dev`. Miniflare options come from the Worker's own
// wrangler configuration (unstable_getMiniflareWorkerOptions), so D1, Durable Objects, R2 and the
// assets binding mirror wrangler.toml instead of being restated here.
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, rm } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { gzipSync } from "node:zlib";
import { Miniflare, convertV4MiniflareOptions, type Json } from "miniflare";
import { unstable_getMiniflareWorkerOptions, unstable_splitSqlQuery } from "wrangler";
import { freePort } from "../test/fakes/listen.ts";
import { childPids, groupCpuMs, processCpuMs, threadCpuMs, startChild, track, untrack, waitForOk, waitForOutput, type Child } from "./processes.ts";

export const ROOT = fileURLToPath(new URL("..", import.meta.url).href);
const WRANGLER = join(ROOT, "node_modules/wrangler/bin/wrangler.js");
export const GATEWAY_CONFIG = join(ROOT, "wrangler.toml");
export const FLOOR_CONFIG = join(ROOT, "bench/floor.wrangler.toml");
export const PROFILE_ENTRY = join(ROOT, "bench/profile-worker.js");
export const VARIANTS_CONFIG = join(ROOT, "bench/variants.wrangler.toml");
const MIGRATIONS_DIR = join(ROOT, "migrations/d1");

/** The same quieting for every wrangler we start: no Request.cf download, no telemetry. */
export const CHILD_ENV: NodeJS.ProcessEnv = {
  ...process.env,
  CLOUDFLARE_CF_FETCH_ENABLED: "false",
  WRANGLER_SEND_METRICS: "false",
  NO_COLOR: "1",
  CI: "1",
};

export interface Target {
  name: string;
  /** Base URL, e.g. http://127.0.0.1:PORT */
  url: string;
  /** CPU time (ms) its processes have used so far; NaN where /proc is not available. */
  cpuMs(): number;
  /** CPU time (ms) of each thread of its one process so far, by thread id (Miniflare's workerd only). */
  threadCpuMs?(): Map<number, number>;
  stop(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Backend

export interface BackendSettings {
  firstTokenDelayMs: number;
  tokenDelayMs: number;
}

/** The scripted backend in its own process, so its event loop does not share the load generator's. */
export async function startBackend(settings: BackendSettings): Promise<Target & { apiUrl: string }> {
  const port = await freePort();
  const child = startChild(
    "scripted-backend",
    process.execPath,
    [
      join(ROOT, "test/fakes/scripted-backend-main.ts"),
      "--port",
      String(port),
      "--first-token-delay",
      String(settings.firstTokenDelayMs),
      "--token-delay",
      String(settings.tokenDelayMs),
    ],
    { cwd: ROOT },
  );
  await waitForOutput(child, /listening on/, 15_000);
  return {
    name: "backend",
    url: `http://127.0.0.1:${port}`,
    apiUrl: `http://127.0.0.1:${port}/v1`,
    cpuMs: () => processCpuMs(child.pid),
    stop: child.stop,
  };
}

// ---------------------------------------------------------------------------------------------
// Bundles

export interface Bundle {
  file: string;
  bytes: number;
  gzipBytes: number;
  /** wrangler's own "Total Upload: … / gzip: …" line. */
  wranglerSize: string;
  seconds: number;
}

/** `wrangler deploy --dry-run --outdir`: the bundle exactly as it would be uploaded. */
/** `minify: false` keeps esbuild's `// path` comments, which the CPU profile attributes samples by. */
export async function buildBundle(dir: string, options: { config: string; entry?: string; minify?: boolean }): Promise<Bundle> {
  // wrangler resolves a relative --outdir against the configuration's folder, not the cwd.
  const outDir = resolve(ROOT, dir);
  await rm(outDir, { recursive: true, force: true });
  await mkdir(outDir, { recursive: true });
  const started = performance.now();
  const args = [WRANGLER, "deploy", "--dry-run", "--outdir", outDir, "--config", options.config];
  if (options.entry) args.push(options.entry);
  if (options.minify === false) args.push("--no-minify");
  const child = startChild(`bundle ${options.entry ?? options.config}`, process.execPath, args, { cwd: ROOT, env: CHILD_ENV });
  const code = await child.exited;
  await child.stop();
  if (code !== 0) throw new Error(`bundling failed (exit ${code}):\n${child.output()}`);
  const files = (await readdir(outDir)).filter((name) => name.endsWith(".js"));
  if (files.length !== 1) throw new Error(`expected one module in ${outDir}, found ${files.join(", ")}`);
  const file = join(outDir, files[0]!);
  const contents = await readFile(file);
  return {
    file,
    bytes: contents.length,
    gzipBytes: gzipSync(contents, { level: 9 }).length,
    wranglerSize: /Total Upload: ([^\n]+)/.exec(child.output())?.[1]?.trim() ?? "(not reported)",
    seconds: (performance.now() - started) / 1000,
  };
}

// ---------------------------------------------------------------------------------------------
// Miniflare

/** Where the tmpfs runtimes and the floor variants' second run keep state: no disk I/O per commit. */
const TMPFS = "/dev/shm";

/**
 * A directory for Miniflare's state (D1, Durable Objects, R2) on tmpfs, for this run only (under
 * one per-process root that `removeTmpfsState` deletes).
 */
export async function tmpfsState(name: string): Promise<{ resourcePersistencePath: string }> {
  if (!existsSync(TMPFS)) throw new Error(`state on tmpfs needs ${TMPFS}: leave out the modes miniflare-tmpfs and miniflare-direct-tmpfs (--modes) and the profile (--no-profile)`);
  const path = join(tmpfsRoot(), name);
  await mkdir(path, { recursive: true });
  return { resourcePersistencePath: path };
}

export async function removeTmpfsState(): Promise<void> {
  await rm(tmpfsRoot(), { recursive: true, force: true });
}

function tmpfsRoot(): string {
  return join(TMPFS, `parley-bench-${process.pid}`);
}

export interface MiniflareTarget extends Target {
  mf: Miniflare;
}

type WorkerOptions = ReturnType<typeof unstable_getMiniflareWorkerOptions>["workerOptions"];

/**
 * How requests reach a Worker that has an assets binding. `miniflare`: as Miniflare emulates
 * `[assets]`, through its router and RPC-proxy Workers, which run in front of every request on the
 * same workerd thread even with `run_worker_first`. `direct`: as on Cloudflare with
 * `run_worker_first = true`, the Worker itself receives every request, and its assets binding is a
 * service binding to a Worker that serves only the assets (asked only when the Worker reads a file).
 */
export type AssetsRouting = "miniflare" | "direct";

/** The Worker's options, and the Worker that serves its assets when they are bound directly. */
function withAssetsRouting(options: WorkerOptions, name: string, routing: AssetsRouting): { entry: WorkerOptions; assetsWorker: Record<string, unknown> | null } {
  const assets = options.assets as { directory: string; binding?: string; assetConfig?: unknown } | undefined;
  if (routing === "miniflare" || !assets?.binding) return { entry: options, assetsWorker: null };
  const { assets: _assets, ...entry } = options;
  const assetsName = `${name}-assets`;
  return {
    entry: { ...entry, serviceBindings: { ...(entry.serviceBindings as Record<string, string> | undefined), [assets.binding]: assetsName } },
    assetsWorker: {
      name: assetsName,
      compatibilityDate: options.compatibilityDate,
      modules: true,
      // Never reached: with no user Worker the router answers what is not an asset with a 404 itself.
      script: "export default { fetch: () => new Response(null, { status: 404 }) };",
      assets: { directory: assets.directory, routerConfig: { has_user_worker: false }, assetConfig: assets.assetConfig },
    },
  };
}

/**
 * A Worker bundle in Miniflare with the bindings its wrangler configuration declares; state in
 * memory, or under `extra.resourcePersistencePath` (D1, Durable Objects, R2), kept across starts.
 */
export async function startMiniflare(
  name: string,
  config: string,
  bundle: string,
  vars: Record<string, string>,
  extra: { inspectorPort?: number; resourcePersistencePath?: string; assetsRouting?: AssetsRouting } = {},
): Promise<MiniflareTarget> {
  const { workerOptions } = unstable_getMiniflareWorkerOptions(config);
  // The bundle is a single ES module, so wrangler's module rules have nothing left to match (and
  // Miniflare 5 refuses to convert them).
  const { modulesRules: _rules, ...declared } = workerOptions;
  const { assetsRouting = "miniflare", ...shared } = extra;
  const { entry: options, assetsWorker } = withAssetsRouting(declared, name, assetsRouting);
  const worker = {
    ...options,
    name,
    modules: true,
    scriptPath: bundle,
    modulesRoot: dirname(bundle),
    // (wrangler's type for these options lost its known keys to an index signature)
    bindings: { ...(options.bindings as Record<string, Json> | undefined), ...vars },
  };
  const workerdBefore = new Set(childPids("workerd"));
  const mf = new Miniflare(
    convertV4MiniflareOptions({
      ...(assetsWorker ? { workers: [worker, assetsWorker] } : worker),
      host: "127.0.0.1",
      port: 0,
      cf: false,
      // A log line per request would be measured too.
      logRequests: false,
      ...shared,
    } as Parameters<typeof convertV4MiniflareOptions>[0]),
  );
  let workerd = NaN;
  let stopped = false;
  const target: MiniflareTarget = {
    name,
    url: "",
    mf,
    cpuMs: () => processCpuMs(workerd),
    threadCpuMs: () => threadCpuMs(workerd),
    stop: async () => {
      untrack(target);
      if (stopped) return;
      stopped = true;
      await mf.dispose();
    },
  };
  track(target);
  target.url = (await mf.ready).origin;
  // Miniflare runs one workerd per instance, as our child: the new one is this instance's.
  workerd = childPids("workerd").find((pid) => !workerdBefore.has(pid)) ?? NaN;
  return target;
}

async function migrationStatements(): Promise<string[]> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((name) => name.endsWith(".sql")).sort();
  const statements: string[] = [];
  for (const file of files) statements.push(...unstable_splitSqlQuery(await readFile(join(MIGRATIONS_DIR, file), "utf8")));
  return statements.map((statement) => statement.trim()).filter(Boolean);
}

/** The D1 migrations, applied like `wrangler d1 migrations apply` would (without its bookkeeping table). */
export async function applyMigrations(target: MiniflareTarget, binding = "DB"): Promise<number> {
  const db = await target.mf.getD1Database(binding);
  const statements = await migrationStatements();
  await db.batch(statements.map((statement) => db.prepare(statement)));
  return statements.length;
}

// ---------------------------------------------------------------------------------------------
// wrangler dev

export interface DevTarget extends Target {
  child: Child;
  /** performance.now() when the process was spawned. */
  spawnedAt: number;
  /** performance.now() of the first 200 from /liveness. */
  readyAt: number;
}

/** Applies the D1 migrations to a local persistence directory with wrangler itself. */
export async function migrateLocal(persistTo: string): Promise<void> {
  const child = startChild(
    "d1 migrations",
    process.execPath,
    [WRANGLER, "d1", "migrations", "apply", "DB", "--local", "--persist-to", persistTo, "--config", GATEWAY_CONFIG],
    { cwd: ROOT, env: CHILD_ENV },
  );
  const code = await child.exited;
  await child.stop();
  if (code !== 0) throw new Error(`d1 migrations failed (exit ${code}):\n${child.output()}`);
}

const DEV_FLAGS = ["--ip", "127.0.0.1", "--show-interactive-dev-session=false", "--log-level", "warn"];

/**
 * The gateway as developers run it: `npm run dev -- --port N` (which applies the D1 migrations
 * first, then execs wrangler dev). State goes to `persistTo` (PARLEY_STATE_DIR), so the benchmark
 * neither reads nor grows anyone's .wrangler/state.
 */
/** Attempts at starting a wrangler dev whose port was taken before it could bind it (see startDev). */
const DEV_START_ATTEMPTS = 3;

/**
 * Spawns a wrangler dev on free ports and waits until it answers. A port freePort found free can be
 * handed to another listener before wrangler binds it (npm run dev applies the D1 migrations first,
 * seconds later; the reliability suite's restart test once lost its port so): it then starts again on
 * new ports.
 */
async function startDev(name: string, spawn: (port: number, inspector: number) => Child): Promise<DevTarget> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    const inspector = await freePort();
    const spawnedAt = performance.now();
    const child = spawn(port, inspector);
    const url = `http://127.0.0.1:${port}`;
    try {
      const readyAt = await waitForOk(`${url}/liveness`, 90_000, child);
      return { name, url, child, spawnedAt, readyAt, cpuMs: () => groupCpuMs(child.pid), stop: child.stop };
    } catch (error) {
      await child.stop();
      if (attempt >= DEV_START_ATTEMPTS || !/Address already in use/.test(child.output())) throw error;
    }
  }
}

export async function startGatewayDev(backendUrl: string, persistTo: string): Promise<DevTarget> {
  return startDev("gateway", (port, inspector) =>
    startChild(
      "gateway (wrangler dev)",
      "npm",
      ["run", "dev", "--", "--port", String(port), "--inspector-port", String(inspector), "--var", `PARLEY_BACKEND_URL:${backendUrl}`, ...DEV_FLAGS],
      { cwd: ROOT, env: { ...CHILD_ENV, PARLEY_STATE_DIR: persistTo } },
    ),
  );
}

export async function startFloorDev(backendUrl: string): Promise<DevTarget> {
  return startDev("floor", (port, inspector) =>
    startChild(
      "floor (wrangler dev)",
      process.execPath,
      [WRANGLER, "dev", "--config", FLOOR_CONFIG, "--port", String(port), "--inspector-port", String(inspector), "--var", `BACKEND_URL:${backendUrl}`, ...DEV_FLAGS],
      { cwd: ROOT, env: CHILD_ENV },
    ),
  );
}
