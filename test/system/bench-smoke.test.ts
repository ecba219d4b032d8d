// A few seconds of the benchmark (bench/), so `npm test` notices when it stops working: Miniflare
// only, a short run at concurrency 10 per target. It checks that every request was answered, none
// slower than a few seconds (a request that waits on another's I/O hangs only under concurrent
// load, and shows here as an error, a 500 or a stall), and that the report renders. It asserts
// nothing about speed beyond that (CI machines are too noisy for it).
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runBench } from "../../bench/bench.ts";
import { renderRun } from "../../bench/report.ts";
import { ROOT } from "../../bench/targets.ts";

const CONNECTIONS = 10;
const TURNS = 60;
/** Far beyond any answer of the scripted backend, far below autocannon's 30 s time-out. */
const STALLED_MS = 5_000;

// Its own folder, so a full `npm run bench` running at the same time keeps its bundles.
const workDir = join(ROOT, "bench/out", `smoke-${process.pid}`);

afterAll(async () => {
  await rm(workDir, { recursive: true, force: true });
});

describe("benchmark smoke run", () => {
  it("gets 200s from the gateway and the floor on every endpoint and renders the report", { timeout: 120_000 }, async () => {
    const report = await runBench({
      modes: ["miniflare"],
      concurrency: [10],
      turnsPerConnection: TURNS,
      warmupRequests: 1,
      ttftSamples: 2,
      startupSamples: 1,
      profile: false,
      workDir,
      log: () => {},
    });

    expect(report.problems).toEqual([]);
    expect(report.load.map((row) => row.endpoint)).toEqual(["POST /v1/query", "POST /v1/responses"]);
    for (const row of report.load) {
      // Split into rounds, floor and gateway alternating, each with its own ratio.
      expect(row.roundRatios).toHaveLength(4);
      for (const share of row.roundRatios) expect(share).toBeGreaterThan(0);
      for (const result of [row.floor, row.gateway]) {
        expect(result.statusCodes).toEqual({ 200: CONNECTIONS * TURNS });
        expect(result.errors).toBe(0);
        expect(result.max).toBeLessThan(STALLED_MS);
      }
    }
    expect(report.ttft.map((row) => row.endpoint)).toEqual(["POST /v1/streaming_query", "POST /v1/responses (stream)"]);
    for (const row of report.ttft) {
      expect(row.floor.ok).toBe(2);
      expect(row.gateway.ok).toBe(2);
    }
    expect(report.bundles.gateway.gzipBytes).toBeGreaterThan(0);

    const markdown = renderRun(report, "npm test (bench smoke)");
    for (const heading of ["### Throughput and latency", "### Time to first token", "### Start-up", "### Bundle"]) {
      expect(markdown).toContain(heading);
    }
    expect(markdown).toContain("| miniflare | POST /v1/query | 10 |");
  });
});
