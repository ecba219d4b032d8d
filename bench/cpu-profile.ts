// V8 CPU profiles of a Worker inside workerd, through the inspector Miniflare opens with
// `inspectorPort` (the Chrome DevTools protocol's Profiler domain, as DevTools uses it for Workers).
// Samples are attributed to the module of the nearest stack frame inside the Worker's bundle, read
// from esbuild's `// path/to/module.js` comments, so time in native code (JSON.parse, fetch, SQL)
// counts for the Worker code that called it.
import { readFile } from "node:fs/promises";

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  /** Microseconds since the previous sample. */
  timeDeltas: number[];
}

export interface ProfileShare {
  name: string;
  /** Milliseconds of samples per request. */
  msPerRequest: number;
  /** Share of the samples that had a frame of the bundle on the stack. */
  share: number;
}

export interface CpuProfileSummary {
  /** Isolate the profile is of, e.g. "core:user:parley". */
  isolate: string;
  requests: number;
  /** Sampled milliseconds per request with bundle code on the stack. */
  bundleMsPerRequest: number;
  /** Sampled milliseconds per request with none, by V8's label ((program), (garbage collector), …). */
  outside: ProfileShare[];
  modules: ProfileShare[];
  functions: ProfileShare[];
}

interface Session {
  send<T>(method: string, params?: Record<string, unknown>): Promise<T>;
  close(): void;
}

async function connect(inspectorPort: number, isolate: string): Promise<Session> {
  const socket = new WebSocket(`ws://127.0.0.1:${inspectorPort}/${isolate}`);
  // addEventListener rather than onopen/onmessage: the smoke test type-checks this file with the
  // Workers types too, whose WebSocket has only the former.
  await new Promise<void>((resolve, reject) => {
    socket.addEventListener("open", () => resolve());
    socket.addEventListener("error", () => reject(new Error(`cannot open the inspector of ${isolate} on port ${inspectorPort}`)));
  });
  let next = 0;
  const pending = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number; result?: unknown; error?: { message: string } };
    const waiting = message.id === undefined ? undefined : pending.get(message.id);
    if (!waiting || message.id === undefined) return;
    pending.delete(message.id);
    if (message.error) waiting.reject(new Error(message.error.message));
    else waiting.resolve(message.result);
  });
  return {
    send: <T>(method: string, params: Record<string, unknown> = {}) =>
      new Promise<T>((resolve, reject) => {
        const id = ++next;
        pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
        socket.send(JSON.stringify({ id, method, params }));
      }),
    close: () => socket.close(),
  };
}

/** Profiles `isolate` while `work` runs. */
export async function profileWhile<T>(inspectorPort: number, isolate: string, work: () => Promise<T>): Promise<{ result: T; profile: CpuProfile }> {
  const session = await connect(inspectorPort, isolate);
  try {
    await session.send("Profiler.enable");
    await session.send("Profiler.setSamplingInterval", { interval: 250 });
    await session.send("Profiler.start");
    const result = await work();
    const { profile } = await session.send<{ profile: CpuProfile }>("Profiler.stop");
    return { result, profile };
  } finally {
    session.close();
  }
}

/** Line (0-based) → module path, from esbuild's module comments in a non-minified bundle. */
async function moduleIndex(bundleFile: string): Promise<(line: number) => string> {
  const lines = (await readFile(bundleFile, "utf8")).split("\n");
  const starts: Array<{ line: number; module: string }> = [];
  lines.forEach((text, line) => {
    const match = /^\/\/ ((?:node_modules|worker|durable-objects|bench|\.\.)\/\S+\.[cm]?[jt]s)$/.exec(text);
    if (match) starts.push({ line, module: match[1]! });
  });
  return (line) => {
    let low = 0;
    let high = starts.length - 1;
    let found = "(bundle prelude)";
    while (low <= high) {
      const middle = (low + high) >> 1;
      if (starts[middle]!.line <= line) {
        found = starts[middle]!.module;
        low = middle + 1;
      } else {
        high = middle - 1;
      }
    }
    return found;
  };
}

/** node_modules/openai/internal/x.js → openai; worker/turn/engine.ts stays a file. */
function moduleGroup(module: string): string {
  const match = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(module);
  return match ? match[1]! : module;
}

export async function summarizeProfile(profile: CpuProfile, isolate: string, bundleFile: string, requests: number): Promise<CpuProfileSummary> {
  const moduleAt = await moduleIndex(bundleFile);
  const bundleName = bundleFile.split("/").pop()!;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);

  // Self time per node: each sample's time is the delta to the next sample.
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, index) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[index + 1] ?? 0)));

  const outside = new Map<string, number>();
  const modules = new Map<string, number>();
  const functions = new Map<string, number>();
  let bundleUs = 0;
  for (const [id, us] of selfUs) {
    let current: number | undefined = id;
    let frame: CallFrame | null = null;
    while (current !== undefined) {
      const candidate: CallFrame = byId.get(current)!.callFrame;
      if (candidate.url.endsWith(bundleName)) {
        frame = candidate;
        break;
      }
      current = parentOf.get(current);
    }
    if (!frame) {
      const label = byId.get(id)!.callFrame.functionName || "(anonymous native)";
      outside.set(label, (outside.get(label) ?? 0) + us);
      continue;
    }
    bundleUs += us;
    const module = moduleAt(frame.lineNumber);
    modules.set(moduleGroup(module), (modules.get(moduleGroup(module)) ?? 0) + us);
    const name = `${frame.functionName || "(anonymous)"} (${module})`;
    functions.set(name, (functions.get(name) ?? 0) + us);
  }
  const shares = (map: Map<string, number>, limit: number): ProfileShare[] =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, limit)
      .map(([name, us]) => ({ name, msPerRequest: us / 1000 / requests, share: bundleUs ? us / bundleUs : 0 }));
  return {
    isolate,
    requests,
    bundleMsPerRequest: bundleUs / 1000 / requests,
    outside: shares(outside, 6),
    modules: shares(modules, 14),
    functions: shares(functions, 15),
  };
}
