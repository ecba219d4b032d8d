import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

/** The tests of turns: every endpoint that calls a model, run in both wire modes. */
const TURN_SUITE = [
  "a2a",
  "compaction",
  "conversations",
  "infer",
  "mcp-turns",
  "query",
  "quota",
  "rag-turns",
  "responses",
  "shields",
  "turn-faults",
  "turn-records",
  "wire-fidelity",
].map((name) => `test/worker/${name}.test.ts`);

/** The reliability tests of turns, run in both wire modes like TURN_SUITE. */
const RELIABILITY_TURN_SUITE = ["backend-faults", "concurrency", "mcp-faults"].map((name) => `test/reliability/worker/${name}.test.ts`);

/**
 * The Worker tests inside workerd. `wireMode` is the wire the default backend is spoken to in
 * (test/worker/helpers.ts testConfig makes the scripted backend a Chat Completions provider for "chat").
 */
function workerProject(name: string, wireMode: "responses" | "chat", include: string[]) {
  return {
    plugins: [
      cloudflareTest(async ({ inject }) => ({
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          bindings: {
            TEST_MIGRATIONS: await readD1Migrations("./migrations/d1"),
            PARLEY_BACKEND_URL: inject("backendUrl"),
            // A credential the deployment holds (a Worker secret), for MCP servers that name it as ${env.MCP_TURN_CREDENTIAL}.
            MCP_TURN_CREDENTIAL: `Bearer ${inject("mcp").token}`,
            // Every test waits for what its requests left running; a short flush delay keeps that short.
            METRICS_FLUSH_DELAY_MS: "20",
          },
        },
      })),
    ],
    test: {
      name,
      include,
      globalSetup: ["./test/global-setup.ts"],
      setupFiles: ["./test/worker/setup.ts"],
      provide: { wireMode },
    },
  };
}

export default defineConfig({
  test: {
    // The JSON report is what .ci/run reads to print its closing "N passed, N failed" line.
    // (test/run.ts gives each of its vitest runs its own file with --outputFile.json.)
    reporters: ["default", "json"],
    outputFile: { json: ".vitest-results.json" },
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          environment: "node",
        },
      },
      {
        // The real bundle under Miniflare, reached over HTTP: what only shows between requests.
        test: {
          name: "system",
          include: ["test/system/**/*.test.ts"],
          environment: "node",
        },
      },
      workerProject("worker", "responses", ["test/worker/**/*.test.ts"]),
      // The turn suite again against a backend that speaks only Chat Completions (README "Providers").
      workerProject("worker-chat", "chat", TURN_SUITE),
      // The reliability suite (RELIABILITY.md), in its short form unless RELIABILITY=full.
      workerProject("reliability", "responses", ["test/reliability/worker/**/*.test.ts"]),
      workerProject("reliability-chat", "chat", RELIABILITY_TURN_SUITE),
      {
        test: {
          name: "reliability-system",
          include: ["test/reliability/system/**/*.test.ts"],
          environment: "node",
        },
      },
    ],
  },
});
