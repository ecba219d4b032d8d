// Child processes and ports for the benchmark. Every process started here is a process-group
// leader, so stopping it also stops what it started (npm -> sh -> wrangler -> workerd); nothing is
// ever stopped by name. `stopAll` is what the CLI's signal handlers and runBench's finally call.
import { spawn, type ChildProcess } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

export interface Child {
  name: string;
  pid: number;
  /** The last lines the process wrote, for error messages. */
  output(): string;
  /** Resolves with the exit code (null when killed by a signal). */
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

const running = new Set<{ stop(): Promise<void> }>();

/** Registers something to stop at the end (Miniflare instances, servers). */
export function track<T extends { stop(): Promise<void> }>(resource: T): T {
  running.add(resource);
  return resource;
}

export function untrack(resource: { stop(): Promise<void> }): void {
  running.delete(resource);
}

/** Stops everything started and still running, newest first. */
export async function stopAll(): Promise<void> {
  const resources = [...running].reverse();
  running.clear();
  await Promise.allSettled(resources.map((resource) => resource.stop()));
}

export function startChild(name: string, command: string, args: string[], options: { cwd: string; env?: NodeJS.ProcessEnv }): Child {
  const child: ChildProcess = spawn(command, args, {
    cwd: options.cwd,
    env: options.env ?? process.env,
    // Own process group: a signal to -pid reaches every descendant, and a Ctrl-C in the terminal
    // reaches only us, so shutdown happens in one place in a known order.
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
    if (lines.length > 200) lines.splice(0, lines.length - 200);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<number | null>((resolve) => {
    child.once("exit", (code) => resolve(code));
    child.once("error", (error) => {
      lines.push(String(error));
      resolve(-1);
    });
  });
  let done = false;
  void exited.then(() => (done = true));
  if (child.pid === undefined) throw new Error(`${name}: could not start ${command}`);
  const pid = child.pid;

  const handle: Child = {
    name,
    pid,
    output: () => lines.join("\n"),
    exited,
    stop: async () => {
      untrack(handle);
      if (done) {
        // The leader is gone; anything it left in its group (a workerd) goes too.
        signalGroup(pid, "SIGKILL");
        return;
      }
      signalGroup(pid, "SIGTERM");
      const stopped = await Promise.race([exited.then(() => true), sleep(5000).then(() => false)]);
      if (!stopped) {
        signalGroup(pid, "SIGKILL");
        await exited;
      }
      // workerd children may outlive their parent by a moment; make sure the group is gone.
      signalGroup(pid, "SIGKILL");
    },
  };
  return track(handle);
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // Already gone.
  }
}

/** Waits for `line` in the child's output; fails early if the child exits. */
export async function waitForOutput(child: Child, pattern: RegExp, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let exited = false;
  void child.exited.then(() => (exited = true));
  while (!pattern.test(child.output())) {
    if (exited) throw new Error(`${child.name} exited before it was ready:\n${child.output()}`);
    if (performance.now() > deadline) throw new Error(`${child.name} was not ready after ${timeoutMs} ms:\n${child.output()}`);
    await sleep(20);
  }
}

/** Polls `url` until it answers 200; returns the time of that answer (performance.now()). */
export async function waitForOk(url: string, timeoutMs: number, child?: Child): Promise<number> {
  const deadline = performance.now() + timeoutMs;
  let exited = false;
  void child?.exited.then(() => (exited = true));
  for (;;) {
    try {
      const response = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await response.arrayBuffer();
      if (response.status === 200) return performance.now();
    } catch {
      // Not listening yet.
    }
    if (exited) throw new Error(`${child?.name} exited before answering ${url}:\n${child?.output()}`);
    if (performance.now() > deadline) throw new Error(`${url} did not answer 200 within ${timeoutMs} ms${child ? `:\n${child.output()}` : ""}`);
    await sleep(10);
  }
}

// ---------------------------------------------------------------------------------------------
// CPU accounting from /proc (Linux): what a target's processes spent per request is the most
// direct evidence of where a single workerd thread's capacity goes. Elsewhere the figures are NaN.

/** USER_HZ: the unit of utime/stime in /proc/PID/stat; 100 on every Linux we target. */
const CLOCK_TICKS_PER_SECOND = 100;

interface ProcStat {
  pid: number;
  comm: string;
  ppid: number;
  pgrp: number;
  cpuMs: number;
}

function readStat(pid: number, file = `/proc/${pid}/stat`): ProcStat | null {
  try {
    const text = readFileSync(file, "utf8");
    const close = text.lastIndexOf(")");
    const fields = text.slice(close + 2).split(" ");
    return {
      pid,
      comm: text.slice(text.indexOf("(") + 1, close),
      ppid: Number(fields[1]),
      pgrp: Number(fields[2]),
      cpuMs: ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS_PER_SECOND,
    };
  } catch {
    return null;
  }
}

function allStats(): ProcStat[] {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    return [];
  }
  return entries.filter((name) => /^\d+$/.test(name)).flatMap((name) => readStat(Number(name)) ?? []);
}

/** Our own child processes with this command name (e.g. the workerd a Miniflare just started). */
export function childPids(comm: string): number[] {
  return allStats()
    .filter((stat) => stat.ppid === process.pid && stat.comm === comm)
    .map((stat) => stat.pid);
}

/** CPU time (ms) used so far by one process. */
export function processCpuMs(pid: number): number {
  return readStat(pid)?.cpuMs ?? NaN;
}

/**
 * CPU time (ms) used so far by each thread of one process, by thread id. workerd runs every
 * isolate (the Worker, its Durable Objects, D1, Miniflare's entry Worker) and its I/O on one
 * thread, so that thread's share of a core bounds what the process can answer.
 */
export function threadCpuMs(pid: number): Map<number, number> {
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return new Map();
  }
  return new Map(tids.flatMap((tid) => {
    const stat = readStat(Number(tid), `/proc/${pid}/task/${tid}/stat`);
    return stat ? [[stat.pid, stat.cpuMs] as const] : [];
  }));
}

/** CPU time (ms) used so far by the live members of a process group (npm -> wrangler -> workerd). */
export function groupCpuMs(pgid: number): number {
  const members = allStats().filter((stat) => stat.pgrp === pgid);
  return members.length ? members.reduce((sum, stat) => sum + stat.cpuMs, 0) : NaN;
}
