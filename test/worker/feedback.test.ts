// POST /v1/feedback (and /feedback), GET/PUT /v1/feedback/status through the Worker: validation,
// ownership, the switch every instance sees, and the record stored in R2 with its index row.
import { createExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, beforeEach, describe, expect, it } from "vitest";
import worker from "../../worker/index.ts";
import { clearData } from "./data-helpers.ts";
import { call, callJson, testConfig } from "./helpers.ts";

interface ErrorBody {
  detail: { response: string; cause: string };
}
type Json = Record<string, unknown>;

const STORAGE = "/tmp/data/feedback";
const config = testConfig({ user_data_collection: { feedback_enabled: true, feedback_storage: STORAGE } });
const disabled = testConfig({ user_data_collection: { feedback_enabled: false, feedback_storage: STORAGE } });
const noStorage = testConfig({ user_data_collection: { feedback_enabled: false } });

const OWNER = "fb-owner";
let conversationId: string;

beforeAll(async () => {
  const answer = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "feedback target" }, user: OWNER, config });
  expect(answer.status).toBe(200);
  conversationId = answer.body.conversation_id;
});

// Each test starts from the configured switch and an empty store.
beforeEach(clearData);

const submission = (fields: Json = {}) => ({ conversation_id: conversationId, user_question: "What is X?", llm_response: "X is Y.", ...fields });

async function storedObjects(): Promise<Array<{ key: string; json: Json }>> {
  const listed = await env.DATA.list({ prefix: "tmp/data/feedback/" });
  return Promise.all(listed.objects.map(async (o) => ({ key: o.key, json: (await (await env.DATA.get(o.key))!.json()) as Json })));
}

describe("POST /v1/feedback", () => {
  it("stores the feedback record as JSON under feedback_storage and indexes it for export", async () => {
    const before = Date.now();
    const { status, body } = await callJson("/v1/feedback", {
      json: submission({ sentiment: 1, user_feedback: "Helpful", categories: ["incomplete", "other", "incomplete"] }),
      user: OWNER,
      config,
    });
    expect({ status, body }).toEqual({ status: 200, body: { response: "feedback received" } });
    const [stored, ...more] = await storedObjects();
    expect(more).toEqual([]);
    expect(stored!.key).toMatch(/^tmp\/data\/feedback\/[0-9a-f-]{36}\.json$/);
    expect(Object.keys(stored!.json)).toEqual(["user_id", "timestamp", "conversation_id", "user_question", "llm_response", "sentiment", "user_feedback", "categories"]);
    expect(stored!.json).toEqual({
      user_id: OWNER,
      timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      conversation_id: conversationId,
      user_question: "What is X?",
      llm_response: "X is Y.",
      sentiment: 1,
      user_feedback: "Helpful",
      categories: ["incomplete", "other"],
    });
    expect(Date.parse(stored!.json.timestamp as string)).toBeGreaterThanOrEqual(before - 1000);
    const head = await env.DATA.head(stored!.key);
    const row = await env.DB.prepare("SELECT * FROM data_objects WHERE key = ?").bind(stored!.key).first();
    expect(row).toMatchObject({ kind: "feedback", bytes: head!.size, sent_at: null, archive: null });
  });

  it("is served on the unversioned /feedback too, and normalizes a conv_ id", async () => {
    const { status } = await callJson("/feedback", { json: submission({ conversation_id: `conv_${conversationId}`, sentiment: -1 }), user: OWNER, config });
    expect(status).toBe(200);
    const [stored] = await storedObjects();
    expect(stored!.json).toMatchObject({ conversation_id: conversationId, sentiment: -1, user_feedback: null, categories: null });
  });

  it("validates as the original system does (422), storing nothing", async () => {
    const cases: Array<[Json, string, RegExp]> = [
      [submission(), "Invalid attribute value", /At least one form of feedback must be provided: 'sentiment', 'user_feedback', or 'categories'/],
      [submission({ categories: [], user_feedback: "" }), "Invalid attribute value", /At least one form of feedback/],
      [submission({ sentiment: 0 }), "Invalid attribute value", /sentiment: Improper sentiment value of 0, needs to be -1 or 1/],
      [submission({ categories: ["boring"] }), "Invalid attribute value", /categories\.0/],
      [submission({ user_feedback: "x".repeat(4097) }), "Invalid attribute value", /user_feedback: must be at most 4096 characters/],
      [submission({ conversation_id: "not-an-id", sentiment: 1 }), "Invalid attribute value", /conversation_id: Improper conversation ID not-an-id/],
      // Only a lower-case conv_ prefix is one (the original's removeprefix("conv_")).
      [submission({ conversation_id: `CONV_${"AB".repeat(24)}`, sentiment: 1 }), "Invalid attribute value", /conversation_id: Improper conversation ID CONV_ABAB/],
      [submission({ sentiment: 1, rating: 5 }), "Invalid attribute value", /unknown field\(s\): rating/],
      [{ conversation_id: conversationId, sentiment: 1 }, "Missing required attributes", /user_question, llm_response/],
    ];
    for (const [json, response, cause] of cases) {
      const { status, body } = await callJson<ErrorBody>("/v1/feedback", { json, user: OWNER, config });
      expect(status, JSON.stringify(json).slice(0, 80)).toBe(422);
      expect(body.detail.response).toBe(response);
      expect(body.detail.cause).toMatch(cause);
    }
    const broken = await callJson<ErrorBody>("/v1/feedback", { body: "{not json", headers: { "Content-Type": "application/json" }, user: OWNER, config });
    expect(broken.status).toBe(422);
    expect(await storedObjects()).toEqual([]);
  });

  it("takes user_feedback of exactly 4096 characters", async () => {
    expect((await callJson("/v1/feedback", { json: submission({ user_feedback: "x".repeat(4096) }), user: OWNER, config })).status).toBe(200);
  });

  it("answers 404 for a conversation that does not exist, in any accepted form", async () => {
    // The original's check takes hex of either case (Python's int(x, 16)) and looks the id up as given.
    for (const id of ["0".repeat(48), `conv_${"0".repeat(48)}`, "123e4567-e89b-12d3-a456-426614174000", "AB".repeat(24), `conv_${"Ab".repeat(24)}`]) {
      const { status, body } = await callJson<ErrorBody>("/v1/feedback", { json: submission({ conversation_id: id, sentiment: 1 }), user: OWNER, config });
      expect(status).toBe(404);
      expect(body.detail.response).toBe("Conversation not found");
    }
    expect(await storedObjects()).toEqual([]);
  });

  it("answers 403 for another user's conversation", async () => {
    const { status, body } = await callJson<ErrorBody>("/v1/feedback", { json: submission({ sentiment: 1 }), user: "someone-else", config });
    expect(status).toBe(403);
    expect(body.detail).toEqual({
      response: "User does not have permission to perform this action",
      cause: `User someone-else does not have permission to submit feedback for conversation with ID ${conversationId}`,
    });
    expect(await storedObjects()).toEqual([]);
  });

  it("refuses a request body over 2 MiB with 413, whether its length is announced or not, storing nothing", async () => {
    const tooLarge = JSON.stringify(submission({ sentiment: 1, llm_response: "x".repeat(2 * 1024 * 1024) }));
    const announced = await callJson<ErrorBody>("/v1/feedback", { body: tooLarge, headers: { "Content-Type": "application/json" }, user: OWNER, config });
    // A body streamed without a Content-Length is counted as it is read.
    const bytes = new TextEncoder().encode(tooLarge);
    const streamed = await callJson<ErrorBody>("/v1/feedback", {
      body: new ReadableStream<Uint8Array>({
        start(controller) {
          for (let offset = 0; offset < bytes.length; offset += 64 * 1024) controller.enqueue(bytes.slice(offset, offset + 64 * 1024));
          controller.close();
        },
      }),
      headers: { "Content-Type": "application/json" },
      user: OWNER,
      config,
    });
    for (const { status, body } of [announced, streamed]) {
      expect(status).toBe(413);
      expect(body.detail).toEqual({ response: "Prompt is too long", cause: "The prompt exceeds the maximum allowed length." });
    }
    expect(await storedObjects()).toEqual([]);
    // Just under the limit is taken.
    const fits = submission({ sentiment: 1, llm_response: "" });
    fits.llm_response = "y".repeat(2 * 1024 * 1024 - JSON.stringify(fits).length);
    expect((await callJson("/v1/feedback", { json: fits, user: OWNER, config })).status).toBe(200);
  });

  it("answers 403 when feedback is disabled, before looking at the body", async () => {
    const { status, body } = await callJson<ErrorBody>("/v1/feedback", { json: { nonsense: true }, user: OWNER, config: disabled });
    expect(status).toBe(403);
    expect(body.detail).toEqual({ response: "Storing feedback is disabled", cause: "Storing feedback is disabled." });
    // Nor at its size.
    const huge = await callJson<ErrorBody>("/v1/feedback", { json: { nonsense: "x".repeat(3 * 1024 * 1024) }, user: OWNER, config: disabled });
    expect(huge.status).toBe(403);
  });

  it("needs the feedback action", async () => {
    const onlyQuery = testConfig({
      user_data_collection: { feedback_enabled: true, feedback_storage: STORAGE },
      authorization: { access_rules: [{ role: "*", actions: ["query"] }] },
    });
    const { status, body } = await callJson<ErrorBody>("/v1/feedback", { json: submission({ sentiment: 1 }), user: OWNER, config: onlyQuery });
    expect(status).toBe(403);
    expect(body.detail.response).toBe("User does not have permission to access this endpoint");
  });

  it("answers 500 with SPEC's envelope when R2 cannot store it, and indexes nothing", async () => {
    const failingBucket = new Proxy(env.DATA, {
      get: (target, property) => (property === "put" ? () => Promise.reject(new Error("R2 is down")) : Reflect.get(target, property, target)),
    });
    const request = new Request(`http://parley.test/v1/feedback?user_id=${OWNER}`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(submission({ sentiment: 1 })),
    });
    const response = await worker.fetch(request, { ...env, DATA: failingBucket, PARLEY_CONFIG: config }, createExecutionContext());
    expect(response.status).toBe(500);
    expect(await response.json()).toEqual({ detail: { response: "Failed to store feedback", cause: "Failed to store feedback under tmp/data/feedback" } });
    expect((await env.DB.prepare("SELECT COUNT(*) AS n FROM data_objects").first())?.n).toBe(0);
  });
});

describe("feedback status", () => {
  it("GET tells whether feedback is accepted, from the configuration until switched", async () => {
    expect((await callJson("/v1/feedback/status", { config })).body).toEqual({ functionality: "feedback", status: { enabled: true } });
    expect((await callJson("/v1/feedback/status", { config: disabled })).body).toEqual({ functionality: "feedback", status: { enabled: false } });
  });

  it("PUT switches it for every request, and says what changed", async () => {
    const off = await callJson<{ status: Json }>("/v1/feedback/status", { method: "PUT", json: { status: false }, user: "admin-1", config });
    expect(off.status).toBe(200);
    expect(off.body).toEqual({
      status: { previous_status: true, updated_status: false, updated_by: "admin-1", timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) },
    });
    expect((await callJson("/v1/feedback/status", { config })).body).toEqual({ functionality: "feedback", status: { enabled: false } });
    const refused = await callJson<ErrorBody>("/v1/feedback", { json: submission({ sentiment: 1 }), user: OWNER, config });
    expect(refused.status).toBe(403);

    const on = await callJson<{ status: Json }>("/v1/feedback/status", { method: "PUT", json: { status: true }, user: "admin-1", config });
    expect(on.body.status).toMatchObject({ previous_status: false, updated_status: true });
    expect((await callJson("/v1/feedback", { json: submission({ sentiment: 1 }), user: OWNER, config })).status).toBe(200);
  });

  it("is persisted in the record store, not in the isolate: a differently loaded configuration sees it", async () => {
    await callJson("/v1/feedback/status", { method: "PUT", json: { status: false }, config });
    const stored = await env.DB.prepare("SELECT value FROM settings WHERE key = 'feedback.enabled'").first<{ value: string }>();
    expect(JSON.parse(stored!.value)).toMatchObject({ enabled: false, configured: true });
    // Another configuration text is another runtime (as a new isolate or a restart would build).
    const sameSwitch = testConfig({ name: "another instance", user_data_collection: { feedback_enabled: true, feedback_storage: STORAGE } });
    expect((await callJson("/v1/feedback/status", { config: sameSwitch })).body).toMatchObject({ status: { enabled: false } });
  });

  it("gives way to a later change of feedback_enabled in the configuration", async () => {
    await callJson("/v1/feedback/status", { method: "PUT", json: { status: false }, config });
    // The switch overrode feedback_enabled: true; a configuration saying false is a newer decision.
    expect((await callJson("/v1/feedback/status", { config: disabled })).body).toMatchObject({ status: { enabled: false } });
    await callJson("/v1/feedback/status", { method: "PUT", json: { status: true }, config: disabled });
    expect((await callJson("/v1/feedback/status", { config: disabled })).body).toMatchObject({ status: { enabled: true } });
    // ... and back to true in the configuration: the configuration wins again.
    expect((await callJson("/v1/feedback/status", { config })).body).toMatchObject({ status: { enabled: true } });
  });

  it("stays given way when feedback_enabled is changed back: an overridden switch is cleared, not revived", async () => {
    await callJson("/v1/feedback/status", { method: "PUT", json: { status: false }, config });
    // The operator restarts with feedback_enabled: false, and a check sees it ...
    expect((await callJson("/v1/feedback/status", { config: disabled })).body).toMatchObject({ status: { enabled: false } });
    expect(await env.DB.prepare("SELECT value FROM settings WHERE key = 'feedback.enabled'").first()).toBeNull();
    // ... then with true again: the configuration's true, not the PUT's false.
    expect((await callJson("/v1/feedback/status", { config })).body).toMatchObject({ status: { enabled: true } });
    expect((await callJson("/v1/feedback", { json: submission({ sentiment: 1 }), user: OWNER, config })).status).toBe(200);
  });

  it("cannot see a round trip of feedback_enabled that no check observed: the switch still stands", async () => {
    await callJson("/v1/feedback/status", { method: "PUT", json: { status: false }, config });
    // (feedback_enabled went to false and back to true, and nothing read the switch meanwhile.)
    expect((await callJson("/v1/feedback/status", { config })).body).toMatchObject({ status: { enabled: false } });
  });

  it("PUT without a status switches feedback off (the original default); bad bodies are 422", async () => {
    const { body } = await callJson<{ status: Json }>("/v1/feedback/status", { method: "PUT", json: {}, config });
    expect(body.status).toMatchObject({ previous_status: true, updated_status: false });
    for (const json of [{ status: "yes" }, { status: true, extra: 1 }]) {
      expect((await callJson("/v1/feedback/status", { method: "PUT", json, config })).status).toBe(422);
    }
  });

  it("refuses to switch feedback on where feedback_storage is not configured", async () => {
    const { status, body } = await callJson<ErrorBody>("/v1/feedback/status", { method: "PUT", json: { status: true }, config: noStorage });
    expect(status).toBe(409);
    expect(body.detail.cause).toMatch(/feedback_storage is not configured/);
    expect((await callJson("/v1/feedback/status", { config: noStorage })).body).toMatchObject({ status: { enabled: false } });
  });

  it("GET needs no authentication (UPSTREAM §8); PUT needs the admin action", async () => {
    const rules = testConfig({
      user_data_collection: { feedback_enabled: true, feedback_storage: STORAGE },
      authorization: { access_rules: [{ role: "*", actions: ["feedback"] }] },
    });
    expect((await callJson("/v1/feedback/status", { config: rules })).status).toBe(200);
    const put = await callJson<ErrorBody>("/v1/feedback/status", { method: "PUT", json: { status: false }, config: rules });
    expect(put.status).toBe(403);
    expect(put.body.detail.response).toBe("User does not have permission to access this endpoint");
    const withJwk = testConfig({
      user_data_collection: { feedback_enabled: true, feedback_storage: STORAGE },
      authentication: { module: "jwk-token", jwk_config: { url: "http://127.0.0.1:9/jwks.json" } },
    });
    expect((await call("/v1/feedback/status", { config: withJwk })).status).toBe(200);
    expect((await call("/v1/feedback/status", { method: "PUT", config: withJwk, json: { status: false } })).status).toBe(401);
  });
});
