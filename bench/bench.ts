// The benchmark: Parley against a floor Worker, side by side in one run, under Miniflare driven
// directly and under `wrangler dev`. `runBench` is what `npm run bench` (bench/run.ts) and the
// smoke test (test/unit/bench-smoke.test.ts, a tiny configuration) call.
import { arch, availableParallelism, cpus, loadavg, platform, release, totalmem } from "node:os";
import { join } from "node:path";
import { mkdir, rm } from "node:fs/promises";
import { combineLoads, percentile, postJson, runLoad, streamSample, type LoadResult, type StreamSample } from "./load.ts";
import { stopAll, waitForOk } from "./processes.ts";
import { runProfile, type ProfileReport } from "./profile.ts";
import {
  applyMigrations,
  buildBundle,
  FLOOR_CONFIG,
  GATEWAY_CONFIG,
  migrateLocal,
  PROFILE_ENTRY,
  removeTmpfsState,
  ROOT,
  startBackend,
  startFloorDev,
  startGatewayDev,
  startMiniflare,
  tmpfsState,
  VARIANTS_CONFIG,
  type BackendSettings,
  type Bundle,
  type Target,
} from "./targets.ts";

/**
 * miniflare: Miniflare as it is by default, its Durable Objects', D1's and R2's SQLite files on disk
 * (every commit written through with fsync). miniflare-tmpfs: the same with those files on tmpfs
 * (/dev/shm), so that a commit costs SQLite's work but not this machine's disk: on Cloudflare a
 * Durable Object's commit is confirmed by replication, not by a local fsync, and neither costs the
 * object's thread what a local fsync does here. miniflare-direct: state on disk, and requests reach
 * the gateway as they do on Cloudflare with `run_worker_first = true` (AssetsRouting "direct"):
 * Miniflare's emulation of `[assets]` puts two more Workers in front of every request on the same
 * thread, which the platform does not charge to the Worker. miniflare-direct-tmpfs: both, routed as
 * on Cloudflare with the state on tmpfs: neither of the two local costs the platform does not have.
 */
export type Mode = "miniflare" | "miniflare-direct" | "miniflare-tmpfs" | "miniflare-direct-tmpfs" | "wrangler-dev";
export const MODES: readonly Mode[] = ["miniflare", "miniflare-direct", "miniflare-tmpfs", "miniflare-direct-tmpfs", "wrangler-dev"];

export interface BenchOptions {
  modes: Mode[];
  /** Connections for the load runs; each gets its own conversation on /v1/query. */
  concurrency: number[];
  /** Requests per connection in a load run: /v1/query conversations grow by this many turns. */
  turnsPerConnection: number;
  /**
   * Rounds a load run is split into, floor and gateway alternating (which goes first alternates
   * too), so that a moment when the shared machine is busy falls on both and not on one of them.
   */
  rounds: number;
  /** A load run stops after this long even if it has not sent all its requests. */
  maxSecondsPerRun: number;
  /** Sequential requests of every kind to every target before measuring. */
  warmupRequests: number;
  ttftSamples: number;
  startupSamples: number;
  backend: BackendSettings;
  /** The profile phase (Miniflare only): timing spans of a persisted /v1/query turn. */
  profile: boolean;
  /** Length of the sequential conversation in the profile's history-growth run. */
  historyTurns: number;
  /** Bundles and wrangler dev state go here (bench/out is git-ignored). */
  workDir: string;
  log: (line: string) => void;
}

export const DEFAULT_OPTIONS: BenchOptions = {
  modes: ["miniflare", "miniflare-direct", "miniflare-tmpfs", "miniflare-direct-tmpfs", "wrangler-dev"],
  concurrency: [1, 10, 50],
  turnsPerConnection: 100,
  rounds: 4,
  maxSecondsPerRun: 120,
  warmupRequests: 20,
  ttftSamples: 40,
  startupSamples: 3,
  backend: { firstTokenDelayMs: 0, tokenDelayMs: 0 },
  profile: true,
  historyTurns: 300,
  workDir: join(ROOT, "bench/out"),
  log: (line) => console.log(line),
};

export type Endpoint = "POST /v1/query" | "POST /v1/responses";
export type StreamEndpoint = "POST /v1/streaming_query" | "POST /v1/responses (stream)";

export interface LoadRow {
  mode: Mode;
  endpoint: Endpoint;
  connections: number;
  /** Every round's answers taken together. */
  floor: LoadResult;
  gateway: LoadResult;
  /** Gateway req/s ÷ floor req/s in each round. */
  roundRatios: number[];
}

export interface StreamStats {
  samples: number;
  /** Samples that answered 200 and carried a token event. */
  ok: number;
  ttftP50: number;
  ttftP99: number;
  totalP50: number;
}

export interface TtftRow {
  mode: Mode;
  endpoint: StreamEndpoint;
  floor: StreamStats;
  gateway: StreamStats;
}

export interface StartupRow {
  mode: Mode;
  target: "gateway" | "floor";
  /** What was timed, e.g. "npm run dev -- --port N". */
  how: string;
  samplesMs: number[];
}

export interface Machine {
  cores: number;
  cpu: string;
  memoryGiB: number;
  node: string;
  os: string;
  loadAtStart: number[];
  loadAtEnd: number[];
}

export interface BenchReport {
  options: Omit<BenchOptions, "log">;
  startedAt: Date;
  seconds: number;
  machine: Machine;
  bundles: { gateway: Bundle; floor: Bundle };
  load: LoadRow[];
  ttft: TtftRow[];
  startup: StartupRow[];
  profile: ProfileReport | null;
  /** Every non-200 answer, error or missing token event, in words; empty when all targets answered. */
  problems: string[];
}

const QUESTION = "What is Parley?";
const MODEL = "scripted/parley-small";

interface TargetPair {
  gateway: Target;
  floor: Target;
}

export async function runBench(partial: Partial<BenchOptions> = {}): Promise<BenchReport> {
  const options: BenchOptions = { ...DEFAULT_OPTIONS, ...partial, backend: { ...DEFAULT_OPTIONS.backend, ...partial.backend } };
  const { log } = options;
  const startedAt = new Date();
  const started = performance.now();
  const loadAtStart = loadavg();
  const problems: string[] = [];
  const report: Omit<BenchReport, "seconds" | "machine" | "bundles"> & { bundles?: BenchReport["bundles"] } = {
    options: withoutLog(options),
    startedAt,
    load: [],
    ttft: [],
    startup: [],
    profile: null,
    problems,
  };

  try {
    const backend = await startBackend(options.backend);
    log(`backend ${backend.apiUrl} (first token ${options.backend.firstTokenDelayMs} ms, between tokens ${options.backend.tokenDelayMs} ms)`);
    const buildDir = join(options.workDir, "build");
    const wantProfile = options.profile && options.modes.includes("miniflare");
    const [gatewayBundle, floorBundle, profileBundle, variantsBundle, readableBundle] = await Promise.all([
      buildBundle(join(buildDir, "gateway"), { config: GATEWAY_CONFIG }),
      buildBundle(join(buildDir, "floor"), { config: FLOOR_CONFIG }),
      wantProfile ? buildBundle(join(buildDir, "profile"), { config: GATEWAY_CONFIG, entry: PROFILE_ENTRY, minify: false }) : Promise.resolve(null),
      wantProfile ? buildBundle(join(buildDir, "variants"), { config: VARIANTS_CONFIG }) : Promise.resolve(null),
      // The CPU profile attributes samples to source files by esbuild's path comments, which minifying drops.
      wantProfile ? buildBundle(join(buildDir, "gateway-unminified"), { config: GATEWAY_CONFIG, minify: false }) : Promise.resolve(null),
    ]);
    report.bundles = { gateway: gatewayBundle, floor: floorBundle };
    log(`bundles: gateway ${gatewayBundle.wranglerSize}, floor ${floorBundle.wranglerSize}`);

    const vars = { gateway: { PARLEY_BACKEND_URL: backend.apiUrl }, floor: { BACKEND_URL: backend.apiUrl } };
    for (const mode of options.modes) {
      log(`== ${mode}`);
      const targets =
        mode === "wrangler-dev"
          ? await devTargets(options, report.startup, backend.apiUrl)
          : await miniflareTargets(mode, options, report.startup, gatewayBundle, floorBundle, vars);
      log(`gateway ${targets.gateway.url}, floor ${targets.floor.url}`);
      await warmUp(targets, options.warmupRequests);
      for (const connections of options.concurrency) {
        for (const endpoint of ["POST /v1/query", "POST /v1/responses"] as const) {
          const row = await measureLoad(mode, endpoint, connections, targets, backend, options);
          report.load.push(row);
          for (const [name, result] of [["floor", row.floor], ["gateway", row.gateway]] as const) {
            log(`${endpoint} c=${connections} ${name}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms (${result.ok}/${result.requests} ok, ${result.errors} errors${result.capped ? ", capped" : ""})`);
            checkLoad(problems, `${mode} ${endpoint} c=${connections} ${name}`, result, connections * options.turnsPerConnection);
          }
        }
      }
      for (const endpoint of ["POST /v1/streaming_query", "POST /v1/responses (stream)"] as const) {
        const row = await measureTtft(mode, endpoint, targets, options.ttftSamples);
        report.ttft.push(row);
        for (const [name, stats] of [["floor", row.floor], ["gateway", row.gateway]] as const) {
          log(`${endpoint} TTFT ${name}: p50 ${stats.ttftP50.toFixed(2)} ms, p99 ${stats.ttftP99.toFixed(2)} ms (${stats.ok}/${stats.samples} ok)`);
          if (stats.ok !== stats.samples) problems.push(`${mode} ${endpoint} ${name}: ${stats.samples - stats.ok} of ${stats.samples} streams failed or carried no token`);
        }
      }
      if (mode === "miniflare" && profileBundle) {
        log("== profile (miniflare)");
        report.profile = await runProfile({
          ...options,
          bundles: { profile: profileBundle.file, gateway: readableBundle?.file ?? gatewayBundle.file, variants: variantsBundle?.file ?? null },
          vars,
          targets,
          backend,
        });
      }
      await Promise.all([targets.gateway.stop(), targets.floor.stop()]);
    }
    return {
      ...report,
      bundles: report.bundles,
      seconds: (performance.now() - started) / 1000,
      machine: machine(loadAtStart),
    };
  } finally {
    await stopAll();
    await rm(stateDir(options), { recursive: true, force: true });
    await removeTmpfsState();
  }
}

function withoutLog(options: BenchOptions): Omit<BenchOptions, "log"> {
  const { log: _log, ...rest } = options;
  return rest;
}

function machine(loadAtStart: number[]): Machine {
  return {
    cores: availableParallelism(),
    cpu: cpus()[0]?.model.trim() ?? "unknown",
    memoryGiB: totalmem() / 2 ** 30,
    node: process.version,
    os: `${platform()} ${release()} ${arch()}`,
    loadAtStart,
    loadAtEnd: loadavg(),
  };
}

function checkLoad(problems: string[], what: string, result: LoadResult, expected: number): void {
  if (result.non2xx > 0) problems.push(`${what}: ${result.non2xx} non-2xx answers (${JSON.stringify(result.statusCodes)})`);
  if (result.errors > 0) problems.push(`${what}: ${result.errors} request errors`);
  if (result.ok === 0) problems.push(`${what}: no successful answer`);
  else if (result.ok < expected && !result.capped) problems.push(`${what}: ${result.ok} of ${expected} requests answered`);
}

// ---------------------------------------------------------------------------------------------
// Targets. The start-up samples start the targets from scratch; the last one stays up for the runs.

async function miniflareTargets(
  mode: Exclude<Mode, "wrangler-dev">,
  options: BenchOptions,
  startup: StartupRow[],
  gatewayBundle: Bundle,
  floorBundle: Bundle,
  vars: { gateway: Record<string, string>; floor: Record<string, string> },
): Promise<TargetPair> {
  const state = mode.endsWith("-tmpfs") ? await tmpfsState(`gateway-${mode}`) : {};
  const assetsRouting = mode.startsWith("miniflare-direct") ? "direct" : "miniflare";
  const pair = await sampleStartups(mode, startup, options.startupSamples, async (which) => {
    const began = performance.now();
    const target =
      which === "gateway"
        ? await startMiniflare("parley", GATEWAY_CONFIG, gatewayBundle.file, vars.gateway, { ...state, assetsRouting })
        : await startMiniflare("parley-bench-floor", FLOOR_CONFIG, floorBundle.file, vars.floor);
    const ready = await waitForOk(`${target.url}/liveness`, 60_000);
    return { target, ms: ready - began };
  });
  await applyMigrations(pair.gateway);
  return pair;
}

/** wrangler dev's local D1/DO state for this run only; removed at the end. */
function stateDir(options: BenchOptions): string {
  return join(options.workDir, "state", String(process.pid));
}

async function devTargets(options: BenchOptions, startup: StartupRow[], backendUrl: string): Promise<TargetPair> {
  const state = stateDir(options);
  await mkdir(state, { recursive: true });
  await migrateLocal(state);
  return sampleStartups("wrangler-dev", startup, options.startupSamples, async (which) => {
    const target = which === "gateway" ? await startGatewayDev(backendUrl, state) : await startFloorDev(backendUrl);
    return { target, ms: target.readyAt - target.spawnedAt };
  });
}

const STARTUP_HOW: Record<Mode, Record<"gateway" | "floor", string>> = {
  miniflare: {
    gateway: "new Miniflare(bundle) until GET /liveness answers 200",
    floor: "new Miniflare(bundle) until GET /liveness answers 200",
  },
  "miniflare-direct": {
    gateway: "new Miniflare(bundle, its assets binding bound directly), until GET /liveness answers 200",
    floor: "new Miniflare(bundle) until GET /liveness answers 200",
  },
  "miniflare-tmpfs": {
    gateway: "new Miniflare(bundle), state on tmpfs, until GET /liveness answers 200",
    floor: "new Miniflare(bundle) until GET /liveness answers 200",
  },
  "miniflare-direct-tmpfs": {
    gateway: "new Miniflare(bundle, its assets binding bound directly), state on tmpfs, until GET /liveness answers 200",
    floor: "new Miniflare(bundle) until GET /liveness answers 200",
  },
  "wrangler-dev": {
    gateway: "spawn `npm run dev -- --port N` (its D1 migrations step included) until GET /liveness answers 200",
    floor: "spawn `wrangler dev --config bench/floor.wrangler.toml` until GET /liveness answers 200",
  },
};

/** Starts each target `samples` times (alternating gateway and floor) and keeps the last of each. */
async function sampleStartups<T extends Target>(
  mode: Mode,
  startup: StartupRow[],
  samples: number,
  start: (which: "gateway" | "floor") => Promise<{ target: T; ms: number }>,
): Promise<{ gateway: T; floor: T }> {
  const rows = {
    gateway: { mode, target: "gateway" as const, how: STARTUP_HOW[mode].gateway, samplesMs: [] as number[] },
    floor: { mode, target: "floor" as const, how: STARTUP_HOW[mode].floor, samplesMs: [] as number[] },
  };
  const rounds = Math.max(1, samples);
  const kept: { gateway?: T; floor?: T } = {};
  for (let round = 1; round <= rounds; round++) {
    for (const which of ["gateway", "floor"] as const) {
      const { target, ms } = await start(which);
      rows[which].samplesMs.push(ms);
      if (round === rounds) kept[which] = target;
      else await target.stop();
    }
  }
  startup.push(rows.gateway, rows.floor);
  if (!kept.gateway || !kept.floor) throw new Error("no target was started");
  return { gateway: kept.gateway, floor: kept.floor };
}

// ---------------------------------------------------------------------------------------------
// Measurements

async function warmUp(targets: TargetPair, requests: number): Promise<void> {
  const conversation = (await postJson<{ conversation_id: string }>(targets.gateway.url, "/v1/query", { query: QUESTION })).conversation_id;
  for (let i = 0; i < requests; i++) {
    for (const target of [targets.floor, targets.gateway]) {
      await postJson(target.url, "/v1/query", { query: QUESTION, conversation_id: conversation });
      await postJson(target.url, "/v1/responses", responsesBody(false));
      await streamSample(target.url, "/v1/streaming_query", JSON.stringify({ query: QUESTION, conversation_id: conversation }));
      await streamSample(target.url, "/v1/responses", JSON.stringify(responsesBody(true)));
    }
  }
}

function responsesBody(stream: boolean): Record<string, unknown> {
  return { model: MODEL, input: QUESTION, stream };
}

/**
 * /v1/query continues a conversation on every request. A conversation's turns are serialized by
 * design, so each connection gets a conversation of its own (N conversations at concurrency N),
 * kept through every round; the floor is sent the same bodies. /v1/responses is an unmodified
 * OpenAI client's request: no conversation, so every request starts a new one (and Parley's topic
 * summary call with it). The run is split into rounds, floor and gateway alternating, each
 * gateway round followed by a quiet spell for its deferred work.
 */
async function measureLoad(mode: Mode, endpoint: Endpoint, connections: number, targets: TargetPair, backend: Target, options: BenchOptions): Promise<LoadRow> {
  let bodies: string[];
  if (endpoint === "POST /v1/query") {
    const conversations = await Promise.all(
      Array.from({ length: connections }, () => postJson<{ conversation_id: string }>(targets.gateway.url, "/v1/query", { query: QUESTION })),
    );
    bodies = conversations.map(({ conversation_id }) => JSON.stringify({ query: QUESTION, conversation_id }));
  } else {
    bodies = [JSON.stringify(responsesBody(false))];
  }
  const rounds = Math.max(1, Math.min(options.rounds, options.turnsPerConnection));
  const spec = { path: endpoint.slice("POST ".length), bodies, connections, maxSeconds: options.maxSecondsPerRun };
  const floor: LoadResult[] = [];
  const gateway: LoadResult[] = [];
  for (let round = 0; round < rounds; round++) {
    // The round's share of the requests per connection, so that the rounds add up to the run's.
    const turns = Math.floor((options.turnsPerConnection * (round + 1)) / rounds) - Math.floor((options.turnsPerConnection * round) / rounds);
    const run = (target: Target) => runLoad({ ...spec, amount: connections * turns, url: target.url, cpu: { target: target.cpuMs, backend: backend.cpuMs, threads: target.threadCpuMs } });
    if (round % 2 === 0) {
      floor.push(await run(targets.floor));
      gateway.push(await run(targets.gateway));
      await quiet();
    } else {
      gateway.push(await run(targets.gateway));
      await quiet();
      floor.push(await run(targets.floor));
    }
  }
  return {
    mode,
    endpoint,
    connections,
    floor: combineLoads(floor),
    gateway: combineLoads(gateway),
    roundRatios: gateway.map((result, index) => result.rps / floor[index]!.rps),
  };
}

/** Sequential samples, floor and gateway alternating, so both see the same machine. */
/**
 * The gateway finishes work after its answers: the record-store writes of its conversations' outboxes
 * (gathered for a second) and the metrics batches (likewise). Each phase starts once the previous
 * phase's has had time to finish, so that it measures its own work (what is deferred within a phase
 * still counts in it: throughput and CPU include the outbox writes of its own turns, less the last
 * second's).
 */
const QUIET_MS = 2_500;
const quiet = () => new Promise((resolve) => setTimeout(resolve, QUIET_MS));

async function measureTtft(mode: Mode, endpoint: StreamEndpoint, targets: TargetPair, samples: number): Promise<TtftRow> {
  await quiet();
  let gatewayBody: string;
  let floorBody: string;
  let path: string;
  if (endpoint === "POST /v1/streaming_query") {
    const { conversation_id } = await postJson<{ conversation_id: string }>(targets.gateway.url, "/v1/query", { query: QUESTION });
    gatewayBody = JSON.stringify({ query: QUESTION, conversation_id });
    floorBody = JSON.stringify({ query: QUESTION });
    path = "/v1/streaming_query";
  } else {
    gatewayBody = floorBody = JSON.stringify(responsesBody(true));
    path = "/v1/responses";
  }
  const floor: StreamSample[] = [];
  const gateway: StreamSample[] = [];
  for (let i = 0; i < samples; i++) {
    floor.push(await streamSample(targets.floor.url, path, floorBody));
    gateway.push(await streamSample(targets.gateway.url, path, gatewayBody));
  }
  return { mode, endpoint, floor: streamStats(floor), gateway: streamStats(gateway) };
}

function streamStats(samples: StreamSample[]): StreamStats {
  const ok = samples.filter((sample) => sample.status === 200 && !Number.isNaN(sample.ttft));
  const ttft = ok.map((sample) => sample.ttft).sort((a, b) => a - b);
  const total = ok.map((sample) => sample.total).sort((a, b) => a - b);
  return { samples: samples.length, ok: ok.length, ttftP50: percentile(ttft, 0.5), ttftP99: percentile(ttft, 0.99), totalP50: percentile(total, 0.5) };
}
