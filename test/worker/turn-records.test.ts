// What turns leave for the operator besides their answer, through the Worker: a transcript per turn
// of each endpoint that writes one (R2, SPEC's layout, from the turn's committed state), and the
// Splunk HEC events of /v1/responses (completed, shield-blocked, error), sent after the answer.
import { createExecutionContext, runInDurableObject, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, inject, it } from "vitest";
import worker from "../../worker/index.ts";
import { call, eventually, largestStoredValue, MAX_STORED_VALUE, readSse, testConfig } from "./helpers.ts";
import { storedTranscripts } from "./data-helpers.ts";

const STORAGE = "/tmp/data/turn-records";
const hec = inject("hec");

describe("transcripts of each endpoint", () => {
  const config = testConfig({ user_data_collection: { transcripts_enabled: true, transcripts_storage: STORAGE } });
  const user = () => `rec-${crypto.randomUUID().slice(0, 8)}`;
  const transcripts = (userId: string, expected: number) =>
    eventually(async () => {
      const found = [...(await storedTranscripts(STORAGE, userId)).values()];
      expect(found).toHaveLength(expected);
      return found;
    });

  it("/v1/query and /v1/streaming_query write one each, with the question, answer and conversation", async () => {
    const userId = user();
    const asked = await call("/v1/query", { user: userId, config, json: { query: "first question" } });
    const { conversation_id } = await asked.json<{ conversation_id: string }>();
    const streamed = await call("/v1/streaming_query", { user: userId, config, json: { query: "second question", conversation_id } });
    await readSse(streamed);
    const found = await transcripts(userId, 2);
    const queries = found.map((record) => (record as { redacted_query: string }).redacted_query).sort();
    expect(queries).toEqual(["first question", "second question"]);
    for (const record of found) {
      expect(record).toMatchObject({ metadata: expect.objectContaining({ conversation_id }), llm_response: expect.stringContaining("You said") });
    }
  });

  it("/v1/responses writes one with store true (the default) and none with store false", async () => {
    const userId = user();
    await (await call("/v1/responses", { user: userId, config, json: { input: "kept" } })).json();
    await (await call("/v1/responses", { user: userId, config, json: { input: "not kept", store: false } })).json();
    await readSse(await call("/v1/responses", { user: userId, config, json: { input: "kept too", stream: true } }));
    const found = await transcripts(userId, 2);
    expect(found.map((record) => (record as { redacted_query: string }).redacted_query).sort()).toEqual(["kept", "kept too"]);
  });

  it("writes one for a question and an answer larger than one storage value, kept in chunks while it waits", async () => {
    const userId = user();
    const asked = await call("/v1/query", { user: userId, config, json: { query: "first" } });
    const { conversation_id } = await asked.json<{ conversation_id: string }>();
    await transcripts(userId, 1);
    // The next delivery fails (as when R2 is down), so the transcript waits in the conversation's outbox.
    const stub = env.CONVERSATION.getByName(conversation_id);
    await runInDurableObject(stub, (instance) => {
      const object = instance as unknown as { deliver: (...args: unknown[]) => Promise<void> };
      const deliver = object.deliver;
      object.deliver = async function () {
        object.deliver = deliver;
        throw new Error("R2 is unavailable");
      };
    });
    // 1.5 MB each way (the scripted model repeats the question): one transcript beyond one storage value.
    const big = "big ".repeat(384 * 1024);
    const next = await call("/v1/query", { user: userId, config, json: { query: big, conversation_id } });
    expect(next.status).toBe(200);
    expect(await largestStoredValue(stub)).toBeLessThanOrEqual(MAX_STORED_VALUE);
    const found = await transcripts(userId, 2);
    expect(found.map((record) => (record as { redacted_query: string }).redacted_query.length).sort((a, b) => a - b)).toEqual(["first".length, big.length]);
    // Delivered: nothing of it is left behind.
    await runInDurableObject(stub, (_instance, state) => {
      expect(state.storage.sql.exec("SELECT 1 FROM outbox WHERE key IS NULL").toArray()).toHaveLength(0);
      expect(state.storage.sql.exec("SELECT 1 FROM blobs WHERE key LIKE 'outbox:%'").toArray()).toHaveLength(0);
    });
  });
});

describe("Splunk events of /v1/responses", () => {
  const tenant = () => `resp-${crypto.randomUUID().slice(0, 8)}`;
  const configFor = (name: string, extra: Record<string, unknown> = {}) =>
    testConfig({
      splunk: { enabled: true, url: `${hec.url}/${name}/services/collector/event`, token_path: "${env.HEC_TEST_TOKEN}", index: "parley", source: "parley-test" },
      deployment_environment: "test",
      ...extra,
    });
  /** A request with the HEC token among the Worker's secrets, waiting for what it sends after the answer. */
  async function send(config: string, json: Record<string, unknown>, headers: Record<string, string> = {}) {
    const ctx = createExecutionContext();
    const request = new Request("http://parley.test/v1/responses?user_id=splunk-user", {
      method: "POST",
      headers: { "Content-Type": "application/json", ...headers },
      body: JSON.stringify(json),
    });
    const response = await worker.fetch(request, { ...env, PARLEY_CONFIG: config, HEC_TEST_TOKEN: hec.token } as Env, ctx);
    const text = await response.text();
    await waitOnExecutionContext(ctx);
    return { status: response.status, text };
  }
  const events = async (name: string) => (await fetch(`${hec.url}/__events/${name}`)).json<Array<{ sourcetype: string; source: string; index: string; event: Record<string, unknown> }>>();

  it("sends responses_completed after an answer, streamed or not", async () => {
    const name = tenant();
    const config = configFor(name);
    const answered = await send(config, { input: "hello telemetry" }, { "User-Agent": "cli/1.0\tbuild 7" });
    expect(answered.status).toBe(200);
    await send(config, { input: "streamed telemetry", stream: true });
    const sent = await events(name);
    expect(sent.map((event) => event.sourcetype)).toEqual(["responses_completed", "responses_completed"]);
    expect(sent[0]).toMatchObject({ index: "parley", source: expect.stringContaining("parley-test") });
    expect(sent[0]!.event).toMatchObject({
      input_text: "hello telemetry",
      response_text: expect.stringContaining("hello telemetry"),
      conversation_id: expect.stringMatching(/^[0-9a-f]{48}$/),
      model: expect.stringContaining("/"),
      deployment: "test",
      org_id: "auth_disabled",
      user_agent: "cli/1.0build 7",
    });
    expect(sent[0]!.event.total_llm_tokens).toBeGreaterThan(0);
  });

  it("sends responses_shield_blocked with the refusal, and responses_error when the turn fails", async () => {
    const name = tenant();
    const config = configFor(name, { shields: [{ name: "guard", message: "Refused by guard." }] });
    await send(config, { input: "something #unsafe" });
    const failed = await send(config, { input: "break #fail-midstream" });
    expect(failed.status).toBe(500);
    const sent = await events(name);
    expect(sent.map((event) => event.sourcetype)).toEqual(["responses_shield_blocked", "responses_error"]);
    expect(sent[0]!.event.response_text).toBe("Refused by guard.");
    // The error's class, never its message.
    expect(sent[1]!.event.response_text).toBe("ApiError");
  });

  it("answers at once while the collector is slow or down", async () => {
    const name = tenant();
    await fetch(`${hec.url}/__mode/${name}`, { method: "PUT", body: JSON.stringify({ mode: "error" }) });
    const answered = await send(configFor(name), { input: "collector down" });
    expect(answered.status).toBe(200);
    expect(await events(name)).toEqual([]);
  });
});
