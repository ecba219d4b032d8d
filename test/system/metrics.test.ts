// /metrics as a deployment serves it: the real bundle under Miniflare, separate HTTP requests, the
// counts kept in the MetricsDO shards' storage. Counts survive a restart of the gateway on the same
// state, and every request served shows in a scrape within the flush delay. Also readiness against a
// backend that reports its providers' health the way Llama Stack does.
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listenOn } from "../fakes/listen.ts";
import { startScriptedBackend, type ScriptedBackend } from "../fakes/scripted-backend.ts";
import { parseExposition, type Exposition } from "../worker/metrics-exposition.ts";
import { startGateway, type RunningGateway } from "./gateway.ts";

/** Far beyond the flush delay (a Durable Object round-trip or two), so only a lost count fails. */
const FLUSH_WAIT_MS = 15_000;

interface Expected {
  path: string;
  status: number;
  count: number;
}

async function scrape(gateway: RunningGateway): Promise<Exposition> {
  const response = await fetch(`${gateway.url}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toBe("text/plain; version=0.0.4; charset=utf-8");
  return parseExposition(await response.text());
}

const counted = (m: Exposition, { path, status }: Omit<Expected, "count">) => m.get("ls_rest_api_calls_total", { path, status_code: String(status) }) ?? 0;

/** Scrapes until every expected count shows (or the wait is over) and returns the last scrape. */
async function scrapeUntil(gateway: RunningGateway, expected: Expected[]): Promise<Exposition> {
  const deadline = Date.now() + FLUSH_WAIT_MS;
  for (;;) {
    const m = await scrape(gateway);
    if (expected.every((entry) => counted(m, entry) >= entry.count) || Date.now() > deadline) return m;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function send(gateway: RunningGateway, path: string, times: number, expectedStatus: number): Promise<void> {
  // Half one after another, half at once: separate requests that flush while others record.
  const one = async () => expect((await fetch(`${gateway.url}${path}`)).status).toBe(expectedStatus);
  const sequential = Math.ceil(times / 2);
  for (let i = 0; i < sequential; i += 1) await one();
  await Promise.all(Array.from({ length: times - sequential }, one));
}

describe("metrics across a restart", () => {
  let backend: ScriptedBackend;
  let state: string;
  let gateway: RunningGateway | undefined;

  beforeAll(async () => {
    [backend, state] = await Promise.all([startScriptedBackend(), mkdtemp(join(tmpdir(), "parley-metrics-"))]);
  });

  afterAll(async () => {
    await gateway?.stop();
    await Promise.all([backend?.close(), state && rm(state, { recursive: true, force: true })]);
  });

  it("keeps every count of the first run and adds the second run's", { timeout: 180_000 }, async () => {
    const setup = { config: { name: "Parley metrics test", inference_backend: { url: backend.url }, authentication: { module: "noop" } } };
    const liveness = { path: "/liveness", status: 200 };
    const badPrompt = { path: "/v1/prompts/{prompt_id}", status: 400 };
    const unknown = { path: "(unmatched)", status: 404 };

    gateway = await startGateway(setup, { persistTo: state });
    await send(gateway, "/liveness", 20, 200);
    await send(gateway, "/v1/prompts/not-an-id", 6, 400);
    await send(gateway, "/no/such/path", 3, 404);
    const first = await scrapeUntil(gateway, [
      { ...liveness, count: 20 },
      { ...badPrompt, count: 6 },
      { ...unknown, count: 3 },
    ]);
    expect([counted(first, liveness), counted(first, badPrompt), counted(first, unknown)]).toEqual([20, 6, 3]);
    expect(first.get("ls_response_duration_seconds_count", { path: "/liveness" })).toBe(20);
    // Answers a scrape has already seen are flushed: stopping now loses nothing.
    await gateway.stop();

    gateway = await startGateway(setup, { persistTo: state });
    await send(gateway, "/liveness", 10, 200);
    await send(gateway, "/v1/prompts/still-not-an-id", 2, 400);
    const second = await scrapeUntil(gateway, [
      { ...liveness, count: 30 },
      { ...badPrompt, count: 8 },
    ]);
    expect([counted(second, liveness), counted(second, badPrompt), counted(second, unknown)]).toEqual([30, 8, 3]);
    expect(second.get("ls_response_duration_seconds_count", { path: "/liveness" })).toBe(30);
    expect(second.get("ls_response_duration_seconds_bucket", { path: "/liveness", le: "+Inf" })).toBe(30);
    // The scrapes themselves are timed, never counted: a scrape's own time is recorded once it has
    // answered, and the next scrape sends it before reading.
    const third = await scrape(gateway);
    expect(third.samples.filter((sample) => sample.name === "ls_rest_api_calls_total" && sample.labels.path === "/metrics")).toEqual([]);
    expect(third.get("ls_response_duration_seconds_count", { path: "/metrics" })).toBeGreaterThan(0);
    // The gauges come from the backend as it is now.
    expect(second.get("ls_provider_model_configuration", { provider: "scripted", model: "scripted/parley-small" })).toBe(0);
    expect(second.get("ls_started_in_degraded_mode")).toBe(0);
  });
});

/**
 * A backend listing its providers with their health as Llama Stack does (GET /v1/providers), plus
 * the model list the probe reads. Its vLLM provider's health is switched by the test.
 */
async function startProvidersBackend(): Promise<{ url: string; setVllm(status: string, message?: string): void; close(): Promise<void> }> {
  let vllm = { status: "OK", message: "" };
  const server: Server = createServer((req, res) => {
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { "content-type": "application/json" });
      res.end(JSON.stringify(body));
    };
    if (req.url === "/v1/models") {
      return json(200, {
        data: [{ identifier: "vllm/llama", id: "vllm/llama", object: "model", owned_by: "llama_stack", custom_metadata: { model_type: "llm", provider_id: "vllm", provider_resource_id: "llama" } }],
      });
    }
    if (req.url === "/v1/providers") {
      return json(200, {
        data: [
          { api: "inference", provider_id: "vllm", provider_type: "remote::vllm", config: {}, health: vllm },
          { api: "safety", provider_id: "llama-guard", provider_type: "inline::llama-guard", config: {}, health: { status: "Not Implemented", message: "" } },
        ],
      });
    }
    json(404, { detail: "Not Found" });
  });
  const port = await listenOn(server);
  return {
    url: `http://127.0.0.1:${port}/v1`,
    setVllm: (status, message = "") => {
      vllm = { status, message };
    },
    close: () => new Promise((done) => server.close(() => done())),
  };
}

describe("readiness with a backend that reports its providers' health", () => {
  let backend: Awaited<ReturnType<typeof startProvidersBackend>>;
  let gateway: RunningGateway;

  beforeAll(async () => {
    backend = await startProvidersBackend();
    gateway = await startGateway({ config: { name: "Parley readiness test", inference_backend: { url: backend.url }, authentication: { module: "noop" } } });
  }, 120_000);

  afterAll(async () => {
    await gateway?.stop();
    await backend?.close();
  });

  it("is 503 naming the provider in error, and healthy again once it recovers", async () => {
    backend.setVllm("Error", "connection to vLLM refused");
    const failing = await fetch(`${gateway.url}/readiness`);
    expect(failing.status).toBe(503);
    expect(await failing.json()).toEqual({
      ready: false,
      reason: "Providers not healthy: vllm",
      overall_status: "unhealthy",
      impacts: ["Provider vllm: connection to vLLM refused"],
      providers: [{ provider_id: "vllm", status: "error", message: "connection to vLLM refused" }],
    });

    backend.setVllm("OK");
    const healthy = await fetch(`${gateway.url}/readiness`);
    expect(healthy.status).toBe(200);
    expect(await healthy.json()).toEqual({ ready: true, reason: "All providers are healthy", overall_status: "healthy", impacts: null, providers: [] });
  });
});
