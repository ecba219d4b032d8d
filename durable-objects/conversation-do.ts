// The state of one conversation (DESIGN: one Durable Object per conversation, named by its
// normalized id): its owner, its history, the order of its turns, the turns running now, and the
// outbox that feeds the record store. This class is the mechanism; worker/turn/conversation-runner.ts
// extends it with what a turn does (the backend call, tools, quotas), so nothing here depends on the
// layers above it.
//
// - Order: turns run one at a time, first come first served, each holding the conversation until
//   it has really ended (completed, interrupted, timed out, failed, or the object restarted), never
//   on a lease.
// - Durability: a turn is committed (its rows and what must follow it, in one transaction) before
//   its last event is sent. A running turn leaves a marker once its model call is on its way (or
//   a moment later, as its caller asks); an object that restarts mid-turn records that turn as
//   incomplete and carries out what the marker says must follow (quota settlement). A new
//   conversation is written with its first turn's marker or commit: besides a compaction's
//   summary, nothing is written before a turn's model call.
// - The outbox: work after a turn that must happen but not on the client's wait path (the record
//   store, quota settlement, transcripts) is stored with the turn and delivered from here, retried
//   with backoff (alarm) until it succeeds. Entries are idempotent, so a delivery that succeeded but
//   was not acknowledged may simply run again. Snapshot entries (with a key: the conversation's
//   record, written whole) say what to deliver, not its content: the subclass reads the state as it
//   is at delivery, so while one waits, later changes need no new entry (latest state wins).
// - Size: a SQLite row holds at most 2 MB, so a large turn's data is stored in chunks.
import { DurableObject } from "cloudflare:workers";
import { turnHistory, utf8Bytes, type Item, type StoredTurn, type TurnStatus, type TurnSummary } from "../worker/domain/conversation.ts";
import type { ApprovalAnswer, ApprovalDecision, ApprovalRequest } from "../worker/domain/mcp.ts";
import { log } from "../worker/log.ts";
import { CHUNK_UNITS, CHUNKS_TABLE, dropText, keptText, readChunks, textOf, writeChunks } from "./chunked-text.ts";

/** Work that follows a turn, delivered by the subclass (see `deliver`). */
export interface OutboxEntry {
  kind: string;
  payload: unknown;
  /**
   * A snapshot: delivered with the state at delivery time, so one entry per key waits at a time
   * and entries with the same key stand for one another while undelivered.
   */
  key?: string;
}

/** What a running turn leaves behind, so that a restart can record it and finish its business. */
export interface RunningTurn {
  requestId: string;
  userId: string;
  startedAt: string;
  provider: string;
  model: string;
  input: Item[];
  userText: string;
  /** What must follow this turn if the object restarts before it ends. */
  afterwards: OutboxEntry[];
}

/** A turn running in this object now: who may interrupt it and how, and its running marker. */
interface ActiveTurn {
  turn: RunningTurn;
  abort: AbortController;
  /** Leaves the marker (once). */
  mark: () => void;
  /** When the marker is due (see startRunning's `after`); null until a time is asked for. */
  markAt: number | null;
  marked: boolean;
}

/** A running turn recorded with what its marker holds: the question, no answer (it was lost or unusable). */
function endedAs(turn: RunningTurn, status: "incomplete" | "failed"): Omit<StoredTurn, "turnNumber"> {
  return {
    requestId: turn.requestId,
    status,
    provider: turn.provider,
    model: turn.model,
    responseId: null,
    startedAt: turn.startedAt,
    completedAt: new Date().toISOString(),
    input: turn.input,
    output: [],
    summary: { user: turn.userText, assistant: "", tool_calls: [], tool_results: [] },
  };
}

export type ConversationAccess = "ok" | "not_found" | "forbidden";

/** A gated tool call to record with the turn that asked for it. */
export interface NewApproval {
  request: ApprovalRequest;
  userId: string;
  /** Pending until then (epoch ms), expired after. */
  expiresAt: number;
  /** How long it is kept once decided or expired, in ms. */
  retainMs: number;
}

/** The approvals a turn answers, usable; or why one of them is not. */
export type ApprovalCheck =
  | { ok: true; decisions: ApprovalDecision[] }
  | { ok: false; id: string; reason: "not_found" | "decided" | "stale" };

/** The approvals a committed turn changes. */
export interface ApprovalChanges {
  /** Gated calls of this turn, now pending. */
  created: NewApproval[];
  /** Approvals this turn answered: decided and used up, a later answer to them is refused. */
  answered: ApprovalAnswer[];
}

type ApprovalRow = {
  id: string;
  user_id: string;
  turn_request_id: string;
  request: string;
  status: "pending" | "approved" | "denied" | "expired";
  reason: string | null;
  outcome: string | null;
  consumed_by: string | null;
  expires_at: number;
  retain_ms: number;
};

/** The abort reason of the turns running when their conversation is deleted. */
export const CONVERSATION_DELETED = "the conversation was deleted";

/**
 * The most a conversation keeps, in UTF-16 code units of its turns' stored JSON (README "Limits"):
 * every copy of its turns (a read of the conversation, a fork's seed) must fit one Durable Object
 * call (32 MiB, at most 2 bytes a unit) with the last turn's answer on top, and the object holds
 * them all in memory. A turn that would take it beyond is refused before its model call.
 */
export const MAX_STORED_UNITS = 10 * 1024 * 1024;

/**
 * Turns waiting for their conversation (behind the one running) are held in its object's memory
 * with their questions, so their number and size are bounded (README "Limits"): a turn that would
 * wait beyond either is refused at once.
 */
export const MAX_WAITING_TURNS = 1_000;
export const MAX_WAITING_UNITS = 8 * 1024 * 1024;

/**
 * Snapshots (keyed entries: the conversation's record) go at once when none went in the last this
 * many milliseconds, and otherwise this long after the last one started, so that a conversation's
 * first answer shows in the list views as soon as it is written (a client that lists right after
 * asking finds it), while the turns of a busy conversation cost one record write between them, not
 * one each (the list views' lag). Other entries (quota settlement, token history, transcripts) go
 * at once.
 */
const SNAPSHOT_INTERVAL_MS = 1_000;
/** Outbox retries: 1 s, doubling, at most 5 minutes apart. */
const RETRY_FIRST_MS = 1_000;
const RETRY_MAX_MS = 300_000;
/** A wake further off than this is left to the alarm (timers are for the object's lifetime). */
const MAX_TIMER_MS = 3_600_000;
/**
 * The alarm, the safety net for a wake whose object is gone before its timer fires, is set up to
 * this much later than the wake its timer covers, so that a busy conversation (a snapshot due every
 * second) moves it about once in this time instead of every second: each setAlarm is a storage
 * write of its own (and, under Miniflare, two fsync'd commits on workerd's one thread). An object
 * gone before its timer delivers up to this much later (README "After the answer").
 */
const ALARM_SLACK_MS = 30_000;
/** Entries delivered together at most. */
const OUTBOX_BATCH = 50;

const SCHEMA = `
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
  );
  ${CHUNKS_TABLE}
  CREATE TABLE IF NOT EXISTS running_turns (request_id TEXT PRIMARY KEY, data TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS approvals (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    turn_request_id TEXT NOT NULL,
    request TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    outcome TEXT,
    consumed_by TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    retain_ms INTEGER NOT NULL,
    decided_at INTEGER,
    remove_at INTEGER
  );
  CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT UNIQUE,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at INTEGER NOT NULL DEFAULT 0
  );`;
// Schema versions: 1 kept each turn's JSON in its row (input, output, summary); 2 keeps it there
// while the row can hold it and in chunked blobs when not (those columns are then ''), and adds
// running turns and the outbox. Version 1 rows are read as they are.
const SCHEMA_VERSION = "2";

type TurnRow = Record<string, string | number | null>;

/** A turn's JSON as it is stored: its items, its answer's items and its summary. */
type StoredJson = { input: string; output: string; summary: string };

function storedJson(turn: StoredTurn): StoredJson {
  return { input: JSON.stringify(turn.input), output: JSON.stringify(turn.output), summary: JSON.stringify(turn.summary) };
}

/** A stored turn's size in UTF-16 code units (see storedUnits). */
function storedUnitsOf(json: StoredJson): number {
  return json.input.length + json.output.length + json.summary.length;
}

/** A conversation its first turn created, not yet written. */
type Creation = { owner: string; createdAt: string; seed: StoredTurn[] };
/** Meta key: how many turns (the first ones) a fork was seeded with. */
const SEEDED_TURNS = "seeded_turns";

export abstract class ConversationDurableObject extends DurableObject<Env> {
  private readonly rawSql: SqlStorage;
  /** Whether the schema exists: an object that has stored nothing creates it with its first write. */
  private schemaReady: boolean;
  /** A conversation its first turn created, written with that turn's marker or commit (see create). */
  private unsaved: Creation | null = null;
  private tail: Promise<void> = Promise.resolve();
  /** Turns holding or waiting for the conversation, and what those waiting hold (see takeTurn). */
  private queuedTurns = 0;
  private waitingUnits = 0;
  // What storage holds, kept in memory once read: every turn replays the whole history.
  private cachedOwner: string | null | undefined;
  private cachedMeta: Map<string, string> | null = null;
  private cachedTurns: StoredTurn[] | null = null;
  /** The stored size of `cachedTurns` (see storedUnits), kept with them. */
  private cachedStoredUnits = 0;
  private cachedHistory: Item[] | null = null;
  private cachedHistoryBytes: number | null = null;
  /** Turns running now, by request id: what they are, who may interrupt them, and how. */
  private readonly active = new Map<string, ActiveTurn>();
  private flushing: Promise<void> | null = null;
  private flushAgain = false;
  /** When a timer will wake this object (snapshots, retries, approvals); null when none is set. */
  private wakeTimerAt: number | null = null;
  /** The alarm this object knows it has set (the safety net if it is evicted before its timer). */
  private alarmAt: number | null = null;
  /** When the timer that leaves running markers fires; null when none is set (see leaveDueMarks). */
  private marksAt: number | null = null;
  /** Keys of snapshots waiting in the outbox (known to this instance): asking for one again writes nothing. */
  private readonly waitingSnapshots = new Set<string>();
  /** When the latest delivery of each snapshot key began (known to this instance). */
  private readonly snapshotsSentAt = new Map<string, number>();
  /** Whether the approvals table may hold rows (null: not known yet); a wake skips the sweep when it holds none. */
  private mayHaveApprovals: boolean | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.rawSql = ctx.storage.sql;
    // Nothing is written here (unless an older schema is brought up to date): a write holds every
    // message the object sends until it is durable (its output gate), so one made now would hold
    // the model call of the turn that woke the object. A new object's schema comes with its first write.
    const stored = this.hasSchema();
    this.schemaReady = stored;
    this.forgetCached();
    if (stored && this.meta("schema_version") !== SCHEMA_VERSION) this.createSchema();
    // After the subclass's constructor has run too: recovery delivers through it.
    if (stored) {
      void ctx.blockConcurrencyWhile(async () => {
        await null;
        this.recoverAbandonedTurns();
      });
    }
  }

  private hasSchema(): boolean {
    return this.rawSql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'").toArray().length > 0;
  }

  /**
   * Runs `write` in one transaction. After a rollback, what it changed is read from storage again
   * (a schema it created is gone; a conversation not yet written is still kept in memory).
   */
  private transaction(write: () => void): void {
    try {
      this.ctx.storage.transactionSync(write);
    } catch (error) {
      this.schemaReady = this.hasSchema();
      this.forgetCached();
      if (this.unsaved) this.keepInMemory(this.unsaved);
      throw error;
    }
  }

  /** The object's SQL storage, its schema created first if it was not yet. */
  protected get sql(): SqlStorage {
    if (!this.schemaReady) this.createSchema();
    return this.rawSql;
  }

  private createSchema(): void {
    this.schemaReady = true;
    this.rawSql.exec(SCHEMA);
    this.setMeta("schema_version", SCHEMA_VERSION);
  }

  /** Drops what was kept in memory, to be read again; an object without a schema is known to be empty. */
  private forgetCached(): void {
    const empty = !this.schemaReady;
    this.cachedOwner = empty ? null : undefined;
    this.cachedMeta = empty ? new Map() : null;
    this.cachedTurns = empty ? [] : null;
    this.cachedStoredUnits = 0;
    this.cachedHistory = null;
    this.cachedHistoryBytes = null;
    if (empty) this.mayHaveApprovals = false;
  }

  /** Carries out outbox entries: throws when they must be tried again later. */
  protected abstract deliver(entries: OutboxEntry[]): Promise<void>;

  // -------------------------------------------------------------------------------------------
  // Owner and access
  // -------------------------------------------------------------------------------------------

  protected owner(): string | null {
    if (this.cachedOwner === undefined) this.cachedOwner = this.meta("owner");
    return this.cachedOwner;
  }

  /** Whether `userId` may use this conversation; `others` lets a user reach other users' ones. */
  protected access(userId: string, others = false): ConversationAccess {
    const owner = this.owner();
    if (owner === null) return "not_found";
    return owner === userId || others ? "ok" : "forbidden";
  }

  /**
   * Creates the conversation for `userId`, seeded with turns copied from another (a fork). It exists
   * in memory at once (later requests find it and wait for its first turn) and is written with
   * that turn's running marker or its commit, so that no write holds the turn's model call; a
   * first turn that ends without either leaves no conversation (forgetCreation).
   */
  protected create(userId: string, seed: StoredTurn[] = []): void {
    this.unsaved = { owner: userId, createdAt: new Date().toISOString(), seed };
    this.keepInMemory(this.unsaved);
  }

  private keepInMemory(creation: Creation): void {
    // What storage holds is read first (meta, turns), so that the creation is added to it.
    this.meta("owner");
    this.cachedMeta!.set("owner", creation.owner).set("created_at", creation.createdAt);
    if (creation.seed.length > 0) this.cachedMeta!.set(SEEDED_TURNS, String(creation.seed.length));
    this.cachedOwner = creation.owner;
    this.turns();
    for (const turn of creation.seed) this.remember(turn);
  }

  /**
   * Runs `write` (one transaction, or one statement) in one transaction with the conversation its
   * first turn created, if that is still unwritten.
   */
  private withCreation(write: () => void): void {
    const creation = this.unsaved;
    if (!creation) return write();
    this.transaction(() => {
      this.setMeta("owner", creation.owner);
      this.setMeta("created_at", creation.createdAt);
      if (creation.seed.length > 0) this.setMeta(SEEDED_TURNS, String(creation.seed.length));
      for (const turn of creation.seed) this.writeTurn(turn);
      write();
    });
    this.unsaved = null;
  }

  /** The first turn ended without being recorded: the conversation it created does not exist. */
  protected forgetCreation(): void {
    if (!this.unsaved) return;
    this.unsaved = null;
    this.forgetCached();
  }

  /** The conversation's small facts (owner, creation time, topic, summary), all read once and kept. */
  protected meta(key: string): string | null {
    this.cachedMeta ??= new Map(this.sql.exec<{ key: string; value: string }>("SELECT key, value FROM meta").toArray().map((row) => [row.key, row.value]));
    return this.cachedMeta.get(key) ?? null;
  }

  protected setMeta(key: string, value: string): void {
    this.sql.exec("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", key, value);
    this.cachedMeta?.set(key, value);
  }

  /** When the conversation began (conversations of schema 1 did not record it: their first turn). */
  protected createdAt(): string {
    return this.meta("created_at") ?? this.turns()[0]?.startedAt ?? new Date().toISOString();
  }

  // -------------------------------------------------------------------------------------------
  // Order of turns
  // -------------------------------------------------------------------------------------------

  /**
   * Waits until every earlier turn has ended; the returned function lets the next one begin. Null,
   * without waiting, when the turns already waiting are as many or as large as the object holds
   * (MAX_WAITING_TURNS, MAX_WAITING_UNITS): `units` is what this one would hold while it waits,
   * asked only when it would wait.
   */
  protected async takeTurn(units: () => number): Promise<(() => void) | null> {
    let weight = 0;
    if (this.queuedTurns > 0) {
      weight = units();
      if (this.queuedTurns > MAX_WAITING_TURNS || this.waitingUnits + weight > MAX_WAITING_UNITS) return null;
    }
    this.queuedTurns++;
    this.waitingUnits += weight;
    const previous = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    this.waitingUnits -= weight;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.queuedTurns--;
      release();
    };
  }

  /**
   * A turn is running: an interrupt finds it from now on. The returned marker is the row a restart
   * finishes the turn by (a question too large for it keeps its text only): `after(ms)` leaves it
   * then, if the turn is still running; `now()` at once, unless it is down already.
   *
   * Leave it once the turn's model call has been sent, not before: a write holds every message the
   * object sends until it is durable (its output gate), so a marker written before the call would
   * hold the call itself until its commit is confirmed (on Cloudflare, by replication). Under
   * Miniflare a commit runs synchronously on workerd's one thread (fsync'd with state on disk), so
   * a marker left a moment after the call has gone overlaps the backend's own work. The price: an
   * object that restarts in the moment between the call and the commit has no marker, so that turn,
   * which its client saw fail, is not recorded, and its quota reservation lapses by itself
   * (durable-objects/quota-do.ts). Once the turn has ended it leaves nothing.
   */
  protected startRunning(turn: RunningTurn, abort: AbortController): { after(ms: number): void; now(): void } {
    const running: ActiveTurn = {
      turn,
      abort,
      markAt: null,
      marked: false,
      mark: () => {
        if (running.marked || this.active.get(turn.requestId) !== running) return;
        running.marked = true;
        let data = JSON.stringify(turn);
        if (data.length > CHUNK_UNITS) data = JSON.stringify({ ...turn, input: [{ type: "message", role: "user", content: turn.userText.slice(0, CHUNK_UNITS / 4) }] });
        try {
          this.withCreation(() => this.sql.exec("INSERT OR REPLACE INTO running_turns (request_id, data) VALUES (?, ?)", turn.requestId, data));
        } catch (error) {
          log.error(`conversation turn ${turn.requestId}: could not leave its running marker (a restart would not record it)`, error);
        }
      },
    };
    this.active.set(turn.requestId, running);
    return {
      after: (ms) => {
        if (running.markAt !== null) return;
        running.markAt = Date.now() + ms;
        this.scheduleMarks(running.markAt);
      },
      now: running.mark,
    };
  }

  /**
   * One timer for every marker waiting for its time, not one per turn: the turns of a busy
   * conversation follow each other within milliseconds, mostly ending before their marker is due,
   * and a timer set and cleared for each of them cost it 15-20 µs of CPU (V8 profile at
   * concurrency 10).
   */
  private scheduleMarks(at: number): void {
    if (this.marksAt !== null && this.marksAt <= at) return;
    this.marksAt = at;
    setTimeout(() => {
      // A timer an earlier one replaced: that one sets the next.
      if (this.marksAt === at) this.leaveDueMarks();
    }, Math.max(0, at - Date.now()));
  }

  /** Leaves the markers that are due, and sets the timer for the next. */
  private leaveDueMarks(): void {
    this.marksAt = null;
    const now = Date.now();
    let next = Infinity;
    for (const running of this.active.values()) {
      if (running.marked || running.markAt === null) continue;
      if (running.markAt <= now) running.mark();
      else next = Math.min(next, running.markAt);
    }
    if (next !== Infinity) this.scheduleMarks(next);
  }

  /** The turn is no longer running here: an interrupt no longer finds it, and it leaves no marker. */
  private endRunning(requestId: string): void {
    this.active.delete(requestId);
  }

  /** Ends a running turn without recording it (it never reached the backend). */
  protected abandonRunning(requestId: string, afterwards: OutboxEntry[] = []): void {
    this.endRunning(requestId);
    let due: number | null = null;
    this.transaction(() => {
      this.clearRunning(requestId);
      due = this.addToOutbox(afterwards);
    });
    this.deliverSoon(due);
  }

  /**
   * Records a finished turn (whatever its status) with the work that must follow it, in one
   * transaction, and ends its running marker. False when the conversation was deleted meanwhile:
   * nothing is recorded then (what must follow still is, e.g. quota settlement).
   */
  protected commitTurn(turn: Omit<StoredTurn, "turnNumber">, afterwards: OutboxEntry[], approvals?: ApprovalChanges): StoredTurn | null {
    const exists = this.owner() !== null;
    const stored: StoredTurn = { ...turn, turnNumber: this.nextTurnNumber() };
    const kept = exists ? afterwards : afterwards.filter((entry) => !entry.key);
    let due: number | null = null;
    this.withCreation(() =>
      this.transaction(() => {
        this.clearRunning(turn.requestId);
        if (exists) {
          this.insertTurn(stored);
          if (approvals) this.recordApprovals(turn.requestId, approvals);
        }
        due = this.addToOutbox(kept);
      }),
    );
    // Still running until recorded: a turn whose commit failed can be recorded as failed instead.
    this.endRunning(turn.requestId);
    this.deliverSoon(due);
    if (exists && approvals && (approvals.created.length > 0 || approvals.answered.length > 0)) this.scheduleApprovalWake();
    return exists ? stored : null;
  }

  /** Ends a running turn by its request id; whether it ran here and the caller may stop it. */
  protected interruptRunning(requestId: string, userId: string, reason: string): ConversationAccess {
    const running = this.active.get(requestId);
    if (!running) return "not_found";
    if (running.turn.userId !== userId) return "forbidden";
    running.abort.abort(reason);
    return "ok";
  }

  /**
   * After a restart, turns that were running are recorded as incomplete (their answer, if any, was
   * lost with the object's memory) and what had to follow them is carried out.
   */
  private recoverAbandonedTurns(): void {
    const abandoned = this.sql.exec<{ data: string }>("SELECT data FROM running_turns").toArray();
    for (const { data } of abandoned) {
      const turn = JSON.parse(data) as RunningTurn;
      log.warn(`conversation turn ${turn.requestId} was running when its Durable Object restarted; recorded as incomplete`);
      this.commitTurn(endedAs(turn, "incomplete"), turn.afterwards);
    }
    if (this.sql.exec("SELECT 1 FROM outbox LIMIT 1").toArray().length > 0) this.flushOutbox();
  }

  /**
   * Ends a running turn that could not be finished as its answer said (an unexpected failure after
   * its model call was sent): recorded as failed with what its marker holds, what must follow it
   * carried out. When even that cannot be written, the marker stays for a restart to find.
   */
  protected failRunning(requestId: string): void {
    const running = this.active.get(requestId);
    if (!running) return;
    try {
      this.commitTurn(endedAs(running.turn, "failed"), running.turn.afterwards);
    } catch (error) {
      this.endRunning(requestId);
      log.error(`conversation turn ${requestId}: could not be recorded as failed`, error);
    }
  }

  /** Removes a turn's marker: one a restart left, or this object's own if it left one (a quick JSON answer's never was). */
  private clearRunning(requestId: string): void {
    if (this.active.get(requestId)?.marked === false) return;
    this.sql.exec("DELETE FROM running_turns WHERE request_id = ?", requestId);
  }

  // -------------------------------------------------------------------------------------------
  // History
  // -------------------------------------------------------------------------------------------

  protected turns(): StoredTurn[] {
    if (this.cachedTurns === null) {
      const rows = this.sql.exec<TurnRow>("SELECT * FROM turns ORDER BY turn_number").toArray();
      this.cachedStoredUnits = 0;
      this.cachedTurns = rows.map((row) => {
        const { turn, units } = this.turnFromRow(row);
        this.cachedStoredUnits += units;
        return turn;
      });
    }
    return this.cachedTurns;
  }

  /**
   * The turns the conversation's views show: a fork's starts with the turn that forked it (SPEC
   * "Conversation continuity"); the turns it was seeded with are its model's history only.
   */
  protected ownTurns(): StoredTurn[] {
    const seeded = Number(this.meta(SEEDED_TURNS) ?? 0);
    return seeded === 0 ? this.turns() : this.turns().filter((turn) => turn.turnNumber > seeded);
  }

  /**
   * How much the conversation's turns take as stored JSON, in UTF-16 code units: what bounds the
   * size of every copy of them (a Durable Object call carries at most 32 MiB, 2 bytes a unit at
   * worst) and of this object's memory.
   */
  protected storedUnits(): number {
    this.turns();
    return this.cachedStoredUnits;
  }

  /** Earlier turns as backend input items, oldest first. */
  protected historyItems(): Item[] {
    this.cachedHistory ??= this.turns().flatMap(turnHistory);
    return this.cachedHistory;
  }

  /** The size of the history as JSON, for the turn's token estimate (kept, not recounted per turn). */
  protected historyBytes(): number {
    this.cachedHistoryBytes ??= utf8Bytes(JSON.stringify(this.historyItems()));
    return this.cachedHistoryBytes;
  }

  /** The model and provider of the last turn that was answered, if any. */
  protected lastUsed(): { model: string; provider: string } | null {
    const last = this.turns().findLast((turn) => turn.status !== "failed");
    return last ? { model: last.model, provider: last.provider } : null;
  }

  private nextTurnNumber(): number {
    return (this.turns().at(-1)?.turnNumber ?? 0) + 1;
  }

  private insertTurn(turn: StoredTurn): void {
    // Read before the write, so that the new row is not read with the rest and then added again.
    this.turns();
    this.remember(turn, this.writeTurn(turn));
  }

  /** Writes a turn's row (and blobs); returns its stored size in UTF-16 code units. */
  private writeTurn(turn: StoredTurn): number {
    // A turn's JSON stays in its row when the row can hold it (one table written), in blobs when not.
    const json = storedJson(turn);
    const { input, output, summary } = json;
    const units = storedUnitsOf(json);
    const inline = units <= CHUNK_UNITS;
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
      ...(inline ? [input, output, summary] : ["", "", ""]),
    );
    if (!inline) writeChunks(this.sql, `turn:${turn.turnNumber}`, `{"input":${input},"output":${output},"summary":${summary}}`);
    return units;
  }

  /** Adds a turn to what is kept in memory (numbers only grow: seeds arrive in order before any turn). */
  private remember(turn: StoredTurn, units = storedUnitsOf(storedJson(turn))): void {
    this.turns().push(turn);
    this.cachedStoredUnits += units;
    const added = turnHistory(turn);
    this.cachedHistory?.push(...added);
    if (this.cachedHistoryBytes !== null && added.length > 0) this.cachedHistoryBytes += utf8Bytes(JSON.stringify(added)) + 1;
  }

  private turnFromRow(row: TurnRow): { turn: StoredTurn; units: number } {
    const turnNumber = Number(row.turn_number);
    let units: number;
    let data: { input: Item[]; output: Item[]; summary: TurnSummary };
    if (row.input === "") {
      const text = readChunks(this.sql, `turn:${turnNumber}`);
      units = text?.length ?? 0;
      data = text === null ? { input: [], output: [], summary: { user: "", assistant: "", tool_calls: [], tool_results: [] } } : (JSON.parse(text) as typeof data);
    } else {
      const [input, output, summary] = [String(row.input), String(row.output), String(row.summary)];
      units = storedUnitsOf({ input, output, summary });
      data = { input: JSON.parse(input) as Item[], output: JSON.parse(output) as Item[], summary: JSON.parse(summary) as TurnSummary };
    }
    const turn: StoredTurn = {
      turnNumber,
      requestId: String(row.request_id),
      status: row.status as TurnStatus,
      provider: String(row.provider),
      model: String(row.model),
      responseId: row.response_id === null ? null : String(row.response_id),
      startedAt: String(row.started_at),
      completedAt: String(row.completed_at),
      ...data,
    };
    return { turn, units };
  }

  // -------------------------------------------------------------------------------------------
  // Approvals of tool calls
  // -------------------------------------------------------------------------------------------
  //
  // A gated call is recorded as pending with the turn that asked for it, in that turn's commit.
  // It is answered here, where the conversation's state lives. Turns of a conversation run one at
  // a time, so an answer is checked and used up by one turn before the next looks at it: the same
  // answer sent twice at once, or to two instances, is used once. An approved call is claimed
  // just before it runs and its result kept the moment it has run, so it never runs twice: a turn
  // that used it but failed afterwards can be sent again and gets that result; a call whose result
  // was lost with the object (it may have run) is not run again. Pending approvals expire at their
  // time-out; used and expired ones are removed after their retention, both by this object's alarm.

  /**
   * Checks the approvals a turn answers, all or none: each must be this user's, unexpired, not used
   * by a committed turn, and asked for by the conversation's latest turn.
   */
  protected checkApprovals(answers: ApprovalAnswer[], userId: string, now = Date.now()): ApprovalCheck {
    this.sweepApprovals(now);
    const latest = this.turns().findLast((turn) => turn.status !== "failed")?.requestId ?? null;
    const decisions: ApprovalDecision[] = [];
    for (const answer of answers) {
      const row = this.sql.exec<ApprovalRow>("SELECT * FROM approvals WHERE id = ?", answer.id).toArray()[0];
      if (!row || row.user_id !== userId || row.status === "expired") return { ok: false, id: answer.id, reason: "not_found" };
      // Used by a committed turn; or claimed, and then either lost (it may have run) or run (it can no longer be denied).
      if (row.consumed_by !== null || (row.status === "approved" && (row.outcome === null || !answer.approve))) return { ok: false, id: answer.id, reason: "decided" };
      if (row.turn_request_id !== latest) return { ok: false, id: answer.id, reason: "stale" };
      decisions.push({
        request: JSON.parse(row.request) as ApprovalRequest,
        approve: answer.approve,
        reason: answer.reason,
        outcome: row.outcome === null ? null : (JSON.parse(row.outcome) as Item),
      });
    }
    return { ok: true, decisions };
  }

  /** An approved call is about to run: from now on it is never run again. */
  protected claimApproval(id: string, now = Date.now()): void {
    this.sql.exec("UPDATE approvals SET status = 'approved', decided_at = ?, remove_at = ? + retain_ms WHERE id = ?", now, now, id);
  }

  /** An approved call has run: its result is kept with the approval at once. */
  protected keepApprovalOutcome(id: string, outcome: Item): void {
    this.sql.exec("UPDATE approvals SET outcome = ? WHERE id = ?", JSON.stringify(outcome), id);
  }

  private recordApprovals(turnRequestId: string, changes: ApprovalChanges): void {
    const now = Date.now();
    if (changes.created.length > 0) this.mayHaveApprovals = true;
    for (const approval of changes.created) {
      this.sql.exec(
        "INSERT INTO approvals (id, user_id, turn_request_id, request, status, created_at, expires_at, retain_ms) VALUES (?, ?, ?, ?, 'pending', ?, ?, ?)",
        approval.request.id,
        approval.userId,
        turnRequestId,
        JSON.stringify(approval.request),
        now,
        approval.expiresAt,
        approval.retainMs,
      );
    }
    for (const answer of changes.answered) {
      this.sql.exec(
        `UPDATE approvals SET status = ?, reason = ?, consumed_by = ?, decided_at = COALESCE(decided_at, ?), remove_at = COALESCE(decided_at, ?) + retain_ms WHERE id = ?`,
        answer.approve ? "approved" : "denied",
        answer.reason,
        turnRequestId,
        now,
        now,
        answer.id,
      );
    }
  }

  /** Expires what has waited too long and removes what has been kept long enough. */
  private sweepApprovals(now = Date.now()): void {
    if (this.mayHaveApprovals === false) return;
    this.sql.exec("UPDATE approvals SET status = 'expired', decided_at = expires_at, remove_at = expires_at + retain_ms WHERE status = 'pending' AND expires_at <= ?", now);
    this.sql.exec("DELETE FROM approvals WHERE remove_at IS NOT NULL AND remove_at <= ?", now);
    this.scheduleApprovalWake();
  }

  private scheduleApprovalWake(): void {
    const next = this.sql
      .exec<{ next: number | null }>("SELECT MIN(CASE WHEN status = 'pending' THEN expires_at ELSE remove_at END) AS next FROM approvals")
      .one().next;
    this.mayHaveApprovals = next !== null;
    if (next !== null) this.wakeAt(next).catch((error: unknown) => log.error("conversation approvals: could not schedule their expiry", error));
  }

  // -------------------------------------------------------------------------------------------
  // Deleting
  // -------------------------------------------------------------------------------------------

  /**
   * Removes the conversation: its owner, history and record snapshot. Running turns are stopped
   * (they record nothing), and an outbox delivery under way finishes first, so that nothing it
   * writes can bring the conversation's record back after the caller has removed it; later
   * deliveries skip snapshots of a conversation that no longer exists. What must follow turns
   * regardless (quota settlement, token history, transcripts) stays and is still delivered.
   */
  protected async erase(): Promise<void> {
    for (const turn of this.active.values()) turn.abort.abort(CONVERSATION_DELETED);
    this.cachedOwner = null;
    this.unsaved = null;
    await this.flushing;
    this.transaction(() => {
      this.sql.exec("DELETE FROM turns");
      this.sql.exec("DELETE FROM blobs WHERE key LIKE 'turn:%'");
      this.sql.exec("DELETE FROM meta WHERE key <> 'schema_version'");
      this.sql.exec("DELETE FROM outbox WHERE key IS NOT NULL");
      this.sql.exec("DELETE FROM approvals");
    });
    this.waitingSnapshots.clear();
    this.mayHaveApprovals = false;
    this.cachedOwner = null;
    this.cachedMeta = null;
    this.cachedTurns = [];
    this.cachedStoredUnits = 0;
    this.cachedHistory = [];
    this.cachedHistoryBytes = 0;
  }

  // -------------------------------------------------------------------------------------------
  // Outbox
  // -------------------------------------------------------------------------------------------

  /**
   * Stores work that must follow a change made outside a turn (a new topic summary, once per
   * conversation) and delivers it at once, a snapshot too.
   */
  protected enqueue(entries: OutboxEntry[]): void {
    this.deliverSoon(this.addToOutbox(entries, true));
  }

  /**
   * The same, returning once delivered (a change the caller made explicitly shows in the lists
   * when it is told so); a failed delivery is retried as usual.
   */
  protected async enqueueNow(entries: OutboxEntry[]): Promise<void> {
    this.enqueue(entries);
    await this.flushing;
  }

  /** Sees to the delivery of entries just stored, `due` being the earliest (see addToOutbox). */
  private deliverSoon(due: number | null): void {
    if (due === null) return;
    if (due <= Date.now()) this.flushOutbox();
    // A delivery under way sets the next wake itself when it ends.
    else if (!this.flushing && (this.wakeTimerAt === null || this.wakeTimerAt > due)) {
      this.wakeAt(due).catch((error: unknown) => log.error("conversation outbox: could not schedule its delivery", error));
    }
  }

  /**
   * Stores entries; returns when the earliest of them is due (null when none was stored: only
   * snapshots already waiting). A snapshot is due at once unless one of its key was delivered
   * within SNAPSHOT_INTERVAL_MS; `now` makes it due at once regardless.
   */
  private addToOutbox(entries: OutboxEntry[], now = false): number | null {
    let due: number | null = null;
    for (const entry of entries) {
      // One waiting snapshot covers every later change (it is read at delivery), unless it is wanted sooner.
      if (entry.key && !now && this.waitingSnapshots.has(entry.key)) continue;
      const payload = JSON.stringify(entry.payload);
      let at = Date.now();
      if (entry.key) {
        const sentAt = this.snapshotsSentAt.get(entry.key);
        if (!now && sentAt !== undefined) at = Math.max(at, sentAt + SNAPSHOT_INTERVAL_MS);
        // A snapshot asked for while its delivery is under way has a row still: it is due again
        // at the time just worked out, not at once.
        this.sql.exec(
          "INSERT INTO outbox (key, kind, payload, next_at) VALUES (?, ?, ?, ?) ON CONFLICT (key) DO UPDATE SET payload = excluded.payload, kind = excluded.kind, next_at = excluded.next_at",
          entry.key,
          entry.kind,
          payload,
          now ? 0 : at,
        );
        this.waitingSnapshots.add(entry.key);
      } else {
        // A transcript may be as large as its question and answer: beyond one value, in chunks.
        this.sql.exec("INSERT INTO outbox (kind, payload) VALUES (?, ?)", entry.kind, keptText(this.sql, `outbox:${crypto.randomUUID()}`, payload));
      }
      due = due === null ? at : Math.min(due, at);
    }
    return due;
  }

  /** Delivers what is due now, in order; runs again when entries arrive during a delivery. */
  protected flushOutbox(): void {
    if (this.flushing) {
      this.flushAgain = true;
      return;
    }
    this.flushing = this.deliverDue().finally(() => {
      this.flushing = null;
      if (this.flushAgain) {
        this.flushAgain = false;
        this.flushOutbox();
      }
    });
  }

  private async deliverDue(): Promise<void> {
    for (;;) {
      const rows = this.sql
        .exec<{ id: number; key: string | null; kind: string; payload: string; attempts: number }>(
          "SELECT id, key, kind, payload, attempts FROM outbox WHERE next_at <= ? ORDER BY id LIMIT ?",
          Date.now(),
          OUTBOX_BATCH,
        )
        .toArray();
      if (rows.length === 0) break;
      if (this.owner() === null) {
        // Deleted: its snapshots describe a conversation that must not reappear.
        for (const row of rows) if (row.key) this.sql.exec("DELETE FROM outbox WHERE id = ?", row.id);
        rows.splice(0, rows.length, ...rows.filter((row) => !row.key));
        if (rows.length === 0) continue;
      }
      // From here a change asks for its snapshot again: this delivery may read the state before it.
      const startedAt = Date.now();
      for (const row of rows) {
        if (!row.key) continue;
        this.waitingSnapshots.delete(row.key);
        this.snapshotsSentAt.set(row.key, startedAt);
      }
      const entries = rows.map((row) => ({ kind: row.kind, payload: JSON.parse(textOf(this.sql, row.payload)) as unknown, ...(row.key ? { key: row.key } : {}) }));
      try {
        await this.deliver(entries);
      } catch (error) {
        const attempts = Math.max(...rows.map((row) => row.attempts)) + 1;
        const delay = Math.min(RETRY_MAX_MS, RETRY_FIRST_MS * 2 ** (attempts - 1));
        log.error(`conversation outbox: delivery failed (attempt ${attempts}), retrying in ${delay / 1000} s`, error);
        for (const row of rows) this.sql.exec("UPDATE outbox SET attempts = ?, next_at = ? WHERE id = ?", attempts, Date.now() + delay, row.id);
        // Still waiting (for their retry), so later changes need no entry of their own.
        for (const row of rows) if (row.key) this.waitingSnapshots.add(row.key);
        break;
      }
      // A snapshot asked for again while it was being delivered stays due.
      for (const row of rows) {
        if (row.key && this.waitingSnapshots.has(row.key)) continue;
        this.sql.exec("DELETE FROM outbox WHERE id = ?", row.id);
        dropText(this.sql, row.payload);
      }
    }
    const next = this.sql.exec<{ next: number | null }>("SELECT MIN(next_at) AS next FROM outbox").one().next;
    if (next !== null) await this.wakeAt(next);
  }

  /**
   * Wakes this object at `at` (the outbox's next delivery, an approval's expiry): by a timer while
   * it lives, by its alarm if it does not. A wake does whatever is due then.
   */
  private async wakeAt(at: number): Promise<void> {
    const when = Math.max(at, Date.now() + 10);
    // Far-off wakes (a retention of days) are the alarm's alone, and so get no slack.
    const timed = when - Date.now() <= MAX_TIMER_MS;
    if (timed && (this.wakeTimerAt === null || when < this.wakeTimerAt)) {
      this.wakeTimerAt = when;
      setTimeout(() => {
        this.wakeTimerAt = null;
        this.wake();
      }, when - Date.now());
    }
    // After a restart the alarm already set is not known in memory: never put it off beyond the slack.
    const latest = when + (timed ? ALARM_SLACK_MS : 0);
    this.alarmAt ??= await this.ctx.storage.getAlarm();
    if (this.alarmAt === null || this.alarmAt > latest) {
      this.alarmAt = latest;
      await this.ctx.storage.setAlarm(this.alarmAt);
    }
  }

  private wake(): void {
    this.sweepApprovals();
    this.flushOutbox();
  }

  override async alarm(): Promise<void> {
    this.alarmAt = null;
    this.wake();
    await this.flushing;
  }
}
