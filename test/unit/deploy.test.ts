// `npm run deploy` (.ci/deploy.ts) against a stand-in for wrangler: the commands it runs, in order,
// for a new account and for one that has everything already, the deploy configuration it writes, and
// what it refuses before touching an account. (No Cloudflare account is reachable from the tests.)
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  DEPLOY_CONFIG,
  deploy,
  DeployError,
  deployToml,
  neededVariables,
  readWranglerToml,
  type DeployOptions,
  type Wrangler,
  type WranglerResult,
} from "../../.ci/deploy.ts";

const TRACKED = await readFile(new URL("../../wrangler.toml", import.meta.url).pathname, "utf8");
const DB_ID = "3f1c2a9e-5b7d-4e21-9c3a-1d2e3f4a5b6c";
const CONFIG = `# A comment naming \${env.NOT_NEEDED} is not a reference.
name: Deployed Parley
inference_backend:
  url: \${env.BACKEND_URL}
  api_key: \${env.BACKEND_API_KEY}
  timeout: \${env.BACKEND_TIMEOUT:=60}
authentication:
  module: noop
`;
const SECRET_VALUES = { BACKEND_URL: "https://models.example.com/v1", BACKEND_API_KEY: "sk-very-secret-key-0042" };

const ok = (stdout = ""): WranglerResult => ({ code: 0, stdout, stderr: "" });
const failed = (stderr: string): WranglerResult => ({ code: 1, stdout: "", stderr });

interface Account {
  loggedIn?: boolean;
  accounts?: Array<{ id: string; name: string }>;
  databases: Array<{ uuid: string; name: string }>;
  buckets: string[];
  /** null: the Worker does not exist yet. */
  secrets: string[] | null;
}

/** A wrangler that answers like the real one for the commands deploy.ts uses, keeping account state. */
function fakeWrangler(account: Account) {
  const calls: string[][] = [];
  let uploaded: Record<string, string> | undefined;
  const wrangler: Wrangler = async (args) => {
    calls.push(args);
    const command = args.slice(0, 3).join(" ");
    if (args[0] === "whoami") {
      return account.loggedIn === false
        ? { code: 1, stdout: JSON.stringify({ loggedIn: false }), stderr: "" }
        : ok(JSON.stringify({ loggedIn: true, authType: "OAuth Token", email: "ops@example.com", accounts: account.accounts ?? [{ id: "acc1", name: "Ops" }] }));
    }
    if (command === "secret list --name") {
      return account.secrets === null
        ? failed("✘ [ERROR] A request to the Cloudflare API (/accounts/acc1/workers/scripts/parley/secrets) failed.\n\n  This Worker does not exist on your account. [code: 10007]")
        : ok(JSON.stringify(account.secrets.map((name) => ({ name, type: "secret_text" }))));
    }
    if (command === "d1 list --json") return ok(JSON.stringify(account.databases));
    if (command.startsWith("d1 create")) {
      account.databases.push({ uuid: DB_ID, name: args[2]! });
      return ok(`✅ Successfully created DB '${args[2]}'`);
    }
    if (command === "r2 bucket list") return ok(["Listing buckets...", ...account.buckets.map((b) => `name:           ${b}\ncreation_date:  2026-11-01T00:00:00.000Z`)].join("\n\n"));
    if (command === "r2 bucket create") {
      account.buckets.push(args[3]!);
      return ok(`Creating bucket '${args[3]}'...\nCreated bucket '${args[3]}' with default storage class of Standard.`);
    }
    if (command.startsWith("d1 migrations apply")) return ok("✅ 0000_init.sql");
    if (args[0] === "deploy") {
      const at = args.indexOf("--secrets-file");
      if (at >= 0) uploaded = JSON.parse(await readFile(args[at + 1]!, "utf8")) as Record<string, string>;
      if (args.includes("--dry-run")) {
        const outdir = args[args.indexOf("--outdir") + 1]!;
        await mkdir(outdir, { recursive: true });
        await writeFile(join(outdir, "index.js"), "export default { fetch() { return new Response('ok'); } };\n".repeat(50));
        return ok("Total Upload: 2.93 KiB / gzip: 0.11 KiB\n--dry-run: exiting now.");
      }
      return ok();
    }
    throw new Error(`unexpected wrangler command: ${args.join(" ")}`);
  };
  return { wrangler, calls, uploaded: () => uploaded };
}

let root: string;
let lines: string[];

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "parley-deploy-test-"));
  await writeFile(join(root, "wrangler.toml"), TRACKED);
  await writeFile(join(root, "parley.yaml"), CONFIG);
  lines = [];
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

function options(wrangler: Wrangler, extra: Partial<DeployOptions> = {}): DeployOptions {
  return { root, dryRun: false, secrets: [], env: { ...SECRET_VALUES }, wrangler, log: (line) => lines.push(line), ...extra };
}

const deployFile = () => readFile(join(root, DEPLOY_CONFIG), "utf8");

describe("npm run deploy", () => {
  it("on a new account: creates the database and the bucket, writes their id beside wrangler.toml, migrates, deploys with the secrets", async () => {
    const account: Account = { databases: [], buckets: [], secrets: null };
    const fake = fakeWrangler(account);
    await deploy(options(fake.wrangler, { configFile: join(root, "parley.yaml") }));

    const file = join(root, DEPLOY_CONFIG);
    expect(fake.calls).toEqual([
      ["whoami", "--json"],
      ["secret", "list", "--name", "parley", "--format", "json"],
      ["d1", "list", "--json"],
      ["d1", "create", "parley"],
      ["d1", "list", "--json"],
      ["r2", "bucket", "list"],
      ["r2", "bucket", "create", "parley-data"],
      ["d1", "migrations", "apply", "parley", "--remote", "-c", file],
      ["deploy", "-c", file, "--minify", "--secrets-file", expect.stringMatching(/secrets\.json$/)],
    ]);
    // The generated configuration is wrangler.toml with the real id; the tracked file keeps its placeholder.
    const generated = await deployFile();
    expect(readWranglerToml(generated).database).toEqual({ name: "parley", id: DB_ID });
    expect(generated).toContain(TRACKED.replace(/database_id = "[^"]*"/, `database_id = "${DB_ID}"`));
    expect(await readFile(join(root, "wrangler.toml"), "utf8")).toBe(TRACKED);
    // The configuration and the variables it names went up with the version; the optional one was not set.
    expect(fake.uploaded()).toEqual({ PARLEY_CONFIG: CONFIG, ...SECRET_VALUES });
    // The secrets file is gone, and no value was printed.
    const secretsFile = fake.calls.at(-1)!.at(-1)!;
    await expect(readFile(secretsFile)).rejects.toThrow(/ENOENT/);
    expect(lines.join("\n")).not.toContain(SECRET_VALUES.BACKEND_API_KEY);
    expect(lines.join("\n")).toContain("Secrets uploaded with this version: BACKEND_API_KEY, BACKEND_URL, PARLEY_CONFIG");
    expect(lines).toContain(`D1 database parley: created (${DB_ID})`);
  });

  it("run again on an account that has everything: reuses the database and bucket, keeps the secrets it is not given", async () => {
    const account: Account = {
      databases: [{ uuid: "0f0f0f0f-1111-2222-3333-444444444444", name: "other" }, { uuid: DB_ID, name: "parley" }],
      buckets: ["logs", "parley-data"],
      secrets: ["PARLEY_CONFIG", "BACKEND_API_KEY"],
    };
    const fake = fakeWrangler(account);
    await deploy(options(fake.wrangler, { env: {} }));

    const file = join(root, DEPLOY_CONFIG);
    expect(fake.calls).toEqual([
      ["whoami", "--json"],
      ["secret", "list", "--name", "parley", "--format", "json"],
      ["d1", "list", "--json"],
      ["r2", "bucket", "list"],
      ["d1", "migrations", "apply", "parley", "--remote", "-c", file],
      ["deploy", "-c", file, "--minify"],
    ]);
    expect(readWranglerToml(await deployFile()).database.id).toBe(DB_ID);
    expect(fake.uploaded()).toBeUndefined();
    expect(lines).toContain(`D1 database parley: exists (${DB_ID})`);
    expect(lines).toContain("R2 bucket parley-data: exists");
  });

  it("a new configuration on a later run: variables the Worker already has may stay out of the environment", async () => {
    const account: Account = { databases: [{ uuid: DB_ID, name: "parley" }], buckets: ["parley-data"], secrets: ["PARLEY_CONFIG", "BACKEND_API_KEY"] };
    const fake = fakeWrangler(account);
    await deploy(options(fake.wrangler, { configFile: join(root, "parley.yaml"), env: { BACKEND_URL: SECRET_VALUES.BACKEND_URL }, secrets: [] }));
    expect(fake.uploaded()).toEqual({ PARLEY_CONFIG: CONFIG, BACKEND_URL: SECRET_VALUES.BACKEND_URL });
    expect(lines.join("\n")).toContain("kept from before: BACKEND_API_KEY");
  });

  it("a configuration longer than a Worker secret holds goes up as compact JSON", async () => {
    // yes: YAML 1.1's true, as the Worker reads the document, so the JSON must say true.
    const long = `${"# a long explanation of every setting, kept in the operator's copy\n".repeat(100)}${CONFIG}user_data_collection: {feedback_enabled: yes, feedback_storage: /data/feedback}\n`;
    await writeFile(join(root, "parley.yaml"), long);
    const account: Account = { databases: [{ uuid: DB_ID, name: "parley" }], buckets: ["parley-data"], secrets: [] };
    const fake = fakeWrangler(account);
    await deploy(options(fake.wrangler, { configFile: join(root, "parley.yaml") }));
    const uploaded = fake.uploaded()!.PARLEY_CONFIG!;
    expect(JSON.parse(uploaded)).toMatchObject({
      name: "Deployed Parley",
      inference_backend: { api_key: "${env.BACKEND_API_KEY}" },
      user_data_collection: { feedback_enabled: true },
    });
    expect(uploaded.length).toBeLessThan(5 * 1024);
    expect(lines.join("\n")).toMatch(/uploading it as compact JSON/);
  });

  it("uploads the secrets listed with --secret from the environment", async () => {
    const account: Account = { databases: [{ uuid: DB_ID, name: "parley" }], buckets: ["parley-data"], secrets: ["PARLEY_CONFIG"] };
    const fake = fakeWrangler(account);
    await deploy(options(fake.wrangler, { secrets: ["SPLUNK_TOKEN"], env: { SPLUNK_TOKEN: "hec-token-value" } }));
    expect(fake.uploaded()).toEqual({ SPLUNK_TOKEN: "hec-token-value" });
  });

  describe("refuses before it changes anything", () => {
    const creates = (calls: string[][]) => calls.filter((c) => c.includes("create") || c[0] === "deploy" || c.includes("migrations"));

    it("without a login: says how to log in or which token to make", async () => {
      const fake = fakeWrangler({ loggedIn: false, databases: [], buckets: [], secrets: null });
      const error = await deploy(options(fake.wrangler, { configFile: join(root, "parley.yaml") })).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DeployError);
      expect((error as Error).message).toMatch(/wrangler login/);
      expect((error as Error).message).toMatch(/CLOUDFLARE_API_TOKEN/);
      expect((error as Error).message).toMatch(/D1 > Edit/);
      expect(fake.calls).toEqual([["whoami", "--json"]]);
    });

    it("with several accounts and no CLOUDFLARE_ACCOUNT_ID: lists them", async () => {
      const accounts = [{ id: "a1", name: "Personal" }, { id: "a2", name: "Work" }];
      const fake = fakeWrangler({ accounts, databases: [], buckets: [], secrets: null });
      await expect(deploy(options(fake.wrangler, { configFile: join(root, "parley.yaml") }))).rejects.toThrow(/CLOUDFLARE_ACCOUNT_ID.*a1 \(Personal\), a2 \(Work\)/);
      // Named, it goes ahead.
      const chosen = fakeWrangler({ accounts, databases: [], buckets: [], secrets: null });
      await deploy(options(chosen.wrangler, { configFile: join(root, "parley.yaml"), env: { ...SECRET_VALUES, CLOUDFLARE_ACCOUNT_ID: "a2" } }));
      expect(lines[0]).toBe("Cloudflare: ops@example.com, account Work (a2)");
    });

    it("a first deployment without a configuration", async () => {
      const fake = fakeWrangler({ databases: [], buckets: [], secrets: null });
      await expect(deploy(options(fake.wrangler))).rejects.toThrow(/--config-file/);
      expect(creates(fake.calls)).toEqual([]);
    });

    it("a variable the configuration needs that is neither in the environment nor on the Worker", async () => {
      const fake = fakeWrangler({ databases: [], buckets: [], secrets: null });
      await expect(deploy(options(fake.wrangler, { configFile: join(root, "parley.yaml"), env: { BACKEND_URL: "https://models.example.com/v1" } }))).rejects.toThrow(
        /Not set in the environment: BACKEND_API_KEY\./,
      );
      expect(creates(fake.calls)).toEqual([]);
    });

    it("a configuration that would not load in the Worker, with the failing keys", async () => {
      await writeFile(join(root, "parley.yaml"), CONFIG.replace("module: noop", "module: nonsense"));
      const fake = fakeWrangler({ databases: [], buckets: [], secrets: null });
      const error = (await deploy(options(fake.wrangler, { configFile: join(root, "parley.yaml") })).catch((e: unknown) => e)) as Error;
      expect(error.message).toMatch(/does not load:\n {2}authentication\.module: /);
      expect(error.message).not.toContain(SECRET_VALUES.BACKEND_API_KEY);
      expect(creates(fake.calls)).toEqual([]);
    });

    it("a configuration naming files the Worker cannot read, in the Worker's words", async () => {
      const files = `${CONFIG}customization:\n  system_prompt_path: /etc/lightspeed/system_prompt.txt\n  agent_card_path: missing-card.yaml\n`;
      await writeFile(join(root, "parley.yaml"), files);
      const fake = fakeWrangler({ databases: [], buckets: [], secrets: null });
      const error = (await deploy(options(fake.wrangler, { dryRun: true, outdir: join(root, "out"), configFile: join(root, "parley.yaml") })).catch((e: unknown) => e)) as Error;
      expect(error).toBeInstanceOf(DeployError);
      expect(error.message.split("\n").slice(1)).toEqual([
        "  customization.system_prompt_path: /etc/lightspeed/system_prompt.txt is not a bundled file: name a file under config/ or env:NAME",
        "  customization.agent_card_path: bundled file config/missing-card.yaml not found",
      ]);
      expect(fake.calls).toEqual([]);
    });

    it("a wrangler.toml value pointing at this machine does not count as the deployment's value", async () => {
      await writeFile(join(root, "parley.yaml"), CONFIG.replace("${env.BACKEND_URL}", "${env.PARLEY_BACKEND_URL}"));
      const fake = fakeWrangler({ databases: [], buckets: [], secrets: null });
      await expect(deploy(options(fake.wrangler, { configFile: join(root, "parley.yaml") }))).rejects.toThrow(/Not set in the environment: PARLEY_BACKEND_URL/);
    });
  });

  it("--dry-run: touches no account, writes the deploy configuration, bundles minified and prints the size", async () => {
    const fake = fakeWrangler({ databases: [], buckets: [], secrets: null });
    const outdir = join(root, "out");
    await deploy(options(fake.wrangler, { dryRun: true, outdir, configFile: join(root, "parley.yaml") }));
    const file = join(root, DEPLOY_CONFIG);
    expect(fake.calls).toEqual([["deploy", "--dry-run", "--outdir", outdir, "--minify", "-c", file]]);
    expect(readWranglerToml(await deployFile()).database.id).toBe("00000000-0000-0000-0000-000000000000");
    expect(lines.join("\n")).toMatch(/Bundle .*index\.js, 2\.9 KiB, gzip -9 0\.\d KiB \(wrangler: 2\.93 KiB \/ gzip: 0\.11 KiB\)/);
    expect(lines.join("\n")).not.toContain(SECRET_VALUES.BACKEND_API_KEY);

    // After a real deployment, a dry run keeps the account's id in the file.
    await writeFile(file, deployToml(TRACKED, DB_ID));
    await deploy(options(fakeWrangler({ databases: [], buckets: [], secrets: null }).wrangler, { dryRun: true, outdir }));
    expect(readWranglerToml(await deployFile()).database.id).toBe(DB_ID);
  });

  it("reads the files a configuration names from the checkout's config/ folder, or from the variables env:NAME names, and says what would warn", async () => {
    await mkdir(join(root, "config"));
    await writeFile(join(root, "config/prompt.txt"), "You are a deployed assistant.");
    await writeFile(join(root, "config/card.yaml"), "name: Deployed agent\n");
    await writeFile(join(root, "config/mcp-token"), "Bearer held-token-0042");
    const text = `${CONFIG}service: {color_log: false}
customization:
  system_prompt_path: config/prompt.txt
  agent_card_path: ./card.yaml
mcp_servers:
  - {name: files, url: "https://mcp.example.com/mcp", authorization_headers: {Authorization: mcp-token, X-Other: "env:OTHER_TOKEN"}}
`;
    await writeFile(join(root, "parley.yaml"), text);
    const fake = fakeWrangler({ databases: [], buckets: [], secrets: null });
    const run = options(fake.wrangler, { dryRun: true, outdir: join(root, "out"), configFile: join(root, "parley.yaml") });
    await expect(deploy(run)).rejects.toThrow(/Not set in the environment: OTHER_TOKEN/);
    await deploy({ ...run, env: { ...SECRET_VALUES, OTHER_TOKEN: "other-token-value" } });
    expect(lines).toContain(`Configuration ${join(root, "parley.yaml")}: loads; secrets that would be uploaded: BACKEND_API_KEY, BACKEND_URL, OTHER_TOKEN, PARLEY_CONFIG`);
    // What the Worker would warn about when it loads the document, said before it is deployed.
    expect(lines).toContain(`Configuration ${join(root, "parley.yaml")}: these settings have no effect in this release: service.color_log`);
  });

  it("--dry-run fails when the bundle does not build", async () => {
    const broken: Wrangler = async () => failed("✘ [ERROR] Could not resolve \"./nowhere.ts\"");
    await expect(deploy(options(broken, { dryRun: true, outdir: join(root, "out") }))).rejects.toThrow(/Bundling .* failed[\s\S]*Could not resolve/);
  });
});

describe("the variables a configuration names", () => {
  it("references in values (not comments), optional ones with a fallback, env: file fields and api_key_env", () => {
    const text = `${CONFIG}customization:
  system_prompt_path: env:SYSTEM_PROMPT
inference:
  providers:
    - type: remote::openai
      api_key_env: OTHER_KEY
      extra: {url: "https://other.example.com/v1"}
`;
    expect(neededVariables(text)).toEqual({ required: ["BACKEND_API_KEY", "BACKEND_URL", "OTHER_KEY", "SYSTEM_PROMPT"], optional: ["BACKEND_TIMEOUT"] });
    expect(neededVariables(JSON.stringify({ inference_backend: { url: "${env.URL}" } }))).toEqual({ required: ["URL"], optional: [] });
  });

  it("the tracked wrangler.toml is what deploy.ts expects: one database (a placeholder id), one bucket", () => {
    expect(readWranglerToml(TRACKED)).toMatchObject({
      name: "parley",
      database: { name: "parley", id: "00000000-0000-0000-0000-000000000000" },
      bucket: "parley-data",
    });
  });
});
