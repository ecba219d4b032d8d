// The profile phase: where a persisted /v1/query turn spends its time. It runs the profiling build
// of the gateway (bench/profile-worker.js: the real Worker plus timing spans around every D1
// statement, Durable Object call and backend fetch) in Miniflare beside the plain gateway and the
// floor, and measures how a turn's cost grows with its conversation's history.
import { profileWhile, summarizeProfile, type CpuProfileSummary } from "./cpu-profile.ts";
import { median, percentile, postJson, runLoad, type LoadResult } from "./load.ts";
import { freePort } from "../test/fakes/listen.ts";
import { applyMigrations, GATEWAY_CONFIG, startMiniflare, tmpfsState, VARIANTS_CONFIG, type Target } from "./targets.ts";

interface Span {
  name: string;
  start: number;
  end: number;
}

interface Trace {
  path: string;
  status: number;
  total: number;
  backendRequestBytes: number;
  spans: Span[];
}

interface InsideTiming {
  name: string;
  ms: number;
  historyTurns: number;
}

interface ProfileDump {
  traces: Trace[];
  inside: InsideTiming[];
}

export interface SpanRow {
  name: string;
  /** How many times a request ran it (mean). */
  perRequest: number;
  meanStart: number;
  meanMs: number;
  p50Ms: number;
  /** Time since the previous I/O ended (or since the request arrived) when this one started. */
  meanWorkerBefore: number;
}

export interface InsideRow {
  name: string;
  perTurn: number;
  meanMs: number;
  maxMs: number;
}

export interface TurnBreakdown {
  requests: number;
  meanTotal: number;
  p50Total: number;
  p99Total: number;
  /** Wall time covered by at least one I/O span. */
  meanIo: number;
  /** Wall time with no I/O outstanding: the Worker's own JavaScript (and its waiting for the CPU). */
  meanWorkerOnly: number;
  /** From the end of the last I/O to the answer. */
  meanAfterLastIo: number;
  meanBackendRequestKiB: number;
  spans: SpanRow[];
  inside: InsideRow[];
}

export interface HistoryBucket {
  /** 1-based turn numbers of the conversation, inclusive. */
  fromTurn: number;
  toTurn: number;
  gatewayP50: number;
  floorP50: number;
  breakdown: TurnBreakdown;
}

export interface VariantRow {
  name: string;
  what: string;
  /** With the variants' state on disk (Miniflare's default). */
  result: LoadResult;
  /** With it on tmpfs (the miniflare-tmpfs runtime). */
  tmpfs: LoadResult;
}

export interface ProfileReport {
  connections: number;
  turnsPerConnection: number;
  load: { floor: LoadResult; gateway: LoadResult; profiled: LoadResult };
  turn: TurnBreakdown;
  history: { turns: number; buckets: HistoryBucket[] };
  variants: VariantRow[];
  cpuProfile: { load: LoadResult; summary: CpuProfileSummary } | null;
}

export interface ProfileOptions {
  bundles: { profile: string; gateway: string; variants: string | null };
  vars: { gateway: Record<string, string>; floor: Record<string, string> };
  targets: { gateway: Target; floor: Target };
  backend: Target;
  turnsPerConnection: number;
  maxSecondsPerRun: number;
  historyTurns: number;
  log: (line: string) => void;
}

/** The floor variants (bench/variants-worker.js), cheapest first, with what each adds. */
export const VARIANTS: Array<{ name: string; what: string }> = [
  { name: "passthrough-json", what: "the floor (baseline): backend JSON passed through" },
  { name: "stream-read-raw", what: "backend called with stream: true, SSE read as bytes" },
  { name: "sdk-json", what: "the SDK's prepared request and JSON read (Parley's call for JSON answers)" },
  { name: "sdk-stream", what: "the same streamed, every event parsed by the SDK (Parley's call for streams)" },
  { name: "d1-read", what: "+ 1 D1 SELECT before the call (raw binding)" },
  { name: "d1-read-drizzle", what: "+ the same SELECT through drizzle" },
  { name: "d1-turn", what: "+ SELECT before, upsert ‖ insert after (Parley's first D1 traffic)" },
  { name: "d1-turn-batched", what: "+ SELECT before, the two writes as one batch" },
  { name: "do-rpc", what: "+ Durable Object begin/complete RPCs (no history)" },
  { name: "do-rpc-control-stream", what: "+ the same with a ReadableStream returned over RPC" },
  { name: "persisted-minimum", what: "+ DO begin, then DO complete ‖ one D1 batch of the two writes: the previous design's round-trips, nothing else" },
  { name: "do-turn-minimum", what: "one RPC to a Durable Object that calls the backend and records the turn: the current design's round-trips, nothing else" },
  { name: "do-turn-marked", what: "+ a running marker written as the backend call leaves, as a restart mid-turn needs (two commits a turn)" },
  { name: "do-turn-marked-sdk", what: "+ the backend call as Parley makes it (SDK-prepared, SDK-parsed): the current design's whole minimum" },
  { name: "do-turn-new-object", what: "the same with a new Durable Object for every request: the minimum of a turn that starts a conversation" },
];

const CONNECTIONS = 10;
const QUESTION = "What is Parley?";
const BUCKET = 20;

export async function runProfile(options: ProfileOptions): Promise<ProfileReport> {
  const profiled = await startMiniflare("parley", GATEWAY_CONFIG, options.bundles.profile, options.vars.gateway);
  try {
    await applyMigrations(profiled);
    const { gateway, floor } = options.targets;
    for (let i = 0; i < 20; i++) await postJson(profiled.url, "/v1/query", { query: QUESTION });

    // The three side by side at the targets' concurrency; the profiled build's own overhead shows
    // as the gap between it and the plain gateway.
    const cpu = (target: Target) => ({ target: target.cpuMs, backend: options.backend.cpuMs });
    const runAt = async (target: Target) => {
      const bodies = await openConversations(target);
      if (target === profiled) await reset(profiled);
      return continuedQueries(target, bodies, options, cpu(target));
    };
    const load = { floor: await runAt(floor), gateway: await runAt(gateway), profiled: await runAt(profiled) };
    for (const [name, result] of Object.entries(load)) {
      options.log(`profile c=${CONNECTIONS} ${name}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50.toFixed(2)} ms (${result.ok}/${result.requests} ok)`);
    }
    const turn = breakdown(await dump(profiled));
    options.log(`profile: mean turn ${turn.meanTotal.toFixed(2)} ms, I/O ${turn.meanIo.toFixed(2)} ms, Worker-only ${turn.meanWorkerOnly.toFixed(2)} ms`);

    const history = await historyGrowth(profiled, floor, options.historyTurns);
    await profiled.stop();
    const variants = options.bundles.variants ? await runVariants(options, options.bundles.variants) : [];
    const cpuProfile = await profileGatewayIsolate(options);
    return { connections: CONNECTIONS, turnsPerConnection: options.turnsPerConnection, load, turn, history, variants, cpuProfile };
  } finally {
    await profiled.stop();
  }
}

/** Each variant at the targets' concurrency, one conversation (and DO) per connection. */
async function runVariants(options: ProfileOptions, bundle: string): Promise<VariantRow[]> {
  const onDisk = await variantLoads(options, bundle, {});
  const onTmpfs = await variantLoads(options, bundle, await tmpfsState("variants"));
  return VARIANTS.map((variant, index) => ({ ...variant, result: onDisk[index]!, tmpfs: onTmpfs[index]! }));
}

/** Each variant's load run, in VARIANTS' order, with the variants' state where `state` says. */
async function variantLoads(options: ProfileOptions, bundle: string, state: { resourcePersistencePath?: string }): Promise<LoadResult[]> {
  const placement = state.resourcePersistencePath ? "tmpfs" : "disk";
  const target = await startMiniflare("parley-bench-variants", VARIANTS_CONFIG, bundle, options.vars.floor, state);
  try {
    await applyMigrations(target);
    const bodies = Array.from({ length: CONNECTIONS }, (_, index) => JSON.stringify({ query: QUESTION, conversation_id: `bench-${index}` }));
    const results: LoadResult[] = [];
    for (const variant of VARIANTS) {
      const spec = { url: target.url, path: `/v/${variant.name}`, bodies, connections: CONNECTIONS, maxSeconds: options.maxSecondsPerRun };
      await runLoad({ ...spec, amount: CONNECTIONS * 5 });
      const result = await runLoad({ ...spec, amount: CONNECTIONS * options.turnsPerConnection, cpu: { target: target.cpuMs, backend: options.backend.cpuMs } });
      options.log(`variant ${variant.name} (${placement}): ${result.rps.toFixed(0)} req/s, p50 ${result.p50.toFixed(2)} ms, workerd ${result.targetCpuMs.toFixed(2)} ms CPU/req (${result.ok}/${result.requests} ok)`);
      results.push(result);
    }
    return results;
  } finally {
    await target.stop();
  }
}

/** A V8 CPU profile of the plain gateway's isolate (Worker and its Durable Objects) under the same load. */
async function profileGatewayIsolate(options: ProfileOptions): Promise<ProfileReport["cpuProfile"]> {
  const inspectorPort = await freePort();
  const target = await startMiniflare("parley", GATEWAY_CONFIG, options.bundles.gateway, options.vars.gateway, { inspectorPort });
  try {
    await applyMigrations(target);
    for (let i = 0; i < 20; i++) await postJson(target.url, "/v1/query", { query: QUESTION });
    const bodies = await openConversations(target);
    const isolate = "core:user:parley";
    const { result, profile } = await profileWhile(inspectorPort, isolate, () =>
      continuedQueries(target, bodies, options, { target: target.cpuMs, backend: options.backend.cpuMs }),
    );
    const summary = await summarizeProfile(profile, isolate, options.bundles.gateway, result.ok);
    options.log(`cpu profile: ${summary.bundleMsPerRequest.toFixed(2)} ms/turn sampled in bundle code; top ${summary.modules.slice(0, 4).map((row) => `${row.name} ${(row.share * 100).toFixed(0)}%`).join(", ")}`);
    return { load: result, summary };
  } catch (error) {
    options.log(`cpu profile failed: ${error instanceof Error ? error.message : String(error)}`);
    return null;
  } finally {
    await target.stop();
  }
}

/** One new conversation per connection; the bodies continue them. */
async function openConversations(target: Target): Promise<string[]> {
  const opened = await Promise.all(Array.from({ length: CONNECTIONS }, () => postJson<{ conversation_id: string }>(target.url, "/v1/query", { query: QUESTION })));
  return opened.map(({ conversation_id }) => JSON.stringify({ query: QUESTION, conversation_id }));
}

/** Persisted /v1/query turns at CONNECTIONS connections, each continuing its own conversation. */
function continuedQueries(target: Target, bodies: string[], options: ProfileOptions, cpu: Parameters<typeof runLoad>[0]["cpu"]): Promise<LoadResult> {
  return runLoad({
    url: target.url,
    path: "/v1/query",
    bodies,
    connections: CONNECTIONS,
    amount: CONNECTIONS * options.turnsPerConnection,
    maxSeconds: options.maxSecondsPerRun,
    cpu,
  });
}

async function reset(target: Target): Promise<void> {
  const response = await fetch(`${target.url}/__profile`, { method: "DELETE" });
  await response.arrayBuffer();
}

async function dump(target: Target): Promise<ProfileDump> {
  const response = await fetch(`${target.url}/__profile`);
  return (await response.json()) as ProfileDump;
}

/**
 * One conversation, one turn at a time, `turns` long: how the cost of a turn grows with the
 * history it carries (the DO reads every earlier turn, and the backend is sent all of them).
 */
async function historyGrowth(profiled: Target, floor: Target, turns: number): Promise<{ turns: number; buckets: HistoryBucket[] }> {
  const { conversation_id } = await postJson<{ conversation_id: string }>(profiled.url, "/v1/query", { query: QUESTION });
  await reset(profiled);
  const body = JSON.stringify({ query: QUESTION, conversation_id });
  const gatewayMs: number[] = [];
  const floorMs: number[] = [];
  // Turn 1 created the conversation; turns 2..turns are timed. Floor requests interleave with them.
  for (let turn = 2; turn <= turns; turn++) {
    gatewayMs.push(await timed(profiled.url, body));
    floorMs.push(await timed(floor.url, JSON.stringify({ query: QUESTION })));
  }
  const { traces, inside } = await dump(profiled);
  const starts = [2, Math.max(2, Math.floor(turns / 2) - BUCKET / 2), Math.max(2, turns - BUCKET + 1)];
  const buckets = [...new Set(starts)].map((fromTurn) => {
    const toTurn = Math.min(turns, fromTurn + BUCKET - 1);
    const index = (turn: number) => turn - 2;
    const slice = <T>(values: T[]) => values.slice(index(fromTurn), index(toTurn) + 1);
    // The DO sees `turn - 1` earlier turns when it hands out the history of turn `turn`.
    const insideHere = inside.filter((timing) => timing.historyTurns >= fromTurn - 1 && timing.historyTurns <= toTurn);
    return {
      fromTurn,
      toTurn,
      gatewayP50: median(slice(gatewayMs)),
      floorP50: median(slice(floorMs)),
      breakdown: breakdown({ traces: slice(traces), inside: insideHere }),
    };
  });
  return { turns, buckets };
}

async function timed(url: string, body: string): Promise<number> {
  const started = performance.now();
  const response = await fetch(`${url}/v1/query`, { method: "POST", headers: { "content-type": "application/json" }, body });
  await response.arrayBuffer();
  if (response.status !== 200) throw new Error(`POST ${url}/v1/query answered ${response.status}`);
  return performance.now() - started;
}

/** Aggregates the traces of successful /v1/query turns. Clock resolution in workerd is 1 ms: read means, not single values. */
export function breakdown(profile: ProfileDump): TurnBreakdown {
  const traces = profile.traces.filter((trace) => trace.path === "/v1/query" && trace.status === 200);
  const n = traces.length || 1;
  const byName = new Map<string, { count: number; starts: number[]; durations: number[]; before: number[] }>();
  let io = 0;
  let afterLastIo = 0;
  for (const trace of traces) {
    const spans = [...trace.spans].sort((a, b) => a.start - b.start || a.end - b.end);
    let coveredUntil = 0;
    for (const span of spans) {
      const entry = byName.get(span.name) ?? { count: 0, starts: [], durations: [], before: [] };
      entry.count++;
      entry.starts.push(span.start);
      entry.durations.push(span.end - span.start);
      entry.before.push(Math.max(0, span.start - coveredUntil));
      byName.set(span.name, entry);
      io += Math.max(0, span.end - Math.max(span.start, coveredUntil));
      coveredUntil = Math.max(coveredUntil, span.end);
    }
    afterLastIo += Math.max(0, trace.total - coveredUntil);
  }
  const mean = (values: number[]) => (values.length ? values.reduce((sum, value) => sum + value, 0) / values.length : NaN);
  const totals = traces.map((trace) => trace.total).sort((a, b) => a - b);
  const spans: SpanRow[] = [...byName.entries()]
    .map(([name, entry]) => ({
      name,
      perRequest: entry.count / n,
      meanStart: mean(entry.starts),
      meanMs: mean(entry.durations),
      p50Ms: median(entry.durations),
      meanWorkerBefore: mean(entry.before),
    }))
    .sort((a, b) => a.meanStart - b.meanStart);

  const insideByName = new Map<string, number[]>();
  for (const timing of profile.inside) insideByName.set(timing.name, [...(insideByName.get(timing.name) ?? []), timing.ms]);
  const inside: InsideRow[] = [...insideByName.entries()].map(([name, values]) => ({
    name,
    perTurn: values.length / n,
    meanMs: mean(values),
    maxMs: Math.max(...values),
  }));

  const meanTotal = mean(traces.map((trace) => trace.total));
  return {
    requests: traces.length,
    meanTotal,
    p50Total: percentile(totals, 0.5),
    p99Total: percentile(totals, 0.99),
    meanIo: io / n,
    meanWorkerOnly: meanTotal - io / n,
    meanAfterLastIo: afterLastIo / n,
    meanBackendRequestKiB: mean(traces.map((trace) => trace.backendRequestBytes)) / 1024,
    spans,
    inside,
  };
}
