// The translation of a turn's events into A2A events, and the task state they produce.
import type { Message, Task, TaskStatusUpdateEvent } from "@a2a-js/sdk";
import { describe, expect, it } from "vitest";
import { finalEvents, sendInBatches, turnToA2A } from "../../worker/a2a/events.ts";
import { answerArtifact, applyEvent, statusUpdate, submittedTask, trimHistory, type A2AEvent } from "../../worker/domain/a2a-task.ts";
import { errors } from "../../worker/errors.ts";
import type { TurnEvent, TurnResult } from "../../worker/domain/conversation.ts";

const ids = { taskId: "task-1", contextId: "ctx-1" };

function result(overrides: Partial<TurnResult> = {}): TurnResult {
  return {
    status: "completed",
    response: null,
    text: "Hello there",
    inputTokens: 3,
    outputTokens: 2,
    summary: { user: "hi", assistant: "Hello there", tool_calls: [], tool_results: [] },
    error: null,
    availableQuotas: { daily: 42 },
    ragChunks: [],
    referencedDocuments: [],
    ...overrides,
  };
}

const backend = (event: Record<string, unknown>): TurnEvent => ({ type: "backend", event: event as never });

async function translate(events: TurnEvent[]): Promise<A2AEvent[]> {
  const out: A2AEvent[] = [];
  const readable = new ReadableStream<TurnEvent>({
    start(controller) {
      for (const event of events) controller.enqueue(event);
      controller.close();
    },
  });
  for await (const event of readable.pipeThrough(turnToA2A(ids, { model: "scripted/parley-small", conversationId: "c".repeat(48) }))) out.push(event);
  return out;
}

const text = (event: A2AEvent) => (event.kind === "status-update" ? (event.status.message?.parts[0] as { text?: string } | undefined)?.text : undefined);

describe("turnToA2A", () => {
  it("emits working with model and conversation, deltas, tool notices, the artifact and the final status in order", async () => {
    const events = await translate([
      backend({ type: "response.created", response: {} }),
      backend({ type: "response.output_item.added", output_index: 0, item: { type: "function_call", name: "lookup", arguments: "" } }),
      backend({ type: "response.output_item.added", output_index: 1, item: { type: "mcp_call", name: "search", server_label: "kb" } }),
      backend({ type: "response.output_item.added", output_index: 2, item: { type: "file_search_call" } }),
      backend({ type: "response.output_text.delta", delta: "Hello " }),
      backend({ type: "response.output_text.delta", delta: "" }),
      backend({ type: "response.output_text.delta", delta: "there" }),
      { type: "finished", result: result() },
    ]);
    expect(events.map((e) => (e.kind === "status-update" ? `${e.status.state}${e.final ? "!" : ""}` : e.kind))).toEqual([
      "working",
      "working",
      "working",
      "working",
      "working",
      "artifact-update",
      "completed!",
    ]);
    expect((events[0] as TaskStatusUpdateEvent).metadata).toEqual({ model: "scripted/parley-small", conversation_id: "c".repeat(48) });
    expect(events.slice(1, 5).map(text)).toEqual(["Calling tool: lookup", "Calling tool: search", "Hello ", "there"]);
    const message = (events[3] as TaskStatusUpdateEvent).status.message!;
    expect(message).toMatchObject({ kind: "message", role: "agent", taskId: "task-1", contextId: "ctx-1", messageId: expect.any(String) });
    expect(events[5]).toMatchObject({ kind: "artifact-update", lastChunk: true, taskId: "task-1", contextId: "ctx-1", artifact: { parts: [{ kind: "text", text: "Hello there" }] } });
    expect(events[6]).toMatchObject({ final: true, metadata: { available_quotas: { daily: 42 } } });
  });
});

describe("finalEvents", () => {
  it("maps each turn outcome to the end of an A2A task", () => {
    const states = (r: TurnResult) => finalEvents(ids, r).map((e) => (e.kind === "status-update" ? e.status.state : e.kind));
    expect(states(result({ status: "blocked", text: "I cannot help with that." }))).toEqual(["artifact-update", "completed"]);
    expect(states(result({ status: "incomplete", text: "Half an" }))).toEqual(["artifact-update", "failed"]);
    expect(states(result({ status: "incomplete", text: "" }))).toEqual(["failed"]);
    expect(states(result({ status: "interrupted" }))).toEqual(["canceled"]);
    const failed = finalEvents(ids, result({ status: "failed", error: errors.backendUnavailable() }));
    expect(failed).toHaveLength(1);
    expect(text(failed[0]!)).toBe("Unable to connect to the inference backend: Connection error while trying to reach backend service.");
    expect(failed.every((e) => e.kind !== "status-update" || e.final)).toBe(true);
  });
});

describe("task state", () => {
  const user: Message = { kind: "message", messageId: "u1", role: "user", parts: [{ kind: "text", text: "hi" }] };

  it("folds events into the task: status, artifacts, and a history without the deltas", () => {
    let task: Task = submittedTask(null, ids, user);
    expect(task).toMatchObject({ kind: "task", id: "task-1", contextId: "ctx-1", status: { state: "submitted" }, history: [user], artifacts: [] });
    task = applyEvent(task, statusUpdate(ids, "working", { metadata: { model: "m" } }));
    task = applyEvent(task, statusUpdate(ids, "working", { message: "Hel" }));
    expect(task.status.state).toBe("working");
    expect(task.history).toHaveLength(1);
    const artifact = answerArtifact(ids, "Hello");
    task = applyEvent(task, artifact);
    task = applyEvent(task, statusUpdate(ids, "completed", { final: true }));
    expect(task.status.state).toBe("completed");
    expect(task.artifacts).toEqual([artifact.artifact]);
    expect(task.history!.map((m) => [m.role, (m.parts[0] as { text: string }).text])).toEqual([
      ["user", "hi"],
      ["agent", "Hello"],
    ]);
    expect(trimHistory(task, 1).history).toHaveLength(1);
    expect(trimHistory(task, 0).history).toEqual([]);
    expect(trimHistory(task, undefined).history).toHaveLength(2);
  });

  it("keeps the message of a task that stopped, and appends artifact chunks", () => {
    let task = submittedTask(null, ids, user);
    task = applyEvent(task, statusUpdate(ids, "input-required", { message: "Need text", final: true }));
    expect(task.history!.at(-1)!.role).toBe("agent");
    const resumed = submittedTask(task, ids, { ...user, messageId: "u2" });
    expect(resumed.status.state).toBe("submitted");
    expect(resumed.history).toHaveLength(3);

    const first = { ...answerArtifact(ids, "a"), lastChunk: false };
    let chunked = applyEvent(resumed, first);
    chunked = applyEvent(chunked, { ...first, append: true, lastChunk: true, artifact: { ...first.artifact, parts: [{ kind: "text", text: "b" }] } });
    expect(chunked.artifacts).toHaveLength(1);
    expect(chunked.artifacts![0]!.parts).toEqual([{ kind: "text", text: "a" }, { kind: "text", text: "b" }]);
    expect(chunked.history!.at(-1)!.parts).toHaveLength(2);
  });
});

describe("sendInBatches", () => {
  /**
   * sendInBatches over a stream the test writes to, once its first event (1) has gone out: the
   * calls `send` received, each held until the test settles it.
   */
  async function started() {
    const { readable, writable } = new TransformStream<number, number>();
    const writer = writable.getWriter();
    const calls: Array<{ batch: number[]; settle: (taken: boolean) => void }> = [];
    let called: () => void = () => undefined;
    const nextCall = () => new Promise<void>((resolve) => (called = resolve));
    const send = (batch: number[]) =>
      new Promise<boolean>((settle) => {
        calls.push({ batch, settle });
        called();
      });
    const first = nextCall();
    const done = sendInBatches(readable, send);
    await writer.write(1);
    await first;
    return { writer, calls, nextCall, done };
  }

  it("sends the first event at once and what arrives meanwhile in one batch, in order", async () => {
    const { writer, calls, nextCall, done } = await started();
    expect(calls.map((c) => c.batch)).toEqual([[1]]);
    await writer.write(2);
    await writer.write(3);
    await writer.write(4);
    const call = nextCall();
    calls[0]!.settle(true);
    await call;
    expect(calls.map((c) => c.batch)).toEqual([[1], [2, 3, 4]]);
    await writer.close();
    calls[1]!.settle(true);
    await done;
    expect(calls).toHaveLength(2);
  });

  it("stops and cancels the events when the receiver has ended", async () => {
    const { writer, calls, done } = await started();
    void writer.write(2).catch(() => undefined);
    calls[0]!.settle(false);
    await done;
    await expect(writer.closed).rejects.toBe("the receiver has ended");
    expect(calls).toHaveLength(1);
  });

  it("sends what came before a failure of the events, then throws it", async () => {
    const { writer, calls, nextCall, done } = await started();
    await writer.write(2);
    const second = nextCall();
    await writer.abort(new Error("the turn broke off"));
    calls[0]!.settle(true);
    await second;
    expect(calls.map((c) => c.batch)).toEqual([[1], [2]]);
    calls[1]!.settle(true);
    await expect(done).rejects.toThrow("the turn broke off");
  });
});
