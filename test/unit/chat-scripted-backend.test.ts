// The scripted backend's Chat Completions side, driven with the official openai client: if the SDK's
// own parsers (and its stream accumulator) accept it, a real chat-only server can replace it.
import OpenAI, { APIError, BadRequestError, InternalServerError, NotFoundError, RateLimitError } from "openai";
import type { ChatCompletionChunk } from "openai/resources/chat/completions";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startScriptedBackend, type ScriptedBackend } from "../fakes/scripted-backend.ts";

let backend: ScriptedBackend;
let chatOnly: ScriptedBackend;
let client: OpenAI;
const MODEL = "scripted/parley-small";

beforeAll(async () => {
  backend = await startScriptedBackend();
  chatOnly = await startScriptedBackend({ chatOnly: true, rejectStreamOptions: true, omitUsage: true, modelStyle: "openai" });
  client = new OpenAI({ baseURL: backend.url, apiKey: "test-key", maxRetries: 0 });
});

afterAll(async () => {
  await Promise.all([backend.close(), chatOnly.close()]);
});

beforeEach(async () => {
  await fetch(backend.url.replace(/\/v1$/, "/__reset"), { method: "POST" });
});

async function chunksOf(stream: AsyncIterable<ChatCompletionChunk>): Promise<ChatCompletionChunk[]> {
  const chunks: ChatCompletionChunk[] = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

describe("chat completions (JSON)", () => {
  it("answers as /v1/responses does, with the same usage", async () => {
    const completion = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hello there" },
      ],
    });
    expect(completion.id).toMatch(/^chatcmpl-/);
    expect(completion.object).toBe("chat.completion");
    expect(completion.model).toBe(MODEL);
    expect(completion.choices).toHaveLength(1);
    expect(completion.choices[0]).toMatchObject({ index: 0, finish_reason: "stop", message: { role: "assistant", content: "[user_turns=1] You said: hello there" } });
    const responses = await client.responses.create({ model: MODEL, input: "hello there", instructions: "be brief" });
    expect(completion.choices[0]!.message.content).toBe(responses.output_text);
    expect(completion.usage).toEqual({
      prompt_tokens: responses.usage!.input_tokens,
      completion_tokens: responses.usage!.output_tokens,
      total_tokens: responses.usage!.total_tokens,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    });
  });

  it("reads history: user turns, text parts, tool results, and the topic-summary instructions", async () => {
    const completion = await client.chat.completions.create({
      model: "parley-large",
      messages: [
        { role: "user", content: "first question" },
        { role: "assistant", content: "first answer" },
        { role: "user", content: [{ type: "text", text: "second" }, { type: "text", text: "question" }] },
      ],
    });
    expect(completion.choices[0]!.message.content).toBe("[user_turns=2] You said: second\nquestion");
    expect(completion.usage?.prompt_tokens).toBe(6);
    const topic = await client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "system", content: "Write a topic summary." }, { role: "user", content: "how do I #rate-limit reset my quota" }],
    });
    expect(topic.choices[0]!.message.content).toBe("Topic: how do I reset my");
  });

  it("gives a tool call with #call-tool, and none once its result follows", async () => {
    const question = "weather? #call-tool:get_weather";
    const completion = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: question }] });
    const choice = completion.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBe(`[user_turns=1] You said: ${question}`);
    const call = choice.message.tool_calls![0]!;
    expect(call).toMatchObject({ type: "function", function: { name: "get_weather", arguments: JSON.stringify({ query: question }) } });
    expect(call.id).toMatch(/^call_/);
    const followUp = await client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: "user", content: question },
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: "sunny" },
      ],
    });
    expect(followUp.choices[0]!.message.tool_calls).toBeUndefined();
    expect(followUp.choices[0]!.finish_reason).toBe("stop");
  });

  it("echoes the chat body as received with #echo-request", async () => {
    const request = { model: MODEL, messages: [{ role: "system" as const, content: "sys" }, { role: "user" as const, content: "show #echo-request" }], temperature: 0.5 };
    const completion = await client.chat.completions.create(request);
    expect(JSON.parse(completion.choices[0]!.message.content!)).toEqual(request);
    expect(backend.requests.at(-1)).toMatchObject({ method: "POST", path: "/v1/chat/completions", body: request });
  });

  it("refuses what OpenAI refuses: unpaired tool calls and results, bad roles, stream_options without stream", async () => {
    const call = { id: "call_1", type: "function" as const, function: { name: "f", arguments: "{}" } };
    await expect(
      client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "q" }, { role: "assistant", tool_calls: [call] }, { role: "user", content: "again" }] }),
    ).rejects.toThrow(/must be followed by tool messages.*call_1/);
    await expect(client.chat.completions.create({ model: MODEL, messages: [{ role: "tool", tool_call_id: "call_9", content: "x" }] })).rejects.toThrow(/preceeding message with 'tool_calls'/);
    await expect(client.chat.completions.create({ model: MODEL, messages: [{ role: "robot", content: "x" } as never] })).rejects.toBeInstanceOf(BadRequestError);
    await expect(client.chat.completions.create({ model: MODEL, messages: [] })).rejects.toBeInstanceOf(BadRequestError);
    await expect(client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "q" }], stream_options: { include_usage: true } })).rejects.toThrow(/only allowed when 'stream' is enabled/);
  });

  it("maps the error markers and models to OpenAI's errors", async () => {
    const ask = (content: string, model = MODEL) => client.chat.completions.create({ model, messages: [{ role: "user", content }] });
    await expect(ask("hi", "gpt-9")).rejects.toBeInstanceOf(NotFoundError);
    await expect(ask("hi", "scripted/parley-embed")).rejects.toBeInstanceOf(BadRequestError);
    await expect(ask("#rate-limit")).rejects.toBeInstanceOf(RateLimitError);
    const tooLong = await ask("#context-too-long").catch((error: unknown) => error);
    expect(tooLong).toBeInstanceOf(BadRequestError);
    expect((tooLong as APIError).code).toBe("context_length_exceeded");
    await expect(ask("#fail-midstream")).rejects.toBeInstanceOf(InternalServerError);
  });
});

describe("chat completions (streaming)", () => {
  it("streams role, tool call, content deltas, finish, the usage chunk and [DONE]", async () => {
    const question = "stream this #call-tool:lookup";
    const chunks = await chunksOf(
      await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: question }], stream: true, stream_options: { include_usage: true } }),
    );
    expect(chunks[0]!.choices[0]!.delta).toEqual({ role: "assistant", content: "", refusal: null });
    expect(chunks[1]!.choices[0]!.delta.tool_calls).toEqual([{ index: 0, id: expect.stringMatching(/^call_/), type: "function", function: { name: "lookup", arguments: "" } }]);
    const args = chunks.flatMap((chunk) => chunk.choices[0]?.delta.tool_calls ?? []).map((call) => call.function?.arguments ?? "").join("");
    expect(args).toBe(JSON.stringify({ query: question }));
    const text = chunks.map((chunk) => chunk.choices[0]?.delta.content ?? "").join("");
    expect(text).toBe(`[user_turns=1] You said: ${question}`);
    const finish = chunks.at(-2)!;
    expect(finish.choices[0]).toMatchObject({ delta: {}, finish_reason: "tool_calls" });
    const usage = chunks.at(-1)!;
    expect(usage.choices).toEqual([]);
    expect(usage.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 6, total_tokens: 9 });
    for (const chunk of chunks.slice(0, -1)) expect(chunk.usage).toBeNull();
    expect(new Set(chunks.map((chunk) => chunk.id)).size).toBe(1);
    const raw = await (
      await fetch(`${backend.url}/chat/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "raw" }], stream: true }) })
    ).text();
    expect(raw.trimEnd().split("\n\n").at(-1)).toBe("data: [DONE]");
    expect(raw).not.toContain("event:");
  });

  it("is accumulated by the SDK's chat stream helper into the JSON answer", async () => {
    const question = "helper #call-tool:lookup";
    const final = await client.chat.completions.stream({ model: MODEL, messages: [{ role: "user", content: question }], stream_options: { include_usage: true } }).finalChatCompletion();
    const json = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: question }] });
    expect(final.choices[0]!.message.content).toBe(json.choices[0]!.message.content);
    const fn = (call: { type: string } | undefined) => (call?.type === "function" ? (call as unknown as { function: unknown }).function : null);
    expect(fn(final.choices[0]!.message.tool_calls?.[0])).toEqual(fn(json.choices[0]!.message.tool_calls?.[0]));
    expect(fn(final.choices[0]!.message.tool_calls?.[0])).toMatchObject({ name: "lookup" });
    expect(final.choices[0]!.finish_reason).toBe("tool_calls");
    expect(final.usage).toEqual(json.usage);
  });

  it("sends no usage chunk unless asked", async () => {
    const chunks = await chunksOf(await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "no usage" }], stream: true }));
    expect(chunks.every((chunk) => chunk.usage === undefined)).toBe(true);
    expect(chunks.at(-1)!.choices[0]!.finish_reason).toBe("stop");
  });

  it("fails midstream with an error chunk, which the SDK throws as an APIError", async () => {
    const stream = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "break now #fail-midstream" }], stream: true });
    const seen: string[] = [];
    const error = await (async () => {
      for await (const chunk of stream) seen.push(chunk.choices[0]?.delta.content ?? "");
    })().catch((failure: unknown) => failure);
    expect(error).toBeInstanceOf(APIError);
    expect((error as APIError).message).toContain("scripted failure");
    expect(seen.join("")).toBe("[user_turns=1] You ");
  });
});

describe("chat-only servers", () => {
  const only = () => new OpenAI({ baseURL: chatOnly.url, apiKey: "k", maxRetries: 0 });

  it("serve models and chat completions, and 404 everything else", async () => {
    const models = await only().models.list();
    expect(models.data.map((model) => model.id)).toContain("parley-small");
    const completion = await only().chat.completions.create({ model: "parley-small", messages: [{ role: "user", content: "hi" }] });
    expect(completion.choices[0]!.message.content).toBe("[user_turns=1] You said: hi");
    await expect(only().responses.create({ model: "parley-small", input: "hi" })).rejects.toBeInstanceOf(NotFoundError);
    await expect(only().moderations.create({ input: "hi" })).rejects.toBeInstanceOf(NotFoundError);
    await expect(only().vectorStores.list()).rejects.toBeInstanceOf(NotFoundError);
    await expect(only().files.list()).rejects.toBeInstanceOf(NotFoundError);
  });

  it("can refuse stream_options and leave usage out", async () => {
    const refused = await only()
      .chat.completions.create({ model: "parley-small", messages: [{ role: "user", content: "hi" }], stream: true, stream_options: { include_usage: true } })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(BadRequestError);
    expect((refused as APIError).message).toContain("Unrecognized request argument supplied: stream_options");
    const completion = await only().chat.completions.create({ model: "parley-small", messages: [{ role: "user", content: "hi" }] });
    expect(completion.usage).toBeUndefined();
    const chunks = await chunksOf(await only().chat.completions.create({ model: "parley-small", messages: [{ role: "user", content: "hi" }], stream: true }));
    expect(chunks.some((chunk) => chunk.usage)).toBe(false);
  });
});
