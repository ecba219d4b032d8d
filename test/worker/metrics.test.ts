// /metrics, readiness and degraded mode through the Worker's fetch, and the recording API the turn
// engine calls, used directly from a test (a Worker request's context) and from a Durable Object.
// The metrics shards are shared by every test of this file, so each test compares a scrape after
// with a scrape before, or uses labels of its own.
import { createExecutionContext, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, inject, it } from "vitest";
import { recordLlmCall, recordValidationError } from "../../worker/metrics/recorder.ts";
import { metricsNamespace } from "../../worker/metrics/shards.ts";
import { call, callJson, eventually, settle, testConfig } from "./helpers.ts";
import { parseExposition, type Exposition } from "./metrics-exposition.ts";

async function scrape(config?: string, path = "/metrics"): Promise<Exposition> {
  await settle();
  const response = await call(path, { config });
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  return parseExposition(await response.text());
}

/**
 * Scrapes until `ready` holds (at most 5 s): a flush another request of the isolate leads sends
 * what a test recorded within the flush delay, and a scrape does not wait for that flush.
 */
async function scrapeWhen(ready: (m: Exposition) => boolean): Promise<Exposition> {
  let m = await scrape();
  for (let attempt = 0; attempt < 50 && !ready(m); attempt += 1) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    m = await scrape();
  }
  return m;
}

const calls = (m: Exposition, path: string, status: number) => m.get("ls_rest_api_calls_total", { path, status_code: String(status) }) ?? 0;

describe("request metrics", () => {
  it("counts each request under its route template and final status, errors and unknown paths included", async () => {
    const locked = testConfig({ authentication: { module: "api-key-token", api_key_config: { api_key: "parley-metrics-key-1" } } });
    const before = await scrape();
    expect((await call("/liveness")).status).toBe(200);
    expect((await call("/liveness")).status).toBe(200);
    expect((await call("/v1/prompts/not-a-prompt-id")).status).toBe(400);
    expect((await call("/v1/prompts/also-not-one")).status).toBe(400);
    expect((await call(`/v1/conversations/${"0".repeat(48)}`)).status).toBe(404);
    expect((await call("/v1/models", { config: locked })).status).toBe(401);
    expect((await call("/v1/nothing-here")).status).toBe(404);
    expect((await call("/liveness", { method: "DELETE" })).status).toBe(405);
    const after = await scrape();

    expect(calls(after, "/liveness", 200) - calls(before, "/liveness", 200)).toBe(2);
    expect(calls(after, "/v1/prompts/{prompt_id}", 400) - calls(before, "/v1/prompts/{prompt_id}", 400)).toBe(2);
    expect(calls(after, "/v1/models", 401) - calls(before, "/v1/models", 401)).toBe(1);
    // SPEC's parameter names.
    expect(calls(after, "/v1/conversations/{conversation_id}", 404) - calls(before, "/v1/conversations/{conversation_id}", 404)).toBe(1);
    expect(calls(after, "(unmatched)", 404) - calls(before, "(unmatched)", 404)).toBe(1);
    expect(calls(after, "(unmatched)", 405) - calls(before, "(unmatched)", 405)).toBe(1);
    // No series per concrete id or unknown path.
    expect(after.samples.some((sample) => /not-a-prompt-id|nothing-here/.test(JSON.stringify(sample.labels)))).toBe(false);
    const durations = (m: Exposition) => m.get("ls_response_duration_seconds_count", { path: "/liveness" }) ?? 0;
    expect(durations(after) - durations(before)).toBe(2);
    expect(after.get("ls_response_duration_seconds_bucket", { path: "/liveness", le: "+Inf" })).toBe(durations(after));
  });

  it("leaves scrapes out of the call counter but times them, on /metrics and /v1/metrics", async () => {
    await scrape();
    await scrape(undefined, "/v1/metrics");
    const m = await scrape();
    expect(m.samples.filter((sample) => sample.name === "ls_rest_api_calls_total" && /metrics/.test(sample.labels.path ?? ""))).toEqual([]);
    expect(m.get("ls_response_duration_seconds_count", { path: "/metrics" })).toBeGreaterThanOrEqual(2);
    expect(m.get("ls_response_duration_seconds_count", { path: "/v1/metrics" })).toBe(1);
  });

  it("counts a configuration that fails to load as a 500 of the route asked", async () => {
    const broken = testConfig({ inference_backend: { timeout: "soon" } });
    const before = await scrape();
    expect((await call("/v1/info", { config: broken })).status).toBe(500);
    const after = await scrape();
    expect(calls(after, "/v1/info", 500) - calls(before, "/v1/info", 500)).toBe(1);
  });

  it("lists every family, with HELP and TYPE, as the original system names them", async () => {
    const m = await scrape();
    expect(m.families.map((family) => [family.name, family.type])).toEqual([
      ["ls_rest_api_calls_total", "COUNTER"],
      ["ls_response_duration_seconds", "HISTOGRAM"],
      ["ls_provider_model_configuration", "GAUGE"],
      ["ls_llm_calls_total", "COUNTER"],
      ["ls_llm_calls_failures_total", "COUNTER"],
      ["ls_llm_validation_errors_total", "COUNTER"],
      ["ls_llm_token_sent_total", "COUNTER"],
      ["ls_llm_token_received_total", "COUNTER"],
      ["ls_llm_inference_duration_seconds", "HISTOGRAM"],
      // Extensions: failed deliveries of what follows a turn; each provider's backend up or down at scrape time.
      ["parley_delivery_failures_total", "COUNTER"],
      ["parley_provider_up", "GAUGE"],
      ["ls_started_in_degraded_mode", "GAUGE"],
    ]);
    expect(m.get("parley_provider_up", { provider: "inference_backend" })).toBe(1);
    expect(m.families.every((family) => family.help.length > 0)).toBe(true);
  });
});

describe("a turn's call", () => {
  it("counts the tokens the backend reported, and none for a stream that failed without reporting any", async () => {
    const labels = { provider: "scripted", model: "parley-small", endpoint: "/v1/streaming_query" };
    const figures = (m: Exposition) => ["ls_llm_calls_total", "ls_llm_calls_failures_total", "ls_llm_token_sent_total", "ls_llm_token_received_total"].map((name) => m.get(name, labels) ?? 0);
    const before = figures(await scrape());
    await (await call("/v1/streaming_query", { json: { query: "fails #fail-midstream" }, user: "metrics-tokens" })).text();
    const failed = await scrapeWhen((m) => figures(m)[0] === before[0]! + 1);
    expect(figures(failed)).toEqual([before[0]! + 1, before[1]! + 1, before[2], before[3]]);
    await (await call("/v1/streaming_query", { json: { query: "answers" }, user: "metrics-tokens" })).text();
    const answered = figures(await scrapeWhen((m) => figures(m)[0] === before[0]! + 2));
    expect(answered[2]).toBeGreaterThan(before[2]!);
    expect(answered[3]).toBeGreaterThan(before[3]!);
  });
});

describe("a model call's duration", () => {
  it("runs from the request to the backend to its answer, on /v1/infer as on /v1/responses", async () => {
    const sum = (m: Exposition, endpoint: string) => m.total("ls_llm_inference_duration_seconds_sum", { provider: "scripted", model: "parley-small", endpoint }) ?? 0;
    const count = (m: Exposition, endpoint: string) => m.total("ls_llm_inference_duration_seconds_count", { provider: "scripted", model: "parley-small", endpoint }) ?? 0;
    const before = await scrape();
    expect((await call("/v1/infer", { json: { question: "a slow backend #late=400" }, user: "metrics-duration" })).status).toBe(200);
    expect((await call("/v1/responses", { json: { input: "a slow backend #late=400" }, user: "metrics-duration" })).status).toBe(200);
    const after = await scrapeWhen((m) => count(m, "/v1/infer") > count(before, "/v1/infer") && count(m, "/v1/responses") > count(before, "/v1/responses"));
    for (const endpoint of ["/v1/infer", "/v1/responses"]) expect(sum(after, endpoint) - sum(before, endpoint), endpoint).toBeGreaterThanOrEqual(0.4);
  });
});

describe("delivery failures", () => {
  it("counts a failed delivery of what follows a turn (the record store refusing its record), which the outbox retries", async () => {
    const broken = testConfig({ database: { postgres: { ...inject("postgres"), namespace: "parley_no_such_schema" } } });
    const failures = (m: Exposition) => m.get("parley_delivery_failures_total", { kind: "record" }) ?? 0;
    const before = await scrape();
    expect((await callJson("/v1/query", { json: { query: "delivered later" }, config: broken, user: "delivery" })).status).toBe(200);
    await eventually(async () => expect(failures(await scrape())).toBeGreaterThan(failures(before)), 10_000);
  });
});

describe("metrics authentication", () => {
  const locked = (skip: boolean) =>
    testConfig({ authentication: { module: "api-key-token", api_key_config: { api_key: "parley-metrics-key-2" }, skip_for_metrics: skip } });

  it("needs credentials unless skip_for_metrics", async () => {
    expect((await call("/metrics", { config: locked(false) })).status).toBe(401);
    expect((await call("/metrics", { config: locked(false), token: "parley-metrics-key-2" })).status).toBe(200);
    expect((await call("/metrics", { config: locked(true) })).status).toBe(200);
    expect((await call("/metrics", { config: locked(true), token: "wrong" })).status).toBe(401);
    expect((await call("/metrics", { config: locked(true), token: "parley-metrics-key-2" })).status).toBe(200);
  });
});

describe("the recording API of the turn engine", () => {
  it("reaches /metrics from a Worker request's context: calls, failures, tokens, durations, validation errors", async () => {
    const ctx = createExecutionContext();
    const labels = { provider: "metrics-worker", model: "parley-small", endpoint: "/v1/responses" };
    recordLlmCall(env, ctx, { ...labels, ok: true, inputTokens: 12, outputTokens: 5, durationMs: 700 });
    recordLlmCall(env, ctx, { ...labels, ok: true, inputTokens: null, outputTokens: null, durationMs: 40 });
    recordLlmCall(env, ctx, { ...labels, ok: false, durationMs: 130_000 });
    recordLlmCall(env, ctx, { ...labels, endpoint: "/v1/streaming_query", ok: true, inputTokens: 3, outputTokens: 4 });
    recordValidationError(env, ctx, "/v1/metrics-test");
    recordValidationError(env, ctx, "/v1/metrics-test");
    await waitOnExecutionContext(ctx);
    const m = await scrapeWhen((m) => m.get("ls_llm_validation_errors_total", { endpoint: "/v1/metrics-test" }) === 2);

    expect(m.get("ls_llm_calls_total", labels)).toBe(3);
    expect(m.get("ls_llm_calls_failures_total", labels)).toBe(1);
    expect(m.get("ls_llm_token_sent_total", labels)).toBe(12);
    expect(m.get("ls_llm_token_received_total", labels)).toBe(5);
    expect(m.get("ls_llm_calls_total", { ...labels, endpoint: "/v1/streaming_query" })).toBe(1);
    expect(m.get("ls_llm_token_sent_total", { ...labels, endpoint: "/v1/streaming_query" })).toBe(3);
    // A call without a duration is counted but not timed.
    expect(m.total("ls_llm_inference_duration_seconds_count", { ...labels, endpoint: "/v1/streaming_query" })).toBe(0);
    const success = { ...labels, result: "success" };
    expect(m.get("ls_llm_inference_duration_seconds_count", success)).toBe(2);
    expect(m.get("ls_llm_inference_duration_seconds_sum", success)).toBeCloseTo(0.74);
    expect(["0.1", "0.5", "1.0", "+Inf"].map((le) => m.get("ls_llm_inference_duration_seconds_bucket", { ...success, le }))).toEqual([1, 1, 2, 2]);
    const failure = { ...labels, result: "failure" };
    expect(["120.0", "+Inf"].map((le) => m.get("ls_llm_inference_duration_seconds_bucket", { ...failure, le }))).toEqual([0, 1]);
    expect(m.get("ls_llm_validation_errors_total", { endpoint: "/v1/metrics-test" })).toBe(2);
  });

  it("shows a request's figures to a scrape right after it, while the isolate's flush still gathers", async () => {
    const ctx = createExecutionContext();
    // Starts this isolate's flush, which gathers for the flush delay before it sends.
    recordValidationError(env, ctx, "/v1/scrape-at-once");
    const response = await call("/metrics");
    expect(parseExposition(await response.text()).get("ls_llm_validation_errors_total", { endpoint: "/v1/scrape-at-once" })).toBe(1);
    await waitOnExecutionContext(ctx);
    // The flush the scrape took over sends nothing twice.
    expect((await scrape()).get("ls_llm_validation_errors_total", { endpoint: "/v1/scrape-at-once" })).toBe(1);
  });

  it("reaches /metrics from inside a Durable Object, which starts the flush without awaiting it", async () => {
    const host = metricsNamespace(env)!.getByName("recording-test-host");
    const labels = { provider: "metrics-do", model: "parley-large", endpoint: "/v1/query" };
    await runInDurableObject(host, (_instance, state) => {
      recordLlmCall(env, state, { ...labels, ok: true, inputTokens: 7, outputTokens: 9, durationMs: 1200 });
    });
    // The flush runs on in the object; the figures show within the flush delay.
    const m = await scrapeWhen((m) => m.get("ls_llm_token_received_total", labels) !== undefined);
    expect(m.get("ls_llm_token_received_total", labels)).toBe(9);
  });
});

describe("gauges computed at scrape time", () => {
  it("reports the backend's language models, 1 for the configured default, and no degraded mode", async () => {
    const m = await scrape(testConfig({ inference: { default_provider: "scripted", default_model: "parley-small" } }));
    const models = m.samples.filter((sample) => sample.name === "ls_provider_model_configuration");
    expect(models).toEqual([
      { name: "ls_provider_model_configuration", labels: { provider: "scripted", model: "scripted/parley-large" }, value: 0 },
      { name: "ls_provider_model_configuration", labels: { provider: "scripted", model: "scripted/parley-small" }, value: 1 },
    ]);
    expect(m.get("ls_started_in_degraded_mode")).toBe(0);
  });
});

describe("readiness", () => {
  it("is healthy when the backend answers and the default model exists", async () => {
    const config = testConfig({ inference: { default_provider: "scripted", default_model: "parley-small" } });
    for (const path of ["/readiness", "/v1/readiness"]) {
      expect(await callJson(path, { config })).toEqual({
        status: 200,
        body: { ready: true, reason: "All providers are healthy", overall_status: "healthy", impacts: null, providers: [] },
      });
    }
  });

  it("is 503 when the configured default model is not in the backend's registry", async () => {
    const config = testConfig({ inference: { default_provider: "scripted", default_model: "no-such-model" } });
    expect(await callJson("/readiness", { config })).toEqual({
      status: 503,
      body: {
        ready: false,
        reason: "Model scripted/no-such-model not found in model registry",
        overall_status: "unhealthy",
        impacts: ["Default model not available in registry"],
        providers: [],
      },
    });
  });
});

describe("backend unreachable", () => {
  const down = (allowDegraded: boolean) =>
    testConfig({ inference_backend: { url: "http://127.0.0.1:9/v1", max_retries: 0, allow_degraded_mode: allowDegraded } });
  const backendEntry = { provider_id: "inference_backend", status: "error", message: "Connection error while trying to reach backend service." };

  it("with allow_degraded_mode: readiness 200 degraded with the reason, the gauge 1, no model gauges, turns 503, the rest answers", async () => {
    const config = down(true);
    expect(await callJson("/readiness", { config })).toEqual({
      status: 200,
      body: {
        ready: true,
        reason: "Service running in degraded mode",
        overall_status: "degraded",
        impacts: ["LLM inference unavailable", "RAG functionality unavailable", "Agent tools unavailable"],
        providers: [],
      },
    });
    const m = await scrape(config);
    expect(m.get("ls_started_in_degraded_mode")).toBe(1);
    // Written as the original's client writes a gauge (its checks look for this text).
    expect(await (await call("/metrics", { config })).text()).toContain("\nls_started_in_degraded_mode 1.0\n");
    expect(m.samples.filter((sample) => sample.name === "ls_provider_model_configuration")).toEqual([]);
    const turn = await callJson("/v1/query", { config, json: { query: "hello" } });
    expect(turn.status).toBe(503);
    expect(turn.body).toMatchObject({ detail: { response: "Unable to connect to the inference backend" } });
    expect((await callJson("/v1/conversations", { config })).status).toBe(200);
    expect((await callJson("/liveness", { config })).status).toBe(200);
    expect((await callJson("/v1/shields", { config })).status).toBe(200);
  });

  it("without it: readiness 503 unhealthy, the gauge 0", async () => {
    const config = down(false);
    expect(await callJson("/readiness", { config })).toEqual({
      status: 503,
      body: {
        ready: false,
        reason: "Cannot connect to backend service",
        overall_status: "unhealthy",
        impacts: ["LLM inference unavailable", "Provider health checks unavailable"],
        providers: [backendEntry],
      },
    });
    expect((await scrape(config)).get("ls_started_in_degraded_mode")).toBe(0);
  });
});
