// A fake Splunk HTTP Event Collector on 127.0.0.1. It answers as HEC does: `Authorization: Splunk
// <token>` is required (401 "Token is required" without, 403 "Invalid token" with a wrong one), the
// body is one JSON event envelope {time, host, source, sourcetype, index, event} (400 "Invalid data
// format" otherwise), success is 200 {"text":"Success","code":0}. Every accepted event is recorded.
// Plain Node (no vitest), so vitest's globalSetup and unit tests can both start it.
//
// Tests share one collector and keep apart by tenant, a path segment of their own:
//   POST /<tenant>/services/collector/event   an event
//   PUT  /__mode/<tenant>     {mode, delayMs?}: "accept" (default), "slow" (answers after delayMs,
//                             default 10 s), "error" (503 "Server is busy"), "throttled" (429
//                             "Server is busy"), "cut" (the connection is dropped), "garbage" (200
//                             text/html "<html>proxy error</html>"), "stall-headers" (200 and its
//                             headers at once, then the body never ends). Events are recorded only
//                             when accepted (accept, slow).
//   GET  /__events/<tenant>   accepted events, oldest first
//   GET  /__refusals/<tenant> refused requests: {status, text}
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { listenOn } from "./listen.ts";

export type HecMode = "accept" | "slow" | "error" | "throttled" | "cut" | "garbage" | "stall-headers";

export interface HecEvent {
  time: number;
  host: string;
  source: string;
  sourcetype: string;
  index: string;
  event: Record<string, unknown>;
}

export interface HecCollector {
  url: string;
  token: string;
  close(): Promise<void>;
}

interface TenantState {
  mode: HecMode;
  delayMs: number;
  events: HecEvent[];
  refusals: Array<{ status: number; text: string }>;
}

const ENVELOPE_FIELDS = ["time", "host", "source", "sourcetype", "index", "event"];

function problemWith(body: unknown): string | null {
  if (body === null || typeof body !== "object" || Array.isArray(body)) return "not a JSON object";
  const envelope = body as Record<string, unknown>;
  const unknown = Object.keys(envelope).filter((key) => !ENVELOPE_FIELDS.includes(key));
  if (unknown.length > 0) return `unknown fields ${unknown.join(", ")}`;
  if (!Number.isInteger(envelope.time)) return "time is not epoch seconds";
  for (const field of ["host", "source", "sourcetype", "index"]) {
    if (typeof envelope[field] !== "string" || envelope[field] === "") return `${field} is not a non-empty string`;
  }
  if (envelope.event === null || typeof envelope.event !== "object" || Array.isArray(envelope.event)) return "event is not an object";
  return null;
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export async function startHecCollector(token = "hec-test-token-0123456789"): Promise<HecCollector> {
  const tenants = new Map<string, TenantState>();
  const tenant = (name: string): TenantState => {
    let state = tenants.get(name);
    if (!state) {
      state = { mode: "accept", delayMs: 10_000, events: [], refusals: [] };
      tenants.set(name, state);
    }
    return state;
  };
  const sockets = new Set<Socket>();
  const timers = new Set<NodeJS.Timeout>();
  const json = (res: ServerResponse, status: number, body: unknown) => {
    if (!res.destroyed) res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(body));
  };

  const server = createServer(async (req, res) => {
    const parts = new URL(req.url ?? "/", "http://localhost").pathname.split("/").filter(Boolean);
    if (parts[0] === "__mode" && parts[1] && req.method === "PUT") {
      const body = JSON.parse(await readBody(req)) as { mode: HecMode; delayMs?: number };
      Object.assign(tenant(parts[1]), { mode: body.mode, delayMs: body.delayMs ?? 10_000 });
      res.writeHead(204).end();
      return;
    }
    if (parts[0] === "__events" && parts[1]) return json(res, 200, tenant(parts[1]).events);
    if (parts[0] === "__refusals" && parts[1]) return json(res, 200, tenant(parts[1]).refusals);
    if (req.method !== "POST" || parts.length !== 4 || parts.slice(1).join("/") !== "services/collector/event") {
      return json(res, 404, { text: "The requested URL was not found on this server.", code: 404 });
    }
    const state = tenant(parts[0]);
    const text = await readBody(req);
    const refuse = (status: number, answer: { text: string; code: number }) => {
      state.refusals.push({ status, text: answer.text });
      json(res, status, answer);
    };
    const authorization = req.headers.authorization;
    if (!authorization) return refuse(401, { text: "Token is required", code: 2 });
    if (authorization !== `Splunk ${token}`) return refuse(403, { text: "Invalid token", code: 4 });
    if (req.headers["content-type"] !== "application/json") return refuse(400, { text: "Invalid data format", code: 6 });
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return refuse(400, { text: "Invalid data format", code: 6 });
    }
    const problem = problemWith(body);
    if (problem) return refuse(400, { text: `Invalid data format: ${problem}`, code: 6 });
    if (state.mode === "error") return refuse(503, { text: "Server is busy", code: 9 });
    if (state.mode === "throttled") return refuse(429, { text: "Server is busy", code: 9 });
    if (state.mode === "cut") {
      state.refusals.push({ status: 0, text: "cut" });
      req.socket.destroy();
      return;
    }
    if (state.mode === "garbage") {
      state.refusals.push({ status: 200, text: "garbage" });
      res.writeHead(200, { "Content-Type": "text/html" }).end("<html>proxy error</html>");
      return;
    }
    if (state.mode === "stall-headers") {
      state.refusals.push({ status: 200, text: "stall-headers" });
      res.writeHead(200, { "Content-Type": "application/json" });
      res.write('{"text":');
      return;
    }
    const accept = () => {
      // A client that gave up before the answer did not deliver the event.
      if (res.destroyed) return;
      state.events.push(body as HecEvent);
      json(res, 200, { text: "Success", code: 0 });
    };
    if (state.mode === "slow") {
      const timer = setTimeout(() => {
        timers.delete(timer);
        accept();
      }, state.delayMs);
      timers.add(timer);
      return;
    }
    accept();
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  const port = await listenOn(server);
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    close: () =>
      new Promise<void>((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
