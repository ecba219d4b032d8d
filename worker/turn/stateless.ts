// A turn that keeps nothing (/v1/infer): the phases of run.ts, run in the Worker itself, since
// there is no conversation whose Durable Object would hold it. No history, no record, no approval
// a client could answer later (a gated tool call is reported, not run). What must follow the answer
// (quota settlement, the transcript, metrics) goes through waitUntil, retried a few times and
// logged when it still fails: without a conversation there is no outbox to keep it in.
import { writeTranscript } from "../data/transcripts.ts";
import type { ModelInfo, TurnPlan, TurnStatus } from "../domain/conversation.ts";
import { ApiError, errors } from "../errors.ts";
import { log } from "../log.ts";
import { recordDeliveryFailure, recordValidationError } from "../metrics/recorder.ts";
import { admitQuotas, settleQuotas, type QuotaCounter } from "../quota/quotas.ts";
import type { Runtime } from "../runtime.ts";
import { openStore } from "../storage/open-store.ts";
import { reportedUsage, type Collected } from "./collect.ts";
import {
  checkContextWindow,
  chooseTurnModel,
  estimateTokens,
  modelCallRecorder,
  type ModelCallRecorder,
  openAnswer,
  prepareTurn,
  readAnswer,
  transcriptOf,
  turnOutcome,
  utf8Bytes,
  type AnswerTools,
  type PreparedTurn,
  type TurnOutcome,
} from "./run.ts";

/** Nothing to resume, nothing to record: a stateless turn's calls gated for approval are only reported. */
const NO_APPROVALS: AnswerTools = { resumed: [], claimApproved: () => undefined, ranApproved: () => undefined, gated: () => undefined };

/** Attempts at what follows the answer, and the pause before the second (doubling). */
const FOLLOW_UP_ATTEMPTS = 3;
const FOLLOW_UP_FIRST_DELAY_MS = 500;

export interface StatelessResult {
  model: ModelInfo;
  status: TurnStatus;
  collected: Collected;
  outcome: TurnOutcome;
}

/**
 * Runs `plan` to its end. Throws ApiError for what stops it before or during the model call (413,
 * 429, 503, a failed backend); a blocked turn is a result like any other.
 */
export async function runStatelessTurn(env: Env, ctx: { waitUntil(promise: Promise<unknown>): void }, rt: Runtime, plan: TurnPlan, counters: QuotaCounter[], signal: AbortSignal): Promise<StatelessResult> {
  // The quota first, then the model (UPSTREAM "/v1/infer", order of operations): a caller out of
  // tokens hears so whatever else is wrong with the request.
  const inputBytes = utf8Bytes(plan.instructions) + utf8Bytes(JSON.stringify(plan.input));
  const admission = counters.length > 0 ? await admitQuotas(env, counters, plan.requestId, estimateTokens(inputBytes)) : { admitted: {}, created: [] };
  if (admission instanceof ApiError) throw admission;
  const follow = (what: string, work: () => Promise<unknown>) => ctx.waitUntil(retried(what, work, () => recordDeliveryFailure(env, ctx, what)));
  const settle = (tokens: number) => {
    if (counters.length > 0) follow("quota-settle", () => settleQuotas(env, counters, plan.requestId, tokens));
    if (admission.created.length > 0) follow("quota-register", () => withStore(env, rt, (store) => Promise.all(admission.created.map((created) => store.quotaSubjects.register(created)))));
  };

  let prepared: PreparedTurn | null = null;
  let recordCall: ModelCallRecorder | null = null;
  let collected: Collected;
  try {
    const model = await chooseTurnModel(rt, plan, null);
    const tooLong = checkContextWindow(rt, model.model, estimateTokens(inputBytes));
    if (tooLong) throw tooLong;
    prepared = await prepareTurn(rt, plan, model);
    recordCall = modelCallRecorder(env, ctx, plan, model.model);
    const answer = await openAnswer(rt, plan, prepared, [], { signal, sent: recordCall.sent }, NO_APPROVALS);
    collected = await readAnswer(rt, plan, prepared, answer, signal, async () => undefined);
  } catch (error) {
    if (prepared && !prepared.verdict) recordCall?.record(false);
    settle(0);
    throw error;
  }
  const model = prepared.model.model;
  if (prepared.verdict) recordValidationError(env, ctx, plan.endpoint);
  const status: TurnStatus = collected.status ?? "incomplete";
  const outcome = turnOutcome(rt, plan, prepared, status, collected, "", inputBytes);
  const tokens = outcome.tokens.input + outcome.tokens.output;
  settle(tokens);
  if (!prepared.verdict) recordCall.record(status !== "failed", reportedUsage(collected));
  if (rt.config.quota_handlers.enable_token_history && tokens > 0) {
    const usage = { turnKey: plan.requestId, userId: plan.auth.userId, provider: outcome.turn.provider, model: outcome.turn.model, inputTokens: outcome.tokens.input, outputTokens: outcome.tokens.output };
    follow("tokens", () => withStore(env, rt, (store) => store.tokenUsage.addOnce(usage)));
  }
  if (status === "failed") throw collected.error ?? errors.internal();
  if (plan.transcript && rt.config.user_data_collection.transcripts_enabled) {
    const transcript = transcriptOf(plan, outcome);
    follow("transcript", () => withStore(env, rt, (store) => writeTranscript({ bucket: env.DATA, sql: store.sql }, rt.config.user_data_collection, transcript)));
  }
  return { model, status, collected, outcome };
}

async function withStore<T>(env: Env, rt: Runtime, work: (store: ReturnType<typeof openStore>) => Promise<T>): Promise<T> {
  const store = openStore(env, rt.config.database);
  try {
    return await work(store);
  } finally {
    await store.close();
  }
}

async function retried(what: string, work: () => Promise<unknown>, failed: () => void): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await work();
      return;
    } catch (error) {
      failed();
      if (attempt >= FOLLOW_UP_ATTEMPTS) {
        log.error(`/v1/infer: ${what} failed ${attempt} times and was given up`, error);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, FOLLOW_UP_FIRST_DELAY_MS * 2 ** (attempt - 1)));
    }
  }
}
