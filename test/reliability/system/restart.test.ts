// `wrangler dev` killed with SIGKILL in the middle of a load run and started again on the same state
// (RELIABILITY.md "Restart under load"): no turn a client was told succeeded may be lost. The
// gateway runs as developers run it (`npm run dev`, state in PARLEY_STATE_DIR, D1 migrated first),
// in its own process group, so the kill takes wrangler and its workerd at once, as a crash would.
// Clients keep conversations of their own and one shared conversation, over /v1/query and
// /v1/streaming_query; a turn counts as told-succeeded on a 200 answer, or a stream's `end` event.
// After each restart every such turn must be in its conversation's history exactly once, and the
// next question must be answered with exactly that history (as the model receives it).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGatewayDev, type DevTarget } from "../../../bench/targets.ts";
import { startScriptedBackend, type ScriptedBackend } from "../../fakes/scripted-backend.ts";

const FULL = process.env.RELIABILITY === "full";
/** Kill-and-restart cycles, clients, and how long the load runs before each kill. */
const CYCLES = FULL ? 3 : 1;
const OWN_CLIENTS = FULL ? 24 : 8;
const SHARED_CLIENTS = FULL ? 8 : 4;
const LOAD_MS = FULL ? 8_000 : 3_000;

let backend: ScriptedBackend;
let stateDir: string;
let gateway: DevTarget | null = null;

beforeAll(async () => {
  // A little time per token, so streams are in flight when the kill comes.
  backend = await startScriptedBackend({ tokenDelayMs: 5 });
  stateDir = await mkdtemp(join(tmpdir(), "parley-restart-"));
});

afterAll(async () => {
  await gateway?.stop();
  await backend?.close();
  await rm(stateDir, { recursive: true, force: true });
});

interface Sent {
  client: string;
  user: string;
  question: string;
  conversation: string;
  /** The client was told the turn succeeded. */
  succeeded: boolean;
}

const USER_OF_SHARED = "restart-shared";

async function ask(url: string, user: string, question: string, conversation: string | null, stream: boolean): Promise<{ ok: boolean; conversation: string | null; answer: string | null }> {
  const body = JSON.stringify({ query: question, ...(conversation ? { conversation_id: conversation } : {}) });
  const response = await fetch(`${url}/v1/${stream ? "streaming_query" : "query"}?user_id=${user}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body,
    signal: AbortSignal.timeout(30_000),
  });
  const text = await response.text();
  if (response.status !== 200) return { ok: false, conversation: null, answer: null };
  if (!stream) {
    const answer = JSON.parse(text) as { conversation_id: string; response: string };
    return { ok: true, conversation: answer.conversation_id, answer: answer.response };
  }
  const events = text
    .split("\n\n")
    .filter((block) => block.startsWith("data: "))
    .map((block) => JSON.parse(block.slice(6)) as { event: string; data: Record<string, unknown> });
  const start = events.find((event) => event.event === "start");
  const end = events.find((event) => event.event === "end");
  const complete = events.find((event) => event.event === "turn_complete");
  return { ok: end !== undefined, conversation: start ? String(start.data.conversation_id) : null, answer: complete ? String(complete.data.token) : null };
}

/** One client: turns one after another until the first failure (the kill), each recorded. */
async function client(url: string, name: string, user: string, conversation: string | null, sent: Sent[]): Promise<string | null> {
  let current = conversation;
  for (let n = 0; ; n++) {
    const question = `${name} turn ${n}`;
    let outcome: Awaited<ReturnType<typeof ask>>;
    try {
      outcome = await ask(url, user, question, current, n % 2 === 1);
    } catch {
      outcome = { ok: false, conversation: null, answer: null };
    }
    current ??= outcome.conversation;
    if (current) sent.push({ client: name, user, question, conversation: current, succeeded: outcome.ok });
    if (!outcome.ok) return current;
  }
}

type History = { chat_history: Array<{ messages: Array<{ type: string; content: string }> }> };

describe("wrangler dev killed (SIGKILL) mid-load and restarted on the same state", () => {
  it(`loses no turn a client was told succeeded (${CYCLES} cycle(s))`, { timeout: 600_000 }, async () => {
    const failures: string[] = [];
    const figures = { succeeded: 0, inDoubt: 0, inDoubtKept: 0, conversations: 0, restartMs: [] as number[] };
    const sent: Sent[] = [];
    gateway = await startGatewayDev(backend.url, stateDir);
    const shared = (await ask(gateway.url, USER_OF_SHARED, "the shared conversation begins", null, false)).conversation!;
    sent.push({ client: "setup", user: USER_OF_SHARED, question: "the shared conversation begins", conversation: shared, succeeded: true });
    const owned = new Map<string, string>();

    for (let cycle = 1; cycle <= CYCLES; cycle++) {
      const url = gateway.url;
      const clients = [
        ...Array.from({ length: OWN_CLIENTS }, (_, i) => {
          const name = `own-${i}`;
          return client(url, `${name} cycle ${cycle}`, `restart-${name}`, owned.get(name) ?? null, sent).then((id) => void (id && owned.set(name, id)));
        }),
        ...Array.from({ length: SHARED_CLIENTS }, (_, i) => client(url, `shared-${i} cycle ${cycle}`, USER_OF_SHARED, shared, sent)),
      ];
      await sleep(LOAD_MS);
      // The crash: the whole process group (npm, wrangler, workerd) at once, no chance to flush.
      process.kill(-gateway.child.pid, "SIGKILL");
      await Promise.all(clients);
      await gateway.child.exited;
      await gateway.stop();
      const restarted = Date.now();
      gateway = await startGatewayDev(backend.url, stateDir);
      figures.restartMs.push(Date.now() - restarted);
    }

    // Every conversation, checked on the last restart.
    const conversations = new Map<string, { user: string; turns: Sent[] }>();
    for (const turn of sent) {
      const entry = conversations.get(turn.conversation) ?? { user: turn.user, turns: [] };
      entry.turns.push(turn);
      conversations.set(turn.conversation, entry);
    }
    figures.conversations = conversations.size;
    for (const [id, { user, turns }] of conversations) {
      const response = await fetch(`${gateway.url}/v1/conversations/${id}?user_id=${user}`);
      if (response.status !== 200) {
        failures.push(`conversation ${id}: ${response.status} ${await response.text()}`);
        continue;
      }
      const history = ((await response.json()) as History).chat_history.map((turn) => turn.messages.find((message) => message.type === "user")?.content ?? "");
      for (const turn of turns) {
        const times = history.filter((question) => question === turn.question).length;
        if (turn.succeeded) {
          figures.succeeded++;
          if (times !== 1) failures.push(`"${turn.question}" was answered 200 but is in the history ${times} time(s)`);
        } else {
          figures.inDoubt++;
          if (times > 1) failures.push(`"${turn.question}" (cut by the kill) is in the history ${times} times`);
          if (times === 1) figures.inDoubtKept++;
        }
      }
      // The next question sees exactly that history.
      const next = `after the restart ${id.slice(0, 8)}`;
      const answer = await ask(gateway.url, user, next, id, false);
      const seen = backend.requests
        .filter((request) => request.path === "/v1/responses" && JSON.stringify(request.body).includes(next))
        .map((request) => ((request.body as { input: Array<{ role?: string; content: unknown }> }).input ?? []).filter((item) => item.role === "user").map((item) => (typeof item.content === "string" ? item.content : (item.content as Array<{ text?: string }>).map((part) => part.text ?? "").join("\n"))))
        .filter((texts) => texts.at(-1) === next);
      if (!answer.ok) failures.push(`conversation ${id}: the next question failed`);
      else if (seen.length !== 1 || JSON.stringify(seen[0]!.slice(0, -1)) !== JSON.stringify(history)) {
        failures.push(`conversation ${id}: the model saw ${JSON.stringify(seen[0]?.slice(-4))} (${seen[0]?.length} turns), the history holds ${history.length}`);
      } else if (answer.answer !== `[user_turns=${history.length + 1}] You said: ${next}`) {
        failures.push(`conversation ${id}: the next answer was ${answer.answer}`);
      }
    }
    console.log(
      `RELIABILITY restart under load (wrangler dev, SIGKILL): tried ${figures.succeeded}, failed ${failures.length}; ${CYCLES} kill(s), ${figures.conversations} conversations, ${figures.succeeded} turns told succeeded, ${figures.inDoubt} cut by the kill (${figures.inDoubtKept} of them kept), restarts took ${figures.restartMs.map((ms) => `${(ms / 1000).toFixed(1)} s`).join(", ")} [form ${FULL ? "full" : "short"}]`,
    );
    expect(figures.succeeded).toBeGreaterThan(0);
    expect(failures).toEqual([]);
  });
});
