// Postgres through drizzle-orm/neon-serverless: the Neon driver speaks the Postgres protocol over a
// WebSocket, which is the only socket-like transport every Workers deployment has. A relay (Neon's
// own endpoint, or a WebSocket-to-TCP proxy named by ws_proxy) forwards it to the server.
import { Client, Pool } from "@neondatabase/serverless";
import { is, Param, SQL, type SQLChunk } from "drizzle-orm";
import { drizzle } from "drizzle-orm/neon-serverless";
import type { Row, SqlRunner } from "./sql-runner.ts";
import type { PostgresSettings } from "./store.ts";
import { log } from "../log.ts";

/** The longest a record-store statement, or opening its connection, may take. */
const STATEMENT_TIMEOUT_MS = 10_000;

/** `settings` as the configuration schema validated them (a plain namespace, a ws:// or wss:// relay). */
export function postgresRunner(settings: PostgresSettings): SqlRunner {
  const pool = new Pool({
    host: settings.host,
    port: settings.port,
    database: settings.db,
    user: settings.user,
    password: settings.password,
    // The namespace is the connection's search_path, so the SQL (and the migrations) never name a
    // schema. UTC makes the text form of timestamptz end in "+00", which rows.ts turns into "Z".
    // A statement that waits on a lock, or a server that stalls, fails the request after
    // STATEMENT_TIMEOUT_MS rather than holding it: a list view answers 500, never hangs.
    options: `-c search_path="${settings.namespace}" -c TimeZone=UTC -c statement_timeout=${STATEMENT_TIMEOUT_MS}`,
    connectionTimeoutMillis: STATEMENT_TIMEOUT_MS,
  });
  // Transport options go on each client this pool creates rather than on the global neonConfig, so
  // two stores with different settings in one isolate cannot disturb each other.
  const configure = transportOptions(settings);
  pool.Client = class ConfiguredClient extends Client {
    constructor(config?: ConstructorParameters<typeof Client>[0]) {
      super(config);
      Object.assign(this.neonConfig, configure);
    }
  };
  // The pool re-emits errors of idle connections, and an EventEmitter error without a listener
  // throws. A dead idle connection needs no action (the pool drops it and the next query opens a
  // new one), and while closing workerd reports each WebSocket's shutdown as "Network connection
  // lost", which is expected then.
  let closing = false;
  pool.on("error", (error: Error) => {
    if (!closing) log.warn(`postgres: idle connection failed: ${error.message}`);
  });
  const db = drizzle({ client: pool });
  return {
    query: async (statement) => (await db.execute<Row>(withoutNul(statement))).rows,
    atomic: (statements) =>
      db.transaction(async (tx) => {
        const results: Row[][] = [];
        for (const statement of statements) results.push((await tx.execute<Row>(withoutNul(statement))).rows);
        return results;
      }),
    close: () => {
      closing = true;
      return pool.end();
    },
  };
}

interface TransportOptions {
  wsProxy?: (host: string, port: number | string) => string;
  useSecureWebSocket?: boolean;
  pipelineTLS?: boolean;
  pipelineConnect?: false;
}

// ssl_mode is honoured at the WebSocket: TLS runs between the Worker and the relay (wss://), and the
// relay owns the hop to the server. gss_encmode has no meaning over a WebSocket, and ca_cert_path
// cannot apply either: workerd has no file system and verifies wss:// against its own trust store.
function transportOptions(settings: PostgresSettings): TransportOptions {
  // Without ws_proxy the Neon defaults stand: wss://<host>/v2, the endpoint Neon itself serves.
  if (!settings.ws_proxy) return {};
  const proxy = new URL(settings.ws_proxy);
  const secure = proxy.protocol === "wss:";
  // The driver adds the scheme itself, from useSecureWebSocket.
  const base = `${proxy.host}${proxy.pathname.replace(/\/+$/, "")}`;
  return {
    wsProxy: (host, port) => `${base}/v1?address=${host}:${port}`,
    useSecureWebSocket: secure,
    // Both pipelining tricks assume Neon's proxy (TLS and cleartext-password auth in the first
    // packet); an ordinary server behind a relay answers them out of order.
    pipelineTLS: false,
    pipelineConnect: false,
  };
}

/**
 * `statement` with U+0000 in every value it binds replaced by U+FFFD (the replacement character).
 * Postgres text and jsonb cannot hold U+0000, which a JavaScript string (a question, a topic summary,
 * a user id) can: a write carrying one would be refused every time, and the conversation outbox
 * retrying it would never get past it. Reads go through here too, so a lookup by a value with
 * U+0000 finds what was written under it. Values differing only there (U+0000 against U+FFFD) are
 * thus one value in Postgres; D1 keeps them apart, as written.
 */
export function withoutNul(statement: SQL): SQL {
  return new SQL(statement.queryChunks.map((chunk) => replaceNul(chunk) as SQLChunk));
}

function replaceNul(value: unknown): unknown {
  if (typeof value === "string") return value.replaceAll("\u0000", "\ufffd");
  if (Array.isArray(value)) return value.map(replaceNul);
  if (value === null || typeof value !== "object") return value;
  // A JSON value (rows.ts jsonValue): its keys and strings, before it becomes JSON text.
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype === Object.prototype || prototype === null) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [replaceNul(key), replaceNul(item)]));
  }
  if (is(value, SQL)) return withoutNul(value);
  if (is(value, Param)) return new Param(replaceNul(value.value), value.encoder);
  // The statement's own text, names, dates.
  return value;
}
