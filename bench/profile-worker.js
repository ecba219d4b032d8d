// @ts-check
/**
 * The gateway with timing spans, for the benchmark's profile phase only (never deployed). It runs
 * the real Worker unchanged and times what a turn waits on from outside: every D1 statement, every
 * Durable Object RPC (a turn is one: runTurn, in which the conversation's Durable Object calls the
 * backend), and inside the ConversationDO the history read and the turn insert. Whatever a request
 * spends outside those spans is the Worker's own JavaScript (routing, validation, planning,
 * presenting).
 *
 * Plain JS with JSDoc rather than TypeScript: tsconfig.node.json checks every bench/*.ts with Node's
 * types, and this file needs the Workers types (bench/tsconfig.worker.json checks it).
 *
 * In local workerd the clock advances during JavaScript execution (checked: a 46 ms loop reads
 * 46 ms), so spans measure wall time as the request saw it.
 *
 *   GET /__profile     the traces of finished requests and the DO-internal timings since the reset
 *   DELETE /__profile  reset
 */
import { AsyncLocalStorage } from "node:async_hooks";
import gateway, { A2AContextDO, ConversationDO, MetricsDO, QuotaDO } from "../worker/index.ts";

export { A2AContextDO, ConversationDO, MetricsDO, QuotaDO };

/** @typedef {{ name: string, start: number, end: number }} Span */
/** @typedef {{ path: string, status: number, total: number, backendRequestBytes: number, spans: Span[] }} Trace */
/** @typedef {{ name: string, ms: number, historyTurns: number }} InsideTiming */

/** @type {AsyncLocalStorage<{ t0: number, trace: Trace }>} */
const current = new AsyncLocalStorage();
/** @type {Trace[]} */
let traces = [];
/** @type {InsideTiming[]} */
let inside = [];
const MAX_RECORDS = 50_000;

const now = () => performance.now();

/**
 * @template T
 * @param {string} name
 * @param {() => Promise<T>} run
 * @returns {Promise<T>}
 */
async function span(name, run) {
  const context = current.getStore();
  if (!context) return run();
  const start = now() - context.t0;
  try {
    return await run();
  } finally {
    context.trace.spans.push({ name, start, end: now() - context.t0 });
  }
}

/** "SELECT conversations", "INSERT responses", …: enough to tell the turn's statements apart. */
function sqlLabel(/** @type {string} */ sql) {
  const verb = /^\s*(\w+)/.exec(sql)?.[1]?.toUpperCase() ?? "SQL";
  const table = /\b(?:from|into|update)\s+["`]?(\w+)/i.exec(sql)?.[1] ?? "?";
  return `${verb} ${table}`;
}

// ---------------------------------------------------------------------------------------------
// The backend: the OpenAI client captures globalThis.fetch when the runtime is built on the first
// request, which is after this module has run.

const realFetch = globalThis.fetch;
/**
 * @param {RequestInfo | URL} input
 * @param {RequestInit} [init]
 * @returns {Promise<Response>}
 */
globalThis.fetch = async function profiledFetch(input, init) {
  const context = current.getStore();
  if (!context) return realFetch(input, init);
  const { t0, trace } = context;
  const url = new URL(input instanceof Request ? input.url : String(input));
  const name = `backend ${url.pathname}`;
  if (typeof init?.body === "string") trace.backendRequestBytes += init.body.length;
  const start = now() - t0;
  const response = await realFetch(input, init);
  const headersAt = now() - t0;
  trace.spans.push({ name: `${name} (headers)`, start, end: headersAt });
  if (!response.body) return response;
  const body = response.body.pipeThrough(
    new TransformStream({
      flush() {
        trace.spans.push({ name: `${name} (body)`, start: headersAt, end: now() - t0 });
      },
    }),
  );
  return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
};

// ---------------------------------------------------------------------------------------------
// Bindings

/**
 * @param {any} target
 * @param {string | symbol} property
 */
function passThrough(target, property) {
  const value = Reflect.get(target, property, target);
  return typeof value === "function" ? value.bind(target) : value;
}

/** @type {WeakMap<object, object>} */
const unwrapped = new WeakMap();

/**
 * @param {D1PreparedStatement} statement
 * @param {string} label
 * @returns {D1PreparedStatement}
 */
function profiledStatement(statement, label) {
  const proxy = new Proxy(statement, {
    get(target, property) {
      if (property === "bind") return (/** @type {unknown[]} */ ...values) => profiledStatement(target.bind(...values), label);
      if (property === "all" || property === "raw" || property === "run" || property === "first") {
        return (/** @type {any[]} */ ...args) => span(`d1 ${label}`, () => /** @type {any} */ (target)[property](...args));
      }
      return passThrough(target, property);
    },
  });
  unwrapped.set(proxy, statement);
  return proxy;
}

/** @param {D1Database} db @returns {D1Database} */
function profiledD1(db) {
  return new Proxy(db, {
    get(target, property) {
      if (property === "prepare") return (/** @type {string} */ sql) => profiledStatement(target.prepare(sql), sqlLabel(sql));
      if (property === "batch") {
        return (/** @type {D1PreparedStatement[]} */ statements) =>
          span("d1 batch", () => target.batch(statements.map((statement) => /** @type {D1PreparedStatement} */ (unwrapped.get(statement) ?? statement))));
      }
      return passThrough(target, property);
    },
  });
}

const RPC_METHODS = new Set(["runTurn", "checkAccess", "describe", "interrupt", "destroy", "setTopicSummary", "read", "admit", "settle"]);

/**
 * @template {DurableObjectNamespace<any>} N
 * @param {N} namespace
 * @param {string} label
 * @returns {N}
 */
function profiledNamespace(namespace, label) {
  return new Proxy(namespace, {
    get(target, property) {
      if (property === "getByName" || property === "get") {
        return (/** @type {any[]} */ ...args) => {
          const stub = /** @type {any} */ (target)[property](...args);
          return new Proxy(stub, {
            get(stubTarget, method) {
              if (typeof method === "string" && RPC_METHODS.has(method)) {
                return (/** @type {any[]} */ ...params) => span(`do ${label}.${method}`, () => stubTarget[method](...params));
              }
              return passThrough(stubTarget, method);
            },
          });
        };
      }
      return passThrough(target, property);
    },
  });
}

/** @type {WeakMap<Env, Env>} */
const profiledEnvs = new WeakMap();

/** @param {Env} env @returns {Env} */
function profiledEnv(env) {
  let wrapped = profiledEnvs.get(env);
  if (!wrapped) {
    wrapped = {
      ...env,
      DB: profiledD1(env.DB),
      CONVERSATION: profiledNamespace(env.CONVERSATION, "conversation"),
      QUOTA: profiledNamespace(env.QUOTA, "quota"),
    };
    profiledEnvs.set(env, wrapped);
  }
  return wrapped;
}

// ---------------------------------------------------------------------------------------------
// Inside the ConversationDO (same isolate as this module in workerd). The methods patched are
// private in TypeScript only; this build alone replaces them, on the prototype.

/** @type {Record<string, (...args: any[]) => any>} */
const conversationPrototype = /** @type {any} */ (ConversationDO.prototype);
for (const method of ["turns", "insertTurn", "owner", "nextTurnNumber"]) {
  const original = conversationPrototype[method];
  if (typeof original !== "function") throw new Error(`ConversationDO.${method} is gone: update bench/profile-worker.js`);
  conversationPrototype[method] = function (/** @type {any[]} */ ...args) {
    const started = now();
    const result = original.apply(this, args);
    if (inside.length < MAX_RECORDS) {
      const historyTurns = method === "turns" ? result.length : method === "insertTurn" ? Number(args[0]?.turnNumber ?? 0) : 0;
      inside.push({ name: `ConversationDO.${method}()`, ms: now() - started, historyTurns });
    }
    return result;
  };
}

// ---------------------------------------------------------------------------------------------

export default {
  /**
   * @param {Request} request
   * @param {Env} env
   * @param {ExecutionContext} ctx
   */
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname === "/__profile") {
      if (request.method === "DELETE") {
        traces = [];
        inside = [];
        return new Response(null, { status: 204 });
      }
      return Response.json({ traces, inside });
    }
    const trace = /** @type {Trace} */ ({ path: url.pathname, status: 0, total: 0, backendRequestBytes: 0, spans: [] });
    const t0 = now();
    const handler = /** @type {NonNullable<typeof gateway.fetch>} */ (gateway.fetch);
    const response = await current.run({ t0, trace }, () => handler(request, profiledEnv(env), ctx));
    // JSON answers exist only after the turn was persisted, so this is the whole turn.
    trace.total = now() - t0;
    trace.status = response.status;
    if (traces.length < MAX_RECORDS) traces.push(trace);
    return response;
  },
  scheduled: gateway.scheduled,
};
