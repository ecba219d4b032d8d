// Inference providers inside workerd: the runtime builds one backend per provider with its own
// endpoint, credential (a Worker secret) and wire; a bad provider fails the configuration load
// naming the key; Chat Completions calls stream through the openai package inside the Worker; with
// two providers and one down, the other still lists and answers.
import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import { describe, expect, inject, it } from "vitest";
import { usageWasEstimated } from "../../worker/backends/chat-events.ts";
import { callModel } from "../../worker/backends/model-call.ts";
import { listProviderModels, probeProviders } from "../../worker/backends/provider-models.ts";
import { routeModel } from "../../worker/backends/providers.ts";
import { scrub } from "../../worker/log.ts";
import { loadRuntime, type Runtime } from "../../worker/runtime.ts";
import { backendError } from "../../worker/turn/backend-errors.ts";
import { collect } from "../../worker/turn/collect.ts";
import worker from "../../worker/index.ts";
import { callJson, testConfig } from "./helpers.ts";

/** Nothing listens on the discard port: a provider that is down. */
const DOWN_URL = "http://127.0.0.1:9/v1";
const KEY = "sk-ollama-provider-key-0123456789";

async function runtime(overrides: Record<string, unknown>, vars: Record<string, string> = {}): Promise<Runtime> {
  const loaded = await loadRuntime({ ...env, PARLEY_CONFIG: testConfig(overrides), ...vars });
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  return loaded.runtime;
}

const ollama = (extra: Record<string, unknown> = {}) => ({ type: "ollama", api_key_env: "OLLAMA_KEY", extra: { url: inject("chatOnlyBackendUrl"), wire: "chat", stream_usage: false, ...extra } });

async function answer(rt: Runtime, identifier: string, streaming: boolean, input = "hello") {
  const { models } = await listProviderModels(rt.backends);
  const model = models.find((candidate) => candidate.identifier === identifier);
  if (!model) throw new Error(`${identifier} is not listed`);
  const stream = await callModel(rt.backends, routeModel(rt.backends, model), { model: model.identifier, input, store: false }, streaming, { signal: new AbortController().signal });
  const events: ResponseStreamEvent[] = [];
  const collected = await collect(stream, new AbortController().signal, async (event) => void events.push(event));
  return { events, collected };
}

async function backendRequests(baseUrl: string): Promise<Array<{ path: string; body: Record<string, unknown>; headers: Record<string, string> }>> {
  return (await (await fetch(`${baseUrl.replace(/\/v1$/, "")}/__requests`)).json()) as never;
}

describe("a provider with its own endpoint", () => {
  it("is called through Chat Completions with its own key, streamed and JSON, inside the Worker", async () => {
    const rt = await runtime({ inference: { providers: [ollama()] } }, { OLLAMA_KEY: KEY });
    expect(rt.backends.all.map((backend) => [backend.id, backend.wire])).toEqual([
      ["inference_backend", "responses"],
      ["ollama", "chat"],
    ]);
    for (const streaming of [true, false]) {
      const { events, collected } = await answer(rt, "ollama/parley-small", streaming, `hi ${streaming ? "stream" : "json"}`);
      expect(collected).toMatchObject({ status: "completed", error: null, text: `[user_turns=1] You said: hi ${streaming ? "stream" : "json"}` });
      // This server reports usage in JSON answers; streamed, it is asked for none (stream_usage false).
      expect(usageWasEstimated(collected.response)).toBe(streaming);
      expect(events.at(-1)!.type).toBe("response.completed");
    }
    const sent = (await backendRequests(inject("chatOnlyBackendUrl"))).filter((request) => request.path === "/v1/chat/completions").at(-1)!;
    expect(sent.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(sent.body).toMatchObject({ model: "parley-small", messages: [{ role: "user", content: "hi json" }] });
    // The key is a secret from now on: scrubbed from logs and error texts.
    expect(scrub(`key ${KEY}`)).toBe("key [redacted]");
  });

  it("reports a server refusing stream_options as SPEC's 500 naming what it refused, unless stream_usage is off", async () => {
    const rt = await runtime({ inference: { providers: [ollama({ stream_usage: true })] } }, { OLLAMA_KEY: KEY });
    const failed = await answer(rt, "ollama/parley-small", true).catch((error: unknown) => backendError(error));
    expect(failed).toMatchObject({ status: 500, cause: expect.stringContaining("stream_options") });
  });

  it("fails the configuration load naming the key when its secret is unset or a setting is wrong", async () => {
    const unset = await callJson<{ detail: { response: string; cause: string } }>("/v1/models", { config: testConfig({ inference: { providers: [ollama()] } }) });
    expect(unset.status).toBe(500);
    expect(unset.body.detail).toEqual({ response: "Configuration is not loaded", cause: "configuration has not been initialized: invalid keys inference.providers.0.api_key_env" });
    const wrong = await callJson<{ detail: { cause: string } }>("/v1/models", { config: testConfig({ inference: { providers: [{ type: "x", extra: { url: inject("chatOnlyBackendUrl"), wire: "soap" } }] } }) });
    expect(wrong.status).toBe(500);
    expect(wrong.body.detail.cause).toContain("inference.providers.0.extra.wire");
    const shields = await callJson<{ detail: { cause: string } }>("/v1/models", {
      config: testConfig({ inference: { providers: [{ type: "scripted", extra: { url: inject("backendUrl"), wire: "chat" } }] }, shields: [{ name: "guard" }] }),
    });
    expect(shields.status).toBe(500);
    expect(shields.body.detail.cause).toContain("invalid keys shields");
  });
});

describe("two providers, one down", () => {
  const overrides = { inference: { providers: [ollama(), { type: "remote", extra: { url: DOWN_URL, wire: "chat" } }] } };

  it("lists the answering providers' models and names the one that is down", async () => {
    const rt = await runtime(overrides, { OLLAMA_KEY: KEY });
    const listing = await listProviderModels(rt.backends, { fresh: true });
    expect(listing.models.filter((model) => model.provider_id === "ollama").map((model) => model.identifier)).toEqual(["ollama/parley-small", "ollama/parley-large", "ollama/parley-embed"]);
    expect(listing.models.some((model) => model.provider_id === "remote")).toBe(false);
    const health = await probeProviders(rt.backends);
    expect(health.map((entry) => [entry.provider_id, entry.status])).toEqual([
      ["inference_backend", "ok"],
      ["ollama", "ok"],
      ["remote", "error"],
    ]);
    expect(health[2]!.message).toBe("Connection error while trying to reach backend service.");
  });

  it("fails only the down provider's models", async () => {
    const rt = await runtime(overrides, { OLLAMA_KEY: KEY });
    expect((await answer(rt, "ollama/parley-large", true)).collected.status).toBe("completed");
    expect((await answer(rt, "scripted/parley-small", true)).collected.status).toBe("completed");
    const route = routeModel(rt.backends, { identifier: "remote/parley-small", provider_id: "remote", provider_resource_id: "parley-small" });
    const failed = await callModel(rt.backends, route, { model: "remote/parley-small", input: "hi" }, true, { signal: new AbortController().signal }).catch((error: unknown) => backendError(error));
    expect(failed).toMatchObject({ status: 503, response: "Unable to connect to the inference backend" });
  });
});

describe("the default backend down, another provider up", () => {
  it("answers SPEC's 503 for the default backend's models, named or by default, not 404", async () => {
    const config = testConfig({
      inference_backend: { url: DOWN_URL },
      inference: { default_provider: "scripted", default_model: "scripted/parley-small", providers: [{ type: "scripted" }, ollama()] },
    });
    const send = async (json: unknown) => {
      const request = new Request("http://parley.test/v1/query", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(json) });
      const response = await worker.fetch(request, { ...env, PARLEY_CONFIG: config, OLLAMA_KEY: KEY } as Env, createExecutionContext());
      return { status: response.status, body: (await response.json()) as { detail?: { response: string } } };
    };
    for (const body of [{ query: "by default" }, { query: "named", model: "parley-small", provider: "scripted" }]) {
      const answer = await send(body);
      expect([answer.status, answer.body.detail?.response]).toEqual([503, "Unable to connect to the inference backend"]);
    }
    expect((await send({ query: "the other provider", model: "parley-small", provider: "ollama" })).status).toBe(200);
  });
});

describe("two providers, one down, through the Worker's endpoints", () => {
  const config = testConfig({ inference: { providers: [ollama(), { type: "remote", extra: { url: DOWN_URL, wire: "chat" } }] } });
  async function send(path: string, json?: unknown) {
    const request = new Request(`http://parley.test${path}`, json === undefined ? {} : { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(json) });
    const response = await worker.fetch(request, { ...env, PARLEY_CONFIG: config, OLLAMA_KEY: KEY } as Env, createExecutionContext());
    return { status: response.status, text: await response.text() };
  }

  it("routes provider/model to its provider on every turn endpoint; the others keep answering while one is down", async () => {
    const chatCalls = async () => (await backendRequests(inject("chatOnlyBackendUrl"))).filter((request) => request.path === "/v1/chat/completions");
    const before = (await chatCalls()).length;
    const query = await send("/v1/query", { query: "to ollama", model: "parley-small", provider: "ollama", generate_topic_summary: false });
    expect(query.status).toBe(200);
    expect(JSON.parse(query.text).response).toContain("to ollama");
    const responses = await send("/v1/responses", { input: "to ollama too", model: "ollama/parley-large", stream: true, generate_topic_summary: false });
    expect(responses.status).toBe(200);
    // Streamed, this server is asked for no usage (stream_usage false): the estimate is marked.
    const completed = responses.text.split("\n").find((line) => line.startsWith("data: ") && line.includes('"type":"response.completed"'))!;
    expect((JSON.parse(completed.slice("data: ".length)) as { response: { metadata: unknown } }).response.metadata).toEqual({ usage_estimated: "true" });
    const reported = await send("/v1/responses", { input: "json", model: "ollama/parley-large", metadata: { mine: "1" }, generate_topic_summary: false });
    expect((JSON.parse(reported.text) as { metadata: unknown }).metadata).toEqual({ mine: "1" });
    const sent = (await chatCalls()).slice(before).map((request) => request.body.model);
    expect(sent).toEqual(["parley-small", "parley-large", "parley-large"]);
    expect((await send("/v1/query", { query: "to the default backend" })).status).toBe(200);
    // Its models are not listed, but the provider is configured: SPEC's 503, not "Model not found".
    for (const [path, body] of [
      ["/v1/query", { query: "to the one that is down", model: "parley-small", provider: "remote" }],
      ["/v1/responses", { input: "to the one that is down", model: "remote/parley-small" }],
    ] as const) {
      const down = await send(path, body);
      expect(down.status, path).toBe(503);
      expect(JSON.parse(down.text).detail.response).toBe("Unable to connect to the inference backend");
    }
    expect((await send("/v1/query", { query: "to no one", model: "parley-small", provider: "nobody" })).status).toBe(404);
  });

  it("shows each provider's models and health, and readiness and /metrics name the one that is down", async () => {
    const models = JSON.parse((await send("/v1/models")).text) as { models: Array<{ identifier: string }>; providers: Array<{ provider_id: string; status: string }> };
    expect(models.models.map((model) => model.identifier)).toContain("ollama/parley-small");
    expect(models.providers.map((provider) => [provider.provider_id, provider.status])).toEqual([
      ["inference_backend", "ok"],
      ["ollama", "ok"],
      ["remote", "error"],
    ]);
    const ready = await send("/readiness");
    expect(ready.status).toBe(503);
    expect(JSON.parse(ready.text)).toMatchObject({ reason: "Providers not healthy: remote", providers: [{ provider_id: "remote", status: "error" }] });
    const listed = JSON.parse((await send("/v1/providers")).text) as { providers: { inference: Array<{ provider_id: string }> } };
    expect(listed.providers.inference.map((provider) => provider.provider_id).slice(0, 3)).toEqual(["inference_backend", "ollama", "remote"]);
    const remote = JSON.parse((await send("/v1/providers/remote")).text) as { health: { status: string }; config: Record<string, unknown> };
    expect(remote.health.status).toBe("Error");
    expect(remote.config).toMatchObject({ url: DOWN_URL, wire: "chat" });
    const metrics = (await send("/metrics")).text;
    expect(metrics).toContain('parley_provider_up{provider="remote"} 0');
    expect(metrics).toContain('parley_provider_up{provider="ollama"} 1');
  });
});
