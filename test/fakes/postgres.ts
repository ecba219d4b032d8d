// The Postgres for tests: a fresh schema (namespace) per run, migrated from migrations/postgres,
// dropped afterwards. Admin work goes through `pg` over plain TCP; the code under test reaches the
// same server through the WebSocket relay and @neondatabase/serverless.
//
// Which server: PGHOST/PGPORT/PGUSER/PGPASSWORD/PGDATABASE, defaulting to the local trust-auth
// server on 127.0.0.1:5432. When that server cannot be reached, an embedded PGlite is started in this
// process instead (test/fakes/pglite-server.ts), so a fresh machine runs the same tests through the
// same drivers. PARLEY_TEST_POSTGRES=server insists on the server (an unreachable one fails the run),
// =embedded uses PGlite even when a server is there. Each process says in one line which one it uses.
// PGlite runs one connection at a time: a test that needs connections working at the same moment
// asks `testPostgresKind()` and runs its Postgres part only against a server, saying so otherwise.
import { readdir, readFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import type { PgliteServer } from "./pglite-server.ts";

/** The configured server; once a namespace is created, the server in use (PGlite's address if embedded). */
export const TEST_POSTGRES: { host: string; port: number; user: string; password: string | undefined; database: string } = {
  host: process.env.PGHOST ?? "127.0.0.1",
  port: Number(process.env.PGPORT ?? 5432),
  user: process.env.PGUSER ?? "postgres",
  password: process.env.PGPASSWORD,
  database: process.env.PGDATABASE ?? "test",
};
const CONFIGURED = { ...TEST_POSTGRES };

export type TestPostgresKind = "server" | "embedded";

// Every test namespace carries this prefix and its creation time, so a run that died before its
// cleanup leaves something the next run can recognise and drop.
const PREFIX = "parley_test_";
const STALE_AFTER_MS = 6 * 60 * 60 * 1000;
// A path string, not a URL: this file is also type-checked beside @cloudflare/workers-types, whose
// URL is not the one node:fs accepts.
const MIGRATIONS = join(dirname(fileURLToPath(import.meta.url)), "../../migrations/postgres");

// Per process, shared by every copy of this module in it (vitest loads globalSetup once per project).
interface ProcessState {
  kind?: Promise<TestPostgresKind>;
  embedded?: Promise<PgliteServer>;
  /** Namespaces created and not yet dropped: the embedded server stops when none is left. */
  users: number;
}
const state: ProcessState = ((globalThis as Record<symbol, unknown>)[Symbol.for("parley.test-postgres")] ??= { users: 0 }) as ProcessState;

/** Whether the tests of this process use the configured server or the embedded PGlite (decided once). */
export function testPostgresKind(): Promise<TestPostgresKind> {
  state.kind ??= decideKind();
  return state.kind;
}

async function decideKind(): Promise<TestPostgresKind> {
  const mode = process.env.PARLEY_TEST_POSTGRES ?? "auto";
  const at = `${CONFIGURED.host}:${CONFIGURED.port}`;
  if (mode === "server") {
    say(`Postgres for tests: the server at ${at} (PARLEY_TEST_POSTGRES=server)`);
    return "server";
  }
  if (mode === "embedded") {
    say(`Postgres for tests: embedded PGlite (PARLEY_TEST_POSTGRES=embedded); ${CONCURRENCY_NOTE}`);
    return "embedded";
  }
  if (mode !== "auto") throw new Error(`PARLEY_TEST_POSTGRES must be auto, server or embedded, not "${mode}"`);
  const client = new pg.Client({ ...CONFIGURED, connectionTimeoutMillis: 3000 });
  try {
    await client.connect();
    const { rows } = await client.query<{ server_version: string }>("SHOW server_version");
    say(`Postgres for tests: the server at ${at} (PostgreSQL ${rows[0]?.server_version})`);
    return "server";
  } catch (error) {
    // (A name that resolves to several addresses fails with an AggregateError without a message.)
    const reason = error instanceof Error ? error.message || (error as { code?: string }).code || error.name : String(error);
    say(`Postgres for tests: embedded PGlite, the server at ${at} is not usable (${reason}); ${CONCURRENCY_NOTE}`);
    return "embedded";
  } finally {
    await client.end().catch(() => {});
  }
}

const CONCURRENCY_NOTE = "tests that need concurrent connections run their Postgres part only against a real server";

function say(line: string) {
  console.log(line);
}

/** Points TEST_POSTGRES at the server in use, starting the embedded one if that is what this process uses. */
async function acquire(): Promise<void> {
  if ((await testPostgresKind()) === "server") return;
  state.users++;
  // Loaded only when used: PGlite is large, and most runs have a server.
  const starting = (state.embedded ??= import("./pglite-server.ts").then(({ startPgliteServer }) => startPgliteServer()));
  try {
    const server = await starting;
    Object.assign(TEST_POSTGRES, { host: server.host, port: server.port, user: "postgres", password: undefined });
  } catch (error) {
    state.users--;
    if (state.embedded === starting) state.embedded = undefined;
    throw new Error("the embedded PGlite did not start", { cause: error });
  }
}

async function release(): Promise<void> {
  if (!state.embedded) return;
  state.users = Math.max(0, state.users - 1);
  if (state.users > 0) return;
  const server = state.embedded;
  state.embedded = undefined;
  await (await server).close();
}

async function withClient<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
  // A short connect timeout: a server that goes away must fail the suite quickly, never skip or hang.
  const client = new pg.Client({ ...TEST_POSTGRES, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

const quote = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * Creates an empty schema with a unique name (and drops test schemas abandoned by earlier runs).
 * Pair it with dropNamespace: the embedded server, if used, lives while a namespace does.
 */
export async function createTestNamespace(): Promise<string> {
  await acquire();
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
  }).catch(async (error: unknown) => {
    await release();
    throw error;
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
  try {
    await withClient((client) => client.query(`DROP SCHEMA IF EXISTS ${quote(namespace)} CASCADE`));
  } finally {
    await release();
  }
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
    ssl_mode: "disable" as const,
    gss_encmode: "disable" as const,
    ws_proxy: wsProxy,
  };
}
