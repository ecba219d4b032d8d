import { createExecutionContext, createScheduledController } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import worker from "../../worker/index.ts";
import { QuotaLimiterSchema } from "../../worker/config/schema.ts";
import { ApiError } from "../../worker/errors.ts";
import { admitQuotas, settleQuotas } from "../../worker/quota/quotas.ts";
import { openStore } from "../../worker/storage/open-store.ts";
import { call, callJson, eventually, readSse, testConfig } from "./helpers.ts";

type Answer = { response: string; input_tokens: number; output_tokens: number; available_quotas: Record<string, number>; detail?: { response: string; cause: string } };

const ask = (config: string, user: string, query = "hello") => callJson<Answer>("/v1/query", { json: { query }, user, config });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Periods are counted in whole seconds: two questions sent just after one begins fall in the same one. */
const startOfSecond = () => sleep(1020 - (Date.now() % 1000));
const limiter = (overrides: Record<string, unknown>) => ({ type: "user_limiter", name: "user_daily", initial_quota: 10, quota_increase: 0, period: "1 day", ...overrides });
const withLimiters = (limiters: unknown[], extra: Record<string, unknown> = {}) => testConfig({ quota_handlers: { limiters, ...extra } });

async function runScheduler(config: string): Promise<void> {
  const ctx = createExecutionContext();
  await worker.scheduled(createScheduledController({ cron: "* * * * *" }), { ...env, PARLEY_CONFIG: config }, ctx);
}

describe("token quotas", () => {
  // A question is admitted when what is left covers its estimated input (UTF-8 bytes / 4 of the
  // instructions, history and question: about 75 tokens for these first questions, which the
  // scripted model counts as about 40), so a limiter of 100 answers one and refuses the next.
  it("answers while the question's tokens are left, then 429 with the user cause", async () => {
    const config = withLimiters([limiter({ name: "u_exhaust", initial_quota: 100 })]);
    const first = await ask(config, "quinn");
    expect(first.status).toBe(200);
    const left = 100 - first.body.input_tokens - first.body.output_tokens;
    expect(first.body.available_quotas).toEqual({ u_exhaust: left });
    const second = await ask(config, "quinn");
    expect(second.status).toBe(429);
    expect(second.body.detail).toEqual({ response: "The quota has been exceeded", cause: expect.stringMatching(new RegExp(`^User quinn has ${left} tokens, but \\d+ tokens are needed$`)) });
    expect((await ask(config, "rita")).status).toBe(200);
    const empty = withLimiters([limiter({ name: "u_empty", initial_quota: 0 })]);
    expect((await ask(empty, "quinn")).body).toEqual({ detail: { response: "The quota has been exceeded", cause: "User quinn has no available tokens" } });
  });

  it("answers from a full quota smaller than one question's estimate, as the original system's example sets", async () => {
    // The original's quota example: 50 tokens a user, 50 more every 30 seconds; a first question is
    // estimated at about 75 (and counted at about 40).
    const config = withLimiters([limiter({ name: "u_small", initial_quota: 50, quota_increase: 50, period: "30 seconds" })]);
    expect((await ask(config, "sven")).status).toBe(200);
    const second = await ask(config, "sven");
    expect(second.status).toBe(429);
    expect(second.body.detail?.cause).toMatch(/^User sven has \d+ tokens, but 50 tokens are needed$/);
  });

  it("says when what is missing is held by answers in progress, with Retry-After", async () => {
    // A turn reserves its estimate plus 1024 tokens for its answer until it ends.
    const config = withLimiters([limiter({ name: "u_held", initial_quota: 1110 })]);
    const slow = ask(config, "hana", "#slow=600 a long answer");
    await sleep(300);
    const refused = await call("/v1/query", { json: { query: "meanwhile" }, user: "hana", config });
    expect(refused.status).toBe(429);
    expect(refused.headers.get("Retry-After")).toBe("1");
    const body = (await refused.json()) as Answer;
    expect(body.detail?.cause).toMatch(/^User hana has \d+ tokens, but \d+ tokens are needed: \d+ are held by answers in progress; try again once they end$/);
    expect((await slow).status).toBe(200);
    expect((await ask(config, "hana", "afterwards")).status).toBe(200);
  });

  it("does not ask to retry when even every reservation coming back would leave too little", async () => {
    const spec = QuotaLimiterSchema.parse(limiter({ name: `u_short_${crypto.randomUUID()}`, initial_quota: 30 }));
    const counters = [{ spec, subject: "vera" }];
    const workerEnv = { ...env } as Env;
    // 25 of the 30 used; then a short question takes a turn, reserving far more than the 5 left.
    expect(await admitQuotas(workerEnv, counters, "turn-0", 10)).not.toBeInstanceOf(ApiError);
    await settleQuotas(workerEnv, counters, "turn-0", 25);
    expect(await admitQuotas(workerEnv, counters, "turn-1", 3)).not.toBeInstanceOf(ApiError);
    // A question needing 20: no answer ending can leave it that much, so a plain 429.
    const long = (await admitQuotas(workerEnv, counters, "turn-2", 20)) as ApiError;
    expect([long.cause, long.headers]).toEqual(["User vera has no available tokens", {}]);
    // One needing 4 could pass once the running turn ends: it is told so.
    const short = (await admitQuotas(workerEnv, counters, "turn-3", 4)) as ApiError;
    expect([short.cause, short.headers]).toEqual([
      "User vera has 0 tokens, but 4 tokens are needed: 5 are held by answers in progress; try again once they end",
      { "Retry-After": "1" },
    ]);
  });

  it("shares the cluster limiter across users", async () => {
    const config = withLimiters([limiter({ type: "cluster_limiter", name: "cluster_shared", initial_quota: 100 })]);
    expect((await ask(config, "sam")).status).toBe(200);
    const refused = await ask(config, "tara");
    expect(refused.status).toBe(429);
    expect(refused.body.detail?.cause).toMatch(/^Cluster has \d+ tokens, but \d+ tokens are needed$/);
  });

  it("refills at the period through the scheduler, and when touched overdue without it", async () => {
    const config = withLimiters([limiter({ name: "u_refill", initial_quota: 100, period: "1 second" })]);
    await startOfSecond();
    expect((await ask(config, "uma")).status).toBe(200);
    expect((await ask(config, "uma")).status).toBe(429);
    const store = openStore(env, undefined);
    // The counter joins the scheduler's registry after the answer (its conversation's outbox).
    const registered = async () => (await store.quotaSubjects.due(Number.MAX_SAFE_INTEGER, 1000)).filter((r) => r.limiter === "u_refill");
    const [before] = await eventually(async () => {
      const rows = await registered();
      expect(rows).toHaveLength(1);
      return rows;
    });
    await sleep(1100);
    await runScheduler(config);
    const [after] = await registered();
    expect(after!.nextResetAt).toBeGreaterThan(before!.nextResetAt);
    const mine = await callJson<{ quotas: Array<{ limiter: string; available: number }> }>("/v1/quotas", { user: "uma", config });
    expect(mine.body.quotas).toEqual([expect.objectContaining({ limiter: "u_refill", available: 100 })]);

    expect((await ask(config, "uma")).status).toBe(200);
    await sleep(1100);
    expect((await ask(config, "uma")).status).toBe(200);
  });

  it("adds quota_increase each period", async () => {
    const config = withLimiters([limiter({ name: "u_grow", initial_quota: 100, quota_increase: 1000, period: 1 })]);
    await startOfSecond();
    const first = await ask(config, "vic");
    const used = first.body.input_tokens + first.body.output_tokens;
    expect((await ask(config, "vic")).status).toBe(429);
    await sleep(1100);
    await eventually(async () => {
      const mine = await callJson<{ quotas: Array<{ available: number }> }>("/v1/quotas", { user: "vic", config });
      // Seconds are whole, so the sleep may span one period or two: each adds exactly 1000.
      const gained = mine.body.quotas[0]!.available - (100 - used);
      expect(gained % 1000).toBe(0);
      expect(gained).toBeGreaterThanOrEqual(1000);
    });
  });

  it("consumes nothing for a turn that failed, streamed or not, as the original charges no failure", async () => {
    const config = withLimiters([limiter({ name: "u_failures", initial_quota: 10_000 })]);
    for (const query of ["boom #fail-midstream", "cut #drop", "refused #status=500"]) {
      await (await call("/v1/streaming_query", { json: { query }, user: "fay", config })).text();
      await call("/v1/query", { json: { query }, user: "fay", config });
      await (await call("/v1/responses", { json: { input: query, stream: true }, user: "fay", config })).text();
    }
    // Settlement follows each turn through its conversation's outbox, at once: an answer's shows after theirs.
    const answered = await ask(config, "fay");
    const used = answered.body.input_tokens + answered.body.output_tokens;
    await eventually(async () => {
      const mine = await callJson<{ quotas: Array<{ available: number }> }>("/v1/quotas", { user: "fay", config });
      expect(mine.body.quotas[0]!.available).toBe(10_000 - used);
    });
  });

  it("consumes exactly the sum of 20 parallel answers, with token history", async () => {
    const config = withLimiters([limiter({ name: "u_parallel", initial_quota: 1_000_000 }), limiter({ type: "cluster_limiter", name: "c_parallel", initial_quota: 1_000_000 })], {
      enable_token_history: true,
    });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, n) => ask(config, "wes", `parallel question number ${n}`)));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    const spent = answers.reduce((sum, a) => sum + a.body.input_tokens + a.body.output_tokens, 0);
    // Each answer settles its counters and token history after it was answered (its conversation's outbox).
    await eventually(async () => {
      const mine = await callJson<{ quotas: Array<{ limiter: string; available: number }>; token_history: Array<Record<string, unknown>> }>("/v1/quotas", { user: "wes", config });
      expect(mine.body.quotas.map((q) => [q.limiter, q.available])).toEqual([
        ["u_parallel", 1_000_000 - spent],
        ["c_parallel", 1_000_000 - spent],
      ]);
      expect(mine.body.token_history).toEqual([
        expect.objectContaining({
          provider: "scripted",
          model: "parley-small",
          input_tokens: answers.reduce((sum, a) => sum + a.body.input_tokens, 0),
          output_tokens: answers.reduce((sum, a) => sum + a.body.output_tokens, 0),
        }),
      ]);
    });
  });

  it("reports available_quotas on query, streaming end, responses and their stream", async () => {
    const config = withLimiters([limiter({ name: "u_report", initial_quota: 100_000 })]);
    const query = await ask(config, "xena");
    const left = 100_000 - query.body.input_tokens - query.body.output_tokens;
    expect(query.body.available_quotas).toEqual({ u_report: left });

    const stream = await readSse(await call("/v1/streaming_query", { json: { query: "s" }, user: "xena", config }));
    const end = stream.map((e) => e.data as { event: string; available_quotas?: Record<string, number> }).find((e) => e.event === "end")!;
    expect(end.available_quotas!.u_report).toBeLessThan(left);

    const responses = await callJson<{ available_quotas: Record<string, number>; usage: { total_tokens: number } }>("/v1/responses", { json: { input: "r" }, user: "xena", config });
    expect(responses.body.available_quotas.u_report).toBeLessThan(end.available_quotas!.u_report!);

    const events = (await readSse(await call("/v1/responses", { json: { input: "rs", stream: true }, user: "xena", config }))).map(
      (e) => e.data as { type?: string; available_quotas?: Record<string, number>; response?: { usage?: { total_tokens: number } } },
    );
    expect(events.find((e) => e.type === "response.in_progress")!.available_quotas).toEqual({});
    const completed = events.find((e) => e.type === "response.completed")!;
    expect(completed.available_quotas!.u_report).toBe(responses.body.available_quotas.u_report! - completed.response!.usage!.total_tokens);
  });

  it("lets an admin read any subject, and nobody else", async () => {
    const config = testConfig({
      quota_handlers: { limiters: [limiter({ name: "u_admin" })] },
      authorization: { access_rules: [{ role: "*", actions: ["query", "read_quotas"] }] },
    });
    await ask(config, "yara");
    expect((await callJson("/v1/quotas/u_admin/yara", { user: "zed", config })).status).toBe(403);
    const open = withLimiters([limiter({ name: "u_admin" })]);
    expect((await callJson<{ quotas: Array<{ subject: string }> }>("/v1/quotas/u_admin/yara", { user: "root", config: open })).body.quotas[0]!.subject).toBe("yara");
    expect((await callJson("/v1/quotas/nope/yara", { config: open })).status).toBe(404);
  });
});
