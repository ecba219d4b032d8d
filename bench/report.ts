// Markdown for bench/RESULTS.md: one section per run, newest first under a fixed header. Notes
// written by hand inside an older run's section stay with that run.
import { readFile, writeFile } from "node:fs/promises";
import type { BenchReport, LoadRow, TtftRow } from "./bench.ts";
import { median } from "./load.ts";
import type { ProfileReport, TurnBreakdown } from "./profile.ts";

export const RESULTS_HEADER = `# Benchmark results

\`npm run bench\` measures Parley against a floor Worker (\`bench/floor-worker.ts\`: one backend call,
answer passed through) on the same runtime, backend and machine, side by side in one run, under
Miniflare driven directly and under \`wrangler dev\`. Options: \`npm run bench -- --help\`. Each run
says what it measured; compare figures within a run, not across runs or machines (the machine is
shared and noisy).

<!-- runs: newest first; npm run bench inserts each new run below this line -->
`;
const MARKER = "<!-- runs: newest first; npm run bench inserts each new run below this line -->";

export async function prependRun(file: string, section: string): Promise<void> {
  let existing = "";
  try {
    existing = await readFile(file, "utf8");
  } catch {
    existing = RESULTS_HEADER;
  }
  if (!existing.includes(MARKER)) existing = `${RESULTS_HEADER}\n${existing}`;
  const [head, ...rest] = existing.split(MARKER);
  await writeFile(file, `${head}${MARKER}\n\n${section.trim()}\n\n${rest.join(MARKER).trimStart()}`.trimEnd() + "\n");
}

const ms = (value: number) => (Number.isFinite(value) ? value.toFixed(2) : "–");
const signed = (value: number) => (Number.isFinite(value) ? `${value >= 0 ? "+" : ""}${value.toFixed(2)}` : "–");
const rate = (value: number) => (Number.isFinite(value) ? value.toFixed(0) : "–");
const ratio = (value: number) => (Number.isFinite(value) ? value.toFixed(2) : "–");
const share = (value: number) => (Number.isFinite(value) ? `${(value * 100).toFixed(0)} %` : "–");
const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

export function renderRun(report: BenchReport, command: string): string {
  const { options, machine } = report;
  const lines: string[] = [];
  lines.push(`## ${report.startedAt.toISOString().replace(/\.\d+Z$/, "Z")}`);
  lines.push("");
  lines.push(`- Command: \`${command}\``);
  lines.push(
    `- Machine: ${machine.cores} cores (${machine.cpu}), ${machine.memoryGiB.toFixed(1)} GiB memory, Node ${machine.node}, ${machine.os}; ` +
      `load average ${machine.loadAtStart.map((value) => value.toFixed(2)).join(" ")} at the start, ${machine.loadAtEnd.map((value) => value.toFixed(2)).join(" ")} at the end`,
  );
  lines.push(
    `- Backend: scripted (test/fakes/scripted-backend.ts) in its own process, first token after ${options.backend.firstTokenDelayMs} ms, ` +
      `${options.backend.tokenDelayMs} ms between tokens. Load: autocannon, 127.0.0.1, ${options.turnsPerConnection} requests per connection, ` +
      `${options.warmupRequests} warm-up rounds per target; TTFT: ${options.ttftSamples} sequential samples per target. Wall time ${report.seconds.toFixed(0)} s.`,
  );
  lines.push(
    "- Floor (`bench/floor-worker.ts`): `/v1/query` → one JSON backend call, `/v1/streaming_query` → one streamed backend call, " +
      "`/v1/responses` → the body forwarded as is; the answer is passed through unparsed. Gateway: the bundled configuration " +
      "(noop auth, D1, no quotas, no shields) against the same backend.",
  );
  if (options.modes.some((mode) => mode.startsWith("miniflare"))) {
    lines.push(
      "- Runtimes: `miniflare` keeps the gateway's state (its Durable Objects', D1's and R2's SQLite files) on disk, as Miniflare does by " +
        "default, where every commit is written through with fsync; `miniflare-tmpfs` keeps the same files on tmpfs (/dev/shm): SQLite's " +
        "work without this machine's disk. On Cloudflare a commit is confirmed by replication, which costs latency but not the object's thread. " +
        "`miniflare-direct` keeps the state on disk and lets requests reach the gateway as Cloudflare does with `run_worker_first = true`: " +
        "the Worker first, its assets binding (`CONFIG_FILES`) a service binding to a Worker serving only the files; in `miniflare` and " +
        "`miniflare-tmpfs`, Miniflare's emulation of `[assets]` runs its router and RPC-proxy Workers in front of every request on the same " +
        "thread. `miniflare-direct-tmpfs` is routed directly with its state on tmpfs: neither local cost that the platform does not have.",
    );
  }
  if (options.backend.tokenDelayMs > 0) {
    lines.push(
      `- With a token delay the scripted backend's JSON answer waits one token delay (${options.backend.tokenDelayMs} ms) longer than its ` +
        "stream ends (first + n × delay against first + (n − 1) × delay): the floor's JSON figures carry that much extra.",
    );
  }
  if (report.problems.length) {
    lines.push(`- **Problems** (${report.problems.length}): ${report.problems.slice(0, 10).join("; ")}`);
  } else {
    lines.push("- Every request to every target answered 200.");
  }
  lines.push("");

  lines.push("### Throughput and latency");
  lines.push("");
  lines.push(
    "`/v1/query` continues a conversation on every request, one conversation per connection (turns of one conversation are serialized by design, " +
      `so concurrency N uses N conversations, each growing by ${options.turnsPerConnection} turns during the run). \`/v1/responses\` is a plain ` +
      "OpenAI-client request (no conversation): Parley starts a new conversation for each, with its topic-summary call. Latency in ms; " +
      `added = gateway − floor; ratio = gateway req/s ÷ floor req/s, the median over ${options.rounds} rounds in which floor and gateway alternate ` +
      "(req/s, latency and CPU are over every round's answers). CPU = CPU time per answer of the target's processes " +
      "(Miniflare: its workerd, which also runs D1, the Durable Objects and Miniflare's entry Worker; wrangler dev: npm, wrangler and workerd) " +
      "and of the backend, floor / gateway, from /proc. Busiest thread = the share of one core the busiest thread of the target's process used " +
      "during the run (Miniflare only): workerd runs every isolate and its I/O on one thread, so a gateway whose thread is near 100 % answers " +
      "at most 1 ÷ its CPU per answer, whatever the floor does.",
  );
  lines.push("");
  lines.push("| Runtime | Endpoint | Conc. | Floor req/s | Gateway req/s | Ratio | Floor p50 | Gateway p50 | Added p50 | Floor p99 | Gateway p99 | Added p99 | Target CPU ms | Busiest thread | Backend CPU ms | Requests |");
  lines.push("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
  for (const row of report.load) lines.push(loadLine(row));
  lines.push("");

  lines.push("### Time to first token");
  lines.push("");
  lines.push(
    "Own fetch client, one request at a time, floor and gateway alternating; TTFT = request sent → first token event read " +
      "(the first `data: {\"event\":\"token\"…` with text from Parley's streaming_query, not the empty one that announces the answer's text part; `event: response.output_text.delta` from the Responses API). " +
      "`/v1/streaming_query` continues one conversation; streamed `/v1/responses` starts a new one each time. Milliseconds.",
  );
  lines.push("");
  lines.push("| Runtime | Endpoint | Floor p50 | Gateway p50 | Added p50 | Floor p99 | Gateway p99 | Added p99 | Stream end p50 (floor / gateway) | Samples |");
  lines.push("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|");
  for (const row of report.ttft) lines.push(ttftLine(row));
  lines.push("");

  lines.push("### Targets (persisted `/v1/query` turn, Miniflare)");
  lines.push("");
  lines.push(...targetLines(report));
  lines.push("");

  lines.push("### Start-up");
  lines.push("");
  lines.push("| Runtime | Worker | Samples (ms) | Median (ms) | What was timed |");
  lines.push("|---|---|--:|--:|---|");
  for (const row of report.startup) {
    lines.push(`| ${row.mode} | ${row.target} | ${row.samplesMs.map((value) => value.toFixed(0)).join(", ")} | ${median(row.samplesMs).toFixed(0)} | ${row.how} |`);
  }
  lines.push("");

  lines.push("### Bundle");
  lines.push("");
  lines.push("| Worker | Bundle | gzip -9 of the bundle | wrangler deploy --dry-run reports |");
  lines.push("|---|--:|--:|---|");
  for (const [name, bundle] of Object.entries(report.bundles)) {
    lines.push(`| ${name} | ${kib(bundle.bytes)} | ${kib(bundle.gzipBytes)} | ${bundle.wranglerSize} |`);
  }
  lines.push("");

  if (report.profile) lines.push(...profileLines(report.profile));
  return lines.join("\n");
}

/** The gateway's share of the floor's req/s: the median over the rounds, each measured side by side. */
function loadRatio(row: LoadRow): number {
  return median(row.roundRatios);
}

function loadLine(row: LoadRow): string {
  const { floor, gateway } = row;
  const requests = `${floor.ok}/${gateway.ok}${floor.capped || gateway.capped ? " (capped)" : ""}`;
  return (
    `| ${row.mode} | ${row.endpoint} | ${row.connections} | ${rate(floor.rps)} | ${rate(gateway.rps)} | ${ratio(loadRatio(row))} | ` +
    `${ms(floor.p50)} | ${ms(gateway.p50)} | ${signed(gateway.p50 - floor.p50)} | ${ms(floor.p99)} | ${ms(gateway.p99)} | ${signed(gateway.p99 - floor.p99)} | ` +
    `${ms(floor.targetCpuMs)} / ${ms(gateway.targetCpuMs)} | ${share(floor.busiestThread)} / ${share(gateway.busiestThread)} | ${ms(floor.backendCpuMs)} / ${ms(gateway.backendCpuMs)} | ${requests} |`
  );
}

function ttftLine(row: TtftRow): string {
  const { floor, gateway } = row;
  return `| ${row.mode} | ${row.endpoint} | ${ms(floor.ttftP50)} | ${ms(gateway.ttftP50)} | ${signed(gateway.ttftP50 - floor.ttftP50)} | ${ms(floor.ttftP99)} | ${ms(gateway.ttftP99)} | ${signed(gateway.ttftP99 - floor.ttftP99)} | ${ms(floor.totalP50)} / ${ms(gateway.totalP50)} | ${gateway.ok}/${gateway.samples} |`;
}

/** Where the targets are read: each Miniflare runtime (see Mode). */
const TARGET_MODES = [
  { mode: "miniflare", label: "state on disk" },
  { mode: "miniflare-direct", label: "state on disk, routed as on Cloudflare" },
  { mode: "miniflare-tmpfs", label: "state on tmpfs" },
  { mode: "miniflare-direct-tmpfs", label: "state on tmpfs, routed as on Cloudflare" },
] as const;

function targetLines(report: BenchReport): string[] {
  // The targets of the rebuilt turn (issue "The turn, rebuilt"): 0.35 of the floor is the bar, 0.5 the aim.
  const lines = ["| Target | Miniflare | Measured | Met |", "|---|---|--:|---|"];
  for (const { mode, label } of TARGET_MODES) {
    const busy = report.load.find((row) => row.mode === mode && row.endpoint === "POST /v1/query" && row.connections === 10);
    const single = report.load.find((row) => row.mode === mode && row.endpoint === "POST /v1/query" && row.connections === 1);
    if (busy) {
      const share = loadRatio(busy);
      lines.push(`| throughput at concurrency 10 ≥ 0.35 × the floor's (aim 0.5) | ${label} | ${ratio(share)} × | ${share >= 0.35 ? "yes" : "no"} |`);
    }
    if (single) {
      const added = single.gateway.p50 - single.floor.p50;
      lines.push(`| added p50 latency over the floor at concurrency 1 ≤ 2 ms | ${label} | ${signed(added)} ms | ${added <= 2 ? "yes" : "no"} |`);
    }
    for (const row of report.ttft.filter((candidate) => candidate.mode === mode)) {
      const added = row.gateway.ttftP50 - row.floor.ttftP50;
      lines.push(`| TTFT p50 within 1.5 ms of the floor's, ${row.endpoint} | ${label} | ${signed(added)} ms | ${added <= 1.5 ? "yes" : "no"} |`);
    }
    if (busy) {
      lines.push(
        `| CPU per answer at concurrency 10 (reported) | ${label} | ${ms(busy.gateway.targetCpuMs)} ms (floor ${ms(busy.floor.targetCpuMs)} ms); ` +
          `busiest workerd thread ${share(busy.gateway.busiestThread)} of a core (floor ${share(busy.floor.busiestThread)}) | - |`,
      );
    }
  }
  return lines.length > 2 ? lines : ["Not measured in this run (needs Miniflare at concurrency 1 or 10)."];
}

function profileLines(profile: ProfileReport): string[] {
  const lines: string[] = [];
  const { load } = profile;
  lines.push("### Profile of a persisted `/v1/query` turn (Miniflare)");
  lines.push("");
  lines.push(
    `Profiling build (\`bench/profile-worker.js\`: the real Worker plus timing spans around every D1 statement, Durable Object RPC and ` +
      `backend fetch, and inside ConversationDO) at concurrency ${profile.connections}, ${profile.turnsPerConnection} turns per conversation, ` +
      `beside the plain gateway and the floor: floor ${rate(load.floor.rps)} req/s (p50 ${ms(load.floor.p50)} ms), gateway ${rate(load.gateway.rps)} req/s ` +
      `(p50 ${ms(load.gateway.p50)} ms), profiled ${rate(load.profiled.rps)} req/s (p50 ${ms(load.profiled.p50)} ms); workerd CPU per answer ` +
      `${ms(load.floor.targetCpuMs)} / ${ms(load.gateway.targetCpuMs)} / ${ms(load.profiled.targetCpuMs)} ms. At concurrency 10 the spans also hold ` +
      "the time a request waited for the one workerd thread while others ran, so compare their shares, not their sum with latency. " +
      "workerd's clock ticks in whole milliseconds: read the means.",
  );
  lines.push("");
  lines.push(...breakdownLines(profile.turn));
  lines.push("");
  lines.push(
    `**History growth**: one conversation, one turn at a time, ${profile.history.turns} turns (profiled build; floor requests interleaved). ` +
      "Client-side p50 and the profiled means per turn, ms:",
  );
  lines.push("");
  lines.push("| Turns | Gateway p50 | Floor p50 | Turn mean | DO runTurn (backend call inside) | Worker-only | turns() in DO | insertTurn() in DO |");
  lines.push("|---|--:|--:|--:|--:|--:|--:|--:|");
  for (const bucket of profile.history.buckets) {
    const b = bucket.breakdown;
    const span = (name: string) => ms(b.spans.find((row) => row.name === name)?.meanMs ?? NaN);
    const inside = (name: string) => ms(b.inside.find((row) => row.name === name)?.meanMs ?? NaN);
    lines.push(
      `| ${bucket.fromTurn}–${bucket.toTurn} | ${ms(bucket.gatewayP50)} | ${ms(bucket.floorP50)} | ${ms(b.meanTotal)} | ${span("do conversation.runTurn")} | ` +
        `${ms(b.meanWorkerOnly)} | ${inside("ConversationDO.turns()")} | ${inside("ConversationDO.insertTurn()")} |`,
    );
  }
  if (profile.variants.length) {
    const base = profile.variants[0]!;
    lines.push("");
    lines.push(
      `**Floor variants** (\`bench/variants-worker.js\`, Miniflare, concurrency ${profile.connections}, one conversation and Durable Object per connection): ` +
        "the floor plus one of Parley's steps each, with the variants' state on disk and then on tmpfs. CPU = workerd CPU per answer; extra = over " +
        "the baseline; × = req/s as a share of the baseline's in the same placement.",
    );
    lines.push("");
    lines.push("| Variant | What it adds | req/s | × | p50 ms | workerd CPU ms | Extra CPU ms | Backend CPU ms | tmpfs req/s | tmpfs × | tmpfs CPU ms |");
    lines.push("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (const row of profile.variants) {
      const { result, tmpfs } = row;
      lines.push(
        `| ${row.name} | ${row.what} | ${rate(result.rps)} | ${ratio(result.rps / base.result.rps)} | ${ms(result.p50)} | ${ms(result.targetCpuMs)} | ` +
          `${signed(result.targetCpuMs - base.result.targetCpuMs)} | ${ms(result.backendCpuMs)} | ${rate(tmpfs.rps)} | ${ratio(tmpfs.rps / base.tmpfs.rps)} | ${ms(tmpfs.targetCpuMs)} |`,
      );
    }
  }
  if (profile.cpuProfile) {
    const { summary, load } = profile.cpuProfile;
    lines.push("");
    lines.push(
      `**V8 CPU profile** of the gateway's isolate (\`${summary.isolate}\`: the Worker and its Durable Objects; D1 runs in another isolate) through ` +
        `workerd's inspector, ${summary.requests} turns at concurrency ${profile.connections} (${rate(load.rps)} req/s while profiling, workerd ` +
        `${ms(load.targetCpuMs)} ms CPU per answer). ${ms(summary.bundleMsPerRequest)} ms per turn was sampled with the Worker's code on the stack; ` +
        "each sample counts for the bundle module of the nearest such frame, so native work (JSON.parse, SQL, fetch) counts for its caller. " +
        `Outside the bundle: ${summary.outside.map((row) => `${row.name} ${ms(row.msPerRequest)}`).join(", ")} ms per turn.`,
    );
    lines.push("");
    lines.push("| Module | ms per turn | Share |");
    lines.push("|---|--:|--:|");
    for (const row of summary.modules) lines.push(`| ${row.name} | ${ms(row.msPerRequest)} | ${(row.share * 100).toFixed(1)} % |`);
    lines.push("");
    lines.push("| Function (module) | ms per turn | Share |");
    lines.push("|---|--:|--:|");
    for (const row of summary.functions) lines.push(`| ${row.name} | ${ms(row.msPerRequest)} | ${(row.share * 100).toFixed(1)} % |`);
  }
  return lines;
}

function breakdownLines(turn: TurnBreakdown): string[] {
  const lines: string[] = [];
  lines.push(
    `${turn.requests} turns: mean ${ms(turn.meanTotal)} ms (p50 ${ms(turn.p50Total)}, p99 ${ms(turn.p99Total)}) inside the Worker, of which ` +
      `${ms(turn.meanIo)} ms with I/O outstanding and ${ms(turn.meanWorkerOnly)} ms with none (the Worker's own JavaScript, and waiting for a CPU); ` +
      `backend request body ${turn.meanBackendRequestKiB.toFixed(1)} KiB on average.`,
  );
  lines.push("");
  lines.push("| Step (in order) | Per turn | Mean start | Mean ms | p50 ms | Worker-only time before it |");
  lines.push("|---|--:|--:|--:|--:|--:|");
  for (const row of turn.spans) {
    lines.push(`| ${row.name} | ${row.perRequest.toFixed(2)} | ${ms(row.meanStart)} | ${ms(row.meanMs)} | ${ms(row.p50Ms)} | ${ms(row.meanWorkerBefore)} |`);
  }
  lines.push(`| (last I/O → answer) | | | ${ms(turn.meanAfterLastIo)} | | |`);
  lines.push("");
  lines.push("| Inside ConversationDO | Per turn | Mean ms | Max ms |");
  lines.push("|---|--:|--:|--:|");
  for (const row of turn.inside) lines.push(`| ${row.name} | ${row.perTurn.toFixed(2)} | ${ms(row.meanMs)} | ${ms(row.maxMs)} |`);
  return lines;
}
