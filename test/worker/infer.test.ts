// POST /v1/infer (rlsapi v1) through the Worker: the prompt built from the question and the
// terminal's context, the templated system prompt, verbose metadata, quotas by quota_subject, the
// errors of SPEC, its transcript and its Splunk event. Nothing of it is kept as a conversation.
import { createExecutionContext, waitOnExecutionContext } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, inject, it } from "vitest";
import worker from "../../worker/index.ts";
import { callJson, echoedRequest, eventually, testConfig } from "./helpers.ts";
import { storedTranscripts } from "./data-helpers.ts";

type InferBody = {
  data: { text: string; request_id: string; tool_calls?: unknown[]; input_tokens?: number; output_tokens?: number; rag_chunks?: unknown[] };
  detail?: { response: string; cause: string };
};

const infer = (json: unknown, options: { config?: string; user?: string } = {}) => callJson<InferBody>("/v1/infer", { user: "cli-user", ...options, json });
const echoed = (body: InferBody) => echoedRequest(body.data.text);

describe("POST /v1/infer", () => {
  it("answers with the question and the terminal's context joined, under the templated system prompt", async () => {
    const config = testConfig({ customization: { system_prompt: "Help on {{ os }} {{version}} ({{ arch }}), today is {{ date }}.{{ unknown }}" } });
    const { status, body } = await infer(
      {
        question: "  why does it fail? #echo-request  ",
        context: {
          stdin: "stdin text",
          attachments: { contents: "file text", mimetype: "text/plain" },
          terminal: { output: "terminal text" },
          systeminfo: { os: "RHEL", version: "9.4", arch: "x86_64", id: "machine-1" },
        },
      },
      { config },
    );
    expect(status).toBe(200);
    expect(body.data.request_id).toMatch(/^[0-9a-f-]{36}$/);
    const sent = echoed(body);
    expect(JSON.stringify(sent.input)).toContain("why does it fail? #echo-request\\n\\nstdin text\\n\\nfile text\\n\\nterminal text");
    expect(sent.instructions).toMatch(/^Help on RHEL 9\.4 \(x86_64\), today is [A-Z][a-z]+ \d\d, \d{4}\.$/);
    // Only the fields SPEC names: no metadata unless allowed and asked.
    expect(Object.keys(body.data).sort()).toEqual(["request_id", "text"]);

    // A Jinja2 template, as in the original: blocks and filters are rendered, not sent as written.
    const jinja = testConfig({ customization: { system_prompt: "On {{ os | lower }}{% if arch == 'x86_64' %} (64-bit){% else %} (other){% endif %}." } });
    const rendered = await infer({ question: "#echo-request which?", context: { systeminfo: { os: "RHEL", version: "9.4", arch: "x86_64" } } }, { config: jinja });
    expect(echoed(rendered.body).instructions).toBe("On rhel (64-bit).");
    // One that is not a template is UPSTREAM's 500.
    const broken = testConfig({ customization: { system_prompt: "On {% if %}" } });
    const refused = await infer({ question: "which?" }, { config: broken });
    expect(refused.status).toBe(500);
    expect((refused.body as unknown as { detail: { response: string } }).detail.response).toBe("Internal server error");
  });

  it("adds tool calls, chunks and tokens only when allow_verbose_infer and include_metadata both say so", async () => {
    const verbose = testConfig({ rlsapi_v1: { allow_verbose_infer: true } });
    const asked = await infer({ question: "hi", include_metadata: true }, { config: verbose });
    expect(asked.body.data).toMatchObject({ tool_calls: [], rag_chunks: [], input_tokens: expect.any(Number), output_tokens: expect.any(Number) });
    const notAllowed = await infer({ question: "hi", include_metadata: true });
    expect(notAllowed.body.data.input_tokens).toBeUndefined();
  });

  it("refuses bad input with 422 and an over-long question with 413", async () => {
    expect((await infer({ question: "   " })).body.detail!.cause).toContain("Question cannot be empty or whitespace-only");
    expect((await infer({ question: "x".repeat(32_769) })).status).toBe(422);
    expect((await infer({ question: "x", context: { systeminfo: { os: "RHEL; rm -rf /" } } })).status).toBe(422);
    expect((await infer({ question: "x", extra: 1 })).status).toBe(422);
    expect((await infer({ question: "x", context: { stdin: "y".repeat(65_537) } })).status).toBe(422);
    const small = testConfig({ inference: { context_windows: { "scripted/parley-small": 10 } } });
    const tooLong = await infer({ question: "a long question ".repeat(20) }, { config: small });
    expect(tooLong.status).toBe(413);
    expect(tooLong.body.detail!.response).toBe("Prompt is too long");
  });

  it("maps backend failures: 503 unreachable, 429 rate limit, 413 context length", async () => {
    // UPSTREAM's words for a backend's rate limit on this endpoint.
    expect(await infer({ question: "x #rate-limit" })).toEqual({
      status: 429,
      body: { detail: { response: "The quota has been exceeded", cause: "Rate limit exceeded, please try again later" } },
    });
    expect((await infer({ question: "x #context-too-long" })).status).toBe(413);
    const down = testConfig({ inference_backend: { url: "http://127.0.0.1:9/v1", max_retries: 0 } });
    expect((await infer({ question: "x" }, { config: down })).status).toBe(503);
    // No language model to answer with: UPSTREAM's 503 on this endpoint (the query endpoints answer 404).
    // (Written out whole: the Chat Completions project's testConfig adds a provider of its own.)
    const embeddingsOnly = JSON.stringify({
      name: "no language model",
      inference_backend: { url: inject("backendUrl") },
      authentication: { module: "noop" },
      inference: { providers: [{ type: "scripted", allowed_models: ["parley-embed"] }] },
    });
    expect(await infer({ question: "x" }, { config: embeddingsOnly })).toEqual({
      status: 503,
      body: { detail: { response: "Unable to connect to inference service", cause: "No LLM model found in available models" } },
    });
    expect((await callJson("/v1/query", { json: { query: "x" }, config: embeddingsOnly })).status).toBe(404);
  });

  it("draws on quotas only when rlsapi_v1.quota_subject names whose", async () => {
    const limiter = { name: "daily", type: "user_limiter", initial_quota: 5, quota_increase: 0, period: "1 day" };
    const none = testConfig({ quota_handlers: { limiters: [limiter] } });
    const user = `infer-${crypto.randomUUID().slice(0, 8)}`;
    for (let i = 0; i < 3; i++) expect((await infer({ question: "a question that costs tokens" }, { config: none, user })).status).toBe(200);
    const byUser = testConfig({ quota_handlers: { limiters: [{ ...limiter, initial_quota: 40 }] }, rlsapi_v1: { quota_subject: "user_id" } });
    const first = await infer({ question: "a question that costs tokens" }, { config: byUser, user });
    expect(first.status).toBe(200);
    await eventually(async () => expect((await infer({ question: "again" }, { config: byUser, user })).status).toBe(429));
    // The quota is checked before the model is chosen and the input measured against it (UPSTREAM's order).
    const byUserSmall = testConfig({
      quota_handlers: { limiters: [{ ...limiter, initial_quota: 40 }] },
      rlsapi_v1: { quota_subject: "user_id" },
      inference: { context_windows: { "scripted/parley-small": 10 } },
    });
    const exhausted = await infer({ question: "a long question ".repeat(20) }, { config: byUserSmall, user });
    expect(exhausted.status).toBe(429);
    expect(exhausted.body.detail!.response).toBe("The quota has been exceeded");
  });

  it("writes a transcript under its request id, and sends the infer Splunk event", async () => {
    const hec = inject("hec");
    const tenant = `infer-${crypto.randomUUID().slice(0, 8)}`;
    const storage = "/tmp/data/infer";
    const config = testConfig({
      user_data_collection: { transcripts_enabled: true, transcripts_storage: storage },
      splunk: { enabled: true, url: `${hec.url}/${tenant}/services/collector/event`, token_path: "${env.HEC_INFER_TOKEN}", index: "cli" },
    });
    const ctx = createExecutionContext();
    const request = new Request("http://parley.test/v1/infer?user_id=cli-transcripts", {
      method: "POST",
      headers: { "Content-Type": "application/json", "User-Agent": "command-line-assistant/0.2" },
      body: JSON.stringify({ question: "what is a pod?", context: { systeminfo: { os: "RHEL", version: "9", arch: "aarch64" } } }),
    });
    const response = await worker.fetch(request, { ...env, PARLEY_CONFIG: config, HEC_INFER_TOKEN: hec.token } as Env, ctx);
    const body = await response.json<InferBody>();
    await waitOnExecutionContext(ctx);
    const id = body.data.request_id;
    const transcripts = await storedTranscripts(storage, "cli-transcripts", id);
    expect([...transcripts.keys()]).toEqual([expect.stringContaining(`/${id}/${id}.json`)]);
    const events = await (await fetch(`${hec.url}/__events/${tenant}`)).json<Array<{ sourcetype: string; event: Record<string, unknown> }>>();
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({
      sourcetype: "infer_with_llm",
      event: { question: "what is a pod?", request_id: id, cla_version: "command-line-assistant/0.2", system_os: "RHEL", system_arch: "aarch64", org_id: "auth_disabled" },
    });
  });

  it("is refused without the rlsapi_v1_infer action", async () => {
    const config = testConfig({
      authorization: { access_rules: [{ role: "*", actions: ["query"] }] },
    });
    expect((await infer({ question: "x" }, { config })).status).toBe(403);
  });
});
