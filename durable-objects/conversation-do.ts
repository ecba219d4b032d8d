// One ConversationDO per conversation (named by its normalized id). It is the single writer of the
// conversation's history and serializes its turns: a turn begins only when the previous one has
// completed, so concurrent questions are answered in order, none lost and none interleaved. The
// Worker serving a turn holds a control stream from here, through which an interrupt reaches it.
import { DurableObject } from "cloudflare:workers";
import { turnHistory } from "./conversation-history.ts";

export type TurnStatus = "completed" | "incomplete" | "interrupted" | "blocked" | "failed";

/** A backend input or output item (a message, a tool call, ...): plain JSON data. */
export type Item = Record<string, unknown>;

export interface TurnSummary {
  /** The user's question text (as the conversation views show it). */
  user: string;
  /** The answer text. */
  assistant: string;
  tool_calls: Item[];
  tool_results: Item[];
}

export interface StoredTurn {
  turnNumber: number;
  requestId: string;
  status: TurnStatus;
  provider: string;
  model: string;
  responseId: string | null;
  startedAt: string;
  completedAt: string;
  /** Backend input items this turn added (the user's message, attachments, tool outputs). */
  input: Item[];
  /** Backend output items of this turn, replayed as input to later turns. */
  output: Item[];
  summary: TurnSummary;
}

export type TurnOutcome = Omit<StoredTurn, "turnNumber" | "requestId" | "startedAt">;

export type BeginResult =
  | {
      ok: true;
      startedAt: string;
      /** Earlier turns as backend input items, oldest first. */
      history: Item[];
      /** The model and provider of the last turn that was answered, if any. */
      lastUsed: { model: string; provider: string } | null;
      /** Carries an interrupt to the Worker serving the turn; only when the request asked for one. */
      control: ReadableStream<Uint8Array> | null;
    }
  | { ok: false; reason: "not_found" | "forbidden" };

export interface BeginRequest {
  userId: string;
  requestId: string;
  /** A new conversation may be created by this turn; an existing one must already belong to userId. */
  create: boolean;
  /** Turns copied from another conversation when a responses request forks it. */
  seed?: StoredTurn[];
  /** How long the turn may hold the conversation if its Worker never reports back (it crashed). */
  leaseMs: number;
  /** Whether the turn can be interrupted, and so needs a control stream. */
  interruptible: boolean;
}

/** Message written on a turn's control stream when the turn must stop. */
export const INTERRUPT_SIGNAL = "interrupt\n";

interface ActiveTurn {
  requestId: string;
  startedAt: string;
  control: WritableStreamDefaultWriter<Uint8Array> | null;
  release: () => void;
  lease: ReturnType<typeof setTimeout>;
}

export class ConversationDO extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private tail: Promise<void> = Promise.resolve();
  // What storage holds, kept in memory once read: every turn reads the whole history, and parsing
  // it from SQLite on each turn made turns slower as conversations grew.
  private cachedOwner: string | null | undefined;
  private cachedTurns: StoredTurn[] | null = null;
  private cachedHistory: Item[] | null = null;
  /** Running turns by request id (more than one only after a lease ran out). */
  private readonly active = new Map<string, ActiveTurn>();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`
      CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS turns (
        turn_number INTEGER PRIMARY KEY,
        request_id TEXT NOT NULL,
        status TEXT NOT NULL,
        provider TEXT NOT NULL,
        model TEXT NOT NULL,
        response_id TEXT,
        started_at TEXT NOT NULL,
        completed_at TEXT NOT NULL,
        input TEXT NOT NULL,
        output TEXT NOT NULL,
        summary TEXT NOT NULL
      );`);
  }

  /** Waits until every earlier turn has completed, then hands out the history and a control stream. */
  async beginTurn(request: BeginRequest): Promise<BeginResult> {
    const owner = this.owner();
    if (owner === null && !request.create) return { ok: false, reason: "not_found" };
    if (owner !== null && owner !== request.userId) return { ok: false, reason: "forbidden" };
    if (owner === null) {
      this.sql.exec("INSERT INTO meta (key, value) VALUES ('owner', ?)", request.userId);
      this.cachedOwner = request.userId;
      for (const turn of request.seed ?? []) this.insertTurn(turn);
    }

    const previous = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((resolve) => (release = resolve));
    await previous;

    const startedAt = new Date().toISOString();
    const channel = request.interruptible ? new TransformStream<Uint8Array, Uint8Array>() : null;
    this.active.set(request.requestId, {
      requestId: request.requestId,
      startedAt,
      control: channel?.writable.getWriter() ?? null,
      release,
      lease: setTimeout(() => this.finish(request.requestId), request.leaseMs),
    });
    return { ok: true, startedAt, history: this.historyItems(), lastUsed: this.lastUsed(), control: channel?.readable ?? null };
  }

  /**
   * Records the turn (whatever its status) and lets the next one begin. Turns are numbered as they
   * are recorded: one whose lease ran out is still kept, after the turns that went on without it.
   * False when the conversation was deleted meanwhile.
   */
  async completeTurn(requestId: string, outcome: TurnOutcome): Promise<boolean> {
    const turn = this.active.get(requestId);
    // Deleted while the turn ran: nothing is recorded, and the caller must not recreate its record.
    if (this.owner() === null) return false;
    this.insertTurn({ ...outcome, turnNumber: this.nextTurnNumber(), requestId, startedAt: turn?.startedAt ?? outcome.completedAt });
    this.finish(requestId);
    return true;
  }

  /** Lets the next turn begin without recording this one (its backend call never started). */
  async abandonTurn(requestId: string): Promise<void> {
    this.finish(requestId);
  }

  /** Ends a running turn by its request id; false when no such turn is running here. */
  async interrupt(requestId: string): Promise<boolean> {
    const turn = this.active.get(requestId);
    if (!turn?.control) return false;
    await turn.control.write(new TextEncoder().encode(INTERRUPT_SIGNAL)).catch(() => undefined);
    return true;
  }

  /** The whole history, oldest first; null when the conversation does not exist or is not userId's. */
  async history(userId: string): Promise<StoredTurn[] | null> {
    return this.owner() === userId ? this.turns() : null;
  }

  /** Removes every trace of the conversation. */
  async destroy(): Promise<void> {
    for (const requestId of [...this.active.keys()]) this.finish(requestId);
    await this.ctx.storage.deleteAll();
    this.cachedOwner = null;
    this.cachedTurns = [];
    this.cachedHistory = [];
  }

  private finish(requestId: string): void {
    const turn = this.active.get(requestId);
    if (!turn) return;
    this.active.delete(requestId);
    clearTimeout(turn.lease);
    turn.control?.close().catch(() => undefined);
    turn.release();
  }

  private owner(): string | null {
    if (this.cachedOwner === undefined) {
      const row = this.sql.exec<{ value: string }>("SELECT value FROM meta WHERE key = 'owner'").toArray()[0];
      this.cachedOwner = row?.value ?? null;
    }
    return this.cachedOwner;
  }

  private nextTurnNumber(): number {
    return (this.turns().at(-1)?.turnNumber ?? 0) + 1;
  }

  private historyItems(): Item[] {
    this.cachedHistory ??= this.turns().flatMap(turnHistory);
    return this.cachedHistory;
  }

  private lastUsed(): { model: string; provider: string } | null {
    const last = this.turns().findLast((turn) => turn.status !== "failed");
    return last ? { model: last.model, provider: last.provider } : null;
  }

  private insertTurn(turn: StoredTurn): void {
    const turns = this.turns();
    this.sql.exec(
      `INSERT INTO turns (turn_number, request_id, status, provider, model, response_id, started_at, completed_at, input, output, summary)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      turn.turnNumber,
      turn.requestId,
      turn.status,
      turn.provider,
      turn.model,
      turn.responseId,
      turn.startedAt,
      turn.completedAt,
      JSON.stringify(turn.input),
      JSON.stringify(turn.output),
      JSON.stringify(turn.summary),
    );
    // Numbers only grow (seeds arrive in order before any turn), so appending keeps the order.
    turns.push(turn);
    this.cachedHistory?.push(...turnHistory(turn));
  }

  private turns(): StoredTurn[] {
    this.cachedTurns ??= this.sql
      .exec<Record<string, string | number | null>>("SELECT * FROM turns ORDER BY turn_number")
      .toArray()
      .map((row) => ({
        turnNumber: Number(row.turn_number),
        requestId: String(row.request_id),
        status: row.status as TurnStatus,
        provider: String(row.provider),
        model: String(row.model),
        responseId: row.response_id === null ? null : String(row.response_id),
        startedAt: String(row.started_at),
        completedAt: String(row.completed_at),
        input: JSON.parse(String(row.input)) as Item[],
        output: JSON.parse(String(row.output)) as Item[],
        summary: JSON.parse(String(row.summary)) as TurnSummary,
      }));
    return this.cachedTurns;
  }
}

/** The RPC surface of ConversationDO as callers use it. */
export type ConversationApi = Pick<ConversationDO, "beginTurn" | "completeTurn" | "abandonTurn" | "interrupt" | "history" | "destroy">;

/**
 * The stub of one conversation. Workers' RPC stub types map every field through a serializability
 * check that turns the plain-JSON item objects (typed `unknown` inside) into `never`; they are plain
 * JSON at run time, so the stub is typed by the class's own method signatures instead.
 */
export function conversationStub(namespace: DurableObjectNamespace<ConversationDO>, conversationId: string): ConversationApi {
  return namespace.getByName(conversationId) as unknown as ConversationApi;
}
