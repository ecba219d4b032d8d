/**
 * `npm run deploy`: deploys Parley to Cloudflare, the first time and every time after, with the
 * wrangler of node_modules.
 *
 *   npm run deploy -- [--config-file FILE] [--secret NAME]... [--dry-run] [--outdir DIR]
 *
 * What it does, in order (each step reuses what a previous run made):
 *  1. checks that wrangler is logged in (`wrangler login`) or has CLOUDFLARE_API_TOKEN, and that it
 *     knows which account to use (CLOUDFLARE_ACCOUNT_ID when the login sees several);
 *  2. checks the configuration and its secrets before touching anything: the configuration document
 *     (PARLEY_CONFIG) must load as the Worker loads it (the same code: the schema, the files it names
 *     read from the checkout's config/ folder, which the Worker gets as its assets, its backends),
 *     with the values the Worker will have, and every variable it names (`${env.NAME}`, `env:NAME`,
 *     `api_key_env`) must come from the environment, from a secret the Worker already has, or from
 *     wrangler.toml's [vars];
 *  3. creates the D1 database and the R2 bucket wrangler.toml names (`parley`, `parley-data`), or
 *     finds them, and reads the database's id;
 *  4. writes wrangler.deploy.toml: wrangler.toml with that id, git-ignored, so an account's ids never
 *     land in the tracked file;
 *  5. applies the D1 migrations to the remote database;
 *  6. `wrangler deploy --minify` with the secrets, uploaded with the new version (never printed).
 *
 * Options and environment:
 *   --config-file FILE, PARLEY_CONFIG_FILE  the configuration document (YAML or JSON), uploaded as the
 *                                           PARLEY_CONFIG secret. Required on the first deployment
 *                                           (config/parley.yaml is the local demo: no authentication,
 *                                           backend on 127.0.0.1); later runs without it keep the one
 *                                           the Worker has. Over 5 KB (a secret's limit) it goes up
 *                                           as compact JSON.
 *   --secret NAME (repeatable), PARLEY_SECRETS="A,B"
 *                                           more secrets to upload, each from the environment variable
 *                                           of that name. The variables the configuration names are
 *                                           uploaded from the environment without being listed.
 *   --dry-run                               everything that needs no account: check the configuration
 *                                           (when given), write wrangler.deploy.toml, bundle with
 *                                           `wrangler deploy --dry-run --minify`, print the bundle's
 *                                           size; fails on a bundle that does not build.
 *   --outdir DIR                            where --dry-run writes the bundle (default dist/deploy).
 *   CLOUDFLARE_API_TOKEN, CLOUDFLARE_ACCOUNT_ID  wrangler's own: an API token instead of `wrangler login`.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { gzipSync } from "node:zlib";
import type { BundledFiles } from "../worker/config/files.ts";
import { readDocument } from "../worker/config/load.ts";
import { loadConfiguration } from "../worker/configuration.ts";
import { scrub } from "../worker/log.ts";

export const DEPLOY_CONFIG = "wrangler.deploy.toml";
const PLACEHOLDER_ID = "00000000-0000-0000-0000-000000000000";
const CONFIG_SECRET = "PARLEY_CONFIG";
/** The most a Worker variable or secret may hold. */
const SECRET_LIMIT = 5 * 1024;
/** The Workers Free plan's limit on a compressed Worker; the Paid plan's is 10 MB. */
const FREE_PLAN_LIMIT = 3 * 1024 * 1024;

export interface WranglerResult {
  code: number;
  stdout: string;
  stderr: string;
}
/**
 * Runs `wrangler <args>`. Output is captured (and parsed) unless `show` puts it on the terminal, or
 * `terminal` also lets wrangler ask questions there; shown output is not in the result.
 */
export type Wrangler = (args: string[], options?: { output?: "capture" | "show" | "terminal" }) => Promise<WranglerResult>;

export interface DeployOptions {
  /** The checkout: wrangler.toml, migrations, worker. */
  root: string;
  dryRun: boolean;
  configFile?: string;
  secrets: string[];
  outdir?: string;
  env: Record<string, string | undefined>;
  wrangler: Wrangler;
  log: (line: string) => void;
}

/** What went wrong, said so the reader can act on it; the CLI prints it without a stack trace. */
export class DeployError extends Error {}

// ---------------------------------------------------------------------------------------------
// wrangler.toml: just what this script reads and rewrites (it is ours, and plain).

export interface WranglerToml {
  name: string;
  database: { name: string; id: string };
  bucket: string;
  vars: Record<string, string>;
  /** The folder the CONFIG_FILES assets binding serves: the files configuration fields name. */
  assets: string;
}

/** `key = "value"` lines per table header; enough for the keys read here. */
function tables(text: string): Array<{ header: string; values: Record<string, string> }> {
  const result = [{ header: "", values: {} as Record<string, string> }];
  for (const line of text.split("\n")) {
    const header = /^\s*(\[\[?[^\]]+\]\]?)\s*(#.*)?$/.exec(line);
    if (header) {
      result.push({ header: header[1]!, values: {} });
      continue;
    }
    const pair = /^\s*([A-Za-z0-9_-]+|"[^"]+")\s*=\s*"((?:[^"\\]|\\.)*)"/.exec(line);
    if (pair) result.at(-1)!.values[pair[1]!.replace(/^"|"$/g, "")] = JSON.parse(`"${pair[2]}"`) as string;
  }
  return result;
}

export function readWranglerToml(text: string): WranglerToml {
  const all = tables(text);
  const d1 = all.filter((t) => t.header === "[[d1_databases]]");
  const r2 = all.filter((t) => t.header === "[[r2_buckets]]");
  const name = all[0]!.values.name;
  if (!name || d1.length !== 1 || !d1[0]!.values.database_name || r2.length !== 1 || !r2[0]!.values.bucket_name) {
    throw new DeployError("wrangler.toml: expected a name, one [[d1_databases]] with database_name and one [[r2_buckets]] with bucket_name");
  }
  return {
    name,
    database: { name: d1[0]!.values.database_name, id: d1[0]!.values.database_id ?? PLACEHOLDER_ID },
    bucket: r2[0]!.values.bucket_name!,
    vars: all.find((t) => t.header === "[vars]")?.values ?? {},
    assets: all.find((t) => t.header === "[assets]")?.values.directory ?? "config",
  };
}

/** wrangler.toml with the account's database id: the text of wrangler.deploy.toml. */
export function deployToml(tracked: string, databaseId: string): string {
  let inD1 = false;
  let replaced = 0;
  const lines = tracked.split("\n").map((line) => {
    if (/^\s*\[/.test(line)) inD1 = /^\s*\[\[d1_databases\]\]/.test(line);
    if (inD1 && /^\s*database_id\s*=/.test(line)) {
      replaced++;
      return `database_id = "${databaseId}"`;
    }
    return line;
  });
  if (replaced !== 1) throw new DeployError("wrangler.toml: expected one database_id in [[d1_databases]]");
  return [
    "# Written by `npm run deploy` from wrangler.toml with this account's resource ids; git-ignored.",
    "# Edit wrangler.toml instead: the next run writes this file again.",
    ...lines,
  ].join("\n");
}

// ---------------------------------------------------------------------------------------------
// The configuration and the variables it needs

// `${env.NAME}` (required) or `${env.NAME:=fallback}` (optional), as worker/config/load.ts reads them.
const REFERENCE = /\$\{env\.([A-Za-z_][A-Za-z0-9_]*)(:=[^}]*)?\}/g;
// A file field may name a variable instead of a file (worker/runtime.ts readConfigFile).
const FILE_REFERENCE = /^env:([A-Za-z_][A-Za-z0-9_]*)$/;

export interface NeededVariables {
  required: string[];
  optional: string[];
}

/** The Worker variables a configuration document reads (from its values, not its comments). */
export function neededVariables(text: string): NeededVariables {
  const required = new Set<string>();
  const optional = new Set<string>();
  const document = readDocument(text);
  if (!document.ok) return { required: [], optional: [] }; // parseConfig reports the broken document
  const walk = (value: unknown, key?: string) => {
    if (typeof value === "string") {
      for (const [, name, fallback] of value.matchAll(REFERENCE)) (fallback ? optional : required).add(name!);
      const file = FILE_REFERENCE.exec(value.trim());
      if (file) required.add(file[1]!);
      // inference.providers[].api_key_env names the variable that holds a provider's key.
      if (key === "api_key_env" && /^[A-Za-z_][A-Za-z0-9_]*$/.test(value)) required.add(value);
    } else if (Array.isArray(value)) value.forEach((item) => walk(item));
    else if (value && typeof value === "object") for (const [k, v] of Object.entries(value)) walk(v, k);
  };
  walk(document.value);
  for (const name of required) optional.delete(name);
  return { required: [...required].sort(), optional: [...optional].sort() };
}

const LOOPBACK_URL = /^[a-z]+:\/\/(127\.|localhost\b|\[::1\])/i;

interface SecretPlan {
  /** name → value, uploaded with the new version. */
  upload: Record<string, string>;
  /** Needed names the Worker keeps from an earlier deployment. */
  kept: string[];
}

async function planSecrets(
  options: DeployOptions,
  toml: WranglerToml,
  configText: string | undefined,
  existing: Set<string>,
): Promise<SecretPlan> {
  const upload: Record<string, string> = {};
  const kept: string[] = [];
  const missing: string[] = [];
  const needed = configText ? neededVariables(configText) : { required: [], optional: [] };
  // A var pointing at this machine (wrangler.toml's local default backend) is no value for a deployment.
  const usableVar = (name: string) => toml.vars[name] !== undefined && !LOOPBACK_URL.test(toml.vars[name]!);
  for (const name of new Set([...options.secrets, ...needed.required, ...needed.optional])) {
    const value = options.env[name];
    if (value !== undefined && value !== "") upload[name] = value;
    else if (existing.has(name)) kept.push(name);
    else if (options.secrets.includes(name) || (needed.required.includes(name) && !usableVar(name))) missing.push(name);
  }
  if (configText !== undefined) upload[CONFIG_SECRET] = configSecret(configText, options.log);
  else if (!existing.has(CONFIG_SECRET)) {
    throw new DeployError(
      [
        "No configuration for the deployed gateway: give one with --config-file FILE (or PARLEY_CONFIG_FILE=FILE).",
        "The bundled config/parley.yaml is the local demo (no authentication, a backend on 127.0.0.1) and is not",
        "deployed on its own. config/parley.example.yaml is a starting point.",
      ].join("\n"),
    );
  }
  if (missing.length > 0) {
    throw new DeployError(
      `Not set in the environment: ${missing.join(", ")}. The configuration or --secret names them; export each ` +
        "(e.g. `export NAME=...`) and run again. Values are uploaded as Worker secrets and never printed.",
    );
  }
  if (configText !== undefined) {
    // The document must load as the Worker will load it, with what the Worker will have: the
    // variables, and the files it names from the folder its assets binding serves. Secrets the
    // Worker keeps are unknown here: what depends on them is not checked.
    const env: Record<string, string> = { ...toml.vars, ...upload };
    const result = await loadConfiguration(configText, env, checkoutFiles(resolve(options.root, toml.assets)));
    const problems = (result.ok ? [] : result.problems).filter(
      (problem) => !kept.some((name) => problem.message.startsWith(`environment variable ${name} is not set`)),
    );
    if (problems.length > 0) {
      throw new DeployError(
        `The configuration (${options.configFile}) does not load:\n${problems.map((p) => `  ${p.path}: ${scrub(p.message, result.scrubbed)}`).join("\n")}`,
      );
    }
    if (result.ok) for (const warning of result.loaded.warnings) options.log(`Configuration ${options.configFile}: ${warning}`);
  }
  return { upload, kept };
}

/** The checkout's folder of bundled files, read as the Worker's CONFIG_FILES binding serves it. */
function checkoutFiles(folder: string): BundledFiles {
  return async (relative) => {
    try {
      return await readFile(join(folder, relative), "utf8");
    } catch (error) {
      if (["ENOENT", "EISDIR", "ENOTDIR"].includes((error as NodeJS.ErrnoException).code ?? "")) return null;
      throw error;
    }
  };
}

/**
 * The PARLEY_CONFIG value. A Worker secret holds at most 5 KB: a longer document goes up as compact
 * JSON (the Worker reads JSON as well as YAML; comments and layout are all that is lost).
 */
function configSecret(text: string, log: (line: string) => void): string {
  const bytes = Buffer.byteLength(text);
  if (bytes <= SECRET_LIMIT) return text;
  // Read as the Worker reads the document, so the JSON means what the YAML meant there (YAML 1.1's yes/no).
  const document = readDocument(text);
  if (!document.ok) return text; // not loadable: the configuration check that follows says why
  const compact = JSON.stringify(document.value);
  if (Buffer.byteLength(compact) > SECRET_LIMIT) {
    throw new DeployError(
      `The configuration is ${bytes} bytes (${Buffer.byteLength(compact)} as compact JSON); a Worker secret holds at most ${SECRET_LIMIT}. ` +
        "Move long texts into files under config/ (system_prompt_path, agent_card_path), which are deployed with the Worker.",
    );
  }
  log(`The configuration is ${bytes} bytes, over the ${SECRET_LIMIT} a Worker secret holds: uploading it as compact JSON (${Buffer.byteLength(compact)} bytes).`);
  return compact;
}

// ---------------------------------------------------------------------------------------------
// The account

const TOKEN_HELP = [
  "Log in with `npx wrangler login` (opens a browser), or create an API token at",
  "https://dash.cloudflare.com/profile/api-tokens from the \"Edit Cloudflare Workers\" template, add the",
  "permission Account > D1 > Edit, and export it as CLOUDFLARE_API_TOKEN (with CLOUDFLARE_ACCOUNT_ID",
  "when the token reaches more than one account).",
].join("\n");

async function checkLogin(options: DeployOptions): Promise<string> {
  const result = await options.wrangler(["whoami", "--json"]);
  let who: { loggedIn?: boolean; email?: string; authType?: string; accounts?: Array<{ id: string; name: string }> } = {};
  try {
    who = JSON.parse(result.stdout) as typeof who;
  } catch {
    // Not JSON: wrangler failed before it could say; its stderr is below.
  }
  if (result.code !== 0 || !who.loggedIn) {
    throw new DeployError(`wrangler is not logged in to Cloudflare.\n${TOKEN_HELP}${result.stderr.trim() ? `\n\nwrangler said: ${result.stderr.trim()}` : ""}`);
  }
  const accounts = who.accounts ?? [];
  const chosen = options.env.CLOUDFLARE_ACCOUNT_ID;
  if (chosen) {
    const account = accounts.find((a) => a.id === chosen);
    if (accounts.length > 0 && !account) {
      throw new DeployError(`CLOUDFLARE_ACCOUNT_ID=${chosen} is not one of this login's accounts: ${accounts.map((a) => `${a.name} (${a.id})`).join(", ")}`);
    }
    return `${who.email ?? who.authType ?? "logged in"}, account ${account ? `${account.name} (${chosen})` : chosen}`;
  }
  if (accounts.length !== 1) {
    throw new DeployError(
      accounts.length === 0
        ? `This login lists no account (an API token without Account Settings: Read). Export CLOUDFLARE_ACCOUNT_ID=<your account id>.`
        : `This login reaches several accounts; export CLOUDFLARE_ACCOUNT_ID as one of: ${accounts.map((a) => `${a.id} (${a.name})`).join(", ")}`,
    );
  }
  return `${who.email ?? who.authType ?? "logged in"}, account ${accounts[0]!.name} (${accounts[0]!.id})`;
}

function fail(step: string, result: WranglerResult): never {
  // wrangler colours some messages whatever NO_COLOR says.
  const output = `${result.stderr}\n${result.stdout}`.replace(/\x1b\[[0-9;]*m/g, "").trim();
  throw new DeployError(`${step} failed (wrangler exited with ${result.code})${output ? `:\n${output}` : ""}`);
}

async function d1Id(options: DeployOptions, name: string): Promise<string | undefined> {
  const result = await options.wrangler(["d1", "list", "--json"]);
  if (result.code !== 0) fail("Listing the D1 databases", result);
  const databases = JSON.parse(result.stdout) as Array<{ uuid: string; name: string }>;
  return databases.find((db) => db.name === name)?.uuid;
}

async function r2Exists(options: DeployOptions, bucket: string): Promise<boolean> {
  const result = await options.wrangler(["r2", "bucket", "list"]);
  if (result.code !== 0) fail("Listing the R2 buckets", result);
  // `wrangler r2 bucket list` has no JSON form; each bucket is a block starting with "name:".
  return [...result.stdout.matchAll(/^name:\s+(\S+)\s*$/gm)].some(([, name]) => name === bucket);
}

async function existingSecrets(options: DeployOptions, worker: string): Promise<Set<string>> {
  const result = await options.wrangler(["secret", "list", "--name", worker, "--format", "json"]);
  if (result.code !== 0) {
    // The first deployment: the Worker does not exist yet, so it has no secrets.
    if (/10007|not found|does not exist/i.test(`${result.stderr}${result.stdout}`)) return new Set();
    fail("Listing the Worker's secrets", result);
  }
  const secrets = JSON.parse(result.stdout) as Array<{ name: string }>;
  return new Set(secrets.map((s) => s.name));
}

// ---------------------------------------------------------------------------------------------
// The deployment

export async function deploy(options: DeployOptions): Promise<void> {
  const { root, log, wrangler } = options;
  const trackedText = await readFile(join(root, "wrangler.toml"), "utf8");
  const toml = readWranglerToml(trackedText);
  const deployFile = join(root, DEPLOY_CONFIG);
  const configText = options.configFile ? await readConfigFile(options.configFile) : undefined;

  if (options.dryRun) {
    await dryRun(options, toml, trackedText, deployFile, configText);
    return;
  }

  log(`Cloudflare: ${await checkLogin(options)}`);
  const existing = await existingSecrets(options, toml.name);
  const secrets = await planSecrets(options, toml, configText, existing);

  let databaseId = await d1Id(options, toml.database.name);
  if (databaseId) log(`D1 database ${toml.database.name}: exists (${databaseId})`);
  else {
    const created = await wrangler(["d1", "create", toml.database.name]);
    if (created.code !== 0) fail(`Creating the D1 database ${toml.database.name}`, created);
    databaseId = await d1Id(options, toml.database.name);
    if (!databaseId) throw new DeployError(`The D1 database ${toml.database.name} was created but is not listed; run again.`);
    log(`D1 database ${toml.database.name}: created (${databaseId})`);
  }

  if (await r2Exists(options, toml.bucket)) log(`R2 bucket ${toml.bucket}: exists`);
  else {
    const created = await wrangler(["r2", "bucket", "create", toml.bucket]);
    // Listing and creating race only with another deployment; "already exists" means it is there.
    if (created.code !== 0 && !/already exists/i.test(`${created.stderr}${created.stdout}`)) fail(`Creating the R2 bucket ${toml.bucket}`, created);
    log(`R2 bucket ${toml.bucket}: created`);
  }

  await writeFile(deployFile, deployToml(trackedText, databaseId));
  log(`Wrote ${DEPLOY_CONFIG} (wrangler.toml with the database id; git-ignored)`);

  log(`Applying the D1 migrations to the remote ${toml.database.name}`);
  // Not asked for confirmation (no terminal input): applying what the checkout holds is the point of the run.
  const migrated = await wrangler(["d1", "migrations", "apply", toml.database.name, "--remote", "-c", deployFile], { output: "show" });
  if (migrated.code !== 0) fail("Applying the D1 migrations", migrated);

  const names = Object.keys(secrets.upload).sort();
  log(`Secrets uploaded with this version: ${names.join(", ") || "none"}${secrets.kept.length ? `; kept from before: ${secrets.kept.join(", ")}` : ""}`);
  // The values reach wrangler through a file only this user can read, removed right after.
  const secretsDir = names.length ? await mkdtemp(join(tmpdir(), "parley-deploy-")) : undefined;
  try {
    const args = ["deploy", "-c", deployFile, "--minify"];
    if (secretsDir) {
      const secretsFile = join(secretsDir, "secrets.json");
      await writeFile(secretsFile, JSON.stringify(secrets.upload), { mode: 0o600 });
      await chmod(secretsFile, 0o600);
      args.push("--secrets-file", secretsFile);
    }
    const deployed = await wrangler(args, { output: "terminal" });
    if (deployed.code !== 0) fail("wrangler deploy", deployed);
  } finally {
    if (secretsDir) await rm(secretsDir, { recursive: true, force: true });
  }
  log("Deployed. Run `npm run deploy` again after a change: it reuses the database and bucket and applies new migrations.");
}

async function dryRun(options: DeployOptions, toml: WranglerToml, trackedText: string, deployFile: string, configText: string | undefined) {
  const { log, wrangler, root } = options;
  log("Dry run: nothing is created, uploaded or changed on a Cloudflare account.");
  if (configText !== undefined) {
    // Without the account the Worker's current secrets are unknown: every needed one must be in the environment.
    const secrets = await planSecrets(options, toml, configText, new Set());
    log(`Configuration ${options.configFile}: loads; secrets that would be uploaded: ${Object.keys(secrets.upload).sort().join(", ")}`);
  }
  // Keep the id of an earlier real deployment, if any, so a dry run never undoes it.
  const lastId = existsSync(deployFile) ? readWranglerToml(await readFile(deployFile, "utf8")).database.id : undefined;
  const previous = lastId !== PLACEHOLDER_ID ? lastId : undefined;
  await writeFile(deployFile, deployToml(trackedText, previous ?? toml.database.id));
  log(`Wrote ${DEPLOY_CONFIG} (database_id ${previous ?? toml.database.id}${previous ? ", from the last deployment" : ", a placeholder until the first deployment"})`);

  const outdir = resolve(root, options.outdir ?? "dist/deploy");
  await rm(outdir, { recursive: true, force: true });
  const result = await wrangler(["deploy", "--dry-run", "--outdir", outdir, "--minify", "-c", deployFile]);
  if (result.code !== 0) fail("Bundling (wrangler deploy --dry-run)", result);
  const modules = existsSync(outdir) ? (await readdir(outdir)).filter((name) => /\.(m?js)$/.test(name)) : [];
  if (modules.length === 0) throw new DeployError(`wrangler deploy --dry-run wrote no bundle to ${outdir}:\n${result.stdout}${result.stderr}`);
  let raw = 0;
  let gzipped = 0;
  for (const name of modules) {
    const contents = await readFile(join(outdir, name));
    raw += contents.length;
    gzipped += gzipSync(contents, { level: 9 }).length;
  }
  const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
  const reported = /Total Upload: ([^\n]+)/.exec(result.stdout + result.stderr)?.[1]?.trim();
  log(`Bundle ${outdir}: ${modules.join(", ")}, ${kib(raw)}, gzip -9 ${kib(gzipped)}${reported ? ` (wrangler: ${reported})` : ""}`);
  if (gzipped > FREE_PLAN_LIMIT) log(`Warning: above the Workers Free plan's 3 MB compressed limit (the Paid plan allows 10 MB).`);
  log(
    `A real run (npm run deploy) would: check the login; create or reuse D1 ${toml.database.name} and R2 ${toml.bucket}; ` +
      `write the database id into ${DEPLOY_CONFIG}; wrangler d1 migrations apply ${toml.database.name} --remote; wrangler deploy --minify with the secrets.`,
  );
}

async function readConfigFile(path: string): Promise<string> {
  try {
    return await readFile(path, "utf8");
  } catch (error) {
    throw new DeployError(`Cannot read the configuration file ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Command line

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const WRANGLER_BIN = join(ROOT, "node_modules/wrangler/bin/wrangler.js");

/** wrangler of node_modules under this Node (22, from node_modules too when run through npm). */
export const runWrangler: Wrangler = (args, { output = "capture" } = {}) =>
  new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [WRANGLER_BIN, ...args], {
      cwd: ROOT,
      // Captured output is parsed: no colours. `terminal` keeps stdin too, so wrangler can ask what
      // it needs to (a workers.dev subdomain on a new account); without it wrangler asks nothing.
      env: output === "capture" ? { ...process.env, NO_COLOR: "1", FORCE_COLOR: "0" } : process.env,
      stdio: output === "capture" ? ["ignore", "pipe", "pipe"] : output === "show" ? ["ignore", "inherit", "inherit"] : "inherit",
    });
    let stdout = "";
    let stderr = "";
    child.stdout?.on("data", (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
    child.on("error", reject);
    child.on("close", (code) => resolvePromise({ code: code ?? 1, stdout, stderr }));
  });

async function main() {
  const { values } = parseArgs({
    options: {
      "dry-run": { type: "boolean", default: false },
      "config-file": { type: "string" },
      secret: { type: "string", multiple: true, default: [] },
      outdir: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
  });
  if (values.help) {
    const source = await readFile(fileURLToPath(import.meta.url), "utf8");
    console.log(/\/\*\*([\s\S]*?)\*\//.exec(source)![1]!.replace(/^ \* ?/gm, ""));
    return;
  }
  const fromEnv = (process.env.PARLEY_SECRETS ?? "").split(/[\s,]+/).filter(Boolean);
  const secrets = [...new Set([...values.secret, ...fromEnv])];
  for (const name of secrets) if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new DeployError(`Not a variable name: ${name}`);
  await deploy({
    root: ROOT,
    dryRun: values["dry-run"],
    configFile: values["config-file"] ?? process.env.PARLEY_CONFIG_FILE,
    secrets,
    outdir: values.outdir,
    env: process.env,
    wrangler: runWrangler,
    log: (line) => console.log(line),
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  main().catch((error: unknown) => {
    console.error(error instanceof DeployError ? `deploy: ${error.message}` : error);
    process.exit(1);
  });
}
