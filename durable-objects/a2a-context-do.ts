// One A2AContextDO per (user, A2A contextId). It maps the context to its conversation and is the
// single writer of the context's tasks: their state, history, artifacts and event log. The Worker
// running a task's turn appends its events here; every stream of the task (the one that started
// it and any tasks/resubscribe) reads from here, so all of them see the same events in the same
// order, and a cancel or the time-out ends the task for all of them at once.
import type { Message, Task } from "@a2a-js/sdk";
import { DurableObject } from "cloudflare:workers";
import { ACTIVE_STATES, TERMINAL_STATES, applyEvent, brokenTurnUpdate, failedUpdate, isFinal, statusUpdate, submittedTask, type A2AEvent } from "../worker/domain/a2a-task.ts";
import { a2aTranslation } from "../worker/domain/a2a-events.ts";
import type { TurnEvent } from "../worker/domain/conversation.ts";
import { ndjsonParser } from "../worker/domain/ndjson.ts";
import { log } from "../worker/log.ts";
import { CHUNKS_TABLE, dropText, keptText, textOf } from "./chunked-text.ts";

/** SPEC "Limits": a task still running this long after it was submitted fails. */
export const A2A_TASK_TIMEOUT_MS = 300_000;

export interface ContextConversation {
  /** Normalized id of the conversation this context continues. */
  id: string;
  /** False until a turn has begun in it: the first turn creates it. */
  started: boolean;
}

export type StartTaskResult = { ok: true; task: Task } | { ok: false; reason: "not_found" | "terminal" | "running" };

export type CancelTaskResult = { ok: true; task: Task } | { ok: false; reason: "not_found" | "not_cancelable" };

// A type alias, not an interface: the SQL cursor types want rows assignable to a string-keyed record.
type TaskRow = {
  task_id: string;
  state: string;
  task: string;
  request_id: string | null;
  deadline: number | null;
  first_seq: number;
};

const encoder = new TextEncoder();

export class A2AContextDO extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  /** Running tasks as their latest events left them (see record). */
  private readonly running = new Map<string, Task>();
  /**
   * The answer's progress (text deltas, tool notices) of running tasks, as logged lines not yet
   * written: they go into the log together with the task's next other event (its artifact, its
   * end), so a long answer costs one write, not one per arriving delta (each a commit, on this
   * machine's disk 0.4 ms). After a restart a running task's log lacks them; its answer is whole in
   * its artifact.
   */
  private readonly progress = new Map<string, string[]>();
  /** Open streams per task, each written every event the task logs until its final one. */
  private readonly subscribers = new Map<string, Set<WritableStreamDefaultWriter<Uint8Array>>>();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`
      CREATE TABLE IF NOT EXISTS context (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        conversation_id TEXT NOT NULL,
        conversation_started INTEGER NOT NULL DEFAULT 0
      );
      CREATE TABLE IF NOT EXISTS context_user (id INTEGER PRIMARY KEY CHECK (id = 1), user_id TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS tasks (
        task_id TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        task TEXT NOT NULL,
        request_id TEXT,
        deadline INTEGER,
        first_seq INTEGER NOT NULL DEFAULT 0
      );
      CREATE TABLE IF NOT EXISTS events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        task_id TEXT NOT NULL,
        event TEXT NOT NULL
      );
      CREATE INDEX IF NOT EXISTS events_by_task ON events (task_id, seq);
      ${CHUNKS_TABLE}`);
    // A running task whose turn this object was following when it was reset (a deploy, a crash):
    // the turn's stream went with the old instance, so the task fails now, not at its time-out.
    const orphaned = this.sql.exec<TaskRow>("SELECT * FROM tasks WHERE request_id IS NOT NULL AND state IN ('submitted', 'working')").toArray();
    for (const row of orphaned) this.record(row, [brokenTurnUpdate(this.ids(row))]);
  }

  /** The context's conversation; the first call binds `candidateId` to it. */
  async bindConversation(candidateId: string, userId: string): Promise<ContextConversation> {
    this.sql.exec("INSERT OR IGNORE INTO context (id, conversation_id) VALUES (1, ?)", candidateId);
    // Whose turns they are, so that a time-out can stop one (older contexts learn it here).
    this.sql.exec("INSERT OR IGNORE INTO context_user (id, user_id) VALUES (1, ?)", userId);
    const row = this.sql.exec<{ conversation_id: string; conversation_started: number }>("SELECT * FROM context").one();
    return { id: row.conversation_id, started: row.conversation_started === 1 };
  }

  /**
   * Opens a task for `message`: a new one, or (resume) one waiting for input. Logs its `task` event
   * (state submitted) and starts its time-out.
   */
  async startTask(input: { taskId: string; contextId: string; message: Message; resume: boolean; requestId: string | null }): Promise<StartTaskResult> {
    const row = this.row(input.taskId);
    if (input.resume && !row) return { ok: false, reason: "not_found" };
    if (row && TERMINAL_STATES.has(row.state as Task["status"]["state"])) return { ok: false, reason: "terminal" };
    if (row && ACTIVE_STATES.has(row.state as Task["status"]["state"])) return { ok: false, reason: "running" };

    const task = submittedTask(row ? this.taskOf(row) : null, { taskId: input.taskId, contextId: input.contextId }, input.message);
    const deadline = Date.now() + A2A_TASK_TIMEOUT_MS;
    const json = JSON.stringify(task);
    if (row) dropText(this.sql, row.task);
    this.sql.exec(
      `INSERT INTO tasks (task_id, state, task, request_id, deadline) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (task_id) DO UPDATE SET state = excluded.state, task = excluded.task, request_id = excluded.request_id, deadline = excluded.deadline`,
      input.taskId,
      task.status.state,
      this.keptTask(input.taskId, json),
      input.requestId,
      deadline,
    );
    // A resumed task's stream starts over at its new `task` event.
    const seq = this.log(input.taskId, json);
    this.sql.exec("UPDATE tasks SET first_seq = ? WHERE task_id = ?", seq, input.taskId);
    const alarm = await this.ctx.storage.getAlarm();
    if (alarm === null || alarm > deadline) await this.ctx.storage.setAlarm(deadline);
    return { ok: true, task };
  }

  /**
   * Follows the turn that answers a task: records which turn it is (so cancel and time-out can
   * interrupt it) and that the conversation now exists, then reads the turn's events (`lines`, the
   * NDJSON its conversation's object sends) as they come, translating and logging what arrives
   * together as one batch. One call for the whole turn: a call per event, or per batch of them,
   * cost the answer a round trip to this object per delta (2-3 ms each under wrangler dev, minutes
   * for a long answer). When the task ends meanwhile (canceled, timed out), the stream is
   * cancelled, which stops the turn; a stream that breaks off fails the task.
   */
  async followTurn(taskId: string, turn: { requestId: string; model: string; conversationId: string }, lines: ReadableStream<Uint8Array>): Promise<void> {
    this.sql.exec("UPDATE context SET conversation_started = 1");
    const started = this.row(taskId);
    if (!started || !ACTIVE_STATES.has(started.state as Task["status"]["state"])) {
      await lines.cancel("the task has ended");
      return;
    }
    this.sql.exec("UPDATE tasks SET request_id = ? WHERE task_id = ?", turn.requestId, taskId);
    const ids = this.ids(started);
    const translation = a2aTranslation(ids, turn);
    const parse = ndjsonParser<TurnEvent>();
    const reader = lines.getReader();
    try {
      let batch = translation.start();
      for (;;) {
        if (batch.length > 0 && !(await this.appendEvents(taskId, batch))) {
          await reader.cancel("the task has ended");
          return;
        }
        const next = await reader.read();
        batch = translation.events(parse(next.done ? null : next.value));
        if (next.done) break;
      }
      if (batch.length > 0) await this.appendEvents(taskId, batch);
    } catch (error) {
      log.error("A2A task lost its turn", error);
      // Nobody reads the turn's stream any more: cancelled, it stops the turn and frees its conversation.
      await reader.cancel("the task's turn broke off").catch(() => undefined);
    }
    // A turn's events end with its result, which ends the task: one still running lost its turn.
    await this.appendEvents(taskId, [brokenTurnUpdate(ids)]);
  }

  /**
   * Logs events of a running task, in order, and passes them to its streams (none after a final
   * one); false once the task has ended, when none are taken.
   */
  async appendEvents(taskId: string, events: A2AEvent[]): Promise<boolean> {
    const row = this.row(taskId);
    if (!row || !ACTIVE_STATES.has(row.state as Task["status"]["state"])) return false;
    const final = events.findIndex(isFinal);
    this.record(row, final < 0 ? events : events.slice(0, final + 1));
    return true;
  }

  /** The task as it stands; null when this context has no such task. */
  async getTask(taskId: string): Promise<Task | null> {
    const row = this.row(taskId);
    return row ? (this.running.get(taskId) ?? this.taskOf(row)) : null;
  }

  /**
   * The task's events from its latest `task` event on, as NDJSON, then its live events until the
   * final one; a task that is not running ends after the replay. Null when there is no such task.
   */
  async subscribe(taskId: string): Promise<ReadableStream<Uint8Array> | null> {
    const row = this.row(taskId);
    if (!row) return null;
    const channel = new TransformStream<Uint8Array, Uint8Array>();
    const writer = channel.writable.getWriter();
    const logged = this.sql.exec<{ event: string }>("SELECT event FROM events WHERE task_id = ? AND seq >= ? ORDER BY seq", taskId, row.first_seq);
    for (const { event } of logged) send(writer, `${textOf(this.sql, event)}\n`);
    for (const line of this.progress.get(taskId) ?? []) send(writer, `${line}\n`);
    if (ACTIVE_STATES.has(row.state as Task["status"]["state"])) {
      let streams = this.subscribers.get(taskId);
      if (!streams) this.subscribers.set(taskId, (streams = new Set()));
      streams.add(writer);
    } else {
      writer.close().catch(() => undefined);
    }
    return channel.readable;
  }

  /** Cancels a task that has not ended, and interrupts its turn if one is running. */
  async cancelTask(taskId: string): Promise<CancelTaskResult> {
    const row = this.row(taskId);
    if (!row) return { ok: false, reason: "not_found" };
    if (TERMINAL_STATES.has(row.state as Task["status"]["state"])) return { ok: false, reason: "not_cancelable" };
    const task = this.record(row, [statusUpdate(this.ids(row), "canceled", { message: "Task canceled by the client.", final: true })]);
    await this.interruptTurn(row);
    return { ok: true, task };
  }

  /** The SPEC time-out: running tasks past their deadline fail and their turns are interrupted. */
  override async alarm(): Promise<void> {
    const now = Date.now();
    const due = this.sql
      .exec<TaskRow>("SELECT * FROM tasks WHERE deadline IS NOT NULL AND deadline <= ? AND state IN ('submitted', 'working')", now)
      .toArray();
    for (const row of due) {
      this.record(row, [failedUpdate(this.ids(row), `Task timed out after ${A2A_TASK_TIMEOUT_MS / 1000} seconds.`)]);
    }
    await Promise.all(due.map((row) => this.interruptTurn(row)));
    const next = this.sql
      .exec<{ next: number | null }>("SELECT MIN(deadline) AS next FROM tasks WHERE deadline IS NOT NULL AND state IN ('submitted', 'working')")
      .one().next;
    if (next !== null) await this.ctx.storage.setAlarm(next);
  }

  /**
   * Applies, logs and publishes events (the last of them may be final); returns the task after
   * them. The log takes every event (progress with the next other event, see `progress`); the
   * task's row is written when its state changes or an artifact arrives, not for each delta of the
   * answer (a status update that only says more), which the running task keeps in memory: a delta
   * costs no write at all, let alone a rewrite of the whole task with its question. After a
   * restart the row lacks only the latest deltas' status.
   */
  private record(row: TaskRow, events: A2AEvent[]): Task {
    let task = this.running.get(row.task_id) ?? this.taskOf(row);
    let lines = "";
    for (const event of events) {
      task = applyEvent(task, event);
      const line = JSON.stringify(event);
      lines += `${line}\n`;
      if (isProgress(event)) {
        const progress = this.progress.get(row.task_id);
        if (progress) progress.push(line);
        else this.progress.set(row.task_id, [line]);
        continue;
      }
      for (const earlier of this.progress.get(row.task_id) ?? []) this.log(row.task_id, earlier);
      this.progress.delete(row.task_id);
      this.log(row.task_id, line);
    }
    const final = events.some(isFinal);
    if (final || task.status.state !== row.state || events.some((event) => event.kind !== "status-update")) {
      dropText(this.sql, row.task);
      this.sql.exec(
        "UPDATE tasks SET state = ?, task = ?, deadline = ? WHERE task_id = ?",
        task.status.state,
        this.keptTask(row.task_id, JSON.stringify(task)),
        final ? null : row.deadline,
        row.task_id,
      );
    }
    if (final) this.running.delete(row.task_id);
    else this.running.set(row.task_id, task);
    const streams = this.subscribers.get(row.task_id);
    for (const writer of streams ?? []) {
      send(writer, lines);
      if (final) writer.close().catch(() => undefined);
    }
    if (final) this.subscribers.delete(row.task_id);
    return task;
  }

  /** Logs an event, given as its JSON; returns its place in the log. */
  private log(taskId: string, event: string): number {
    // An event may carry a whole answer (its artifact) or question (the task): beyond one value, in chunks.
    const kept = keptText(this.sql, `event:${crypto.randomUUID()}`, event);
    return this.sql.exec<{ seq: number }>("INSERT INTO events (task_id, event) VALUES (?, ?) RETURNING seq", taskId, kept).one().seq;
  }

  private ids(row: TaskRow): { taskId: string; contextId: string } {
    return { taskId: row.task_id, contextId: this.taskOf(row).contextId };
  }

  /** A task as its row keeps it (in chunks when it is larger than one value). */
  private taskOf(row: TaskRow): Task {
    return JSON.parse(textOf(this.sql, row.task)) as Task;
  }

  /** What a task's row keeps of its JSON; the row's earlier value is dropped first (dropText). */
  private keptTask(taskId: string, json: string): string {
    return keptText(this.sql, `task:${taskId}`, json);
  }

  private row(taskId: string): TaskRow | null {
    return this.sql.exec<TaskRow>("SELECT * FROM tasks WHERE task_id = ?", taskId).toArray()[0] ?? null;
  }

  /**
   * Stops the turn of a task that has ended: a running one is interrupted; one still waiting for
   * its conversation (behind the context's earlier tasks) is told its client has gone, so that it
   * never starts and leaves nothing in the conversation.
   */
  private async interruptTurn(row: TaskRow): Promise<void> {
    const requestId = this.row(row.task_id)?.request_id;
    const context = this.sql.exec<{ conversation_id: string }>("SELECT conversation_id FROM context").toArray()[0];
    const user = this.sql.exec<{ user_id: string }>("SELECT user_id FROM context_user").toArray()[0];
    if (!requestId || !context || !user) return;
    const conversation = this.env.CONVERSATION.getByName(context.conversation_id);
    try {
      if ((await conversation.interrupt(requestId, user.user_id)) === "not_found") await conversation.clientGone(requestId, user.user_id);
    } catch (error) {
      log.error("could not interrupt the turn of an A2A task", error);
    }
  }
}

/** An event that only says more of the answer: a status message of a task still working. */
function isProgress(event: A2AEvent): boolean {
  return event.kind === "status-update" && !event.final && event.status.state === "working" && event.metadata === undefined;
}

/** Writes without waiting for the reader; a reader that has gone only loses its own stream. */
function send(writer: WritableStreamDefaultWriter<Uint8Array>, line: string): void {
  writer.write(encoder.encode(line)).catch(() => undefined);
}

/** The RPC surface of A2AContextDO as callers use it. */
export type A2AContextApi = Pick<
  A2AContextDO,
  "bindConversation" | "startTask" | "followTurn" | "appendEvents" | "getTask" | "subscribe" | "cancelTask"
>;

/**
 * The DO of one user's context. The name pairs both unambiguously, so another user's contextId
 * reaches a different DO (and a different conversation). Typed by the class's own signatures, as
 * conversationStub explains: the RPC types turn the open-ended A2A metadata objects into `never`.
 */
export function contextStub(namespace: DurableObjectNamespace<A2AContextDO>, userId: string, contextId: string): A2AContextApi {
  return namespace.getByName(JSON.stringify([userId, contextId])) as unknown as A2AContextApi;
}
