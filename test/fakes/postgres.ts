// The real Postgres for tests: a fresh schema (namespace) per run, migrated from migrations/postgres,
// dropped afterwards. Admin work goes through `pg` over plain TCP; the code under test reaches the
// same server through the WebSocket relay and @neondatabase/serverless.
// Connection: PGHOST/PGPORT/PGUSER/PGPASSWORD/PGDATABASE, defaulting to the local trust-auth server.
import { readdir, readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";

export const TEST_POSTGRES = {
  host: process.env.PGHOST ?? "127.0.0.1",
  port: Number(process.env.PGPORT ?? 5432),
  user: process.env.PGUSER ?? "postgres",
  password: process.env.PGPASSWORD,
  database: process.env.PGDATABASE ?? "test",
};

// Every test namespace carries this prefix and its creation time, so a run that died before its
// cleanup leaves something the next run can recognise and drop.
const PREFIX = "parley_test_";
const STALE_AFTER_MS = 6 * 60 * 60 * 1000;
// A path string, not a URL: this file is also type-checked beside @cloudflare/workers-types, whose
// URL is not the one node:fs accepts.
const MIGRATIONS = join(dirname(fileURLToPath(import.meta.url)), "../../migrations/postgres");

async function withClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  // A short connect timeout: an unreachable server must fail the suite quickly, never skip or hang.
  const client = new pg.Client({ ...TEST_POSTGRES, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** Creates an empty schema with a unique name (and drops test schemas abandoned by earlier runs). */
export async function createTestNamespace(): Promise<string> {
  const namespace = `${PREFIX}${Date.now()}_${Math.random().toString(16).slice(2, 10)}`;
  await withClient(async (client) => {
    const { rows } = await client.query<{ nspname: string }>(
      "SELECT nspname FROM pg_namespace WHERE starts_with(nspname, $1)",
      [PREFIX],
    );
    for (const { nspname } of rows) {
      const createdAt = Number(nspname.slice(PREFIX.length).split("_")[0]);
      if (Date.now() - createdAt > STALE_AFTER_MS) await client.query(`DROP SCHEMA IF EXISTS ${quote(nspname)} CASCADE`);
    }
    await client.query(`CREATE SCHEMA ${quote(namespace)}`);
  });
  return namespace;
}

/** Runs migrations/postgres/*.sql in order, each file in one transaction, inside `namespace`. */
export async function applyPostgresMigrations(namespace: string): Promise<void> {
  const files = (await readdir(MIGRATIONS)).filter((name) => name.endsWith(".sql")).sort();
  await withClient(async (client) => {
    for (const file of files) {
      const text = await readFile(join(MIGRATIONS, file), "utf8");
      await client.query("BEGIN");
      try {
        // The migrations name no schema; search_path places them, as it does for the gateway.
        await client.query(`SET LOCAL search_path TO ${quote(namespace)}`);
        for (const statement of text.split("--> statement-breakpoint")) {
          if (statement.trim()) await client.query(statement);
        }
        await client.query("COMMIT");
      } catch (error) {
        await client.query("ROLLBACK");
        throw new Error(`migration ${file} failed`, { cause: error });
      }
    }
  });
}

export async function dropNamespace(namespace: string): Promise<void> {
  await withClient((client) => client.query(`DROP SCHEMA IF EXISTS ${quote(namespace)} CASCADE`));
}

/** The `database.postgres` settings that reach TEST_POSTGRES's `namespace` through `wsProxy`. */
export function testPostgresSettings(namespace: string, wsProxy: string) {
  return {
    host: TEST_POSTGRES.host,
    port: TEST_POSTGRES.port,
    db: TEST_POSTGRES.database,
    user: TEST_POSTGRES.user,
    password: TEST_POSTGRES.password,
    namespace,
    ssl_mode: "disable",
    gss_encmode: "disable",
    ws_proxy: wsProxy,
  };
}
