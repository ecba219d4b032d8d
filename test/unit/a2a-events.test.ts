// The translation of a turn's events into A2A events, and the task state they produce.
import type { Message, Task, TaskStatusUpdateEvent } from "@a2a-js/sdk";
import { describe, expect, it } from "vitest";
import { a2aTranslation, finalEvents } from "../../worker/domain/a2a-events.ts";
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

/** The events translated one at a time, as they arrive when each comes alone. */
async function translate(events: TurnEvent[]): Promise<A2AEvent[]> {
  const translation = a2aTranslation(ids, { model: "scripted/parley-small", conversationId: "c".repeat(48) });
  return [...translation.start(), ...events.flatMap((event) => translation.events([event]))];
}

const text = (event: A2AEvent) => (event.kind === "status-update" ? (event.status.message?.parts[0] as { text?: string } | undefined)?.text : undefined);

describe("a2aTranslation, event by event", () => {
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

  it("gives the deltas that arrived together as one status message, the text as it came, tool notices in their place", () => {
    const translation = a2aTranslation(ids, { model: "scripted/parley-small", conversationId: "c".repeat(48) });
    const events = translation.events([
      backend({ type: "response.output_text.delta", delta: "Let me " }),
      backend({ type: "response.output_text.delta", delta: "look." }),
      backend({ type: "response.output_item.added", output_index: 1, item: { type: "mcp_call", name: "search", server_label: "kb" } }),
      backend({ type: "response.output_text.delta", delta: "Found " }),
      backend({ type: "response.output_text.delta", delta: "it" }),
      { type: "finished", result: result({ text: "Let me look.Found it" }) },
    ]);
    expect(events.map((e) => (e.kind === "status-update" ? `${e.status.state}:${text(e) ?? ""}` : e.kind))).toEqual([
      "working:Let me look.",
      "working:Calling tool: search",
      "working:Found it",
      "artifact-update",
      "completed:",
    ]);
    expect(translation.events([backend({ type: "response.output_text.delta", delta: "" })])).toEqual([]);
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
