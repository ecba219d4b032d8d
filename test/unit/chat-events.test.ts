// Chat Completions answers as Responses events (worker/backends/chat-events.ts), from hand-made
// chunks: the shapes real servers send (OpenAI, vLLM, Ollama, llama.cpp), usage present or not,
// cut streams. The events are read back by the turn's own collector (worker/turn/collect.ts).
import type { ChatCompletion, ChatCompletionChunk } from "openai/resources/chat/completions";
import type { Response, ResponseStreamEvent } from "openai/resources/responses/responses";
import { describe, expect, it } from "vitest";
import { ChatEventTranslator, usageWasEstimated } from "../../worker/backends/chat-events.ts";
import type { ResponsesParams } from "../../worker/backends/chat-request.ts";
import { collect } from "../../worker/turn/collect.ts";

const params: ResponsesParams = { model: "llama3", instructions: "sys", input: "q", tools: [{ type: "function", name: "f", parameters: null, strict: null }] };

type Delta = ChatCompletionChunk.Choice.Delta;
const chunk = (delta: Delta, finish: ChatCompletionChunk.Choice["finish_reason"] = null): ChatCompletionChunk => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  created: 1,
  model: "llama3",
  choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }],
});
const usageChunk = (prompt: number, completion: number): ChatCompletionChunk => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  created: 1,
  model: "llama3",
  choices: [],
  usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
});

function translate(chunks: ChatCompletionChunk[], inputTokens = 7): ResponseStreamEvent[] {
  const translator = new ChatEventTranslator(params, inputTokens);
  return [...translator.start(), ...chunks.flatMap((c) => translator.chunk(c)), ...translator.end()];
}

async function* iterate(events: ResponseStreamEvent[]): AsyncIterable<ResponseStreamEvent> {
  yield* events;
}

const terminal = (events: ResponseStreamEvent[]) => events.at(-1) as ResponseStreamEvent & { response: Response };

describe("streamed answers", () => {
  it("give the Responses event sequence of a text answer, with the server's usage", async () => {
    const events = translate([chunk({ role: "assistant", content: "" }), chunk({ content: "Hello " }), chunk({ content: "there" }), chunk({}, "stop"), usageChunk(12, 2)]);
    expect(events.map((event) => event.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((event) => event.sequence_number)).toEqual(events.map((_, index) => index));
    const done = terminal(events).response;
    expect(done).toMatchObject({ status: "completed", model: "llama3", instructions: "sys", tools: params.tools, output_text: "Hello there", error: null });
    expect(done.id).toMatch(/^resp_[0-9a-f]{48}$/);
    expect(done.output).toEqual([
      { type: "message", id: expect.stringMatching(/^msg_[0-9a-f]{48}$/), status: "completed", role: "assistant", content: [{ type: "output_text", text: "Hello there", annotations: [], logprobs: [] }] },
    ]);
    expect(done.usage).toEqual({ input_tokens: 12, input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 14 });
    expect(usageWasEstimated(done)).toBe(false);
    const collected = await collect(iterate(events), new AbortController().signal, async () => undefined);
    expect(collected).toMatchObject({ status: "completed", text: "Hello there", deltas: 2, error: null, usage: { input: 12, output: 2 } });
  });

  it("estimate usage when the server reports none, and say so", async () => {
    const events = translate([chunk({ content: "abcdefgh" }), chunk({}, "stop")], 40);
    const done = terminal(events).response;
    expect(done.usage).toMatchObject({ input_tokens: 40, output_tokens: 2, total_tokens: 42 });
    expect(usageWasEstimated(done)).toBe(true);
    expect(done.metadata).toEqual({ usage_estimated: "true" });
    const collected = await collect(iterate(events), new AbortController().signal, async () => undefined);
    expect(collected.usage).toEqual({ input: 40, output: 2 });
  });

  it("turn tool calls into function_call items with argument deltas, then the message", async () => {
    const events = translate([
      chunk({ role: "assistant", content: "" }),
      chunk({ tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "weather", arguments: "" } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: '"Oslo"}' } }] }),
      chunk({ tool_calls: [{ index: 1, id: "call_2", type: "function", function: { name: "time", arguments: "{}" } }] }),
      chunk({ content: "Checking." }),
      chunk({}, "tool_calls"),
    ]);
    expect(events.map((event) => event.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const added = events[2] as Extract<ResponseStreamEvent, { type: "response.output_item.added" }>;
    expect(added).toMatchObject({ output_index: 0, item: { type: "function_call", call_id: "call_1", name: "weather", arguments: "", status: "in_progress" } });
    const output = terminal(events).response.output;
    expect(output.map((item) => item.type)).toEqual(["function_call", "function_call", "message"]);
    expect(output[0]).toMatchObject({ type: "function_call", call_id: "call_1", name: "weather", arguments: '{"city":"Oslo"}', status: "completed", id: expect.stringMatching(/^fc_/) });
    expect(output[1]).toMatchObject({ call_id: "call_2", name: "time", arguments: "{}" });
    const argsDone = events[5] as Extract<ResponseStreamEvent, { type: "response.function_call_arguments.done" }>;
    expect(argsDone.arguments).toBe('{"city":"Oslo"}');
  });

  it("take tool calls without index or id (as some servers send them) and text before a call", () => {
    const events = translate([
      chunk({ content: "Let me look. " }),
      chunk({ tool_calls: [{ id: "call_a", function: { name: "lookup", arguments: '{"q":' } } as never] }),
      chunk({ tool_calls: [{ function: { arguments: '"x"}' } } as never] }),
      chunk({}, "tool_calls"),
    ]);
    const output = terminal(events).response.output;
    expect(output.map((item) => item.type)).toEqual(["message", "function_call"]);
    expect(output[1]).toMatchObject({ call_id: "call_a", name: "lookup", arguments: '{"q":"x"}' });
    // Every item is done before the next is added.
    const kinds = events.filter((event) => event.type === "response.output_item.added" || event.type === "response.output_item.done").map((event) => event.type);
    expect(kinds).toEqual(["response.output_item.added", "response.output_item.done", "response.output_item.added", "response.output_item.done"]);
  });

  it("complete late fragments of a call already closed in the final response only", () => {
    const events = translate([
      chunk({ tool_calls: [{ index: 0, id: "call_1", function: { name: "a", arguments: "{" } }] }),
      chunk({ tool_calls: [{ index: 1, id: "call_2", function: { name: "b", arguments: "{}" } }] }),
      chunk({ tool_calls: [{ index: 0, function: { arguments: "}" } }] }),
      chunk({}, "tool_calls"),
    ]);
    expect(terminal(events).response.output[0]).toMatchObject({ call_id: "call_1", arguments: "{}" });
    // A call alone makes no message item, as a Responses answer with only a call has none.
    expect(terminal(events).response.output.map((item) => item.type)).toEqual(["function_call", "function_call"]);
  });

  it("end an answer cut by the token limit or the content filter as response.incomplete", async () => {
    const cut = translate([chunk({ content: "partial" }), chunk({}, "length")]);
    expect(terminal(cut)).toMatchObject({ type: "response.incomplete", response: { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } } });
    expect(terminal(cut).response.output[0]).toMatchObject({ type: "message", status: "incomplete" });
    expect((await collect(iterate(cut), new AbortController().signal, async () => undefined)).status).toBe("incomplete");
    const filtered = translate([chunk({}, "content_filter")]);
    expect(terminal(filtered).response).toMatchObject({ status: "incomplete", incomplete_details: { reason: "content_filter" } });
  });

  it("give an empty message for an empty answer, and a refusal as its text", () => {
    const empty = translate([chunk({ role: "assistant", content: "" }), chunk({}, "stop")]);
    expect(terminal(empty).response.output).toEqual([expect.objectContaining({ type: "message", content: [expect.objectContaining({ text: "" })] })]);
    const refused = translate([chunk({ refusal: "I can't." } as Delta), chunk({}, "stop")]);
    expect(terminal(refused).response.output_text).toBe("I can't.");
  });

  it("end without a terminal event when the server never said it finished, so the turn fails as cut", async () => {
    const events = translate([chunk({ content: "Hello " }), chunk({ content: "the" })]);
    expect(events.at(-1)!.type).toBe("response.output_text.delta");
    const collected = await collect(iterate(events), new AbortController().signal, async () => undefined);
    expect(collected).toMatchObject({ status: "failed", text: "Hello the", response: null, error: { status: 500, cause: "the inference backend ended its answer before finishing it" } });
  });
});

describe("JSON answers", () => {
  const completion = (message: Partial<ChatCompletion.Choice["message"]>, finish: ChatCompletion.Choice["finish_reason"] = "stop", usage = true): ChatCompletion => ({
    id: "chatcmpl-2",
    object: "chat.completion",
    created: 1,
    model: "llama3",
    choices: [{ index: 0, finish_reason: finish, logprobs: null, message: { role: "assistant", content: null, refusal: null, ...message } }],
    ...(usage ? { usage: { prompt_tokens: 5, completion_tokens: 3, total_tokens: 8, prompt_tokens_details: { cached_tokens: 2 } } } : {}),
  });

  it("become the Response a Responses backend answers: calls first, then the message", () => {
    const response = new ChatEventTranslator(params, 9).completion(
      completion({ content: "It is sunny.", tool_calls: [{ id: "call_9", type: "function", function: { name: "weather", arguments: "{}" } }] }, "tool_calls"),
    );
    expect(response).toMatchObject({ status: "completed", output_text: "It is sunny.", incomplete_details: null });
    expect(response.output.map((item) => item.type)).toEqual(["function_call", "message"]);
    expect(response.output[0]).toMatchObject({ call_id: "call_9", name: "weather", arguments: "{}", status: "completed" });
    expect(response.usage).toEqual({ input_tokens: 5, input_tokens_details: { cached_tokens: 2, cache_write_tokens: 0 }, output_tokens: 3, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 8 });
  });

  it("estimate absent usage and mark it; a cut answer is incomplete", () => {
    const response = new ChatEventTranslator(params, 9).completion(completion({ content: "abcd" }, "length", false));
    expect(response).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" }, usage: { input_tokens: 9, output_tokens: 1 } });
    expect(usageWasEstimated(response)).toBe(true);
    const onlyCall = new ChatEventTranslator(params, 9).completion(completion({ tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }] }, "tool_calls"));
    expect(onlyCall.output.map((item) => item.type)).toEqual(["function_call"]);
  });
});
