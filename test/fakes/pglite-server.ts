// An embedded PostgreSQL for machines without a server: PGlite (Postgres compiled to WebAssembly, one
// backend, in memory) behind a TCP listener that speaks the wire protocol, so `pg` and the WebSocket
// relay reach it exactly as they reach a real server.
//
// PGlite has one session, and @electric-sql/pglite-socket's multiplexer shares it message by message:
// two clients' extended-protocol messages (Parse/Bind/Execute/Sync) interleave and clobber each
// other's unnamed statement, and startup options such as `-c search_path=...` (how the gateway picks
// its namespace) are ignored. This listener shares it by protocol unit instead:
// - a connection takes the backend with its first message and keeps it until the backend reports
//   ReadyForQuery "idle", so a Sync-delimited batch or a whole transaction runs undisturbed;
// - when the backend passes to another connection, that connection's startup parameters (including
//   each `-c name=value` of `options`) are applied with RESET ALL + set_config, so every connection
//   sees its own search_path and TimeZone.
// Connections therefore run one at a time, never at once: a client that holds a transaction open
// while it waits for another connection's answer would wait forever. Tests that need several
// connections working at the same moment must use a real server (see test/fakes/postgres.ts).
import { createRequire } from "node:module";
import { createServer, type Socket } from "node:net";
import type { PGlite as PGliteType } from "@electric-sql/pglite";
import { listenOn } from "./listen.ts";

// Loaded through Node's own require, as test/fakes/ws-relay.ts loads ws: the worker test project's
// globalSetup resolves imports with browser conditions, under which PGlite's package maps node:fs
// and friends to nothing.
const { PGlite } = createRequire(import.meta.url)("@electric-sql/pglite") as { PGlite: typeof PGliteType };

export interface PgliteServer {
  host: string;
  port: number;
  /** e.g. "PGlite 0.5.14 (PostgreSQL 18.6)" */
  version: string;
  close(): Promise<void>;
}

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;
const PROTOCOL_3 = 196608;
/** Startup parameters that are not settings. */
const NOT_SETTINGS = new Set(["user", "database", "options", "replication"]);

interface Session {
  socket: Socket;
  /** Bytes received and not yet split into messages. */
  input: Buffer;
  /** Complete messages waiting for the backend. */
  pending: Buffer[];
  /** The startup packet has arrived (later messages are typed). */
  greeted: boolean;
  /** The backend has answered the startup packet. */
  startedUp: boolean;
  /** The connection's own settings, applied whenever the backend passes to it. */
  settings: Array<[string, string]>;
  closed: boolean;
}

export async function startPgliteServer(): Promise<PgliteServer> {
  const db = await PGlite.create();
  // "PostgreSQL 18.6 (PGlite 0.5.14) on wasm32-unknown-emscripten, ..."
  const { rows } = await db.query<{ version: string }>("SELECT version()");
  const [, postgresVersion, pgliteVersion] = /^PostgreSQL (\S+) \(PGlite ([^)]+)\)/.exec(rows[0]?.version ?? "") ?? [];
  // From here on the backend is driven only through execProtocolRawStream (see run()).

  const sessions = new Set<Session>();
  /** Sessions with pending messages, in the order they asked. */
  const ready: Session[] = [];
  /** The session holding the backend until it is idle again. */
  let owner: Session | null = null;
  /** Whose settings the backend currently has. */
  let applied: Session | null = null;
  let pumping = false;

  /** Runs one protocol message; returns the backend's output and the last ReadyForQuery status in it. */
  async function run(message: Uint8Array): Promise<{ output: Buffer; status: string | null; error: boolean }> {
    const chunks: Uint8Array[] = [];
    await db.execProtocolRawStream(message, { onRawData: (data) => chunks.push(data.slice()) });
    const output = Buffer.concat(chunks);
    let status: string | null = null;
    let error = false;
    for (let at = 0; at + 5 <= output.length; ) {
      const type = String.fromCharCode(output[at]!);
      const length = output.readInt32BE(at + 1);
      if (type === "Z") status = String.fromCharCode(output[at + 5]!);
      if (type === "E") error = true;
      at += 1 + length;
    }
    return { output, status, error };
  }

  const simpleQuery = (sql: string) => {
    const text = Buffer.from(`${sql}\0`, "utf8");
    const message = Buffer.alloc(5 + text.length);
    message.write("Q", 0, "latin1");
    message.writeInt32BE(4 + text.length, 1);
    text.copy(message, 5);
    return message;
  };
  const literal = (value: string) => `'${value.replaceAll("'", "''")}'`;

  async function applySettings(session: Session) {
    const sets = session.settings.map(([name, value]) => `SELECT set_config(${literal(name)}, ${literal(value)}, false);`);
    const result = await run(simpleQuery(`RESET ALL; ${sets.join(" ")}`));
    applied = session;
    return result;
  }

  function send(session: Session, data: Buffer) {
    if (data.length > 0 && !session.closed && session.socket.writable) session.socket.write(data);
  }

  async function pump() {
    if (pumping) return;
    pumping = true;
    try {
      for (;;) {
        let session: Session | undefined;
        if (owner) {
          if (owner.pending.length === 0) break; // wait for the owner's next message
          session = owner;
        } else {
          session = ready.shift();
          if (!session) break;
          if (session.closed || session.pending.length === 0) continue;
          owner = session;
        }
        const message = session.pending.shift()!;
        if (!session.startedUp) {
          session.startedUp = true;
          const startup = await run(message);
          // A real server applies startup settings before it answers; an unknown setting fails the connection.
          const settings = await applySettings(session);
          if (settings.error) {
            send(session, extractErrors(settings.output));
            session.socket.destroy();
          } else {
            send(session, startup.output);
          }
          owner = null;
        } else {
          if (applied !== session) await applySettings(session);
          const result = await run(message);
          send(session, result.output);
          if (result.status === "I") owner = null;
        }
        if (!owner && session.pending.length > 0 && !ready.includes(session)) ready.push(session);
      }
    } finally {
      pumping = false;
    }
  }

  async function release(session: Session) {
    session.closed = true;
    sessions.delete(session);
    const index = ready.indexOf(session);
    if (index >= 0) ready.splice(index, 1);
    session.pending.length = 0;
    if (owner === session) {
      // Left mid-batch or mid-transaction: end the batch and undo the transaction, as a real
      // server does when its client goes away.
      while (pumping) await new Promise((resolve) => setImmediate(resolve));
      if (owner === session) {
        const sync = await run(Buffer.from([0x53, 0, 0, 0, 4]));
        if (sync.status !== "I") await run(simpleQuery("ROLLBACK"));
        owner = null;
      }
    }
    void pump();
  }

  function receive(session: Session, data: Buffer) {
    session.input = session.input.length ? Buffer.concat([session.input, data]) : data;
    for (;;) {
      const input = session.input;
      if (!session.greeted) {
        // Untyped: length, then a code.
        if (input.length < 8) break;
        const length = input.readInt32BE(0);
        if (input.length < length) break;
        const code = input.readInt32BE(4);
        session.input = input.subarray(length);
        if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
          send(session, Buffer.from("N"));
          continue;
        }
        if (code === CANCEL_REQUEST || code !== PROTOCOL_3) {
          session.socket.destroy();
          return;
        }
        session.greeted = true;
        session.settings = startupSettings(input.subarray(8, length));
        session.pending.push(Buffer.from(input.subarray(0, length)));
      } else {
        if (input.length < 5) break;
        const length = 1 + input.readInt32BE(1);
        if (input.length < length) break;
        session.input = input.subarray(length);
        if (input[0] === 0x58) {
          // Terminate: the connection ends; the backend stays.
          session.socket.end();
          return;
        }
        session.pending.push(Buffer.from(input.subarray(0, length)));
      }
      if (owner !== session && !ready.includes(session)) ready.push(session);
    }
    void pump();
  }

  const server = createServer((socket) => {
    socket.setNoDelay(true);
    const session: Session = { socket, input: Buffer.alloc(0), pending: [], greeted: false, startedUp: false, settings: [], closed: false };
    sessions.add(session);
    socket.on("data", (data) => receive(session, data));
    socket.on("error", () => socket.destroy());
    socket.on("close", () => void release(session));
  });
  const port = await listenOn(server);

  return {
    host: "127.0.0.1",
    port,
    version: `PGlite ${pgliteVersion ?? "?"} (PostgreSQL ${postgresVersion ?? "?"})`,
    close: async () => {
      for (const session of sessions) session.socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      while (pumping) await new Promise((resolve) => setImmediate(resolve));
      await db.close();
    },
  };
}

/** The settings a startup packet asks for: its parameters, and each `-c name=value` of `options`. */
export function startupSettings(body: Buffer): Array<[string, string]> {
  const fields = body.toString("utf8").split("\0");
  const settings: Array<[string, string]> = [];
  for (let i = 0; i + 1 < fields.length && fields[i] !== ""; i += 2) {
    const name = fields[i]!;
    const value = fields[i + 1]!;
    if (name === "options") settings.push(...commandLineSettings(value));
    else if (!NOT_SETTINGS.has(name)) settings.push([name, value]);
  }
  return settings;
}

// libpq's `options`: whitespace-separated switches, a backslash escaping the next character;
// `-c name=value`, `-cname=value` and `--name=value` set a parameter.
function commandLineSettings(options: string): Array<[string, string]> {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  for (let i = 0; i < options.length; i++) {
    const char = options[i]!;
    if (char === "\\" && i + 1 < options.length) {
      word += options[++i];
      inWord = true;
    } else if (/\s/.test(char)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += char;
      inWord = true;
    }
  }
  if (inWord) words.push(word);
  const settings: Array<[string, string]> = [];
  for (let i = 0; i < words.length; i++) {
    let pair: string | undefined;
    if (words[i] === "-c") pair = words[++i];
    else if (words[i]!.startsWith("-c")) pair = words[i]!.slice(2);
    else if (words[i]!.startsWith("--")) pair = words[i]!.slice(2);
    const equals = pair?.indexOf("=") ?? -1;
    if (pair && equals > 0) settings.push([pair.slice(0, equals).replaceAll("-", "_"), pair.slice(equals + 1)]);
  }
  return settings;
}

/** The ErrorResponse messages of a backend output. */
function extractErrors(output: Buffer): Buffer {
  const errors: Buffer[] = [];
  for (let at = 0; at + 5 <= output.length; ) {
    const length = output.readInt32BE(at + 1);
    if (output[at] === 0x45) errors.push(output.subarray(at, at + 1 + length));
    at += 1 + length;
  }
  return Buffer.concat(errors);
}
