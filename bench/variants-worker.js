// @ts-check
/**
 * Variants of the floor, each adding one thing a Parley turn does, so the profile phase can price
 * the steps one at a time (req/s and workerd CPU per request against the bare passthrough). Only
 * `npm run bench` uses it; its bindings are in bench/variants.wrangler.toml.
 *
 * Plain JS with JSDoc rather than TypeScript: it needs the Workers types (DurableObject, D1), which
 * tsconfig.node.json (it checks every bench/*.ts) does not have; bench/tsconfig.worker.json checks it.
 *
 * POST /v/<variant> with {query, conversation_id?}; every variant makes the floor's one backend call.
 */
import { DurableObject } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/d1";
import { sql } from "drizzle-orm";
import OpenAI from "openai";
import { postModel, streamModel } from "../worker/backends/model-request.ts";

const MODEL = "scripted/parley-small";

/**
 * @typedef {{ BACKEND_URL: string, DB: D1Database, TURNS: DurableObjectNamespace<VariantDO> }} VariantEnv
 */

/**
 * A stand-in for ConversationDO's turn bookkeeping: next number, insert, control stream.
 * @extends {DurableObject<VariantEnv>}
 */
export class VariantDO extends DurableObject {
  /** @type {WritableStreamDefaultWriter<Uint8Array> | null} */
  control = null;

  /** @param {DurableObjectState} ctx @param {VariantEnv} env */
  constructor(ctx, env) {
    super(ctx, env);
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS turns (n INTEGER PRIMARY KEY, body TEXT NOT NULL)");
    ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS running (n INTEGER PRIMARY KEY, question TEXT NOT NULL)");
  }

  /** @param {boolean} withControl */
  async begin(withControl) {
    const row = this.ctx.storage.sql.exec("SELECT MAX(n) AS n FROM turns").one();
    const next = Number(row.n ?? 0) + 1;
    if (!withControl) return { next };
    const channel = new TransformStream();
    this.control = channel.writable.getWriter();
    return { next, control: channel.readable };
  }

  /**
   * The new turn's minimum: the Durable Object makes the backend call itself and records the turn,
   * in the one RPC the Worker makes. `marked`: a running marker is stored once the call is on its
   * way, as the gateway does, and removed with the turn's commit (what a restart mid-turn needs),
   * so the turn commits twice. `viaSdk`: the call is made as the gateway makes it (the SDK's
   * prepared request, its parsers).
   * @param {string} question @param {boolean} marked @param {boolean} viaSdk
   */
  async turn(question, marked = false, viaSdk = false) {
    const { next } = await this.begin(false);
    const sql = this.ctx.storage.sql;
    const sent = () => {
      if (marked) sql.exec("INSERT OR REPLACE INTO running (n, question) VALUES (?, ?)", next, question);
    };
    let body;
    if (viaSdk) {
      body = JSON.stringify(await postModel(sdk(this.env), "/responses", JSON.stringify({ model: MODEL, input: question, stream: false }), { ...open(), sent }));
    } else {
      const answer = backend(this.env, question, false);
      sent();
      body = await (await answer).text();
    }
    this.ctx.storage.transactionSync(() => {
      if (marked) sql.exec("DELETE FROM running WHERE n = ?", next);
      sql.exec("INSERT OR REPLACE INTO turns (n, body) VALUES (?, ?)", next, body);
    });
    return body;
  }

  /** @param {number} n @param {string} body */
  async complete(n, body) {
    this.ctx.storage.sql.exec("INSERT OR REPLACE INTO turns (n, body) VALUES (?, ?)", n, body);
    await this.control?.close().catch(() => undefined);
    this.control = null;
  }
}

/** @type {OpenAI | null} */
let client = null;

/** @param {VariantEnv} env */
function sdk(env) {
  // Built once per isolate, as the gateway's runtime does; same timeout and retries as its defaults.
  client ??= new OpenAI({ baseURL: env.BACKEND_URL, apiKey: "not-needed", timeout: 180_000, maxRetries: 2 });
  return client;
}

/** A call that nothing stops early. */
const open = () => ({ signal: new AbortController().signal });

/** @param {VariantEnv} env @param {string} question @param {boolean} stream */
function backend(env, question, stream) {
  return fetch(`${env.BACKEND_URL}/responses`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(stream ? { model: MODEL, input: question, stream: true } : { model: MODEL, input: question }),
  });
}

/** The floor's answer: the backend's JSON, passed through. @param {Response} answer */
function passThrough(answer) {
  return new Response(answer.body, { status: answer.status, headers: { "content-type": "application/json" } });
}

/** @param {VariantEnv} env @param {string} id */
function selectConversation(env, id) {
  return env.DB.prepare("SELECT * FROM conversations WHERE id = ?").bind(id).all();
}

const UPSERT = `INSERT INTO conversations (id, user_id, last_used_model, last_used_provider, created_at, last_message_at, message_count, topic_summary, last_response_id)
  VALUES (?, 'bench', 'parley-small', 'scripted', ?, ?, 1, NULL, ?)
  ON CONFLICT (id) DO UPDATE SET message_count = conversations.message_count + 1, last_message_at = excluded.last_message_at,
    last_response_id = COALESCE(excluded.last_response_id, conversations.last_response_id)
  WHERE conversations.user_id = excluded.user_id RETURNING *`;
const INSERT_RESPONSE = "INSERT INTO responses (response_id, conversation_id, user_id, created_at) VALUES (?, ?, 'bench', ?) ON CONFLICT (response_id) DO NOTHING";

/** @param {VariantEnv} env @param {string} id */
function writeStatements(env, id) {
  const at = new Date().toISOString();
  const responseId = `resp_${crypto.randomUUID()}`;
  return [env.DB.prepare(UPSERT).bind(id, at, at, responseId), env.DB.prepare(INSERT_RESPONSE).bind(responseId, id, at)];
}

/**
 * The floor's JSON backend call with a variant's work before it and after it. The answer is read
 * whole before the work after it, as a turn that records its answer must; then it is passed on.
 * @template T
 * @param {VariantEnv} env @param {string} question
 * @param {() => Promise<T>} before
 * @param {(body: string, begun: T) => Promise<unknown>} after
 */
async function aroundBackend(env, question, before, after) {
  const begun = await before();
  const answer = await backend(env, question, false);
  const body = await answer.text();
  await after(body, begun);
  return new Response(body, { status: answer.status, headers: { "content-type": "application/json" } });
}

/** @type {Record<string, (env: VariantEnv, question: string, id: string) => Promise<Response>>} */
const VARIANTS = {
  // The floor itself, inside this Worker: the baseline every other variant is compared with.
  "passthrough-json": async (env, question) => passThrough(await backend(env, question, false)),

  // The backend call as Parley makes it (stream: true) but read as bytes: the price of SSE framing.
  "stream-read-raw": async (env, question) => {
    const answer = await backend(env, question, true);
    const bytes = await answer.arrayBuffer();
    return Response.json({ bytes: bytes.byteLength });
  },

  // Parley's backend call for streams (worker/backends/model-request.ts: the openai SDK's prepared
  // request, one fetch, the SDK's event parser), every event parsed and iterated.
  "sdk-stream": async (env, question) => {
    const body = JSON.stringify({ model: MODEL, input: question, stream: true, store: false });
    const stream = /** @type {AsyncIterable<{ type: string, delta?: string }>} */ (await streamModel(sdk(env), "/responses", body, open()));
    let text = "";
    for await (const event of stream) if (event.type === "response.output_text.delta") text += event.delta;
    return Response.json({ text });
  },

  // The same call without streaming, as Parley makes it for JSON answers.
  "sdk-json": async (env, question) => {
    const body = JSON.stringify({ model: MODEL, input: question, stream: false, store: false });
    const response = /** @type {{ output: unknown[] }} */ (await postModel(sdk(env), "/responses", body, open()));
    return Response.json({ items: response.output.length });
  },

  // One D1 read before the backend call (Parley's conversation lookup), raw binding.
  "d1-read": async (env, question, id) => {
    await selectConversation(env, id);
    return passThrough(await backend(env, question, false));
  },

  // The same read through drizzle, as Parley's store does it.
  "d1-read-drizzle": async (env, question, id) => {
    await drizzle(env.DB).all(sql`SELECT * FROM conversations WHERE id = ${id}`);
    return passThrough(await backend(env, question, false));
  },

  // Parley's first D1 traffic per turn: the read, then the index upsert and the response row in parallel.
  "d1-turn": (env, question, id) =>
    aroundBackend(
      env,
      question,
      () => selectConversation(env, id),
      () => Promise.all(writeStatements(env, id).map((statement) => statement.all())),
    ),

  // The two writes as one batch: one round trip instead of two.
  "d1-turn-batched": (env, question, id) =>
    aroundBackend(
      env,
      question,
      () => selectConversation(env, id),
      () => env.DB.batch(writeStatements(env, id)),
    ),

  // Parley's Durable Object traffic per turn without the history: begin, then complete.
  "do-rpc": (env, question, id) => {
    const stub = env.TURNS.getByName(id);
    return aroundBackend(
      env,
      question,
      async () => stub.begin(false),
      (body, { next }) => stub.complete(next, body),
    );
  },

  // The same with the control stream Parley's beginTurn hands out (a ReadableStream over RPC).
  "do-rpc-control-stream": (env, question, id) => {
    const stub = env.TURNS.getByName(id);
    return aroundBackend(
      env,
      question,
      async () => {
        const { next, control } = await stub.begin(true);
        return { next, reading: control ? new Response(control).arrayBuffer() : Promise.resolve(null) };
      },
      async (body, { next, reading }) => {
        await stub.complete(next, body);
        await reading;
      },
    );
  },

  // The round-trips a persisted turn of the previous design made, with none of its other work: the
  // DO hands out the turn, then its completion and the record's one D1 batch go side by side.
  "persisted-minimum": (env, question, id) => {
    const stub = env.TURNS.getByName(id);
    return aroundBackend(
      env,
      question,
      async () => stub.begin(false),
      (body, { next }) => Promise.all([stub.complete(next, body), env.DB.batch(writeStatements(env, id))]),
    );
  },

  // The round-trips a persisted turn makes now, with none of its other work: one RPC to the
  // conversation's Durable Object, which calls the backend and records the turn (the record store
  // is fed after the answer, off this path).
  "do-turn-minimum": async (env, question, id) =>
    new Response(await env.TURNS.getByName(id).turn(question), { headers: { "content-type": "application/json" } }),

  // The same with a running marker written as the backend call leaves (a restart records the turn).
  "do-turn-marked": async (env, question, id) =>
    new Response(await env.TURNS.getByName(id).turn(question, true), { headers: { "content-type": "application/json" } }),

  // The same with the call made as the gateway makes it: the current design's whole minimum.
  "do-turn-marked-sdk": async (env, question, id) =>
    new Response(await env.TURNS.getByName(id).turn(question, true, true), { headers: { "content-type": "application/json" } }),

  // The same for a new conversation: a new Durable Object every time (its SQLite file and tables
  // created, its first commit), as a plain OpenAI client's /v1/responses request makes one.
  "do-turn-new-object": async (env, question) =>
    new Response(await env.TURNS.getByName(crypto.randomUUID()).turn(question, true, true), { headers: { "content-type": "application/json" } }),
};

export default {
  /** @param {Request} request @param {VariantEnv} env */
  async fetch(request, env) {
    const { pathname } = new URL(request.url);
    if (request.method === "GET" && pathname === "/liveness") return Response.json({ alive: true });
    const variant = VARIANTS[pathname.replace(/^\/v\//, "")];
    if (request.method !== "POST" || !variant) return Response.json({ variants: Object.keys(VARIANTS) }, { status: 404 });
    const body = /** @type {{ query?: string, conversation_id?: string }} */ (await request.json());
    return variant(env, body.query ?? "", body.conversation_id ?? "bench");
  },
};
