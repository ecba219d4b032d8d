/**
 * The size of the Worker as `wrangler deploy` uploads it, and what weighs most in it:
 *   npm run bundle-size [-- --top 20] [-- --config wrangler.toml]
 * Bundles with `wrangler deploy --dry-run --outdir` twice, as configured (wrangler.toml sets
 * minify = true, what deploys) and with --no-minify, and prints for each the raw size, gzip -9 and
 * wrangler's own "Total Upload" line; then the largest contributors to the configured bundle by
 * package or source folder, from esbuild's metafile (bytes in the minified output, before gzip).
 */
import { spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";

const ROOT = fileURLToPath(new URL("..", import.meta.url).href);
const WRANGLER = join(ROOT, "node_modules/wrangler/bin/wrangler.js");

interface Build {
  label: string;
  raw: number;
  gzip: number;
  wrangler: string;
  /** input path → bytes it contributes to the output */
  inputs: Record<string, number>;
}

async function build(label: string, config: string, extra: string[], dir: string): Promise<Build> {
  const outdir = join(dir, label);
  const metafile = join(dir, `${label}.meta.json`);
  const args = [WRANGLER, "deploy", "--dry-run", "--outdir", outdir, "--metafile", metafile, "-c", config, ...extra];
  const output = await new Promise<string>((done, reject) => {
    const child = spawn(process.execPath, args, {
      cwd: ROOT,
      env: { ...process.env, CLOUDFLARE_CF_FETCH_ENABLED: "false", WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let text = "";
    child.stdout.on("data", (chunk: Buffer) => (text += chunk.toString()));
    child.stderr.on("data", (chunk: Buffer) => (text += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code) => (code === 0 ? done(text) : reject(new Error(`wrangler exited with ${code}:\n${text}`))));
  });
  const modules = (await readdir(outdir)).filter((name) => /\.m?js$/.test(name));
  let raw = 0;
  let gzip = 0;
  for (const name of modules) {
    const contents = await readFile(join(outdir, name));
    raw += contents.length;
    gzip += gzipSync(contents, { level: 9 }).length;
  }
  const meta = JSON.parse(await readFile(metafile, "utf8")) as {
    outputs: Record<string, { entryPoint?: string; inputs: Record<string, { bytesInOutput: number }> }>;
  };
  const inputs: Record<string, number> = {};
  for (const output of Object.values(meta.outputs)) {
    for (const [path, { bytesInOutput }] of Object.entries(output.inputs)) inputs[path] = (inputs[path] ?? 0) + bytesInOutput;
  }
  return { label, raw, gzip, wrangler: /Total Upload: ([^\n]+)/.exec(output)?.[1]?.trim() ?? "(not reported)", inputs };
}

/** node_modules/<package> (scoped too), or the first two levels of a source path. */
function group(path: string): string {
  const inModules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (inModules) return inModules[1]!;
  return path.split("/").slice(0, 2).join("/");
}

const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;

async function main() {
  const { values } = parseArgs({
    options: {
      top: { type: "string", default: "15" },
      config: { type: "string", default: "wrangler.toml" },
    },
  });
  const config = resolve(ROOT, values.config);
  const dir = await mkdtemp(join(tmpdir(), "parley-bundle-"));
  try {
    const configured = await build("configured", config, [], dir);
    const unminified = await build("unminified", config, ["--no-minify"], dir);
    console.log(`Bundle of ${values.config} (wrangler deploy --dry-run --outdir):`);
    console.log("| Build | Bundle | gzip -9 | wrangler reports |");
    console.log("|---|--:|--:|---|");
    for (const b of [configured, unminified]) {
      const name = b.label === "configured" ? "as configured (what deploys)" : "--no-minify";
      console.log(`| ${name} | ${kib(b.raw)} | ${kib(b.gzip)} | ${b.wrangler} |`);
    }
    const groups = new Map<string, number>();
    for (const [path, bytes] of Object.entries(configured.inputs)) groups.set(group(path), (groups.get(group(path)) ?? 0) + bytes);
    const total = [...groups.values()].reduce((a, b) => a + b, 0);
    console.log(`\nLargest parts of the configured bundle (bytes in the output, before gzip; ${kib(total)} in all):`);
    for (const [name, bytes] of [...groups].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) {
      console.log(`${kib(bytes).padStart(11)}  ${((bytes / total) * 100).toFixed(1).padStart(5)} %  ${name}`);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
