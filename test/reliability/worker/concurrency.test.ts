// Concurrency (RELIABILITY.md "Concurrency"): 50 turns sent at once on one conversation, over the
// four endpoints that can continue one (all answered; each answer's history holds exactly the turns
// recorded before it, as the model received it; turn numbers without gaps), and 100 parallel
// requests of one user over every endpoint that counts tokens, against a small quota (consumption
// within README's bound: the limit plus one answer's output tokens; the counter exact). Runs in both
// wire projects. The restart under load is test/reliability/system/restart.test.ts.
import { describe, expect, it } from "vitest";
import { call, callJson, eventually, readSse, settle, testConfig, wireMode } from "../../worker/helpers.ts";
import { figure, scaled } from "./suite.ts";
import { modelCallsWith, TURN_ENDPOINTS, userTexts } from "./turns.ts";

const ROUNDS = scaled(1, 3);
const CONCURRENT = 50;

describe(`${CONCURRENT} concurrent turns on one conversation (${wireMode()} wire)`, () => {
  const continuing = TURN_ENDPOINTS.filter((endpoint) => endpoint.name.startsWith("/v1/query") || endpoint.name.startsWith("/v1/streaming_query") || endpoint.name.startsWith("/v1/responses"));

  it(`all answered, each seeing exactly the turns before it, numbered without gaps (${ROUNDS} round(s))`, { timeout: 300_000 }, async () => {
    const failures: string[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const tag = crypto.randomUUID().slice(0, 8);
      const user = `concurrent-${tag}`;
      const config = testConfig();
      const first = await continuing[0]!.ask(`c-${tag}-first`, { conversation: null, config, user });
      const id = first.conversation!;
      const questions = Array.from({ length: CONCURRENT }, (_, i) => `c-${tag}-${i}`);
      const outcomes = await Promise.all(questions.map((question, i) => continuing[i % continuing.length]!.ask(question, { conversation: id, config, user })));

      const numbers = new Map<string, number>();
      outcomes.forEach((outcome, i) => {
        const match = /^\[user_turns=(\d+)\] You said: (.*)$/.exec(outcome.answer ?? "");
        if (!match || match[2] !== questions[i]) failures.push(`round ${round}: ${questions[i]} on ${continuing[i % continuing.length]!.name} answered ${JSON.stringify(outcome.answer ?? outcome.error)}`);
        else numbers.set(questions[i]!, Number(match[1]));
      });
      const sorted = [...numbers.values()].sort((a, b) => a - b);
      if (JSON.stringify(sorted) !== JSON.stringify(Array.from({ length: CONCURRENT }, (_, i) => i + 2))) failures.push(`round ${round}: turn numbers ${JSON.stringify(sorted)} (expected 2..${CONCURRENT + 1})`);

      const detail = await callJson<{ chat_history: Array<{ messages: Array<{ type: string; content: string }> }> }>(`/v1/conversations/${id}`, { config, user });
      const history = detail.body.chat_history.map((turn) => turn.messages[0]!.content);
      if (history.length !== CONCURRENT + 1) failures.push(`round ${round}: the history holds ${history.length} turns (expected ${CONCURRENT + 1})`);
      for (const [question, number] of numbers) {
        if (history[number - 1] !== question) failures.push(`round ${round}: ${question} answered as turn ${number}, but the history has ${history[number - 1]} there`);
        // What the model received: every turn recorded before it, in order, then the question.
        const seen = (await modelCallsWith(question)).map(userTexts);
        if (seen.length !== 1 || JSON.stringify(seen[0]) !== JSON.stringify(history.slice(0, number))) {
          failures.push(`round ${round}: the model saw ${JSON.stringify(seen[0]?.slice(-3))}... (${seen[0]?.length} turns) for ${question}, turn ${number}`);
        }
      }
    }
    figure(`${CONCURRENT} concurrent turns on one conversation (${wireMode()} wire)`, ROUNDS * CONCURRENT, failures.length, `${ROUNDS} round(s) over ${continuing.map((endpoint) => endpoint.name).join(", ")}`);
    expect(failures).toEqual([]);
  });
});

describe(`100 parallel requests against a small quota (${wireMode()} wire)`, () => {
  // README "Token quotas": a counter may be overdrawn by the output of one answer. Each admitted turn
  // reserves its input estimate plus 1,024 tokens, so a small limit admits one turn at a time.
  const LIMITS = scaled(1, 2) === 1 ? [200, 3_000] : [200, 3_000, 120, 6_000];

  it(`consumption stays within the limit plus one answer, the counters exact (limits ${LIMITS.join(", ")})`, { timeout: 300_000 }, async () => {
    const failures: string[] = [];
    let tried = 0;
    for (const limit of LIMITS) {
      const tag = crypto.randomUUID().slice(0, 8);
      const user = `quota-${tag}`;
      const config = testConfig({
        quota_handlers: {
          limiters: [
            { type: "user_limiter", name: `user-${tag}`, initial_quota: limit, quota_increase: 0, period: "1 day" },
            { type: "cluster_limiter", name: `cluster-${tag}`, initial_quota: limit * 2, quota_increase: 0, period: "1 day" },
          ],
        },
        rlsapi_v1: { allow_verbose_infer: true, quota_subject: "user_id" },
      });
      // Each request reports what it used where its wire can (A2A cannot: it counts only in the counter).
      const kinds = ["query", "stream", "responses", "responses-stream", "infer", "a2a"] as const;
      const requests = Array.from({ length: 100 }, (_, i) => kinds[i % kinds.length]!);
      tried += requests.length;
      const results = await Promise.all(
        requests.map(async (kind, i): Promise<{ status: "ok" | "refused" | string; tokens: number | null; output: number | null }> => {
          const question = `quota ${tag} ${i}`;
          if (kind === "query") {
            const { status, body } = await callJson<{ input_tokens: number; output_tokens: number }>("/v1/query", { json: { query: question }, config, user });
            return status === 200 ? { status: "ok", tokens: body.input_tokens + body.output_tokens, output: body.output_tokens } : { status: status === 429 ? "refused" : `${status} ${JSON.stringify(body)}`, tokens: null, output: null };
          }
          if (kind === "stream") {
            const response = await call("/v1/streaming_query", { json: { query: question }, config, user });
            if (response.status !== 200) return { status: response.status === 429 ? "refused" : `${response.status} ${await response.text()}`, tokens: null, output: null };
            const end = (await readSse(response)).map((event) => event.data as { event: string; data: { input_tokens: number; output_tokens: number } }).find((event) => event.event === "end");
            return end ? { status: "ok", tokens: end.data.input_tokens + end.data.output_tokens, output: end.data.output_tokens } : { status: "stream without end", tokens: null, output: null };
          }
          if (kind === "responses" || kind === "responses-stream") {
            const response = await call("/v1/responses", { json: { input: question, stream: kind === "responses-stream" }, config, user });
            if (response.status !== 200) return { status: response.status === 429 ? "refused" : `${response.status} ${await response.text()}`, tokens: null, output: null };
            const object = kind === "responses"
              ? ((await response.json()) as { status: string; usage: { input_tokens: number; output_tokens: number } })
              : ((await readSse(response)).map((event) => event.data as { type?: string; response?: { status: string; usage: { input_tokens: number; output_tokens: number } } }).find((event) => event.type === "response.completed")?.response ?? null);
            return object?.status === "completed" ? { status: "ok", tokens: object.usage.input_tokens + object.usage.output_tokens, output: object.usage.output_tokens } : { status: `responses ${JSON.stringify(object).slice(0, 200)}`, tokens: null, output: null };
          }
          if (kind === "infer") {
            const { status, body } = await callJson<{ data: { input_tokens: number; output_tokens: number } }>("/v1/infer", { json: { question, include_metadata: true }, config, user });
            return status === 200 ? { status: "ok", tokens: body.data.input_tokens + body.data.output_tokens, output: body.data.output_tokens } : { status: status === 429 ? "refused" : `${status} ${JSON.stringify(body)}`, tokens: null, output: null };
          }
          const outcome = await TURN_ENDPOINTS.find((endpoint) => endpoint.name === "/a2a message/send")!.ask(question, { conversation: null, config, user });
          if (outcome.answer !== null) return { status: "ok", tokens: null, output: null };
          return { status: outcome.error?.response === "The quota has been exceeded" ? "refused" : `a2a ${JSON.stringify(outcome.error)}`, tokens: null, output: null };
        }),
      );
      await settle();
      const odd = results.filter((result) => result.status !== "ok" && result.status !== "refused");
      for (const result of odd) failures.push(`limit ${limit}: a request answered ${result.status.slice(0, 300)}`);
      const answered = results.filter((result) => result.status === "ok");
      if (answered.length === 0) failures.push(`limit ${limit}: nothing was answered`);
      const reported = answered.reduce((sum, result) => sum + (result.tokens ?? 0), 0);
      const maxOutput = Math.max(0, ...answered.map((result) => result.output ?? 0));
      const quotas = async () =>
        (await callJson<{ quotas: Array<{ limiter: string; available: number }> }>("/v1/quotas", { config, user })).body.quotas;
      // Settled after the answers (README "Lag"): the counters show what was consumed.
      const counters = await eventually(async () => {
        const now = await quotas();
        await new Promise((resolve) => setTimeout(resolve, 300));
        const later = await quotas();
        if (JSON.stringify(now) !== JSON.stringify(later) || now.length < 2) throw new Error("still settling");
        return now;
      }, 15_000);
      const userLeft = counters.find((counter) => counter.limiter === `user-${tag}`)!.available;
      const consumed = limit - userLeft;
      if (consumed > limit + maxOutput) failures.push(`limit ${limit}: ${consumed} consumed, beyond the limit plus one answer's output (${maxOutput})`);
      const a2aAnswered = results.some((result, i) => result.status === "ok" && requests[i] === "a2a");
      if (!a2aAnswered && userLeft > 0 && consumed !== reported) failures.push(`limit ${limit}: the counter shows ${consumed} consumed, the answers report ${reported}`);
      if (a2aAnswered && consumed < reported) failures.push(`limit ${limit}: the counter shows ${consumed} consumed, less than the answers report (${reported})`);
      figure(`quota under 100 parallel requests, limit ${limit} (${wireMode()} wire)`, requests.length, odd.length + (consumed > limit + maxOutput ? 1 : 0), `${answered.length} answered, ${results.filter((result) => result.status === "refused").length} refused with 429, ${consumed} tokens consumed (bound ${limit + maxOutput})`);
    }
    expect(failures).toEqual([]);
  });
});
