// Many turns at once, as a loaded gateway sees them: none may hang, whatever the record store. A
// request that waits on another request's I/O never finishes in workerd, so each answer is held to
// the backend time-out plus a margin (slower counts as a hang), not to a performance target.
// The Postgres part needs a real server: the embedded PGlite that test/fakes/postgres.ts falls back
// to on machines without one runs one connection at a time, which is not the load this test is
// about. Without a server that part is reported as skipped, the reason in its name and the output.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { applyPostgresMigrations, createTestNamespace, dropNamespace, testPostgresKind, testPostgresSettings } from "../fakes/postgres.ts";
import { startScriptedBackend, type ScriptedBackend } from "../fakes/scripted-backend.ts";
import { startWsRelay, type WsRelay } from "../fakes/ws-relay.ts";
import { startGateway, type RunningGateway } from "./gateway.ts";

/** The backend time-out of the Postgres configuration; the bundled one keeps the default (180 s). */
const BACKEND_TIMEOUT_S = 10;
const HANG_MS = (BACKEND_TIMEOUT_S + 5) * 1000;
/** Turns each client sends, one after another: enough for a hang to show under sustained load. */
const SHARED_ROUNDS = 4;
const OWN_ROUNDS = 40;

const REAL_POSTGRES = (await testPostgresKind()) === "server";
const NEEDS_SERVER = "needs a real PostgreSQL server, not run against the embedded PGlite (one connection at a time)";
if (!REAL_POSTGRES) console.warn(`\n!!! 50 concurrent turns with Postgres: ${NEEDS_SERVER}. Start a server on 127.0.0.1:5432 (or set PGHOST/PGPORT) to run it.\n`);

let backend: ScriptedBackend;
let relay: WsRelay;
let namespace: string | undefined;

beforeAll(async () => {
  [backend, relay, namespace] = await Promise.all([startScriptedBackend(), startWsRelay(), REAL_POSTGRES ? createTestNamespace() : undefined]);
  if (namespace) await applyPostgresMigrations(namespace);
});

afterAll(async () => {
  await Promise.all([backend?.close(), relay?.close(), namespace && dropNamespace(namespace)]);
});

interface Answer {
  status: number;
  body: { conversation_id: string; response: string };
  ms: number;
}

async function timedQuery(gateway: RunningGateway, body: Record<string, unknown>): Promise<Answer> {
  const started = Date.now();
  try {
    const response = await fetch(`${gateway.url}/v1/query?user_id=loaded`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(HANG_MS),
    });
    const answer = (await response.json()) as Answer["body"];
    return { status: response.status, body: answer, ms: Date.now() - started };
  } catch {
    // Not answered within HANG_MS: a hang.
    return { status: 0, body: { conversation_id: "", response: "" }, ms: Date.now() - started };
  }
}

const STORES = [
  // The bundled configuration, as `npm start` and a first deployment run it (its files are read
  // through the assets binding, which is I/O of whichever request loads the configuration first).
  ["D1", () => ({ vars: { PARLEY_BACKEND_URL: backend.url } })] as const,
  [
    "Postgres",
    () => ({
      config: {
        name: "Parley concurrency test",
        inference_backend: { url: backend.url, timeout: BACKEND_TIMEOUT_S },
        authentication: { module: "noop" },
        customization: { agent_card_path: "agent-card.yaml" },
        database: { postgres: testPostgresSettings(namespace!, relay.url) },
      },
    }),
  ] as const,
];

// Postgres needs the real server here: without one it is reported skipped, and the warning above says why.
for (const [store, setup] of STORES) describe.skipIf(store === "Postgres" && !REAL_POSTGRES)(`50 concurrent turns with ${store}`, () => {
  let gateway: RunningGateway;

  beforeAll(async () => {
    gateway = await startGateway(setup());
  }, 120_000);

  afterAll(() => gateway?.stop());

  it("answers every one, 25 on one conversation and 25 on their own", { timeout: 120_000 }, async () => {
    const first = await timedQuery(gateway, { query: "the shared conversation" });
    expect(first.status).toBe(200);
    const shared = first.body.conversation_id;

    // 50 clients at once, each sending its turns one after another for a while (a hang shows under
    // sustained load, not in one burst): 25 continue the shared conversation, 25 keep their own.
    const client = async (rounds: number, first: Record<string, unknown>, next: (answer: Answer, turn: number) => Record<string, unknown>) => {
      const answers = [await timedQuery(gateway, first)];
      for (let turn = 2; turn <= rounds && answers.at(-1)!.status === 200; turn++) {
        answers.push(await timedQuery(gateway, next(answers.at(-1)!, turn)));
      }
      return answers;
    };
    const clients = await Promise.all([
      ...Array.from({ length: 25 }, (_, i) => client(SHARED_ROUNDS, { query: `shared ${i}`, conversation_id: shared }, (_, turn) => ({ query: `shared ${i} turn ${turn}`, conversation_id: shared }))),
      ...Array.from({ length: 25 }, (_, i) => client(OWN_ROUNDS, { query: `own ${i}` }, (answer, turn) => ({ query: `own ${i} turn ${turn}`, conversation_id: answer.body.conversation_id }))),
    ]);

    for (const answer of clients.flat()) {
      expect(answer.status).toBe(200);
      expect(answer.ms).toBeLessThan(HANG_MS);
    }
    // Every turn of the shared conversation saw all those recorded before it: 2, 3, ... user turns.
    const turns = clients.slice(0, 25).flat().map((answer) => Number(/\[user_turns=(\d+)\]/.exec(answer.body.response)?.[1]));
    expect(turns.sort((a, b) => a - b)).toEqual(Array.from({ length: 25 * SHARED_ROUNDS }, (_, i) => i + 2));
    // Each of the others kept its own conversation, all of whose turns it saw.
    for (const own of clients.slice(25)) {
      expect(new Set(own.map((answer) => answer.body.conversation_id)).size).toBe(1);
      expect(own.at(-1)!.body.response).toMatch(new RegExp(`^\\[user_turns=${OWN_ROUNDS}\\]`));
    }
    expect(new Set(clients.slice(25).map((own) => own[0]!.body.conversation_id)).size).toBe(25);
  });
});

