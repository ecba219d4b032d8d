// sendSplunkEvent inside workerd against the fake HEC collector (test/fakes/hec-collector.ts), with
// the token loaded as the configuration loads it (splunk.token_path as a ${env.NAME} secret). A
// collector that refuses, is down or is slow costs a log line: the sender never throws and never
// waits longer than splunk.timeout.
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, inject, it, vi } from "vitest";
import { inferEvent, responsesEvent, sendSplunkEvent } from "../../worker/data/splunk.ts";
import { loadRuntime, type Runtime } from "../../worker/runtime.ts";
import { SERVICE_VERSION } from "../../worker/version.ts";
import { testConfig } from "./helpers.ts";

const hec = inject("hec");
const HEX48 = "5eed".repeat(12);

function tenant(): string {
  return `t${crypto.randomUUID().replaceAll("-", "")}`;
}

async function runtimeFor(splunk: Record<string, unknown>, token = hec.token): Promise<Runtime> {
  const config = testConfig({ deployment_environment: "test", splunk: { enabled: true, token_path: "${env.SPLUNK_HEC_TOKEN}", index: "parley_events", ...splunk } });
  const result = await loadRuntime({ ...env, PARLEY_CONFIG: config, SPLUNK_HEC_TOKEN: token });
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.runtime;
}

const eventsOf = async (name: string) => (await fetch(`${hec.url}/__events/${name}`)).json() as Promise<Array<Record<string, unknown>>>;
const refusalsOf = async (name: string) => (await fetch(`${hec.url}/__refusals/${name}`)).json() as Promise<Array<{ status: number; text: string }>>;
const setMode = (name: string, mode: string, delayMs?: number) =>
  fetch(`${hec.url}/__mode/${name}`, { method: "PUT", body: JSON.stringify({ mode, delayMs }) });
const collectorUrl = (name: string) => `${hec.url}/${name}/services/collector/event`;

const responsesData = { inputText: "hi", conversationId: HEX48, inferenceTime: 0.2, model: "openai/gpt-test", totalTokens: 12, userAgent: "test-agent/1.0" };
const inferData = { question: "why?", inferenceTime: 0.3, requestId: "req-1", totalTokens: 5 };

afterEach(() => {
  vi.restoreAllMocks();
});

describe("sendSplunkEvent", () => {
  it("delivers every event kind with the HEC envelope and the Splunk token", async () => {
    const name = tenant();
    const rt = await runtimeFor({ url: collectorUrl(name), source: "parley-ci" });
    const events = [
      responsesEvent(rt.config, { ...responsesData, outcome: { kind: "completed", text: "hello" } }),
      responsesEvent(rt.config, { ...responsesData, outcome: { kind: "shield_blocked", refusal: "blocked" } }),
      responsesEvent(rt.config, { ...responsesData, outcome: { kind: "error", error: new RangeError("boom") } }),
      inferEvent(rt.config, { ...inferData, outcome: { kind: "completed", text: "because" } }),
      inferEvent(rt.config, { ...inferData, outcome: { kind: "shield_blocked", refusal: "no" } }),
      inferEvent(rt.config, { ...inferData, outcome: { kind: "error", error: new TypeError("x") } }),
    ];
    for (const event of events) expect(await sendSplunkEvent(rt, event)).toBe(true);
    const received = await eventsOf(name);
    expect(received.map((e) => e.sourcetype)).toEqual([
      "responses_completed",
      "responses_shield_blocked",
      "responses_error",
      "infer_with_llm",
      "infer_shield_blocked",
      "infer_error",
    ]);
    for (const event of received) {
      expect(event).toMatchObject({ host: "parley", source: `parley-ci (v${SERVICE_VERSION})`, index: "parley_events", time: expect.any(Number) });
    }
    expect(received[0]!.event).toEqual({
      input_text: "hi",
      response_text: "hello",
      conversation_id: HEX48,
      inference_time: 0.2,
      model: "openai/gpt-test",
      deployment: "test",
      org_id: "auth_disabled",
      system_id: "auth_disabled",
      total_llm_tokens: 12,
      user_agent: "test-agent/1.0",
    });
    expect(received[5]!.event).toMatchObject({ question: "why?", response: "TypeError", request_id: "req-1", deployment: "test" });
  });

  it("a wrong token is refused by the collector: logged (without the token), not thrown", async () => {
    const name = tenant();
    const rt = await runtimeFor({ url: collectorUrl(name) }, "not-the-right-token-123");
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    expect(await sendSplunkEvent(rt, responsesEvent(rt.config, { ...responsesData, outcome: { kind: "completed", text: "x" } }))).toBe(false);
    expect(await refusalsOf(name)).toEqual([{ status: 403, text: "Invalid token" }]);
    const logged = warn.mock.calls.map((call) => call.join(" ")).join("\n");
    expect(logged).toMatch(/collector refused the responses_completed event: HTTP 403/);
    expect(logged).not.toContain("not-the-right-token-123");
  });

  it("a collector answering 503 is logged, not thrown", async () => {
    const name = tenant();
    await setMode(name, "error");
    const rt = await runtimeFor({ url: collectorUrl(name) });
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    expect(await sendSplunkEvent(rt, inferEvent(rt.config, { ...inferData, outcome: { kind: "completed", text: "x" } }))).toBe(false);
    expect(warn.mock.calls.flat().join(" ")).toMatch(/HTTP 503 .*Server is busy/);
    expect(await eventsOf(name)).toEqual([]);
  });

  it("a collector that is down is logged, not thrown", async () => {
    // Port 9 (discard) has nothing listening on the test machine's loopback.
    const rt = await runtimeFor({ url: "http://127.0.0.1:9/services/collector/event" });
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    expect(await sendSplunkEvent(rt, inferEvent(rt.config, { ...inferData, outcome: { kind: "completed", text: "x" } }))).toBe(false);
    expect(warn.mock.calls.flat().join(" ")).toMatch(/infer_with_llm event not delivered/);
  });

  it("a slow collector is given up on after splunk.timeout", async () => {
    const name = tenant();
    await setMode(name, "slow", 30_000);
    const rt = await runtimeFor({ url: collectorUrl(name), timeout: 0.3 });
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    // Resolves (false) well before the collector would answer, which is what bounds the wait.
    expect(await sendSplunkEvent(rt, responsesEvent(rt.config, { ...responsesData, outcome: { kind: "completed", text: "x" } }))).toBe(false);
    expect(warn.mock.calls.flat().join(" ")).toMatch(/responses_completed event not delivered: no answer within 0.3 s/);
  }, 10_000);

  it("sends nothing when splunk is disabled", async () => {
    const result = await loadRuntime({ ...env, PARLEY_CONFIG: testConfig({ splunk: { enabled: false, url: collectorUrl("never") } }) });
    if (!result.ok) throw new Error("config");
    const rt = result.runtime;
    expect(await sendSplunkEvent(rt, responsesEvent(rt.config, { ...responsesData, outcome: { kind: "completed", text: "x" } }))).toBe(false);
    expect(await eventsOf("never")).toEqual([]);
  });
});
