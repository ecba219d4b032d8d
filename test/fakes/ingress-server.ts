// A fake ingress server (the upload service the data exporter sends to), on 127.0.0.1. It takes what
// the real one takes: a multipart POST with one part `file` (a filename and the type
// application/vnd.redhat.<service>.periodic+tar) holding a gzip tarball, and answers 202 with a
// request id. It unpacks every tarball and records each file, so tests check what arrived.
// Plain Node (no vitest), so vitest's globalSetup and unit tests can both start it.
//
// Tests share one server and keep apart by tenant, a path segment of their own:
//   POST   /upload/<tenant>      an upload; answered as the tenant's mode says
//   PUT    /__mode/<tenant>      {mode, status?, times?}: how the next uploads are answered
//   GET    /__uploads/<tenant>   every upload received so far (also refused ones), oldest first
// Modes: "accept" (202, the default), "error" (`status`, default 500), "stall" (never answers; the
// client must give up), "cut" (the connection is dropped after the body arrived), "slow" (202 after
// `delayMs`, default 10 s), "garbage" (200 text/html "<html>proxy error</html>", not the 202 the
// client needs), "stall-headers" (202 and its headers at once, then the body never ends). With
// `times`, the mode applies to that many uploads and then "accept" returns.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { gunzipSync } from "node:zlib";
import { unpackTar } from "modern-tar";
import { listenOn } from "./listen.ts";

export type IngressMode = "accept" | "error" | "stall" | "cut" | "slow" | "garbage" | "stall-headers";

export interface IngressFile {
  name: string;
  content: string;
}

export interface IngressUpload {
  /** How it was answered: 202, the error status, or "stalled" / "cut" / "slow" / "garbage" / "stall-headers". */
  answer: number | "stalled" | "cut" | "slow" | "garbage" | "stall-headers";
  authorization: string | null;
  userAgent: string | null;
  /** Names of the multipart fields. */
  fields: string[];
  filename: string | null;
  partType: string | null;
  files: IngressFile[];
  /** What was wrong with the upload, if anything (the answer is then 400). */
  problem: string | null;
}

export interface IngressServer {
  url: string;
  close(): Promise<void>;
}

const PART_TYPE = /^application\/vnd\.redhat\.[A-Za-z0-9_-]+\.periodic\+tar$/;

interface TenantState {
  mode: IngressMode;
  status: number;
  delayMs: number;
  /** Uploads left in this mode; null: until changed. */
  times: number | null;
  uploads: IngressUpload[];
}

async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** Parses and unpacks an upload; what a real ingress server would refuse becomes `problem`. */
async function inspect(req: IncomingMessage, body: Buffer): Promise<Omit<IngressUpload, "answer">> {
  const upload: Omit<IngressUpload, "answer"> = {
    authorization: req.headers.authorization ?? null,
    userAgent: req.headers["user-agent"] ?? null,
    fields: [],
    filename: null,
    partType: null,
    files: [],
    problem: null,
  };
  try {
    const contentType = req.headers["content-type"] ?? "";
    if (!contentType.startsWith("multipart/form-data")) throw new Error(`not multipart: ${contentType}`);
    const form = await new Request("http://ingress.invalid/", { method: "POST", headers: { "content-type": contentType }, body: body }).formData();
    upload.fields = [...form.keys()];
    const file = form.get("file");
    if (!(file instanceof File)) throw new Error("no file part named `file`");
    upload.filename = file.name || null;
    upload.partType = file.type || null;
    if (!upload.filename) throw new Error("the file part has no filename");
    if (!upload.partType || !PART_TYPE.test(upload.partType)) throw new Error(`unexpected part type ${upload.partType}`);
    const tar = gunzipSync(Buffer.from(await file.arrayBuffer()));
    const entries = await unpackTar(new Uint8Array(tar), { strict: true });
    const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
    for (const entry of entries) {
      if (entry.header.type !== "file" || !entry.data) throw new Error(`unexpected entry ${entry.header.name} (${entry.header.type})`);
      upload.files.push({ name: entry.header.name, content: decoder.decode(entry.data) });
    }
  } catch (error) {
    upload.problem = error instanceof Error ? error.message : String(error);
  }
  return upload;
}

export async function startIngressServer(): Promise<IngressServer> {
  const tenants = new Map<string, TenantState>();
  const tenant = (name: string): TenantState => {
    let state = tenants.get(name);
    if (!state) {
      state = { mode: "accept", status: 500, delayMs: 10_000, times: null, uploads: [] };
      tenants.set(name, state);
    }
    return state;
  };
  const sockets = new Set<Socket>();
  let requestCounter = 0;

  const json = (res: ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { "Content-Type": "application/json" }).end(JSON.stringify(body));
  };

  const server = createServer(async (req, res) => {
    try {
      const [, action, name] = new URL(req.url ?? "/", "http://localhost").pathname.split("/");
      if (!name) return json(res, 404, { error: "not found" });
      const state = tenant(decodeURIComponent(name));
      if (action === "__mode" && req.method === "PUT") {
        const body = JSON.parse((await readBody(req)).toString("utf8")) as { mode: IngressMode; status?: number; delayMs?: number; times?: number };
        Object.assign(state, { mode: body.mode, status: body.status ?? 500, delayMs: body.delayMs ?? 10_000, times: body.times ?? null });
        res.writeHead(204).end();
        return;
      }
      if (action === "__uploads" && req.method === "GET") return json(res, 200, state.uploads);
      if (action !== "upload" || req.method !== "POST") return json(res, 404, { error: "not found" });

      const body = await readBody(req);
      const upload = await inspect(req, body);
      const mode = state.mode;
      if (state.times !== null && --state.times <= 0) Object.assign(state, { mode: "accept", times: null });
      if (mode === "stall") {
        state.uploads.push({ ...upload, answer: "stalled" });
        return; // never answered; the socket goes when the client gives up or the server closes
      }
      if (mode === "cut") {
        state.uploads.push({ ...upload, answer: "cut" });
        req.socket.destroy();
        return;
      }
      if (mode === "slow") {
        state.uploads.push({ ...upload, answer: "slow" });
        await new Promise((resolve) => setTimeout(resolve, state.delayMs));
        if (!res.destroyed) json(res, 202, { request_id: `ingress-${++requestCounter}` });
        return;
      }
      if (mode === "garbage") {
        state.uploads.push({ ...upload, answer: "garbage" });
        res.writeHead(200, { "Content-Type": "text/html" }).end("<html>proxy error</html>");
        return;
      }
      if (mode === "stall-headers") {
        state.uploads.push({ ...upload, answer: "stall-headers" });
        res.writeHead(202, { "Content-Type": "application/json" });
        res.write('{"request_id":');
        return; // the body never ends
      }
      if (mode === "error") {
        state.uploads.push({ ...upload, answer: state.status });
        return json(res, state.status, { errors: [{ status: state.status, detail: "the fake ingress server was told to fail" }] });
      }
      if (upload.problem) {
        state.uploads.push({ ...upload, answer: 400 });
        return json(res, 400, { errors: [{ status: 400, detail: upload.problem }] });
      }
      state.uploads.push({ ...upload, answer: 202 });
      json(res, 202, { request_id: `ingress-${++requestCounter}`, upload: { account_number: "0000000", org_id: "0000000" } });
    } catch (error) {
      if (!res.headersSent) json(res, 500, { error: String(error) });
    }
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  const port = await listenOn(server);
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}
