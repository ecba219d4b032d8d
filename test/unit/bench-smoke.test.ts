// A few seconds of the benchmark (bench/), so `npm test` notices when it stops working: Miniflare
// only, a handful of requests per target. It checks that every target answered and that the report
// renders; it asserts nothing about timing (CI machines are too noisy for that).
import { rm } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { runBench } from "../../bench/bench.ts";
import { renderRun } from "../../bench/report.ts";
import { ROOT } from "../../bench/targets.ts";

// Its own folder, so a full `npm run bench` running at the same time keeps its bundles.
const workDir = join(ROOT, "bench/out", `smoke-${process.pid}`);

afterAll(async () => {
  await rm(workDir, { recursive: true, force: true });
});

describe("benchmark smoke run", () => {
  it("gets 200s from the gateway and the floor on every endpoint and renders the report", { timeout: 120_000 }, async () => {
    const report = await runBench({
      modes: ["miniflare"],
      concurrency: [2],
      turnsPerConnection: 3,
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
      for (const result of [row.floor, row.gateway]) {
        expect(result.ok).toBe(6);
        expect(result.statusCodes).toEqual({ 200: 6 });
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
    expect(markdown).toContain("| miniflare | POST /v1/query | 2 |");
  });
});
