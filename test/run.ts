// `npm test` after the type check: every vitest project, in three runs of vitest one after the
// other (the `worker` project, the `worker-chat` project, then all the others), each guarded
// against a stalled pool. `@cloudflare/vitest-plugin`'s pool can stop between two test files with
// every process idle and nothing printed again (cloudflare/workers-sdk#15498, open; seen here in
// the worker project). A run that prints nothing for STALL_SECONDS (180) is stopped, workerd
// included, and run once more; a second stall fails. A stall is never a pass, and failing tests
// fail either way. Splitting the projects bounds what a stall costs to one run of its group.
//
//   node test/run.ts             the groups; their JSON reports merged into .vitest-results.json
//   node test/run.ts ARGS...     one guarded `vitest run ARGS...` (a file, --project, -t ...)
import { spawn } from "node:child_process";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const VITEST = join(dirname(createRequire(import.meta.url).resolve("vitest/package.json")), "vitest.mjs");
const STALL_MS = Number(process.env.STALL_SECONDS ?? 180) * 1000;
/** What .ci/run reads: the merged report of every group. */
const REPORT = join(ROOT, ".vitest-results.json");
const GROUP_REPORTS = join(ROOT, ".vitest-results");

/** The projects that run on their own: the two with the most workerd test files. */
const OWN_RUNS = ["worker", "worker-chat"];

type Outcome = { code: number; stalled: boolean };

/** One `vitest run`, its output passed through; stopped with everything it started when it falls silent. */
function runVitest(args: string[]): Promise<Outcome> {
  return new Promise((resolve) => {
    // Its own process group, so that a stalled run is stopped with its workerd processes.
    const child = spawn(process.execPath, [VITEST, "run", ...args], { cwd: ROOT, stdio: ["ignore", "pipe", "pipe"], detached: true });
    let heard = Date.now();
    let stalled = false;
    child.stdout.on("data", (chunk: Buffer) => ((heard = Date.now()), process.stdout.write(chunk)));
    child.stderr.on("data", (chunk: Buffer) => ((heard = Date.now()), process.stderr.write(chunk)));
    const watch = setInterval(() => {
      if (Date.now() - heard < STALL_MS) return;
      stalled = true;
      clearInterval(watch);
      process.stderr.write(`\nvitest printed nothing for ${STALL_MS / 1000} s: stopped as stalled (cloudflare/workers-sdk#15498)\n`);
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // Already gone.
      }
    }, 5_000);
    child.on("close", (code) => {
      clearInterval(watch);
      resolve({ code: code ?? 1, stalled });
    });
  });
}

/** A guarded run, run once more if it stalled. */
async function guarded(args: string[]): Promise<number> {
  const first = await runVitest(args);
  if (!first.stalled) return first.code;
  process.stderr.write(`running once more: vitest run ${args.join(" ")}\n`);
  const second = await runVitest(args);
  return second.stalled ? 124 : second.code;
}

/** The project names vitest.config.ts defines. */
async function projectNames(): Promise<string[]> {
  const config = (await import(join(ROOT, "vitest.config.ts"))).default as { test: { projects: Array<{ test: { name: string } }> } };
  return config.test.projects.map((project) => project.test.name);
}

interface JsonReport {
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  numRuntimeErrorTestSuites?: number;
  testResults: unknown[];
}

/** The groups' reports as one; a group without a report (vitest did not get that far) fails the merge. */
async function mergeReports(files: string[]): Promise<boolean> {
  const merged: JsonReport = { numPassedTests: 0, numFailedTests: 0, numPendingTests: 0, numTodoTests: 0, numRuntimeErrorTestSuites: 0, testResults: [] };
  let complete = true;
  for (const file of files) {
    let report: JsonReport;
    try {
      report = JSON.parse(await readFile(file, "utf8")) as JsonReport;
    } catch {
      process.stderr.write(`no test report from ${file}\n`);
      complete = false;
      continue;
    }
    merged.numPassedTests += report.numPassedTests;
    merged.numFailedTests += report.numFailedTests;
    merged.numPendingTests += report.numPendingTests;
    merged.numTodoTests += report.numTodoTests;
    merged.numRuntimeErrorTestSuites! += report.numRuntimeErrorTestSuites ?? 0;
    merged.testResults.push(...report.testResults);
  }
  await writeFile(REPORT, JSON.stringify(merged));
  return complete;
}

async function main(): Promise<number> {
  const passed = process.argv.slice(2);
  if (passed.length > 0) return guarded(passed);

  const names = await projectNames();
  const others = names.filter((name) => !OWN_RUNS.includes(name));
  const groups = [...OWN_RUNS.filter((name) => names.includes(name)).map((name) => [name]), others];
  await rm(GROUP_REPORTS, { recursive: true, force: true });
  await mkdir(GROUP_REPORTS, { recursive: true });
  await rm(REPORT, { force: true });
  let status = 0;
  const reports: string[] = [];
  for (const [index, group] of groups.entries()) {
    const report = join(GROUP_REPORTS, `${index}.json`);
    reports.push(report);
    process.stdout.write(`\n=== vitest: ${group.join(", ")} ===\n`);
    const code = await guarded([...group.flatMap((name) => ["--project", name]), `--outputFile.json=${report}`]);
    if (code !== 0 && status === 0) status = code;
  }
  if (!(await mergeReports(reports)) && status === 0) status = 1;
  return status;
}

process.exitCode = await main();
