// A WebSocket-to-TCP relay of the kind @neondatabase/serverless expects for a non-Neon Postgres
// (`wsProxy`): each WebSocket connection to /v1?address=host:port becomes a TCP connection to that
// address, with bytes piped both ways. Only loopback targets are accepted, so a relay left running on
// a developer machine cannot be used to reach anything else.
import { createRequire } from "node:module";
import { connect, isIP, type Socket } from "node:net";
import type { WebSocket, WebSocketServer as WebSocketServerType } from "ws";

// Loaded through Node's own require: the worker test project resolves imports with workerd/browser
// conditions (vitest's globalSetup goes through that resolver), and those pick ws's browser stub.
const { WebSocketServer } = createRequire(import.meta.url)("ws") as { WebSocketServer: typeof WebSocketServerType };

export interface WsRelay {
  /** ws://127.0.0.1:PORT, the value for `database.postgres.ws_proxy`. */
  url: string;
  close(): Promise<void>;
}

// Stop reading from the database while this much is still queued toward the WebSocket.
const HIGH_WATER = 1 << 20;

export async function startWsRelay(): Promise<WsRelay> {
  const server = new WebSocketServer({ host: "127.0.0.1", port: 0 });
  const sockets = new Set<Socket>();
  await new Promise<void>((resolve, reject) => {
    server.once("listening", resolve);
    server.once("error", reject);
  });

  server.on("connection", (ws, request) => {
    const target = parseTarget(request.url ?? "");
    if (!target) {
      ws.close(1008, "expected /v1?address=<loopback host>:<port>");
      return;
    }
    const socket = connect(target);
    sockets.add(socket);
    pipe(ws, socket);
    socket.once("close", () => sockets.delete(socket));
  });

  const { port } = server.address() as { port: number };
  return {
    url: `ws://127.0.0.1:${port}`,
    close: async () => {
      for (const client of server.clients) client.terminate();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
    },
  };
}

function pipe(ws: WebSocket, socket: Socket): void {
  // Writes made before the TCP connection is up are queued by the socket itself. With ws's default
  // binaryType every message arrives as one Buffer.
  ws.on("message", (data) => socket.write(data as Buffer));
  socket.on("data", (chunk) => {
    ws.send(chunk, { binary: true }, () => {
      if (socket.isPaused() && ws.bufferedAmount <= HIGH_WATER) socket.resume();
    });
    if (ws.bufferedAmount > HIGH_WATER) socket.pause();
  });
  ws.on("close", () => socket.end());
  ws.on("error", () => socket.destroy());
  socket.on("close", () => ws.close());
  socket.on("error", () => ws.terminate());
}

function parseTarget(url: string): { host: string; port: number } | null {
  const parsed = new URL(url, "ws://relay");
  const address = parsed.searchParams.get("address");
  if (parsed.pathname !== "/v1" || !address) return null;
  // The port follows the last colon, so an unbracketed IPv6 host such as ::1 survives.
  const colon = address.lastIndexOf(":");
  const host = address.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
  const port = Number(address.slice(colon + 1));
  if (colon < 0 || !Number.isInteger(port) || port <= 0 || port > 65535 || !isLoopback(host)) return null;
  return { host, port };
}

function isLoopback(host: string): boolean {
  if (host === "localhost") return true;
  if (isIP(host) === 4) return host.startsWith("127.");
  return isIP(host) === 6 && host === "::1";
}
