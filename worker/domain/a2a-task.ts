// SPEC "A2A task": a task's state is what its events made of it. The context DO folds every event
// it logs into the task snapshot with these pure functions, so tasks/get and the live stream can
// never disagree.
import type { Artifact, Message, Task, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent } from "@a2a-js/sdk";

/** What a task's stream carries (SPEC "A2A events": task, status-update, artifact-update). */
export type A2AEvent = Task | TaskStatusUpdateEvent | TaskArtifactUpdateEvent;

export interface TaskIds {
  taskId: string;
  contextId: string;
}

/** States a task never leaves: no more events are taken, cancel answers "not cancelable". */
export const TERMINAL_STATES: ReadonlySet<TaskState> = new Set<TaskState>(["completed", "failed", "canceled", "rejected"]);

/** States in which a turn is running for the task and its events are taken. */
export const ACTIVE_STATES: ReadonlySet<TaskState> = new Set<TaskState>(["submitted", "working"]);

/**
 * The task as a new message (re)opens it: state submitted, the message appended to its history.
 * A task waiting for input keeps its history and artifacts when the answer arrives.
 */
export function submittedTask(previous: Task | null, ids: TaskIds, message: Message): Task {
  return {
    kind: "task",
    id: ids.taskId,
    contextId: ids.contextId,
    status: { state: "submitted", timestamp: new Date().toISOString() },
    history: [...(previous?.history ?? []), message],
    artifacts: previous?.artifacts ?? [],
    ...(previous?.metadata ? { metadata: previous.metadata } : {}),
  };
}

/** True for the event after which a stream of the task ends. */
export function isFinal(event: A2AEvent): boolean {
  return event.kind === "status-update" && event.final;
}

/**
 * The task after `event`. History keeps the user's messages, the answer (from its artifact) and
 * the status messages of a task that stopped (failure, cancel, input required); text deltas and
 * tool notices are progress, kept in the event log only, or history would hold one message a token.
 */
export function applyEvent(task: Task, event: A2AEvent): Task {
  switch (event.kind) {
    case "task":
      return event;
    case "status-update": {
      const message = event.status.message;
      const keep = message && !ACTIVE_STATES.has(event.status.state) && !task.history?.some((m) => m.messageId === message.messageId);
      return { ...task, status: event.status, history: keep ? [...(task.history ?? []), message] : task.history };
    }
    case "artifact-update": {
      const artifacts = mergeArtifact(task.artifacts ?? [], event.artifact, event.append ?? false);
      const answer: Message | null = event.lastChunk
        ? {
            kind: "message",
            messageId: event.artifact.artifactId,
            role: "agent",
            parts: artifacts.find((a) => a.artifactId === event.artifact.artifactId)!.parts,
            taskId: task.id,
            contextId: task.contextId,
          }
        : null;
      return { ...task, artifacts, history: answer ? [...(task.history ?? []), answer] : task.history };
    }
  }
}

function mergeArtifact(artifacts: Artifact[], update: Artifact, append: boolean): Artifact[] {
  const index = artifacts.findIndex((a) => a.artifactId === update.artifactId);
  if (index === -1) return [...artifacts, update];
  const current = artifacts[index]!;
  const merged = append ? { ...current, ...update, parts: [...current.parts, ...update.parts] } : update;
  return artifacts.map((a, i) => (i === index ? merged : a));
}

/** The task with only the last `historyLength` messages (tasks/get, message/send configuration). */
export function trimHistory(task: Task, historyLength: number | undefined): Task {
  if (historyLength === undefined || !task.history) return task;
  return { ...task, history: historyLength === 0 ? [] : task.history.slice(-historyLength) };
}

/** An agent message with one text part. */
export function agentMessage(ids: TaskIds, text: string): Message {
  return { kind: "message", messageId: crypto.randomUUID(), role: "agent", parts: [{ kind: "text", text }], taskId: ids.taskId, contextId: ids.contextId };
}

export function statusUpdate(
  ids: TaskIds,
  state: TaskState,
  options: { message?: string; final?: boolean; metadata?: Record<string, unknown> } = {},
): TaskStatusUpdateEvent {
  return {
    kind: "status-update",
    taskId: ids.taskId,
    contextId: ids.contextId,
    status: {
      state,
      timestamp: new Date().toISOString(),
      ...(options.message !== undefined ? { message: agentMessage(ids, options.message) } : {}),
    },
    final: options.final ?? false,
    ...(options.metadata ? { metadata: options.metadata } : {}),
  };
}

/** The final status of a task that stopped before its answer was complete. */
export function failedUpdate(ids: TaskIds, reason: string, metadata?: Record<string, unknown>): TaskStatusUpdateEvent {
  return statusUpdate(ids, "failed", { message: reason, final: true, metadata });
}

/** A task whose turn ended without its result (its stream broke off, its object was reset). */
export function brokenTurnUpdate(ids: TaskIds): TaskStatusUpdateEvent {
  return failedUpdate(ids, "Internal server error: the task's turn broke off");
}

/** The whole answer in one chunk: SPEC's artifact-update carries the final content, lastChunk true. */
export function answerArtifact(ids: TaskIds, text: string): TaskArtifactUpdateEvent {
  return {
    kind: "artifact-update",
    taskId: ids.taskId,
    contextId: ids.contextId,
    artifact: { artifactId: crypto.randomUUID(), name: "answer", parts: [{ kind: "text", text }] },
    append: false,
    lastChunk: true,
  };
}
