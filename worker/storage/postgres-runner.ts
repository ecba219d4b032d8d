// Postgres through drizzle-orm/neon-serverless: the Neon driver speaks the Postgres protocol over a
// WebSocket, which is the only socket-like transport every Workers deployment has. A relay (Neon's
// own endpoint, or a WebSocket-to-TCP proxy named by ws_proxy) forwards it to the server.
import { Client, Pool } from "@neondatabase/serverless";
import { drizzle } from "drizzle-orm/neon-serverless";
import type { Row, SqlRunner } from "./sql-runner.ts";
import type { PostgresSettings } from "./store.ts";
import { log } from "../log.ts";

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
    options: `-c search_path="${settings.namespace}" -c TimeZone=UTC`,
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
    query: async (statement) => (await db.execute<Row>(statement)).rows,
    atomic: (statements) =>
      db.transaction(async (tx) => {
        const results: Row[][] = [];
        for (const statement of statements) results.push((await tx.execute<Row>(statement)).rows);
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
