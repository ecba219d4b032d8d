// The pure parts of feedback, transcripts and telemetry: object keys, the feedback request rules,
// the transcript record and the Splunk events, each in the shape UPSTREAM.md records.
import { describe, expect, it } from "vitest";
import { parseConfig } from "../../worker/config/load.ts";
import type { Config } from "../../worker/config/schema.ts";
import { FeedbackRequestSchema, feedbackRecord } from "../../worker/data/feedback.ts";
import { archiveEntryName, feedbackKey, storagePrefix, transcriptKey } from "../../worker/data/object-keys.ts";
import { inferEvent, responsesEvent, sanitizeUserAgent } from "../../worker/data/splunk.ts";
import { transcriptRecord, userIdHash, type TranscriptInput } from "../../worker/data/transcripts.ts";
import { SERVICE_VERSION } from "../../worker/version.ts";

const HEX48 = "0123456789abcdef".repeat(3);

function configOf(extra: Record<string, unknown> = {}): Config {
  const result = parseConfig(JSON.stringify({ name: "unit", inference_backend: { url: "http://127.0.0.1:1/v1" }, ...extra }), { HEC_TOKEN: "t" });
  if (!result.ok) throw new Error(JSON.stringify(result.problems));
  return result.config;
}

describe("object keys", () => {
  it("turns file system paths of the original system's configurations into key prefixes", () => {
    expect(storagePrefix("/tmp/data/feedback")).toBe("tmp/data/feedback");
    expect(storagePrefix("./data//transcripts/")).toBe("data/transcripts");
    expect(storagePrefix("/a/../../b/./c")).toBe("b/c");
    expect(storagePrefix("/")).toBe("");
  });

  it("lays objects out as SPEC says", () => {
    expect(feedbackKey("/tmp/data/feedback", "5b4e7e4a-1a2b-4c3d-8e9f-0a1b2c3d4e5f")).toBe("tmp/data/feedback/5b4e7e4a-1a2b-4c3d-8e9f-0a1b2c3d4e5f.json");
    expect(transcriptKey("transcripts", "ab".repeat(32), HEX48, "req-1")).toBe(`transcripts/${"ab".repeat(32)}/${HEX48}/req-1.json`);
    expect(transcriptKey("/", "u", "c", "r")).toBe("u/c/r.json");
  });

  it("refuses components that could leave their place", () => {
    for (const bad of ["..", "../x", "a/b", "", ".hidden", "a..b", "a b"]) {
      expect(() => transcriptKey("t", "user", bad, "r")).toThrow(/not usable in an object key/);
    }
  });

  it("names archive entries by kind and the key's own trailing segments", () => {
    expect(archiveEntryName("feedback", "tmp/data/feedback/x.json")).toBe("feedback/x.json");
    expect(archiveEntryName("transcript", "old/prefix/transcripts/u/c/r.json")).toBe("transcripts/u/c/r.json");
    expect(archiveEntryName("transcript", "u/c/r.json")).toBe("transcripts/u/c/r.json");
  });
});

describe("feedback request", () => {
  const base = { conversation_id: HEX48, user_question: "q?", llm_response: "a." };
  const parse = (body: Record<string, unknown>) => FeedbackRequestSchema.safeParse({ ...base, ...body });
  const messages = (body: Record<string, unknown>) => {
    const result = parse(body);
    return result.success ? [] : result.error.issues.map((issue) => issue.message);
  };

  it("needs at least one form of feedback", () => {
    const expected = "At least one form of feedback must be provided: 'sentiment', 'user_feedback', or 'categories'";
    expect(messages({})).toEqual([expected]);
    expect(messages({ sentiment: null, user_feedback: "   ", categories: [] })).toEqual([expected]);
    expect(parse({ sentiment: 1 }).success).toBe(true);
    expect(parse({ user_feedback: "good" }).success).toBe(true);
    expect(parse({ categories: ["other"] }).success).toBe(true);
  });

  it("takes sentiment -1 or 1 only", () => {
    expect(parse({ sentiment: -1 }).success).toBe(true);
    expect(messages({ sentiment: 0 })).toEqual(["Improper sentiment value of 0, needs to be -1 or 1"]);
    expect(messages({ sentiment: 2 })).toEqual(["Improper sentiment value of 2, needs to be -1 or 1"]);
  });

  it("limits user_feedback to 4096 characters", () => {
    expect(parse({ user_feedback: "x".repeat(4096) }).success).toBe(true);
    expect(parse({ user_feedback: "x".repeat(4097) }).success).toBe(false);
  });

  it("keeps categories from the fixed set, once each, in order; an empty list is none", () => {
    const result = parse({ sentiment: 1, categories: ["unsafe", "incorrect", "unsafe", "other"] });
    expect(result.success && result.data.categories).toEqual(["unsafe", "incorrect", "other"]);
    const empty = parse({ sentiment: 1, categories: [] });
    expect(empty.success && empty.data.categories).toBeNull();
    expect(parse({ categories: ["wrong"] }).success).toBe(false);
  });

  it("accepts the conversation id forms and stores the normalized one", () => {
    const prefixed = parse({ conversation_id: `conv_${HEX48}`, sentiment: 1 });
    expect(prefixed.success && prefixed.data.conversation_id).toBe(HEX48);
    const uuid = parse({ conversation_id: "123e4567-e89b-12d3-a456-426614174000", sentiment: 1 });
    expect(uuid.success && uuid.data.conversation_id).toBe("123e4567-e89b-12d3-a456-426614174000");
    expect(messages({ conversation_id: HEX48.slice(0, 41), sentiment: 1 })).toEqual([`Improper conversation ID ${HEX48.slice(0, 41)}`]);
  });

  it("refuses unknown fields", () => {
    expect(parse({ sentiment: 1, extra: true }).success).toBe(false);
  });

  it("builds the record in the original key order with nulls for what is missing", () => {
    const result = parse({ conversation_id: `conv_${HEX48}`, sentiment: -1 });
    if (!result.success) throw result.error;
    const record = feedbackRecord("user-1", result.data, new Date("2025-01-01T12:00:00.123Z"));
    expect(Object.keys(record)).toEqual(["user_id", "timestamp", "conversation_id", "user_question", "llm_response", "sentiment", "user_feedback", "categories"]);
    expect(record).toEqual({
      user_id: "user-1",
      timestamp: "2025-01-01T12:00:00.123Z",
      conversation_id: HEX48,
      user_question: "q?",
      llm_response: "a.",
      sentiment: -1,
      user_feedback: null,
      categories: null,
    });
  });
});

describe("transcript record", () => {
  const input: TranscriptInput = {
    requestId: "req-1",
    userId: "user-1",
    conversationId: HEX48,
    provider: "openai",
    model: "gpt-test",
    query: "What is OpenShift?",
    response: "A platform.",
    ragChunks: [{ content: "chunk", source: "docs", score: 0.5, attributes: { doc_url: "https://x", document_id: "d1" } }],
    toolCalls: [{ id: "c1", name: "file_search", args: { queries: ["q"] }, type: "tool_call" }],
    toolResults: [{ id: "c1", status: "success", content: "[]", type: "tool_result", round: 1 }],
    completedAt: "2025-01-01T12:00:00.5+02:00",
  };

  it("hashes the user id with SHA-256", async () => {
    expect(await userIdHash("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  });

  it("has SPEC's fields in the original key order, plus tool calls and results", async () => {
    const hash = await userIdHash("user-1");
    const record = transcriptRecord(input, hash);
    expect(Object.keys(record)).toEqual([
      "metadata",
      "redacted_query",
      "query_is_valid",
      "llm_response",
      "rag_chunks",
      "truncated",
      "attachments",
      "tool_calls",
      "tool_results",
    ]);
    expect(Object.keys(record.metadata)).toEqual(["provider", "model", "query_provider", "query_model", "user_id", "conversation_id", "timestamp"]);
    expect(record).toEqual({
      metadata: {
        provider: "openai",
        model: "gpt-test",
        query_provider: "openai",
        query_model: "gpt-test",
        user_id: hash,
        conversation_id: HEX48,
        timestamp: "2025-01-01T10:00:00.500Z",
      },
      redacted_query: "What is OpenShift?",
      query_is_valid: true,
      llm_response: "A platform.",
      rag_chunks: input.ragChunks,
      truncated: false,
      attachments: [],
      tool_calls: input.toolCalls,
      tool_results: input.toolResults,
    });
  });

  it("is the same on every attempt (the timestamp is the turn's, not the write's)", async () => {
    const hash = await userIdHash("user-1");
    expect(JSON.stringify(transcriptRecord(input, hash))).toBe(JSON.stringify(transcriptRecord({ ...input }, hash)));
  });

  it("refuses input that is not a turn", () => {
    expect(() => transcriptRecord({ ...input, completedAt: "yesterday" }, "h")).toThrow();
  });
});

describe("Splunk events", () => {
  const config = configOf({
    service: { base_url: "https://parley.example.com/api" },
    deployment_environment: "production",
    inference: { default_model: "granite", default_provider: "vllm" },
    splunk: { enabled: true, url: "https://splunk.example.com:8088/services/collector/event", token_path: "${env.HEC_TOKEN}", index: "rhel_lightspeed", source: "parley-test" },
  });
  const at = Date.UTC(2025, 0, 1, 12, 0, 0, 900);

  it("infer: the rlsapi fields, by outcome", () => {
    const data = {
      question: "  how do I list files?\n",
      inferenceTime: 1.25,
      requestId: "req-9",
      totalTokens: 42,
      identity: { orgId: "org-1", systemId: "sys-1" },
      userAgent: "command-line-assistant/0.3.0",
      systemInfo: { os: "RHEL", version: "9.4", arch: "x86_64" },
    };
    const completed = inferEvent(config, { ...data, outcome: { kind: "completed", text: "Use ls." } }, at);
    expect(completed).toEqual({
      time: 1735732800,
      host: "parley.example.com",
      source: `parley-test (v${SERVICE_VERSION})`,
      sourcetype: "infer_with_llm",
      index: "rhel_lightspeed",
      event: {
        question: "how do I list files?",
        refined_questions: [],
        context: "",
        response: "Use ls.",
        inference_time: 1.25,
        model: "granite",
        deployment: "production",
        org_id: "org-1",
        system_id: "sys-1",
        total_llm_tokens: 42,
        request_id: "req-9",
        cla_version: "command-line-assistant/0.3.0",
        system_os: "RHEL",
        system_version: "9.4",
        system_arch: "x86_64",
      },
    });
    const blocked = inferEvent(config, { ...data, outcome: { kind: "shield_blocked", refusal: "I cannot help with that." } }, at);
    expect(blocked.sourcetype).toBe("infer_shield_blocked");
    expect(blocked.event.response).toBe("I cannot help with that.");
    class APIConnectionError extends Error {
      override name = "APIConnectionError";
    }
    const failed = inferEvent(config, { ...data, identity: undefined, outcome: { kind: "error", error: new APIConnectionError("secret detail") } }, at);
    expect(failed.sourcetype).toBe("infer_error");
    expect(failed.event).toMatchObject({ response: "APIConnectionError", org_id: "auth_disabled", system_id: "auth_disabled" });
  });

  it("responses: the responses fields, by outcome", () => {
    const data = { inputText: "hello", conversationId: HEX48, inferenceTime: 0.5, model: "vllm/granite", totalTokens: 7, userAgent: "curl/8\r\nX-Evil: 1" };
    const completed = responsesEvent(config, { ...data, outcome: { kind: "completed", text: "hi" } }, at);
    expect(completed.sourcetype).toBe("responses_completed");
    expect(completed.event).toEqual({
      input_text: "hello",
      response_text: "hi",
      conversation_id: HEX48,
      inference_time: 0.5,
      model: "vllm/granite",
      deployment: "production",
      org_id: "auth_disabled",
      system_id: "auth_disabled",
      total_llm_tokens: 7,
      user_agent: "curl/8X-Evil: 1",
    });
    expect(responsesEvent(config, { ...data, outcome: { kind: "shield_blocked", refusal: "no" } }, at).sourcetype).toBe("responses_shield_blocked");
    const failed = responsesEvent(config, { ...data, userAgent: null, outcome: { kind: "error", error: new TypeError("x") } }, at);
    expect(failed.sourcetype).toBe("responses_error");
    expect(failed.event).toMatchObject({ response_text: "TypeError", user_agent: null });
  });

  it("cleans the user agent: no control characters, at most 128 characters, null when empty", () => {
    expect(sanitizeUserAgent("a\u0000b\tc\u007f")).toBe("abc");
    expect(sanitizeUserAgent("x".repeat(300))).toHaveLength(128);
    expect(sanitizeUserAgent("\r\n")).toBeNull();
    expect(sanitizeUserAgent(undefined)).toBeNull();
  });

  it("without service.base_url the host is 'parley'", () => {
    const plain = configOf({ splunk: { enabled: true, url: "https://s.example.com/services/collector/event", token_path: "${env.HEC_TOKEN}", index: "i" } });
    const event = responsesEvent(plain, { inputText: "", conversationId: HEX48, inferenceTime: 0, model: "m", totalTokens: 0, outcome: { kind: "completed", text: "" } }, at);
    expect(event.host).toBe("parley");
    expect(event.source).toBe(`lightspeed-stack (v${SERVICE_VERSION})`);
  });
});
