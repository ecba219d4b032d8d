// The benchmark's rounds: load runs of one target combined into one result (bench/load.ts).
import { describe, expect, it } from "vitest";
import { combineLoads, type LoadResult } from "../../bench/load.ts";

function run(latencies: number[], seconds: number, cpu: number, codes: Record<string, number> = { 200: latencies.length }, busiestThread = 0.5): LoadResult {
  const sorted = [...latencies].sort((a, b) => a - b);
  return {
    connections: 2,
    requests: latencies.length,
    ok: sorted.length,
    non2xx: 0,
    errors: 0,
    seconds,
    rps: sorted.length / seconds,
    p50: NaN,
    p99: NaN,
    max: sorted.at(-1)!,
    mean: NaN,
    statusCodes: codes,
    capped: false,
    targetCpuMs: cpu,
    backendCpuMs: cpu / 2,
    busiestThread,
    latencies: sorted,
  };
}

describe("combineLoads", () => {
  it("adds up answers and time, and takes latency and CPU over every answer", () => {
    const combined = combineLoads([run([1, 2, 3, 4], 1, 2), run([10, 20], 2, 5)]);
    expect(combined.ok).toBe(6);
    expect(combined.seconds).toBe(3);
    expect(combined.rps).toBe(2);
    expect(combined.latencies).toEqual([1, 2, 3, 4, 10, 20]);
    expect(combined.p50).toBe(3);
    expect(combined.p99).toBe(20);
    expect(combined.max).toBe(20);
    expect(combined.statusCodes).toEqual({ 200: 6 });
    // Weighted by answers: (4 × 2 + 2 × 5) / 6.
    expect(combined.targetCpuMs).toBeCloseTo(3);
    expect(combined.backendCpuMs).toBeCloseTo(1.5);
  });

  it("takes the busiest thread's share over the rounds' time", () => {
    const combined = combineLoads([run([1], 1, 1, undefined, 0.9), run([2], 3, 1, undefined, 0.5)]);
    // Weighted by seconds: (1 × 0.9 + 3 × 0.5) / 4.
    expect(combined.busiestThread).toBeCloseTo(0.6);
  });

  it("keeps every status code and a capped round", () => {
    const capped = { ...run([5], 1, 1, { 200: 1, 503: 2 }), capped: true, non2xx: 2, requests: 3 };
    const combined = combineLoads([run([1], 1, 1), capped]);
    expect(combined.statusCodes).toEqual({ 200: 2, 503: 2 });
    expect(combined.non2xx).toBe(2);
    expect(combined.requests).toBe(4);
    expect(combined.capped).toBe(true);
  });
});
