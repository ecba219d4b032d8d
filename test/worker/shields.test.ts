import { describe, expect, it } from "vitest";
import { inject } from "vitest";
import { call, callJson, openaiClient, readSse, testConfig, wireMode } from "./helpers.ts";

const REFUSAL = "Refused by input-guard.";
const config = testConfig({
  shields: [
    { name: "input-guard", model: "omni-moderation-latest", message: REFUSAL },
    { name: "second-guard", message: "Refused by second-guard." },
  ],
});
const outputOnly = testConfig({ shields: [{ name: "output-guard", input: false, output: true, message: "Answer withheld." }] });

/** What the scripted backend received whose body mentions `marker` (requests of other test files are ignored). */
async function backendCalls(marker: string): Promise<Array<{ path: string }>> {
  const base = inject("backendUrl").replace(/\/v1$/, "");
  const requests = (await (await fetch(`${base}/__requests`)).json()) as Array<{ path: string; body: unknown }>;
  return requests.filter((request) => JSON.stringify(request.body ?? "").includes(marker));
}

type Query = { conversation_id: string; response: string; input_tokens: number; output_tokens: number; detail?: { response: string } };

describe("input shields", () => {
  it("blocks /v1/query before the model: the refusal is the answer, zero tokens, recorded as blocked", async () => {
    const marker = crypto.randomUUID();
    const res = await callJson<Query>("/v1/query", { json: { query: `#unsafe ${marker}` }, user: "sheila", config });
    expect(res.body).toMatchObject({ response: REFUSAL, input_tokens: 0, output_tokens: 0 });
    const calls = await backendCalls(marker);
    expect(calls.map((c) => c.path)).toEqual(["/v1/moderations"]);
    const detail = await callJson<{ chat_history: Array<{ status: string; messages: Array<{ content: string }> }> }>(`/v1/conversations/${res.body.conversation_id}`, { user: "sheila" });
    expect(detail.body.chat_history[0]).toMatchObject({ status: "blocked", messages: [{ content: `#unsafe ${marker}` }, { content: REFUSAL }] });
  });

  it("checks attachments too", async () => {
    const res = await callJson<Query>("/v1/query", {
      json: { query: "look at this log", attachments: [{ attachment_type: "log", content_type: "text/plain", content: "#unsafe line" }] },
      user: "sheila",
      config,
    });
    expect(res.body.response).toBe(REFUSAL);
  });

  it("streams start, the refusal and end on /v1/streaming_query", async () => {
    const events = (await readSse(await call("/v1/streaming_query", { json: { query: "#unsafe stream" }, user: "sheila", config }))).map(
      (e) => e.data as { event: string; data: Record<string, unknown> },
    );
    expect(events.map((e) => e.event)).toEqual(["start", "token", "token", "turn_complete", "end"]);
    expect(events.slice(1, 3).map((e) => e.data.token)).toEqual(["", REFUSAL]);
    expect(events[4]!.data).toMatchObject({ input_tokens: 0, output_tokens: 0 });
  });

  it("answers /v1/responses with status blocked, in JSON and as a stream", async () => {
    const json = await callJson<{ status: string; output_text: string; output: Array<{ type: string }>; usage: { total_tokens: number } }>("/v1/responses", {
      json: { input: "#unsafe please" },
      user: "sheila",
      config,
    });
    expect(json.body).toMatchObject({ status: "blocked", output_text: REFUSAL, usage: { total_tokens: 0 } });
    expect(json.body.output.map((item) => item.type)).toEqual(["message"]);

    const events = await readSse(await call("/v1/responses", { json: { input: "#unsafe please", stream: true }, user: "sheila", config }));
    const types = events.map((e) => e.event ?? e.data);
    expect(types).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
      "[DONE]",
    ]);
    expect((events.at(-2)!.data as { response: { status: string } }).response.status).toBe("blocked");

    // The official client's stream helper assembles it like any answer.
    const final = await openaiClient({ user: "sheila", config }).responses.stream({ input: "#unsafe helper" }).finalResponse();
    expect(final).toMatchObject({ status: "blocked", output_text: REFUSAL, usage: { total_tokens: 0 } });
  });

  it("keeps blocked turns in history but never as the latest response", async () => {
    const ok = await callJson<{ id: string; conversation: string }>("/v1/responses", { json: { input: "fine question" }, user: "sheila", config });
    const blocked = await callJson<{ id: string; conversation: string }>("/v1/responses", {
      json: { input: "#unsafe follow-up", previous_response_id: ok.body.id },
      user: "sheila",
      config,
    });
    expect(blocked.body.conversation).toBe(ok.body.conversation);
    const refBlocked = await callJson("/v1/responses", { json: { input: "x", previous_response_id: blocked.body.id }, user: "sheila", config });
    expect(refBlocked.status).toBe(404);
    const next = await callJson<{ conversation: string; output_text: string }>("/v1/responses", {
      json: { input: "continue", previous_response_id: ok.body.id },
      user: "sheila",
      config,
    });
    expect(next.body.conversation).toBe(ok.body.conversation);
    expect(next.body.output_text).toBe("[user_turns=3] You said: continue");
  });

  it("applies shield_ids: omitted → all, [] → none, named → those, unknown → 404", async () => {
    const ask = (shield_ids?: string[] | null) =>
      callJson<Query>("/v1/query", { json: { query: "#unsafe ask", ...(shield_ids === undefined ? {} : { shield_ids }) }, user: "sheila", config });
    expect((await ask()).body.response).toBe(REFUSAL);
    expect((await ask(null)).body.response).toBe(REFUSAL);
    expect((await ask([])).body.response).toBe("[user_turns=1] You said: #unsafe ask");
    expect((await ask(["second-guard"])).body.response).toBe("Refused by second-guard.");
    const unknown = await ask(["nope"]);
    expect(unknown.status).toBe(404);
    expect(unknown.body.detail!.response).toBe("Shield not found");
  });

  it("rejects shield_ids with 422 when overriding is disabled", async () => {
    const locked = testConfig({ shields: [{ name: "input-guard" }], customization: { disable_shield_ids_override: true } });
    expect((await callJson("/v1/query", { json: { query: "hi", shield_ids: [] }, user: "sheila", config: locked })).status).toBe(422);
    expect((await callJson("/v1/responses", { json: { input: "hi", shield_ids: [] }, user: "sheila", config: locked })).status).toBe(422);
    expect((await callJson<Query>("/v1/query", { json: { query: "#unsafe" }, user: "sheila", config: locked })).body.response).not.toContain("You said");
  });
});

describe("a moderation that gives no verdict", () => {
  it("fails the turn instead of letting the input through, on the way in and on the way out", async () => {
    const marker = crypto.randomUUID();
    const res = await callJson<{ detail: { response: string; cause: string } }>("/v1/query", { json: { query: `#no-verdict ${marker}` }, user: "sheila", config });
    expect(res.status).toBe(500);
    expect(res.body.detail.cause).toMatch(/^the inference backend's moderation could not be read at results/);
    // Refused before the model was called.
    expect((await backendCalls(marker)).map((c) => c.path)).toEqual(["/v1/moderations"]);
    // An output shield gets the model's answer (which repeats the question) and no verdict on it.
    const out = await callJson<{ detail: { cause: string } }>("/v1/query", { json: { query: "repeat #no-verdict" }, user: "sheila", config: outputOnly });
    expect(out.status).toBe(500);
    expect(out.body.detail.cause).toMatch(/moderation could not be read/);
  });
});

describe("output shields", () => {
  it("hold a stream's answer and release nothing unsafe", async () => {
    const events = (await readSse(await call("/v1/streaming_query", { json: { query: "repeat #unsafe words" }, user: "sheila", config: outputOnly }))).map(
      (e) => e.data as { event: string; data: Record<string, unknown> },
    );
    expect(JSON.stringify(events)).not.toContain("#unsafe words");
    expect(events.filter((e) => e.event === "token").map((e) => e.data.token)).toEqual(["", "Answer withheld."]);
    expect(events.at(-1)!.event).toBe("end");
  });

  it("release a safe answer whole", async () => {
    const res = await callJson<Query>("/v1/query", { json: { query: "harmless" }, user: "sheila", config: outputOnly });
    expect(res.body.response).toBe("[user_turns=1] You said: harmless");
    const responses = await callJson<{ status: string; output_text: string }>("/v1/responses", { json: { input: "repeat #unsafe" }, user: "sheila", config: outputOnly });
    expect(responses.body).toMatchObject({ status: "blocked", output_text: "Answer withheld." });
  });

  it("report the tokens the model used on every endpoint when they block its answer", async () => {
    const query = await callJson<Query>("/v1/query", { json: { query: "count #unsafe tokens" }, user: "sheila", config: outputOnly });
    expect(query.body.response).toBe("Answer withheld.");
    expect(query.body.output_tokens).toBeGreaterThan(0);
    const usage = { input_tokens: query.body.input_tokens, output_tokens: query.body.output_tokens };
    const json = await callJson<{ status: string; usage: Record<string, number> }>("/v1/responses", { json: { input: "count #unsafe tokens" }, user: "sheila", config: outputOnly });
    expect(json.body).toMatchObject({ status: "blocked", usage });
    const streamed = await openaiClient({ user: "sheila", config: outputOnly }).responses.stream({ input: "count #unsafe tokens" }).finalResponse();
    expect(streamed).toMatchObject({ status: "blocked", output_text: "Answer withheld.", usage });
  });
});

describe("shields and providers views", () => {
  it("lists configured shields", async () => {
    const { body } = await callJson<{ shields: unknown[] }>("/v1/shields", { config });
    expect(body.shields).toEqual([
      { identifier: "input-guard", params: { input: true, output: false, model: "omni-moderation-latest" }, provider_id: "backend-moderation", provider_resource_id: "omni-moderation-latest", type: "shield" },
      { identifier: "second-guard", params: { input: true, output: false }, provider_id: "backend-moderation", provider_resource_id: "second-guard", type: "shield" },
    ]);
  });

  it("groups providers by API and shows one with redacted config and health", async () => {
    const withProvider = testConfig({
      inference: { providers: [{ type: "openai", api_key_env: "OPENAI_API_KEY", allowed_models: ["parley-small"] }] },
      inference_backend: { api_key: "sk-should-not-show" },
      shields: [{ name: "guard" }],
    });
    const list = await callJson<{ providers: Record<string, Array<{ provider_id: string }>> }>("/v1/providers", { config: withProvider });
    // In the chat wire mode the default backend is named by a provider entry (test/worker/helpers.ts): "scripted".
    const backendId = wireMode() === "chat" ? "scripted" : "inference_backend";
    expect(list.body.providers.inference!.map((p) => p.provider_id)).toEqual(wireMode() === "chat" ? ["scripted", "openai"] : ["inference_backend", "openai", "scripted"]);
    expect(list.body.providers.safety).toEqual([{ provider_id: "backend-moderation", provider_type: "remote::openai-moderation" }]);
    const one = await call(`/v1/providers/${backendId}`, { config: withProvider });
    const text = await one.text();
    expect(text).not.toContain("sk-should-not-show");
    expect(JSON.parse(text)).toMatchObject({ api: "inference", provider_id: backendId, health: { status: "OK" } });
    expect(await callJson("/v1/providers/nope", { config: withProvider })).toEqual({
      status: 404,
      body: { detail: { response: "Provider not found", cause: "Provider with ID nope does not exist" } },
    });
  });
});

describe("the original's own shield kinds (question_validity, redaction)", () => {
  // As the original's e2e configuration writes them (tests/e2e/configuration/.../lightspeed-stack-shields.yaml).
  const topicGuard = (prompt: string) => ({
    name: "topic-guard",
    provider_id: "question_validity",
    config: { model_id: "scripted/parley-small", model_prompt: prompt, invalid_question_response: "I can only answer questions about OpenShift." },
  });
  const piiRedaction = { name: "pii-redaction", provider_id: "redaction", config: { rules: [{ pattern: "\\d+", replacement: "[NUM]" }], case_sensitive: false } };
  const allowing = testConfig({ shields: [topicGuard("Classify: ${message} #reply=${allowed}"), piiRedaction] });
  const rejecting = testConfig({ shields: [topicGuard("Classify: ${message} #reply=${rejected}")] });

  it("load as the original writes them and are listed in its shape", async () => {
    const { status, body } = await callJson<{ shields: unknown[] }>("/v1/shields", { config: allowing });
    expect(status).toBe(200);
    expect(body.shields).toEqual([
      { name: "topic-guard", provider_id: "question_validity", type: "shield", config: topicGuard("Classify: ${message} #reply=${allowed}").config },
      { name: "pii-redaction", provider_id: "redaction", type: "shield", config: { rules: [{ pattern: "\\d+", replacement: "[NUM]", case_sensitive: null }], case_sensitive: false } },
    ]);
  });

  it("redaction rewrites the user's text before the model, the other shields and the history see it", async () => {
    const marker = crypto.randomUUID().replaceAll(/\d/g, "x");
    const res = await callJson<Query>("/v1/query", { json: { query: `call me at 555 1234 ${marker}` }, user: "rita", config: allowing });
    expect(res.status).toBe(200);
    expect(res.body.response).toBe(`[user_turns=1] You said: call me at [NUM] [NUM] ${marker}`);
    const sent = JSON.stringify(await backendCalls(marker));
    expect(sent).not.toContain("555");
    const detail = await callJson<{ chat_history: Array<{ messages: Array<{ content: string }> }> }>(`/v1/conversations/${res.body.conversation_id}`, { user: "rita" });
    expect(detail.body.chat_history[0]!.messages[0]!.content).toBe(`call me at [NUM] [NUM] ${marker}`);
  });

  it("question_validity lets through what its model calls ALLOWED, with its prompt filled in", async () => {
    const marker = crypto.randomUUID();
    const res = await callJson<Query>("/v1/query", { json: { query: `how do I scale? ${marker}`, shield_ids: ["topic-guard"] }, user: "rita", config: allowing });
    expect(res.body.response).toBe(`[user_turns=1] You said: how do I scale? ${marker}`);
    const prompts = (await backendCalls(marker)).map((call) => JSON.stringify(call));
    expect(prompts.some((text) => text.includes(`Classify: how do I scale? ${marker} #reply=ALLOWED`))).toBe(true);
  });

  it("question_validity answers anything else with its reply, without the model, on every endpoint", async () => {
    const marker = crypto.randomUUID();
    const query = await callJson<Query>("/v1/query", { json: { query: `why is the sky blue? ${marker}` }, user: "rita", config: rejecting });
    expect(query.body).toMatchObject({ response: "I can only answer questions about OpenShift.", input_tokens: 0, output_tokens: 0 });
    // Only the classifier was asked: one model call.
    expect(await backendCalls(marker)).toHaveLength(1);
    const response = await callJson<{ status: string; output_text?: string; output: unknown[] }>("/v1/responses", { json: { input: "off topic" }, user: "rita", config: rejecting });
    expect(response.body.status).toBe("blocked");
    expect(JSON.stringify(response.body.output)).toContain("I can only answer questions about OpenShift.");
  });

  it("question_validity whose model is not there fails the turn rather than let the question through", async () => {
    const missing = testConfig({ shields: [{ name: "topic-guard", provider_id: "question_validity", config: { model_id: "scripted/no-such-model" } }] });
    const res = await callJson<Query>("/v1/query", { json: { query: "anything" }, user: "rita", config: missing });
    expect(res.status).toBe(500);
    expect(JSON.stringify(res.body)).toContain("scripted/no-such-model");
  });

  it("refuse a rule that is no regular expression, and a moderation shield named like them, when the configuration loads", async () => {
    const bad = testConfig({ shields: [{ name: "r", provider_id: "redaction", config: { rules: [{ pattern: "(unclosed", replacement: "x" }] } }] });
    const res = await callJson<{ detail: { cause: string } }>("/v1/shields", { config: bad });
    expect(res.status).toBe(500);
    expect(res.body.detail.cause).toContain("shields.0.config.rules.0.pattern");
  });
});
