// `npm run bench [-- options]`: runs the benchmark and puts its figures on top of bench/RESULTS.md.
// Every option also reads an environment variable (flags win), so CI-style wrappers need no argv.
import { join } from "node:path";
import { parseArgs } from "node:util";
import { DEFAULT_OPTIONS, MODES, runBench, type BenchOptions, type Mode } from "./bench.ts";
import { stopAll } from "./processes.ts";
import { prependRun, renderRun } from "./report.ts";
import { ROOT } from "./targets.ts";

const HELP = `npm run bench -- [options]            (environment variable in brackets)
  --modes LIST               miniflare,miniflare-direct,miniflare-tmpfs,    [BENCH_MODES]
                             miniflare-direct-tmpfs,wrangler-dev
  --concurrency LIST         connections per load run, default 1,10,50      [BENCH_CONCURRENCY]
  --turns N                  requests per connection per load run, 100      [BENCH_TURNS]
  --rounds N                 floor/gateway rounds per load run, 4           [BENCH_ROUNDS]
  --max-seconds N            cap on one load run, 120                       [BENCH_MAX_SECONDS]
  --warmup N                 warm-up rounds per target, 20                  [BENCH_WARMUP]
  --ttft-samples N           streams per target and endpoint, 40            [BENCH_TTFT_SAMPLES]
  --startup-samples N        start-ups per target and runtime, 3            [BENCH_STARTUP_SAMPLES]
  --first-token-delay MS     backend delay before the first token, 0        [BENCH_FIRST_TOKEN_DELAY_MS]
  --token-delay MS           backend delay between tokens, 0                [BENCH_TOKEN_DELAY_MS]
  --history-turns N          length of the profile's history run, 300       [BENCH_HISTORY_TURNS]
  --no-profile               skip the profile phase                         [BENCH_PROFILE=0]
  --results FILE             where to write, bench/RESULTS.md               [BENCH_RESULTS]
  --no-write                 print the report, leave RESULTS.md alone`;

function fail(message: string): never {
  console.error(`bench: ${message}\n\n${HELP}`);
  process.exit(2);
}

function integer(name: string, value: string | undefined, fallback: number, min = 0): number {
  if (value === undefined || value === "") return fallback;
  const number = Number(value);
  if (!Number.isInteger(number) || number < min) fail(`${name} must be an integer >= ${min}, got "${value}"`);
  return number;
}

function list(name: string, value: string | undefined): string[] | undefined {
  return value === undefined || value === "" ? undefined : value.split(",").map((item) => item.trim()).filter(Boolean);
}

let parsed;
try {
  parsed = parseArgs({
    options: {
      modes: { type: "string" },
      concurrency: { type: "string" },
      turns: { type: "string" },
      rounds: { type: "string" },
      "max-seconds": { type: "string" },
      warmup: { type: "string" },
      "ttft-samples": { type: "string" },
      "startup-samples": { type: "string" },
      "first-token-delay": { type: "string" },
      "token-delay": { type: "string" },
      "history-turns": { type: "string" },
      "no-profile": { type: "boolean", default: false },
      results: { type: "string" },
      "no-write": { type: "boolean", default: false },
      help: { type: "boolean", default: false },
    },
  });
} catch (error) {
  fail(error instanceof Error ? error.message : String(error));
}
const { values } = parsed;
if (values.help) {
  console.log(HELP);
  process.exit(0);
}
const env = process.env;

const modes = (list("--modes", values.modes ?? env.BENCH_MODES) ?? DEFAULT_OPTIONS.modes).map((mode) => {
  if (!MODES.includes(mode as Mode)) fail(`unknown mode "${mode}"`);
  return mode as Mode;
});
const concurrency = (list("--concurrency", values.concurrency ?? env.BENCH_CONCURRENCY) ?? DEFAULT_OPTIONS.concurrency.map(String)).map((value) =>
  integer("--concurrency", String(value), 1, 1),
);
const options: Partial<BenchOptions> = {
  modes,
  concurrency,
  turnsPerConnection: integer("--turns", values.turns ?? env.BENCH_TURNS, DEFAULT_OPTIONS.turnsPerConnection, 1),
  rounds: integer("--rounds", values.rounds ?? env.BENCH_ROUNDS, DEFAULT_OPTIONS.rounds, 1),
  maxSecondsPerRun: integer("--max-seconds", values["max-seconds"] ?? env.BENCH_MAX_SECONDS, DEFAULT_OPTIONS.maxSecondsPerRun, 1),
  warmupRequests: integer("--warmup", values.warmup ?? env.BENCH_WARMUP, DEFAULT_OPTIONS.warmupRequests),
  ttftSamples: integer("--ttft-samples", values["ttft-samples"] ?? env.BENCH_TTFT_SAMPLES, DEFAULT_OPTIONS.ttftSamples, 1),
  startupSamples: integer("--startup-samples", values["startup-samples"] ?? env.BENCH_STARTUP_SAMPLES, DEFAULT_OPTIONS.startupSamples, 1),
  historyTurns: integer("--history-turns", values["history-turns"] ?? env.BENCH_HISTORY_TURNS, DEFAULT_OPTIONS.historyTurns, 2),
  profile: !(values["no-profile"] || env.BENCH_PROFILE === "0"),
  backend: {
    firstTokenDelayMs: integer("--first-token-delay", values["first-token-delay"] ?? env.BENCH_FIRST_TOKEN_DELAY_MS, DEFAULT_OPTIONS.backend.firstTokenDelayMs),
    tokenDelayMs: integer("--token-delay", values["token-delay"] ?? env.BENCH_TOKEN_DELAY_MS, DEFAULT_OPTIONS.backend.tokenDelayMs),
  },
};
const resultsFile = join(ROOT, values.results ?? env.BENCH_RESULTS ?? "bench/RESULTS.md");

// Ctrl-C or a kill: stop every process and Miniflare we started before leaving.
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.once(signal, () => {
    console.error(`\nbench: ${signal}, stopping everything it started…`);
    void stopAll().finally(() => process.exit(128 + (signal === "SIGINT" ? 2 : signal === "SIGTERM" ? 15 : 1)));
  });
}

const benchEnv = Object.entries(env)
  .filter(([name]) => name.startsWith("BENCH_"))
  .map(([name, value]) => `${name}=${value} `)
  .join("");
const args = process.argv.slice(2);
const command = `${benchEnv}npm run bench${args.length ? ` -- ${args.join(" ")}` : ""}`;

try {
  const report = await runBench(options);
  const section = renderRun(report, command);
  if (values["no-write"]) {
    console.log(`\n${section}`);
  } else {
    await prependRun(resultsFile, section);
    console.log(`\nbench: results written to ${resultsFile}`);
  }
  if (report.problems.length) {
    console.error(`bench: ${report.problems.length} problem(s):\n  ${report.problems.join("\n  ")}`);
    process.exitCode = 1;
  }
} catch (error) {
  console.error("bench failed:", error);
  process.exitCode = 1;
}
