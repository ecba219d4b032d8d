import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    // The JSON report is what .ci/run reads to print its closing "N passed, N failed" line.
    reporters: ["default", ["json", { outputFile: ".vitest-results.json" }]],
    projects: [
      {
        test: {
          name: "unit",
          include: ["test/unit/**/*.test.ts"],
          environment: "node",
        },
      },
      {
        plugins: [
          cloudflareTest(async ({ inject }) => ({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              bindings: {
                TEST_MIGRATIONS: await readD1Migrations("./migrations/d1"),
                PARLEY_BACKEND_URL: inject("backendUrl"),
              },
            },
          })),
        ],
        test: {
          name: "worker",
          include: ["test/worker/**/*.test.ts"],
          globalSetup: ["./test/global-setup.ts"],
          setupFiles: ["./test/worker/setup.ts"],
        },
      },
    ],
  },
});
