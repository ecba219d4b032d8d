// Load and latency measurement: autocannon for throughput and latency under concurrency, and a
// small fetch client for time to first token. Latencies are kept per response in milliseconds as
// floats: autocannon's own histogram has 1 ms resolution, too coarse for a 3 ms budget.
/// <reference path="./autocannon.d.ts" />
import autocannon from "autocannon";

export interface LoadSpec {
  /** Base URL of the target. */
  url: string;
  path: string;
  /** One body per connection (cycled when there are fewer): connection i sends bodies[i] every time. */
  bodies: string[];
  connections: number;
  /** Total requests, spread evenly over the connections. */
  amount: number;
  /** Stops the run after this long even if `amount` was not reached. */
  maxSeconds: number;
  /** Cumulative CPU (ms) of the target's and the backend's processes (and the target's threads), read before and after. */
  cpu?: { target: () => number; backend: () => number; threads?: () => Map<number, number> };
}

export interface LoadResult {
  connections: number;
  requests: number;
  /** 2xx answers. */
  ok: number;
  non2xx: number;
  errors: number;
  seconds: number;
  /** 2xx answers per second, from the first request to the last answer. */
  rps: number;
  p50: number;
  p99: number;
  /** The slowest 2xx answer. */
  max: number;
  mean: number;
  statusCodes: Record<string, number>;
  /** Stopped by maxSeconds before `amount` was reached. */
  capped: boolean;
  /** CPU (ms) per 2xx answer spent by the target's processes (all of workerd under Miniflare). */
  targetCpuMs: number;
  /** CPU (ms) per 2xx answer spent by the backend. */
  backendCpuMs: number;
  /** The busiest thread of the target's process: its CPU time over the run's time (1 = a whole core); NaN when not known. */
  busiestThread: number;
  /** Every 2xx answer's latency, ascending. */
  latencies: number[];
}

export function runLoad(spec: LoadSpec): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const latencies: number[] = [];
    const statusCodes: Record<string, number> = {};
    let ok = 0;
    let non2xx = 0;
    let errors = 0;
    let lastAnswerAt = 0;
    let capped = false;
    let nextBody = 0;
    const cpuBefore = { target: spec.cpu?.target() ?? NaN, backend: spec.cpu?.backend() ?? NaN, threads: spec.cpu?.threads?.() ?? null };
    const startedAt = performance.now();
    const instance = autocannon(
      {
        url: new URL(spec.path, spec.url).href,
        method: "POST",
        headers: { "content-type": "application/json" },
        connections: spec.connections,
        amount: spec.amount,
        pipelining: 1,
        timeout: 30,
        sampleInt: 50,
        setupClient: (client) => client.setBody(spec.bodies[nextBody++ % spec.bodies.length]!),
      },
      (error) => {
        clearTimeout(cap);
        if (error) return reject(error);
        const seconds = ((lastAnswerAt || performance.now()) - startedAt) / 1000;
        const sorted = latencies.sort((a, b) => a - b);
        const perAnswer = (before: number, after: number | undefined) => ((after ?? NaN) - before) / ok;
        resolve({
          connections: spec.connections,
          requests: ok + non2xx,
          ok,
          non2xx,
          errors,
          seconds,
          rps: seconds > 0 ? ok / seconds : 0,
          ...latencyFigures(sorted),
          statusCodes,
          capped,
          targetCpuMs: perAnswer(cpuBefore.target, spec.cpu?.target()),
          backendCpuMs: perAnswer(cpuBefore.backend, spec.cpu?.backend()),
          busiestThread: busiestThread(cpuBefore.threads, spec.cpu?.threads?.() ?? null, seconds),
        });
      },
    );
    instance.on("response", (_client, statusCode, _bytes, responseTimeMs) => {
      lastAnswerAt = performance.now();
      statusCodes[statusCode] = (statusCodes[statusCode] ?? 0) + 1;
      if (statusCode >= 200 && statusCode < 300) {
        ok++;
        latencies.push(responseTimeMs);
      } else {
        non2xx++;
      }
    });
    instance.on("reqError", () => errors++);
    const cap = setTimeout(() => {
      capped = true;
      instance.stop();
    }, spec.maxSeconds * 1000);
  });
}

/** Load runs of one target taken as one: counts and time added up, latencies and CPU over every answer. */
export function combineLoads(parts: LoadResult[]): LoadResult {
  const sum = (pick: (part: LoadResult) => number) => parts.reduce((total, part) => total + pick(part), 0);
  const ok = sum((part) => part.ok);
  const seconds = sum((part) => part.seconds);
  const latencies = parts.flatMap((part) => part.latencies).sort((a, b) => a - b);
  const statusCodes: Record<string, number> = {};
  for (const part of parts) for (const [code, count] of Object.entries(part.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + count;
  return {
    connections: parts[0]?.connections ?? 0,
    requests: sum((part) => part.requests),
    ok,
    non2xx: sum((part) => part.non2xx),
    errors: sum((part) => part.errors),
    seconds,
    rps: seconds > 0 ? ok / seconds : 0,
    ...latencyFigures(latencies),
    statusCodes,
    capped: parts.some((part) => part.capped),
    targetCpuMs: ok ? sum((part) => part.targetCpuMs * part.ok) / ok : NaN,
    backendCpuMs: ok ? sum((part) => part.backendCpuMs * part.ok) / ok : NaN,
    busiestThread: seconds > 0 ? sum((part) => part.busiestThread * part.seconds) / seconds : NaN,
  };
}

/** The largest share of a core one thread used between two readings `seconds` apart. */
function busiestThread(before: Map<number, number> | null, after: Map<number, number> | null, seconds: number): number {
  if (!before || !after || after.size === 0 || seconds <= 0) return NaN;
  let most = 0;
  for (const [tid, ms] of after) most = Math.max(most, ms - (before.get(tid) ?? 0));
  return most / 1000 / seconds;
}

/** The latency figures of a run's answers (ascending), with the latencies themselves. */
function latencyFigures(sorted: number[]): Pick<LoadResult, "p50" | "p99" | "max" | "mean" | "latencies"> {
  return {
    p50: percentile(sorted, 0.5),
    p99: percentile(sorted, 0.99),
    max: sorted.at(-1) ?? NaN,
    mean: sorted.length ? sorted.reduce((sum, value) => sum + value, 0) / sorted.length : NaN,
    latencies: sorted,
  };
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

export function median(values: number[]): number {
  return percentile([...values].sort((a, b) => a - b), 0.5);
}

/**
 * A token event with text in either wire format: Parley's streaming_query (not the empty token
 * that announces a text part) or the Responses API's SSE.
 */
const FIRST_TOKEN = /"event":\s*"token",\s*"data":\s*\{\s*"id":\s*\d+,\s*"token":\s*"(?!")|event: response\.output_text\.delta/;

export interface StreamSample {
  status: number;
  /** Milliseconds from sending the request to reading the first token event. */
  ttft: number;
  /** Milliseconds until the stream ended. */
  total: number;
}

/** Sends one streaming request and reads it to the end, noting when the first token arrived. */
export async function streamSample(url: string, path: string, body: string): Promise<StreamSample> {
  const started = performance.now();
  const response = await fetch(new URL(path, url), { method: "POST", headers: { "content-type": "application/json" }, body });
  let ttft = NaN;
  let seen = "";
  const decoder = new TextDecoder();
  if (response.body) {
    const reader = response.body.getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      if (Number.isNaN(ttft)) {
        seen += decoder.decode(value, { stream: true });
        if (FIRST_TOKEN.test(seen)) ttft = performance.now() - started;
      }
    }
  }
  return { status: response.status, ttft, total: performance.now() - started };
}

/** One JSON request; throws unless it answers 200. */
export async function postJson<T>(url: string, path: string, body: unknown): Promise<T> {
  const response = await fetch(new URL(path, url), { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`POST ${path} answered ${response.status}: ${text.slice(0, 500)}`);
  return JSON.parse(text) as T;
}
