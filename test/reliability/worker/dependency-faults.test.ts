// The services Parley depends on besides the model and the MCP servers (mcp-faults.test.ts),
// misbehaving (RELIABILITY.md "Dependency faults"): the ingress server (the export loses nothing
// and never hangs), the Splunk HEC collector (telemetry never delays or breaks an answer) and the
// cluster API (SPEC's 503 within the 5 s bound, the conversation untouched). Fakes:
// test/fakes/ingress-server.ts, hec-collector.ts and cluster-api.ts, each misbehaving as its header
// documents.
import { createExecutionContext, createScheduledController, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, inject, it, vi } from "vitest";
import type { UserDataCollectionConfig } from "../../../worker/config/schema.ts";
import { writeTranscript } from "../../../worker/data/transcripts.ts";
import worker from "../../../worker/index.ts";
import { loadRuntime } from "../../../worker/runtime.ts";
import { d1Runner } from "../../../worker/storage/d1-runner.ts";
import type { IngressUpload } from "../../fakes/ingress-server.ts";
import { clearData } from "../../worker/data-helpers.ts";
import { call, callJson, settle, testConfig } from "../../worker/helpers.ts";
import { envelopeProblem, figure, inBatches, scaled, since } from "./suite.ts";
import { TURN_ENDPOINTS } from "./turns.ts";

const REPEATS = scaled(1, 3);
/** An address nothing listens on: the fake MCP server's. */
const mcp = inject("mcp");

describe("the ingress server", () => {
  const ingress = inject("ingressUrl");
  const INTERVAL = 600;
  const T0 = Date.UTC(2031, 0, 1);
  const deadIngress = `http://127.0.0.1:${new URL(mcp.downUrl).port}/upload`;

  async function setup(url?: string): Promise<{ tenant: string; config: string; collection: UserDataCollectionConfig }> {
    const tenant = `t${crypto.randomUUID().replaceAll("-", "")}`;
    const config = testConfig({
      user_data_collection: {
        transcripts_enabled: true,
        transcripts_storage: "/tmp/data/transcripts",
        data_collector: {
          enabled: true,
          ingress_server_url: url ?? `${ingress}/upload/${tenant}`,
          ingress_server_auth_token: "ingress-token-0123456789",
          ingress_content_service_name: "parley",
          collection_interval: INTERVAL,
          cleanup_after_send: false,
          connection_timeout_seconds: 1,
        },
      },
    });
    const loaded = await loadRuntime({ ...env, PARLEY_CONFIG: config });
    if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
    return { tenant, config, collection: loaded.runtime.config.user_data_collection };
  }

  async function cron(config: string, at: number): Promise<number> {
    const started = Date.now();
    const ctx = createExecutionContext();
    await worker.scheduled(createScheduledController({ scheduledTime: at, cron: "* * * * *" }), { ...env, PARLEY_CONFIG: config }, ctx);
    await waitOnExecutionContext(ctx);
    return since(started);
  }

  const uploadsOf = async (tenant: string) => (await (await fetch(`${ingress}/__uploads/${tenant}`)).json()) as IngressUpload[];
  const unsent = async () => (await env.DB.prepare("SELECT count(*) AS n FROM data_objects WHERE sent_at IS NULL").first<{ n: number }>())!.n;

  const MODES: Array<{ name: string; mode?: string; extra?: Record<string, unknown>; down?: boolean }> = [
    { name: "down (connection refused)", down: true },
    { name: "slower than connection_timeout_seconds", mode: "slow", extra: { delayMs: 5_000 } },
    { name: "answers 500", mode: "error", extra: { status: 500 } },
    { name: "answers 503", mode: "error", extra: { status: 503 } },
    { name: "answers 429", mode: "error", extra: { status: 429 } },
    { name: "cuts the connection", mode: "cut" },
    { name: "answers garbage (200 HTML)", mode: "garbage" },
    { name: "never answers", mode: "stall" },
    { name: "stalls after its headers", mode: "stall-headers" },
  ];

  it("loses nothing and never hangs, whatever the ingress server does", { timeout: 300_000 }, async () => {
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const failures: string[] = [];
    let tried = 0;
    for (let round = 0; round < REPEATS; round++) {
      for (const fault of MODES) {
        tried++;
        await clearData();
        const s = await setup();
        const faulty = fault.down ? await setup(deadIngress) : s;
        const keys: string[] = [];
        for (let i = 0; i < 3; i++) {
          const result = await writeTranscript({ bucket: env.DATA, sql: d1Runner(env.DB) }, s.collection, {
            requestId: crypto.randomUUID(),
            userId: "export-user",
            conversationId: "ab".repeat(24),
            provider: "scripted",
            model: "parley-small",
            query: `question ${i}`,
            response: `answer ${i}`,
            completedAt: new Date(Date.UTC(2030, 0, 1) + i * 1000).toISOString(),
          });
          if (result.status === "written") keys.push(result.key);
        }
        if (fault.mode) await fetch(`${ingress}/__mode/${s.tenant}`, { method: "PUT", body: JSON.stringify({ mode: fault.mode, ...fault.extra, times: 1 }) });
        const ms = await cron(faulty.config, T0 + round * 3_600_000);
        // connection_timeout_seconds (1 s) bounds each upload, plus the machine's margin.
        if (ms > 6_000) failures.push(`${fault.name}: the run took ${ms} ms`);
        if ((await unsent()) !== keys.length) failures.push(`${fault.name}: ${keys.length - (await unsent())} object(s) marked sent without a 202`);
        // Back to normal: the retry (5 minutes later) delivers every object.
        await cron(s.config, T0 + round * 3_600_000 + 5 * 60_000);
        const delivered = (await uploadsOf(s.tenant)).filter((upload) => upload.answer === 202).flatMap((upload) => upload.files.map((file) => file.content));
        const expected = await Promise.all(keys.map(async (key) => (await (await env.DATA.get(key))!.text())));
        for (const content of expected) if (!delivered.includes(content)) failures.push(`${fault.name}: an object was never delivered`);
        if ((await unsent()) !== 0) failures.push(`${fault.name}: ${await unsent()} object(s) still unsent after the retry`);
      }
    }
    figure("ingress server faults (data export)", tried, new Set(failures.map((failure) => failure.split(":")[0])).size, `${MODES.length} faults x ${REPEATS}`);
    vi.restoreAllMocks();
    expect(failures).toEqual([]);
  });
});

describe("the Splunk HEC collector", () => {
  const hec = inject("hec");
  const deadHec = `http://127.0.0.1:${new URL(mcp.downUrl).port}/services/collector/event`;
  const SPLUNK_TIMEOUT_S = 3;
  const MODES: Array<{ name: string; mode?: string; down?: boolean }> = [
    { name: "accepting", mode: "accept" },
    { name: "down (connection refused)", down: true },
    { name: "slower than splunk.timeout", mode: "slow" },
    { name: "answers 503", mode: "error" },
    { name: "answers 429", mode: "throttled" },
    { name: "cuts the connection", mode: "cut" },
    { name: "answers garbage", mode: "garbage" },
    { name: "stalls after its headers", mode: "stall-headers" },
  ];
  const ENDPOINTS = TURN_ENDPOINTS.filter((endpoint) => endpoint.name.startsWith("/v1/responses") || endpoint.name === "/v1/infer");

  it("never delays or breaks an answer, and gives up within splunk.timeout", { timeout: 300_000 }, async () => {
    vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const failures: string[] = [];
    let tried = 0;
    for (let round = 0; round < REPEATS; round++) {
      for (const fault of MODES) {
        const tenant = `t${crypto.randomUUID().replaceAll("-", "")}`;
        if (fault.mode) await fetch(`${hec.url}/__mode/${tenant}`, { method: "PUT", body: JSON.stringify({ mode: fault.mode, delayMs: 10_000 }) });
        const config = testConfig({
          splunk: { enabled: true, url: fault.down ? deadHec : `${hec.url}/${tenant}/services/collector/event`, token_path: `\${env.PARLEY_RELIABILITY_HEC:=${hec.token}}`, index: "parley", timeout: SPLUNK_TIMEOUT_S },
        });
        for (const endpoint of ENDPOINTS) {
          tried++;
          const user = `hec-${crypto.randomUUID().slice(0, 8)}`;
          const first = await endpoint.ask("telemetry one", { conversation: null, config, user });
          // The answer is complete before the event is sent: a collector slower than its time-out shows nowhere here.
          if (first.answer !== "[user_turns=1] You said: telemetry one" || first.ms > 2_500) failures.push(`${endpoint.name} / HEC ${fault.name}: answered ${JSON.stringify(first.answer ?? first.error)} in ${first.ms} ms`);
          const settled = Date.now();
          await settle();
          if (since(settled) > SPLUNK_TIMEOUT_S * 1000 + 3_000) failures.push(`${endpoint.name} / HEC ${fault.name}: the event's delivery took ${since(settled)} ms`);
          if (endpoint.conversational && first.conversation) {
            const next = await endpoint.ask("telemetry two", { conversation: first.conversation, config, user });
            if (next.answer !== "[user_turns=2] You said: telemetry two") failures.push(`${endpoint.name} / HEC ${fault.name}: the next question was answered ${JSON.stringify(next.answer ?? next.error)}`);
          }
        }
        if (fault.mode === "accept") {
          const events = (await (await fetch(`${hec.url}/__events/${tenant}`)).json()) as unknown[];
          if (events.length === 0) failures.push("HEC accepting: no event arrived (the harness is not sending telemetry)");
        }
      }
    }
    await settle();
    vi.restoreAllMocks();
    figure("HEC collector faults (telemetry)", tried, new Set(failures.map((failure) => failure.split(":")[0])).size, `${ENDPOINTS.length} endpoints x ${MODES.length} collector states x ${REPEATS}`);
    expect(failures).toEqual([]);
  });
});

describe("the cluster API", () => {
  const cluster = inject("clusterApi");
  /** The cluster API's own time-out (README "k8s and trusted-proxy") plus the machine's margin. */
  const CLUSTER_BOUND_MS = 5_000 + 4_000;
  const MODES: Array<{ mode: string; status: number; response: string }> = [
    { mode: "down", status: 503, response: "Unable to connect to the cluster API" },
    { mode: "throttled", status: 503, response: "Unable to connect to the cluster API" },
    { mode: "hang", status: 503, response: "Unable to connect to the cluster API" },
    { mode: "cut", status: 503, response: "Unable to connect to the cluster API" },
    { mode: "garbage", status: 503, response: "Unable to connect to the cluster API" },
    { mode: "stall-headers", status: 503, response: "Unable to connect to the cluster API" },
    { mode: "unreachable", status: 503, response: "Unable to connect to the cluster API" },
    { mode: "unauthorized", status: 500, response: "Internal server error" },
  ];
  const k8s = (mode: string) =>
    testConfig({
      authentication: {
        module: "k8s",
        k8s_cluster_api: mode === "unreachable" ? `http://127.0.0.1:${new URL(mcp.downUrl).port}` : `${cluster.url}/${mode}`,
        k8s_service_account_token: cluster.serviceToken,
      },
    });

  it("answers SPEC's error within the bound on every kind of endpoint, and the conversation goes on", { timeout: 300_000 }, async () => {
    const failures: string[] = [];
    const cases = Array.from({ length: REPEATS }, () => MODES).flat();
    await inBatches(cases, 4, async (fault) => {
      const token = `user.rel-${crypto.randomUUID().slice(0, 8)}`;
      const first = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "cluster one" }, config: k8s("ok"), token });
      const attempts: Array<[string, () => Promise<Response>]> = [
        ["POST /authorized", () => call("/authorized", { method: "POST", config: k8s(fault.mode), token })],
        ["POST /v1/query", () => call("/v1/query", { json: { query: "cluster fault", conversation_id: first.body.conversation_id }, config: k8s(fault.mode), token })],
        ["POST /v1/streaming_query", () => call("/v1/streaming_query", { json: { query: "cluster fault", conversation_id: first.body.conversation_id }, config: k8s(fault.mode), token })],
        ["GET /v1/conversations", () => call("/v1/conversations", { config: k8s(fault.mode), token })],
      ];
      for (const [name, attempt] of attempts) {
        // A failed review is never cached, so the same token meets the fault every time.
        const started = Date.now();
        const response = await attempt();
        const text = await response.text();
        const ms = since(started);
        const where = `${fault.mode} (${name})`;
        if (ms > CLUSTER_BOUND_MS) failures.push(`cluster API ${where}: took ${ms} ms`);
        if (response.status !== fault.status) failures.push(`cluster API ${where}: answered ${response.status} ${text.slice(0, 200)}`);
        const problem = envelopeProblem(response.status, response.headers.get("Content-Type"), text);
        if (problem) failures.push(`cluster API ${where}: ${problem}`);
        else if (!text.includes(`"${fault.response}"`)) failures.push(`cluster API ${where}: ${text.slice(0, 200)} (expected "${fault.response}")`);
      }
      const next = await callJson<{ response: string }>("/v1/query", { json: { query: "cluster two", conversation_id: first.body.conversation_id }, config: k8s("ok"), token });
      if (next.body.response !== "[user_turns=2] You said: cluster two") failures.push(`cluster API ${fault.mode}: the next question was answered ${JSON.stringify(next.body)}`);
    });
    figure("cluster API faults (k8s authentication)", cases.length * 4, new Set(failures.map((failure) => failure.split(":")[0])).size, `${MODES.length} faults x 4 endpoints x ${REPEATS}`);
    expect(failures).toEqual([]);
  });
});
