// The conversation's Durable Object as the turn uses it (exported from worker/index.ts as
// ConversationDO). One call runs a turn from start to end: ownership, order, admission, the model
// call with the whole history, and the commit, with the answer's events streamed back as they
// arrive. Whatever a client can do right after an answer (continue, read the conversation,
// interrupt) reaches this object directly; the record store is fed from its outbox afterwards.
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import { CONVERSATION_DELETED, ConversationDurableObject, MAX_STORED_UNITS, MAX_WAITING_TURNS, MAX_WAITING_UNITS, type ApprovalCheck, type ConversationAccess, type NewApproval, type OutboxEntry } from "../../durable-objects/conversation-do.ts";
import { failedResult, shownEvents, type StoredTurn, type TurnEvent, type TurnHead, type TurnPlan, type TurnResult, type TurnStart, type TurnStatus, type WireError } from "../domain/conversation.ts";
import { writeTranscript, type TranscriptInput } from "../data/transcripts.ts";
import { ApiError, errors } from "../errors.ts";
import { log } from "../log.ts";
import { recordDeliveryFailure, recordValidationError } from "../metrics/recorder.ts";
import { admitQuotas, quotaCounters, remaining, settleQuotas, spentQuota, type QuotaCounter } from "../quota/quotas.ts";
import { loadRuntime, type Runtime } from "../runtime.ts";
import { openStore } from "../storage/open-store.ts";
import type { ConversationRecord } from "../storage/store.ts";
import { conversationOfRequest, newConversationId, newResponseId } from "./conversation-id.ts";
import { failedAnswer, reportedUsage, type Collected } from "./collect.ts";
import { checkContextWindow, chooseTurnModel, contextWindow, estimateTokens, modelCallRecorder, openAnswer, prepareTurn, readAnswer, transcriptOf, turnOutcome, utf8Bytes, type ChosenModel, type OpenAnswer, type PreparedTurn } from "./run.ts";
import { compact, compactedHistory, compactionDue, type ConversationSummary } from "./compaction.ts";
import { EVENT_LINES, presenting, streamPresenter, type TurnPresenter } from "./presenting.ts";
import { unrunnableApproval, withDeniedCalls } from "./tool-loop.ts";
import { unansweredCallOutput } from "./tools.ts";
import { generateTopicSummary } from "./topic-summary.ts";

/** The abort reason of an interrupt (POST /v1/streaming_query/interrupt, A2A tasks/cancel). */
export const INTERRUPTED = "interrupted";

type Entry =
  /** The conversation's record, as it is when delivered (earlier releases stored the record itself). */
  | { kind: "record"; payload: { conversationId: string } | ConversationRecord; key: "record" }
  | { kind: "tokens"; payload: { turnKey: string; userId: string; provider: string; model: string; inputTokens: number; outputTokens: number } }
  | { kind: "quota-settle"; payload: { counters: QuotaCounter[]; reservationId: string; tokens: number } }
  | { kind: "quota-register"; payload: { limiter: string; subject: string; nextResetAt: number } }
  | { kind: "transcript"; payload: TranscriptInput }
  | { kind: "stream-unregister"; payload: { requestId: string } }
  /** The conversation was deleted: its record goes too, retried until the record store takes it. */
  | { kind: "record-delete"; payload: { conversationId: string } };

/** The outbox entry that brings the conversation's record in the record store up to date. */
const recordSnapshot = (conversationId: string): Entry => ({ kind: "record", payload: { conversationId }, key: "record" });

const wire = (error: ApiError): WireError => ({ status: error.status, response: error.response, cause: error.cause, headers: error.headers });
const refuse = (error: ApiError): TurnStart => ({ ok: false, error: wire(error) });

function approvalError(check: Extract<ApprovalCheck, { ok: false }>): ApiError {
  if (check.reason === "not_found") return errors.approvalNotFound(check.id);
  if (check.reason === "decided") return errors.approvalDecided(check.id);
  return errors.approvalNotLatest(check.id);
}

/**
 * The Worker's environment with the configuration document a turn names; none named (an object
 * restarted since its last turn, whose outbox still delivers) means the Worker's own, which is
 * the object's environment as it is: never the bundled default in its place.
 */
export function runtimeEnv(env: Env, configText: string | null): Env {
  return configText === null || configText === (env.PARLEY_CONFIG ?? null) ? env : { ...env, PARLEY_CONFIG: configText };
}

/**
 * A turn answered in one piece leaves its running marker once it has run this long after its model
 * call left. Its client sees nothing until the answer, so a restart before then only fails its
 * request, as a restart before the call does; a turn that answers sooner costs one commit (fsync'd)
 * instead of two. A stream's marker is left the moment the call has gone, in the same step rather
 * than a timer's turn later: fetch() takes its place at the output gate when it is called (workerd
 * waits only for locks taken before), so the write does not hold the call, and its commit runs
 * beside the backend's first bytes (about 0.35 ms less time to first token under Miniflare). In any
 * case it is down before its client sees any of the stream.
 */
const JSON_MARKER_DELAY_MS = 100;
/** Lines waiting for the reader beyond this many UTF-16 units hold the turn back (backpressure). */
const MAX_QUEUED_UNITS = 64 * 1024;

/**
 * A turn's events over workerd's native byte pipe, in the wire form `presenter` gives them
 * (NDJSON lines, or the endpoint's own, which then passes through the Worker untouched). Text goes
 * out at once when nothing is on its way; text that comes while a write waits for the reader goes
 * out together in the next write, so a reader that falls behind costs one write per read, not one
 * per event. `gone` is called once when the reader has gone away. A reader that stops reading
 * holds the turn back until it reads on or goes, unless the turn is `stopped` (an interrupt).
 */
function eventChannel(presenter: TurnPresenter, gone: () => void, stopped: AbortSignal) {
  const form = presenting(presenter);
  const stop = new Promise<void>((resolve) => stopped.addEventListener("abort", () => resolve(), { once: true }));
  const channel = new IdentityTransformStream();
  const writer = channel.writable.getWriter();
  const encoder = new TextEncoder();
  let queued = "";
  let readerGone = false;
  let writing: Promise<void> | null = null;
  const drain = async () => {
    while (queued && !readerGone) {
      const text = queued;
      queued = "";
      try {
        await writer.write(encoder.encode(text));
      } catch {
        readerGone = true;
        gone();
      }
    }
    writing = null;
  };
  const queue = (text: string) => {
    if (readerGone || !text) return;
    queued += text;
    writing ??= drain();
  };
  queue(form.start());
  return {
    readable: channel.readable,
    send(event: TurnEvent): Promise<void> | undefined {
      queue(form.events([event]));
      return queued.length > MAX_QUEUED_UNITS && writing && !stopped.aborted ? Promise.race([writing, stop]) : undefined;
    },
    async close(): Promise<void> {
      queue(form.end());
      await writing;
      await writer.close().catch(() => undefined);
    },
  };
}

/** What a started turn's caller learns first: where it runs, its ids and its model. */
function turnHead(plan: TurnPlan, model: ChosenModel, inlineChunks: TurnHead["inlineChunks"]): TurnHead {
  return {
    conversationId: plan.conversationId,
    requestId: plan.requestId,
    responseId: newResponseId(plan.conversationId),
    model: model.model,
    modelRequested: model.requested,
    inlineChunks,
  };
}

/** A turn's stream, in the wire form its plan names; a reader that has gone stops the turn (`abort`). */
function turnChannel(plan: TurnPlan, head: TurnHead, abort: AbortController) {
  return eventChannel(plan.presentation ? streamPresenter(plan.presentation, head) : EVENT_LINES, () => abort.abort(CLIENT_GONE), abort.signal);
}

/**
 * A stream opened before its turn has started (see openBeforeCompaction): its head, its channel, and
 * what stops the turn.
 */
interface OpenedStream {
  head: TurnHead;
  lines: ReturnType<typeof turnChannel>;
  abort: AbortController;
}

/** The abort reason of a stream whose reader went away, or whose client disconnected. */
const CLIENT_GONE = "client disconnected";

export class ConversationDO extends ConversationDurableObject {
  /** The configuration of the latest turn, which the outbox delivers with (the Worker's own after a restart). */
  private configText: string | null = null;
  /** Turns not yet running (request id → their user, and whether their client has left meanwhile). */
  private readonly waitingTurns = new Map<string, { userId: string; left: boolean }>();

  /** Runs a turn (see TurnStart): the one call the Worker makes for it. */
  async runTurn(plan: TurnPlan): Promise<TurnStart> {
    this.configText = plan.configText;
    // Until it runs, its client's leaving is noted (clientGone) and stops it before its model call.
    this.waitingTurns.set(plan.requestId, { userId: plan.auth.userId, left: false });
    try {
      const loaded = await loadRuntime(runtimeEnv(this.env, plan.configText));
      if (!loaded.ok) return refuse(errors.configNotLoaded());
      return await this.run(loaded.runtime, plan);
    } catch (error) {
      if (error instanceof ApiError) return refuse(error);
      log.error("conversation turn failed before it started", error);
      return refuse(errors.internal());
    } finally {
      this.waitingTurns.delete(plan.requestId);
    }
  }

  /** Whether the conversation exists and is the caller's. */
  async checkAccess(userId: string): Promise<ConversationAccess> {
    return this.access(userId);
  }

  /**
   * The client of a turn has gone (the Worker saw its request aborted): a turn still waiting for the
   * conversation never starts, a running stream ends as if its reader had gone (incomplete). A JSON
   * turn already running goes on: its answer is recorded for the conversation.
   */
  async clientGone(requestId: string, userId: string): Promise<void> {
    const running = this.running.get(requestId);
    if (running) {
      if (running.userId === userId) running.clientGone?.();
    } else {
      const waiting = this.waitingTurns.get(requestId);
      if (waiting?.userId === userId) waiting.left = true;
    }
  }

  /** Stops a running turn of this conversation; whether it was running here and the caller's. */
  async interrupt(requestId: string, userId: string): Promise<ConversationAccess> {
    const access = this.interruptRunning(requestId, userId, INTERRUPTED);
    // A stream opened before its turn started (openBeforeCompaction) is stopped as well.
    const running = this.running.get(requestId);
    if (access !== "not_found" || !running?.opening) return access;
    if (running.userId !== userId) return "forbidden";
    running.opening.abort(INTERRUPTED);
    return "ok";
  }

  /** The conversation as its views show it; null when it does not exist, "forbidden" when not the caller's. */
  async describe(userId: string, mayReadOthers: boolean): Promise<{ createdAt: string; topicSummary: string | null; turns: StoredTurn[] } | "not_found" | "forbidden"> {
    const access = this.access(userId, mayReadOthers);
    if (access !== "ok") return access;
    return { createdAt: this.createdAt(), topicSummary: this.meta("topic_summary"), turns: this.ownTurns() };
  }

  /** Sets the topic summary (PUT on the conversation); the record store follows through the outbox. */
  async setTopicSummary(conversationId: string, userId: string, mayUpdateOthers: boolean, summary: string): Promise<ConversationAccess> {
    const access = this.access(userId, mayUpdateOthers);
    if (access !== "ok") return access;
    this.setMeta("topic_summary", summary);
    await this.enqueueNow([recordSnapshot(conversationId)]);
    return "ok";
  }

  /**
   * Deletes the conversation, and its record through the outbox: removed before this returns when
   * the record store answers, else retried until it does (a record store that is down never leaves
   * a deleted conversation listed for good).
   */
  async destroy(conversationId: string, userId: string, mayDeleteOthers: boolean): Promise<ConversationAccess> {
    const access = this.access(userId, mayDeleteOthers);
    if (access !== "ok") return access;
    await this.erase();
    await this.enqueueNow([{ kind: "record-delete", payload: { conversationId } }]);
    return "ok";
  }

  private async run(rt: Runtime, plan: TurnPlan): Promise<TurnStart> {
    const userId = plan.auth.userId;
    const access = this.access(userId, plan.auth.mayUseOthers);
    if (access === "forbidden") return refuse(errors.conversationForbidden(userId, plan.conversationId));
    if (access === "not_found") {
      if (!plan.create) return refuse(errors.notFound("Conversation", plan.conversationId));
      this.create(userId, plan.seed);
    }

    // What it holds while it waits: its question, twice (its items and its text).
    const releaseOnce = await this.takeTurn(() => JSON.stringify(plan.input).length + plan.userText.length + plan.instructions.length);
    if (!releaseOnce) {
      if (access === "not_found") this.forgetCreation();
      return refuse(errors.conversationBusy(plan.conversationId, MAX_WAITING_TURNS, MAX_WAITING_UNITS));
    }
    try {
      // Deleted while this turn waited for its slot.
      if (this.owner() === null) return refuse(errors.notFound("Conversation", plan.conversationId));
      if (plan.previousResponseId) {
        const fork = this.forkFrom(plan);
        if (fork) {
          releaseOnce();
          return await fork;
        }
      }
      return await this.start(rt, plan, releaseOnce);
    } finally {
      // A turn that started releases its slot when it ends; one that did not, here (and a
      // conversation it created is not kept).
      if (!this.running.has(plan.requestId)) {
        this.forgetCreation();
        releaseOnce();
      }
    }
  }

  /** Turns started here and not yet ended; a stream's ends when its client goes (clientGone). */
  private readonly running = new Map<string, { userId: string; clientGone: (() => void) | null; opening?: AbortController }>();

  /**
   * previous_response_id naming this conversation's latest answer continues it; naming an older one
   * forks: a new conversation, seeded with the history up to that answer, takes the turn.
   */
  private forkFrom(plan: TurnPlan): Promise<TurnStart> | null {
    const turns = this.turns();
    const latest = turns.findLast((turn) => turn.status === "completed")?.responseId ?? null;
    if (latest === plan.previousResponseId) return null;
    const upTo = turns.findIndex((turn) => turn.responseId === plan.previousResponseId);
    if (upTo < 0) return Promise.resolve(refuse(errors.notFound("Response", plan.previousResponseId!)));
    // Approvals answer the latest turn; a fork starts from an earlier one (an answer already used says so first).
    if (plan.approvals.length > 0) {
      const checked = this.checkApprovals(plan.approvals, plan.auth.userId);
      return Promise.resolve(refuse(checked.ok ? errors.approvalNotLatest(plan.approvals[0]!.id) : approvalError(checked)));
    }
    const forkId = newConversationId();
    return this.env.CONVERSATION.getByName(forkId).runTurn({
      ...plan,
      conversationId: forkId,
      create: true,
      previousResponseId: null,
      seed: turns.slice(0, upTo + 1),
    }) as Promise<TurnStart>;
  }

  /**
   * A /v1/streaming_query turn that must compact first: its stream opens at once with the
   * compaction event, before the summary is made, as the original's does (UPSTREAM "Compaction"),
   * and the turn goes on behind it, holding the conversation; whatever stops it before its model
   * call ends the stream with that error (nothing is then recorded or charged).
   */
  private openBeforeCompaction(rt: Runtime, plan: TurnPlan, model: ChosenModel, release: () => void): TurnStart {
    const { requestId } = plan;
    const head = turnHead(plan, model, []);
    const abort = new AbortController();
    const lines = turnChannel(plan, head, abort);
    void lines.send({ type: "compaction", conversationId: plan.conversationId });
    // Running from now on, so that run() leaves the conversation's slot to this turn; an interrupt
    // stops it from now on too.
    this.running.set(requestId, { userId: plan.auth.userId, clientGone: () => abort.abort(CLIENT_GONE), opening: abort });
    void (async () => {
      let started: TurnStart;
      try {
        started = await this.start(rt, plan, release, { head, lines, abort });
      } catch (error) {
        if (!(error instanceof ApiError)) log.error(`conversation turn ${requestId} failed before its stream`, error);
        started = refuse(error instanceof ApiError ? error : errors.internal());
      }
      if (started.ok) return;
      this.running.delete(requestId);
      release();
      const failed = failedResult(plan.userText, started.error);
      await lines.send({ type: "finished", result: abort.signal.reason === INTERRUPTED ? { ...failed, status: "interrupted", error: null } : failed });
      await lines.close();
    })();
    return { ok: true, head, events: lines.readable };
  }

  /** Runs a turn that holds its conversation; `opened`: its stream is already open (openBeforeCompaction). */
  private async start(rt: Runtime, plan: TurnPlan, release: () => void, opened: OpenedStream | null = null): Promise<TurnStart> {
    const { requestId } = plan;
    const userId = plan.auth.userId;
    // Its client left while it waited: nothing is asked of the model, nothing recorded or charged.
    if (this.waitingTurns.get(requestId)?.left) return refuse(errors.clientGone());
    const model = await chooseTurnModel(rt, plan, this.lastUsed());
    // A turn keeps its question twice (its items and its summary's text): both must still fit.
    const inputJson = JSON.stringify(plan.input);
    if (this.storedUnits() + 2 * inputJson.length > MAX_STORED_UNITS) return refuse(errors.conversationFull(MAX_STORED_UNITS));
    // A function's output must answer a call of the conversation's or of its own input.
    const unanswered = unansweredCallOutput(plan.input, this.historyItems());
    if (unanswered !== null) return refuse(errors.invalidValue(`No tool call found for function call output with call_id ${unanswered}.`));
    const summary = this.summary();
    let history = summary ? compactedHistory(this.turns(), summary) : this.historyItems();

    // Sizes are measured only when a quota or a context window asks for them.
    const counters = quotaCounters(rt.config, userId);
    const window = contextWindow(rt, model.model);
    const ownBytes = utf8Bytes(plan.instructions) + utf8Bytes(inputJson);
    const historyBytes = () => (summary || history !== this.historyItems() ? utf8Bytes(JSON.stringify(history)) : this.historyBytes());
    let inputBytes = counters.length > 0 || window !== undefined ? ownBytes + historyBytes() : 0;
    // Compaction (README "Conversations"): older turns summarised in place of themselves, this turn holding the conversation.
    let compacted = false;
    if (window !== undefined && compactionDue(rt.config.compaction, window, estimateTokens(inputBytes))) {
      if (!opened) {
        // The summary is a model call the caller is not charged for: not made for one without tokens.
        const spent = counters.length > 0 ? await spentQuota(this.env, counters) : null;
        if (spent) return refuse(spent);
        if (plan.endpoint === "/v1/streaming_query") return this.openBeforeCompaction(rt, plan, model, release);
      }
      const result = await compact(rt, model.model, this.turns(), summary, window, estimateTokens(ownBytes), opened?.abort.signal);
      // Deleted while the summary was made: nothing of it is kept.
      if (this.owner() === null) return refuse(errors.notFound("Conversation", plan.conversationId));
      if (result instanceof ApiError) return refuse(result);
      if (result) {
        this.setMeta("summary", JSON.stringify(result.summary));
        history = result.history;
        inputBytes = ownBytes + historyBytes();
        compacted = true;
      }
    }
    // Interrupted, or its reader left, while the summary was made.
    if (opened?.abort.signal.aborted) return refuse(errors.clientGone());
    const tooLong = checkContextWindow(rt, model.model, estimateTokens(inputBytes));
    if (tooLong) return refuse(tooLong);

    // Approvals it answers (checked, not yet claimed): a client's mistake costs no reservation.
    const checked = plan.approvals.length > 0 ? this.checkApprovals(plan.approvals, userId) : { ok: true as const, decisions: [] };
    if (!checked.ok) return refuse(approvalError(checked));
    const unrunnable = unrunnableApproval(checked.decisions, plan.mcp?.servers ?? []);
    if (unrunnable) return refuse(errors.approvalServerUnavailable(unrunnable.request.id, unrunnable.request.serverLabel));

    // Admitted against what is left at the moment the turn really starts, reserving its estimate.
    const admission = counters.length > 0 ? await admitQuotas(this.env, counters, requestId, estimateTokens(inputBytes)) : { admitted: {}, created: [] };
    if (admission instanceof ApiError) return refuse(admission);
    const settled = (tokens: number): Entry[] => [
      ...(counters.length > 0 ? [{ kind: "quota-settle" as const, payload: { counters, reservationId: requestId, tokens } }] : []),
      ...admission.created.map((created) => ({ kind: "quota-register" as const, payload: created })),
    ];

    const abort = opened?.abort ?? new AbortController();
    const startedAt = new Date().toISOString();
    // Marked once the model call is on its way (see startRunning and JSON_MARKER_DELAY_MS); interruptible from now.
    const marker = this.startRunning(
      {
        requestId,
        userId,
        startedAt,
        provider: model.model.provider_id,
        model: model.model.provider_resource_id,
        input: plan.input,
        userText: plan.userText,
        // Ended without its answer (a restart, a failure of its own): what the input was estimated
        // at is charged (the answer's size is unknown), and the record store hears of the turn.
        afterwards: [...settled(estimateTokens(inputBytes)), recordSnapshot(plan.conversationId)] as OutboxEntry[],
      },
      abort,
    );
    this.running.set(requestId, { userId, clientGone: plan.streaming ? () => abort.abort(CLIENT_GONE) : null });
    const legacyStream = plan.endpoint === "/v1/streaming_query" && conversationOfRequest(requestId) === null;
    let prepared: PreparedTurn | null = null;
    let answer: OpenAnswer;
    const recordCall = modelCallRecorder(this.env, this.ctx, plan, model.model);
    const gated: NewApproval[] = [];
    const approvals = rt.config.approvals;
    try {
      prepared = await prepareTurn(rt, plan, model);
      if (legacyStream) await this.registerLegacyStream(rt, plan);
      answer = await openAnswer(rt, plan, prepared, history, {
        signal: abort.signal,
        sent: () => {
          recordCall.sent();
          if (plan.streaming) marker.now();
          else marker.after(JSON_MARKER_DELAY_MS);
        },
      }, {
        resumed: checked.decisions,
        claimApproved: (id) => this.claimApproval(id),
        ranApproved: (id, item) => this.keepApprovalOutcome(id, item),
        gated: (request) =>
          gated.push({ request, userId, expiresAt: Date.now() + approvals.approval_timeout_seconds * 1000, retainMs: approvals.approval_retention_days * 86_400_000 }),
      });
    } catch (error) {
      // Nothing reached the backend: the turn is not recorded, and its reservation is returned.
      if (prepared && !prepared.verdict) recordCall.record(false);
      this.running.delete(requestId);
      this.abandonRunning(requestId, settled(0) as OutboxEntry[]);
      // Deleted while its backend had not answered yet: the conversation is what is gone, not the backend.
      if (abort.signal.reason === CONVERSATION_DELETED) throw errors.notFound("Conversation", plan.conversationId);
      throw error;
    }
    if (prepared.verdict) recordValidationError(this.env, this.ctx, plan.endpoint);
    const ready = prepared;
    const head = opened?.head ?? turnHead(plan, model, ready.retrieval.chunks);
    let besideAnswer: Promise<string | null> | null = null;

    /** What the turn records, and what it reports. Throws when the turn could not be recorded. */
    const record = (collected: Collected): TurnResult => {
      // A turn stopped by its conversation's deletion fails as the conversation not found: its
      // client is not shown the cut answer as one that ended normally (the model call did not fail).
      const deleted = collected.status === null && abort.signal.reason === CONVERSATION_DELETED;
      if (deleted) collected = { ...collected, status: "failed", error: errors.notFound("Conversation", plan.conversationId) };
      const status: TurnStatus = collected.status ?? (abort.signal.reason === INTERRUPTED ? "interrupted" : "incomplete");
      const outcome = turnOutcome(rt, plan, ready, status, collected, head.responseId, inputBytes);
      const tokens = outcome.tokens.input + outcome.tokens.output;
      if (!ready.verdict) recordCall.record(status !== "failed" || deleted, reportedUsage(collected));
      const entries = settled(tokens);
      if (rt.config.quota_handlers.enable_token_history && tokens > 0) {
        entries.push({ kind: "tokens", payload: { turnKey: requestId, userId, provider: outcome.turn.provider, model: outcome.turn.model, inputTokens: outcome.tokens.input, outputTokens: outcome.tokens.output } });
      }
      if (legacyStream) entries.push({ kind: "stream-unregister", payload: { requestId } });
      if (plan.transcript && rt.config.user_data_collection.transcripts_enabled && (status === "completed" || status === "blocked")) {
        entries.push({ kind: "transcript", payload: transcriptOf(plan, outcome) });
      }
      // Kept only when the conversation still exists (commitTurn drops snapshots otherwise).
      entries.push(recordSnapshot(plan.conversationId));
      // A failed turn leaves the approvals it answered usable, for the client to send again.
      const answered = status === "failed" ? [] : plan.approvals;
      this.commitTurn({ ...outcome.turn, input: withDeniedCalls(outcome.turn.input, checked.decisions), requestId, startedAt }, entries as OutboxEntry[], { created: gated, answered });
      return {
        status,
        response: collected.response,
        text: collected.text,
        inputTokens: outcome.tokens.input,
        outputTokens: outcome.tokens.output,
        summary: outcome.turn.summary,
        error: collected.error ? wire(collected.error) : null,
        availableQuotas: remaining(admission.admitted, tokens),
        ragChunks: outcome.ragChunks,
        referencedDocuments: outcome.referencedDocuments,
      };
    };

    let finished = false;
    /**
     * Ends the turn, once, whatever happens on the way: recorded as its answer says or, when that
     * fails, as failed (an answer whose turn could not be recorded is not reported as a success);
     * then the next turn of the conversation may begin.
     */
    const finish = (collected: Collected): TurnResult => {
      finished = true;
      try {
        return record(collected);
      } catch (error) {
        log.error(`conversation turn ${requestId} could not be recorded`, error);
        this.failRunning(requestId);
        const estimate = estimateTokens(inputBytes);
        return failedResult(plan.userText, wire(errors.internal("the answer could not be recorded")), estimate, remaining(admission.admitted, estimate));
      } finally {
        this.running.delete(requestId);
        release();
        if (besideAnswer) void this.recordTopic(plan.conversationId, besideAnswer);
      }
    };
    /** The answer as read, or a failed one when reading it threw (the readers report backend faults themselves). */
    const read = (forward: (event: ResponseStreamEvent) => Promise<void>): Promise<Collected> =>
      readAnswer(rt, plan, ready, answer, abort.signal, forward).catch((error: unknown) => {
        log.error(`conversation turn ${requestId}: its answer could not be read`, error);
        return failedAnswer(errors.internal("the answer could not be read"));
      });

    try {
      // A new conversation's topic summary is a backend call of its own: a JSON answer's runs beside
      // the answer, a stream's once the stream has ended, so that no event of the answer waits on it.
      // Also the first answer of a conversation whose earlier turns all failed (they made none).
      const firstAnswer = plan.create || this.turns().every((turn) => turn.status === "failed");
      const wantsTopic = firstAnswer && plan.generateTopicSummary && !ready.verdict && this.meta("topic_summary") === null;
      const topic = () => generateTopicSummary(rt, model.model, plan.userText);
      besideAnswer = wantsTopic && !plan.streaming ? topic() : null;

      if (!plan.streaming) return { ok: true, head, result: finish(await read(async () => undefined)) };
      // Down already once its model call left; a turn that made none (a shield refused the question)
      // leaves it here, before its client sees anything of the stream (its head goes back with this call).
      marker.now();

      // A stream: its events go back while the turn runs, `finished` last, as NDJSON lines or in the
      // wire form the plan names. A reader that has gone (the client disconnected) stops the backend
      // call; the turn is then incomplete.
      const lines = opened?.lines ?? turnChannel(plan, head, abort);
      const shown = shownEvents(plan.endpoint);
      void (async () => {
        try {
          // (An opened stream has told it already.)
          if (compacted && !opened) await lines.send({ type: "compaction", conversationId: plan.conversationId });
          const collected = await read(async (event) => {
            if (!shown || shown(event)) await lines.send({ type: "backend", event });
          });
          const result = finish(collected);
          await lines.send({ type: "finished", result });
          // A first turn that failed leaves nothing to sum up (and no entry in the lists, see record).
          if (wantsTopic && result.status !== "failed") void this.recordTopic(plan.conversationId, topic());
        } catch (error) {
          // Only a fault of Parley's own lands here; the turn still ends and the stream closes.
          log.error(`conversation turn ${requestId}: its stream failed`, error);
          if (!finished) finish(failedAnswer(errors.internal()));
        } finally {
          await lines.close();
        }
      })();
      return { ok: true, head, events: lines.readable };
    } catch (error) {
      // A fault of Parley's own between the model call and its reading: the call is stopped and
      // the turn ends as failed, so that the conversation goes on.
      if (!finished) {
        abort.abort("the turn failed");
        finish(failedAnswer(errors.internal()));
      }
      throw error;
    }
  }

  /** The conversation's summary (compaction), if it has one. */
  private summary(): ConversationSummary | null {
    const stored = this.meta("summary");
    return stored === null ? null : (JSON.parse(stored) as ConversationSummary);
  }

  /** A new conversation's topic summary, once generated, is kept and goes to the record store. */
  private async recordTopic(conversationId: string, topic: Promise<string | null>): Promise<void> {
    const summary = await topic;
    if (!summary || this.owner() === null || this.meta("topic_summary")) return;
    this.setMeta("topic_summary", summary);
    this.enqueue([recordSnapshot(conversationId)]);
  }

  /** The conversation's record as the list views show it, written whole (latest state wins). */
  private record(conversationId: string): ConversationRecord {
    const turns = this.ownTurns().filter((turn) => turn.status !== "failed");
    const last = turns.at(-1);
    return {
      id: conversationId,
      userId: this.owner() ?? "",
      lastUsedModel: last?.model ?? "",
      lastUsedProvider: last?.provider ?? "",
      createdAt: this.createdAt(),
      lastMessageAt: last?.completedAt ?? this.createdAt(),
      messageCount: turns.length,
      topicSummary: this.meta("topic_summary"),
      lastResponseId: turns.findLast((turn) => turn.responseId !== null)?.responseId ?? null,
    };
  }

  /** Streams of conversations created by earlier releases are found through the record store. */
  private async registerLegacyStream(rt: Runtime, plan: TurnPlan): Promise<void> {
    const store = openStore(this.env, rt.config.database);
    try {
      await store.streamRequests.register({ requestId: plan.requestId, conversationId: plan.conversationId, userId: plan.auth.userId });
    } finally {
      await store.close();
    }
  }

  protected override async deliver(entries: OutboxEntry[]): Promise<void> {
    const loaded = await loadRuntime(runtimeEnv(this.env, this.configText));
    if (!loaded.ok) throw new Error("the configuration does not load");
    const rt = loaded.runtime;
    const store = openStore(this.env, rt.config.database);
    let current: Entry["kind"] | null = null;
    try {
      for (const entry of entries as Entry[]) {
        current = entry.kind;
        switch (entry.kind) {
          case "record": {
            const record = this.record("conversationId" in entry.payload ? entry.payload.conversationId : entry.payload.id);
            // Listed from its first turn that did not fail, as a JSON answer's failed first turn leaves none.
            if (record.messageCount > 0) await store.conversations.upsertSnapshot(record);
            break;
          }
          case "tokens":
            await store.tokenUsage.addOnce(entry.payload);
            break;
          case "quota-settle":
            await settleQuotas(this.env, entry.payload.counters, entry.payload.reservationId, entry.payload.tokens);
            break;
          case "quota-register":
            await store.quotaSubjects.register({ limiter: entry.payload.limiter, subject: entry.payload.subject, nextResetAt: entry.payload.nextResetAt });
            break;
          case "transcript":
            await writeTranscript({ bucket: this.env.DATA, sql: store.sql }, rt.config.user_data_collection, entry.payload);
            break;
          case "stream-unregister":
            await store.streamRequests.remove(entry.payload.requestId);
            break;
          case "record-delete":
            await store.conversations.delete(entry.payload.conversationId);
            break;
        }
      }
    } catch (error) {
      // Retried by the outbox with backoff; counted so that an operator sees deliveries failing.
      if (current) recordDeliveryFailure(this.env, this.ctx, current);
      throw error;
    } finally {
      await store.close();
    }
  }
}
