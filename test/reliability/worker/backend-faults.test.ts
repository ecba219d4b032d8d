// The inference backend misbehaving under every endpoint that calls the model, JSON and stream
// (RELIABILITY.md "Backend faults"): down, slower than the time-out, 5xx, 429, a connection cut
// mid-answer, malformed SSE (a JSON answer that is not JSON), JSON of the wrong shape, a stall right after the headers, a
// stall mid-stream and a failure reported mid-stream. Each must give SPEC's status or terminal
// event, within the time-out (plus a margin for the test machine), and leave the conversation
// consistent: the failed turn is no turn (no half answer in the history, the count unchanged), and
// the next question is answered with exactly the turns that succeeded before it. Runs in both wire
// projects (Responses and Chat Completions), so both backend adapters are held to it.
import { describe, expect, inject, it } from "vitest";
import { callJson, eventually, testConfig, wireMode } from "../../worker/helpers.ts";
import { figure, inBatches, scaled } from "./suite.ts";
import { conversationOf, modelCallsWith, TURN_ENDPOINTS, userTexts, type Outcome, type TurnEndpoint } from "./turns.ts";

const TIMEOUT_S = 2;
/** The time-out plus what a loaded 2-core test machine may add; anything slower counts as a hang. */
const BOUND_MS = TIMEOUT_S * 1000 + 6_000;
const REPEATS = scaled(1, 3);

const deadBackend = `http://127.0.0.1:${new URL(inject("mcp").downUrl).port}/v1`;
const good = testConfig({ inference_backend: { timeout: TIMEOUT_S } });
const down = testConfig({ inference_backend: { url: deadBackend, timeout: TIMEOUT_S, max_retries: 0 } });

const UNREACHABLE = "Unable to connect to the inference backend";
const INTERNAL = "Internal server error";

interface Fault {
  name: string;
  marker: string;
  config?: string;
  /** SPEC's status (REFERENCE "Errors": connection failure 503, backend 429 429, anything else 500) and response text. */
  status: number;
  response: string;
  /** Another response text on an endpoint that words this fault otherwise (UPSTREAM, by endpoint name). */
  responseOn?: Record<string, string>;
  cause?: RegExp;
}

const FAULTS: Fault[] = [
  { name: "down (connection refused)", marker: "", config: down, status: 503, response: UNREACHABLE },
  { name: "slower than the time-out (no byte at all)", marker: "#late=15000", status: 503, response: UNREACHABLE, cause: /did not answer in time/ },
  { name: "answers 500", marker: "#status=500", status: 500, response: INTERNAL },
  { name: "answers 502", marker: "#status=502", status: 500, response: INTERNAL },
  { name: "answers 503", marker: "#status=503", status: 500, response: INTERNAL },
  { name: "answers 429", marker: "#rate-limit", status: 429, response: "The model quota has been exceeded", responseOn: { "/v1/infer": "The quota has been exceeded" } },
  { name: "cuts the connection mid-answer", marker: "#drop", status: 503, response: UNREACHABLE },
  { name: "sends malformed SSE / a body that is not JSON", marker: "#garbled", status: 500, response: INTERNAL, cause: /answer is not JSON/ },
  { name: "answers JSON of the wrong shape", marker: "#misshapen", status: 500, response: INTERNAL, cause: /could not be read/ },
  { name: "stalls right after the headers", marker: "#stall-headers=15000", status: 503, response: UNREACHABLE, cause: /did not answer in time/ },
  { name: "stalls mid-stream", marker: "#stall=15000", status: 503, response: UNREACHABLE, cause: /did not answer in time/ },
  { name: "reports a failure mid-stream", marker: "#fail-midstream", status: 500, response: INTERNAL },
];

/** What is wrong with a failed turn's outcome, measured against the fault's SPEC error. */
function errorProblems(endpoint: TurnEndpoint, fault: Fault, outcome: Outcome): string[] {
  const problems = [...outcome.malformed];
  if (outcome.ms > BOUND_MS) problems.push(`took ${outcome.ms} ms (time-out ${TIMEOUT_S} s)`);
  const error = outcome.error;
  if (!error) return [...problems, `answered instead of failing: ${outcome.answer?.slice(0, 120)}`];
  const response = fault.responseOn?.[endpoint.name] ?? fault.response;
  if (error.response !== response) problems.push(`response "${error.response}" (expected "${response}")`);
  if (error.status !== 0 && error.status !== fault.status) problems.push(`status ${error.status} in form ${error.form} (expected ${fault.status})`);
  if (fault.cause && !fault.cause.test(error.cause)) problems.push(`cause "${error.cause}" (expected ${fault.cause})`);
  return problems;
}

type History = { chat_history: Array<{ messages: Array<{ type: string; content: string }> }> };

/** One endpoint under one fault: a good turn, the fault, a good turn; then the conversation is checked. */
async function runCase(endpoint: TurnEndpoint, fault: Fault, round: number, baselineCount: number): Promise<string[]> {
  const tag = crypto.randomUUID().slice(0, 8);
  const user = `faults-${tag}`;
  const problems: string[] = [];
  const ask = (question: string, conversation: string | null, config = good) => endpoint.ask(question, { conversation, config, user });

  if (!endpoint.conversational) {
    const failed = await ask(`fault ${tag} one two three four ${fault.marker}`, null, fault.config ?? good);
    problems.push(...errorProblems(endpoint, fault, failed));
    const after = await ask(`after ${tag}`, null);
    if (after.answer !== `[user_turns=1] You said: after ${tag}`) problems.push(`the next question was answered ${JSON.stringify(after.answer ?? after.error)}`);
    return problems.map((problem) => `${endpoint.name} / ${fault.name} (round ${round}): ${problem}`);
  }

  const first = await ask(`first ${tag}`, null);
  if (first.answer !== `[user_turns=1] You said: first ${tag}`) return [`${endpoint.name} / ${fault.name}: the first turn failed: ${JSON.stringify(first)}`];
  const failed = await ask(`fault ${tag} one two three four ${fault.marker}`, first.conversation, fault.config ?? good);
  problems.push(...errorProblems(endpoint, fault, failed));
  const after = await ask(`after ${tag}`, first.conversation);
  if (after.answer !== `[user_turns=2] You said: after ${tag}`) problems.push(`the next question was answered ${JSON.stringify(after.answer ?? after.error)} (expected [user_turns=2])`);
  // The model saw exactly the turns that succeeded, in order.
  const seen = (await modelCallsWith(`after ${tag}`)).map(userTexts);
  if (seen.length !== 1 || JSON.stringify(seen[0]) !== JSON.stringify([`first ${tag}`, `after ${tag}`])) problems.push(`the model saw ${JSON.stringify(seen)}`);

  const options = { config: good, user };
  const id = await eventually(async () => {
    const found = await conversationOf(endpoint, first, options);
    if (!found) throw new Error("no conversation listed yet");
    return found;
  }).catch(() => null);
  if (!id) return [...problems, "the conversation could not be found"].map((problem) => `${endpoint.name} / ${fault.name} (round ${round}): ${problem}`);
  // No half turn: the history holds the two answered turns, whole.
  const detail = await callJson<History>(`/v1/conversations/${id}`, options);
  const turns = detail.body.chat_history.map((turn) => turn.messages.map((message) => `${message.type}: ${message.content}`));
  const expected = [
    [`user: first ${tag}`, `assistant: ${first.answer}`],
    [`user: after ${tag}`, `assistant: ${after.answer}`],
  ];
  if (JSON.stringify(turns) !== JSON.stringify(expected)) problems.push(`the history is ${JSON.stringify(turns).slice(0, 400)}`);
  // The right count: what a conversation with the same two answered turns and no failure shows.
  const counted = await eventually(async () => {
    const list = await callJson<{ conversations: Array<{ conversation_id: string; message_count: number }> }>("/v1/conversations", options);
    const record = list.body.conversations.find((conversation) => conversation.conversation_id === id);
    if (!record || record.message_count < baselineCount) throw new Error(`message_count ${record?.message_count}`);
    return record.message_count;
  }).catch((error: Error) => error.message);
  if (counted !== baselineCount) problems.push(`message_count ${counted} (a conversation of two answered turns shows ${baselineCount})`);
  return problems.map((problem) => `${endpoint.name} / ${fault.name} (round ${round}): ${problem}`);
}

describe(`backend faults (${wireMode()} wire)`, () => {
  it(`every endpoint that calls the model, under every fault, ${REPEATS} time(s)`, { timeout: 600_000 }, async () => {
    // What two answered turns count as, read from a conversation without faults.
    const user = `faults-baseline-${crypto.randomUUID().slice(0, 8)}`;
    const one = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "baseline one" }, config: good, user });
    await callJson("/v1/query", { json: { query: "baseline two", conversation_id: one.body.conversation_id }, config: good, user });
    const baselineCount = await eventually(async () => {
      const list = await callJson<{ conversations: Array<{ message_count: number }> }>("/v1/conversations", { config: good, user });
      const count = list.body.conversations[0]?.message_count ?? 0;
      if (count < 2) throw new Error(`message_count ${count}`);
      return count;
    });

    const cases = Array.from({ length: REPEATS }, (_, round) => TURN_ENDPOINTS.flatMap((endpoint) => FAULTS.map((fault) => ({ endpoint, fault, round: round + 1 })))).flat();
    const results = await inBatches(cases, 8, ({ endpoint, fault, round }) => runCase(endpoint, fault, round, baselineCount));
    const failures = results.flat();
    const failedCases = results.filter((problems) => problems.length > 0).length;
    figure(`backend faults (${wireMode()} wire)`, cases.length, failedCases, `${TURN_ENDPOINTS.length} endpoints x ${FAULTS.length} faults x ${REPEATS}`);
    expect(failures).toEqual([]);
  });
});
