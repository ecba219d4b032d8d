// The checks of a backend's answers (worker/backends/answer-shapes.ts): every answer the scripted
// backend gives through the official client passes, in both wire APIs, with fields and item types
// Parley does not read left alone; answers of the wrong shape are refused, saying where.
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkedChunk, checkedCompletion, checkedEvent, checkedResponse, MalformedAnswer, moderationFlagged } from "../../worker/backends/answer-shapes.ts";
import { startScriptedBackend, type ScriptedBackend } from "../fakes/scripted-backend.ts";

let backend: ScriptedBackend;
let client: OpenAI;
const model = "scripted/parley-small";

beforeAll(async () => {
  backend = await startScriptedBackend();
  client = new OpenAI({ baseURL: backend.url, apiKey: "test-key", maxRetries: 0 });
});

afterAll(async () => {
  await backend.close();
});

const message = (content: unknown) => ({ type: "message", id: "msg_1", role: "assistant", status: "completed", content });
const response = (fields: Record<string, unknown>) => ({ id: "resp_1", object: "response", status: "completed", output: [message([{ type: "output_text", text: "hi", annotations: [] }])], usage: { input_tokens: 3, output_tokens: 1 }, ...fields });

describe("Responses answers", () => {
  it("passes what the scripted backend answers, JSON and streamed, tool calls included", async () => {
    for (const input of ["hello there", "look it up #call-tool:lookup", "#fail-midstream one two three"]) {
      if (!input.includes("fail")) expect(checkedResponse(await client.responses.create({ model, input }))).toBeTruthy();
      const stream = await client.responses.create({ model, input, stream: true });
      const types: string[] = [];
      try {
        for await (const event of stream) types.push(checkedEvent(event).type);
      } catch (error) {
        // #fail-midstream: the SDK throws for the backend's own error event, not our check.
        expect(error).not.toBeInstanceOf(MalformedAnswer);
      }
      expect(types).toContain("response.output_text.delta");
    }
  });

  it("leaves fields and item types it does not read alone", () => {
    const reasoning = { type: "reasoning", id: "rs_1", summary: [], encrypted_content: null };
    const answer = response({ output: [reasoning, message([{ type: "refusal", refusal: "no" }])], usage: null, extra: { anything: true } });
    expect(checkedResponse(answer)).toBe(answer);
    const event = { type: "response.reasoning_summary_text.delta", delta: 7 };
    expect(checkedEvent(event)).toBe(event);
  });

  it.each([
    ["no output", response({ output: undefined }), /answer could not be read at output/],
    ["a message without content", response({ output: [message(null)] }), /at output\.0\.content/],
    ["an output_text without text", response({ output: [message([{ type: "output_text" }])] }), /an output_text part needs its text/],
    ["a function call without its call id", response({ output: [{ type: "function_call", name: "f", arguments: "{}" }] }), /a function_call needs its name, arguments and call_id/],
    ["tokens as text", response({ usage: { input_tokens: "3", output_tokens: 1 } }), /at usage\.input_tokens/],
    ["negative tokens", response({ usage: { input_tokens: -1, output_tokens: 1 } }), /at usage\.input_tokens/],
    ["not an object", [1, 2], /answer could not be read/],
  ])("refuses an answer with %s", (_, answer, cause) => {
    expect(() => checkedResponse(answer)).toThrow(MalformedAnswer);
    expect(() => checkedResponse(answer)).toThrow(cause);
  });

  it.each([
    ["no type", { delta: "x" }, /stream event could not be read at type/],
    ["a delta that is not text", { type: "response.output_text.delta", delta: 42 }, /response\.output_text\.delta event could not be read at delta/],
    ["a completion without its response", { type: "response.completed" }, /response\.completed event could not be read at response/],
    ["a failure whose response has no output", { type: "response.failed", response: { status: "failed", error: { message: "x" } } }, /at response\.output/],
  ])("refuses a stream event with %s", (_, event, cause) => {
    expect(() => checkedEvent(event)).toThrow(cause);
  });
});

describe("Chat Completions answers", () => {
  it("passes what the scripted backend answers, JSON and streamed, tool calls and usage included", async () => {
    for (const content of ["hello there", "look it up #call-tool:lookup"]) {
      const messages = [{ role: "user" as const, content }];
      expect(checkedCompletion(await client.chat.completions.create({ model, messages }))).toBeTruthy();
      const stream = await client.chat.completions.create({ model, messages, stream: true, stream_options: { include_usage: true } });
      let chunks = 0;
      for await (const chunk of stream) {
        checkedChunk(chunk);
        chunks += 1;
      }
      expect(chunks).toBeGreaterThan(2);
    }
  });

  const completion = (fields: Record<string, unknown>) => ({ id: "c", object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }], ...fields });

  it.each([
    ["no choices", completion({ choices: null }), /at choices/],
    ["content that is not text", completion({ choices: [{ message: { content: 42 }, finish_reason: "stop" }] }), /at choices\.0\.message\.content/],
    ["a function call without its function", completion({ choices: [{ message: { content: null, tool_calls: [{ id: "call_1", type: "function" }] } }] }), /a function tool call needs its name and arguments/],
    ["tokens as text", completion({ usage: { prompt_tokens: 1, completion_tokens: "2" } }), /at usage\.completion_tokens/],
  ])("refuses a completion with %s", (_, answer, cause) => {
    expect(() => checkedCompletion(answer)).toThrow(cause);
  });

  it("refuses a chunk whose delta content is not text", () => {
    expect(() => checkedChunk({ id: "c", choices: [{ index: 0, delta: { content: 42 }, finish_reason: null }] })).toThrow(/stream chunk could not be read at choices\.0\.delta\.content/);
  });
});

describe("moderations", () => {
  it("reads the scripted backend's verdicts through the official client", async () => {
    expect(moderationFlagged(await client.moderations.create({ input: "a kind word" }))).toBe(false);
    expect(moderationFlagged(await client.moderations.create({ input: "#unsafe words" }))).toBe(true);
  });

  it.each([
    ["no results", { results: [] }, /at results: Too small/],
    ["a result without its verdict", { results: [{ categories: {} }] }, /at results\.0\.flagged/],
    ["a verdict in words", { results: [{ flagged: "yes" }] }, /at results\.0\.flagged/],
    ["a page that is not JSON", "<html>", /moderation could not be read/],
  ])("refuses one with %s rather than reading it as not flagged", (_, answer, cause) => {
    expect(() => moderationFlagged(answer)).toThrow(cause);
  });
});

describe("the scripted backend's #misshapen answers", () => {
  it("are refused in both wire APIs, JSON and streamed", async () => {
    // The SDK's own reading of a Responses answer (its output_text) already trips over it: read it raw.
    const json: unknown = await (await client.responses.create({ model, input: "broken #misshapen" }).asResponse()).json();
    expect(() => checkedResponse(json)).toThrow(/at output/);
    const completionJson = await client.chat.completions.create({ model, messages: [{ role: "user", content: "broken #misshapen" }] });
    expect(() => checkedCompletion(completionJson)).toThrow(/at choices/);

    const events = await client.responses.create({ model, input: "one two three #misshapen", stream: true });
    await expect(
      (async () => {
        for await (const event of events) checkedEvent(event);
      })(),
    ).rejects.toThrow(/delta/);
    const chunks = await client.chat.completions.create({ model, messages: [{ role: "user", content: "one two three #misshapen" }], stream: true });
    await expect(
      (async () => {
        for await (const chunk of chunks) checkedChunk(chunk);
      })(),
    ).rejects.toThrow(/delta\.content/);
  });
});
