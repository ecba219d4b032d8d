// What official clients, existing configurations and the Responses schema expect of the gateway,
// through the Worker: model names of OpenAI-style backends, stored prompt versions, the models list
// during an outage, the complete Responses object, how failures after a stream began end it, and
// that a configured secret never reaches a client or a log line.
import { afterEach, describe, expect, inject, it, vi } from "vitest";
import { RESPONSE_KEYS } from "../../worker/routes/response-object.ts";
import { call, callJson, echoedRequest, isModelCall, openaiClient, readSse, testConfig, unlessSearch } from "./helpers.ts";

type Json = Record<string, unknown>;

const client = (config: string, user = "wire") => openaiClient({ config, user });

/** The requests a scripted backend received, newest last. */
async function backendRequests(baseUrl: string): Promise<Array<{ path: string; body: Json }>> {
  return (await (await fetch(`${baseUrl.replace(/\/v1$/, "")}/__requests`)).json()) as Array<{ path: string; body: Json }>;
}

describe("models of a backend whose ids carry no provider prefix", () => {
  const config = testConfig({ inference_backend: { url: inject("openaiStyleBackendUrl") } });

  it("lists them with the provider the backend reports", async () => {
    const { body } = await callJson<{ models: Json[] }>("/v1/models", { config });
    expect(body.models).toContainEqual(expect.objectContaining({ identifier: "parley-small", provider_id: "scripted", provider_resource_id: "parley-small", model_type: "llm" }));
  });

  it("resolves provider/model, echoes it, and sends the backend its own id", async () => {
    const response = await client(config).responses.create({ model: "scripted/parley-small", input: "prefixed" });
    expect(response.model).toBe("scripted/parley-small");
    expect(response.output_text).toBe("[user_turns=1] You said: prefixed");
    const sent = (await backendRequests(inject("openaiStyleBackendUrl"))).filter((request) => isModelCall(request.path)).at(-1);
    expect(sent?.body.model).toBe("parley-small");

    const query = await callJson<{ response: string }>("/v1/query", { json: { query: "by provider", model: "parley-large", provider: "scripted" }, config, user: "wire" });
    expect(query.status).toBe(200);
    expect((await callJson("/v1/responses", { json: { model: "other/parley-small", input: "x" }, config, user: "wire" })).status).toBe(404);
  });

  it("still prefers an exact id that contains a slash itself", async () => {
    // The Llama-Stack-style scripted backend lists "scripted/parley-small" as its whole id.
    const response = await client(testConfig()).responses.create({ model: "scripted/parley-small", input: "exact" });
    expect(response.model).toBe("scripted/parley-small");
    const sent = (await backendRequests(inject("backendUrl"))).filter((request) => isModelCall(request.path) && JSON.stringify(request.body).includes("exact")).at(-1);
    expect(sent?.body.model).toBe("scripted/parley-small");
  });
});

describe("stored prompt versions", () => {
  const config = testConfig();
  const create = async (text: string) =>
    (await callJson<{ prompt_id: string }>("/v1/prompts", { json: { prompt: text, variables: [] }, config, user: "wire" })).body.prompt_id;
  const answerWith = async (promptId: string) => {
    const response = await client(config).responses.create({ input: "#echo-request", prompt: { id: promptId } } as never);
    return echoedRequest(response.output_text);
  };

  it("an update becomes the default unless set_as_default is false", async () => {
    const id = await create("Version one.");
    expect((await callJson("/v1/prompts/" + id, { method: "PUT", json: { prompt: "Version two.", version: 1 }, config, user: "wire" })).status).toBe(200);
    expect((await answerWith(id)).instructions).toBe("Version two.");
    expect((await callJson("/v1/prompts/" + id, { method: "PUT", json: { prompt: "Version three.", version: 2, set_as_default: false }, config, user: "wire" })).status).toBe(200);
    expect((await answerWith(id)).instructions).toBe("Version two.");
  });

  it("refuses an update of a version that is not the current one with 400", async () => {
    const id = await create("Only.");
    await callJson("/v1/prompts/" + id, { method: "PUT", json: { prompt: "Second.", version: 1 }, config, user: "wire" });
    const stale = await callJson<{ detail: Json }>("/v1/prompts/" + id, { method: "PUT", json: { prompt: "Stale.", version: 1 }, config, user: "wire" });
    expect(stale.status).toBe(400);
    expect(stale.body.detail).toEqual({ response: expect.any(String), cause: expect.stringContaining("version 1") });
  });
});

describe("an outage of the backend", () => {
  const url = inject("outageBackendUrl");
  const outage = (down: boolean) => fetch(`${url.replace(/\/v1$/, "")}/__outage`, { method: "POST", body: JSON.stringify({ down }), headers: { "content-type": "application/json" } });
  afterEach(() => outage(false));

  it("turns /v1/models into 503 at once, as readiness says", async () => {
    const config = testConfig({ inference_backend: { url, max_retries: 0 } });
    expect((await callJson("/v1/models", { config })).status).toBe(200);
    await outage(true);
    const models = await callJson<{ detail: Json }>("/v1/models", { config });
    expect(models.status).toBe(503);
    expect(models.body.detail.response).toBe("Unable to connect to the inference backend");
    expect((await callJson("/readiness", { config })).status).toBe(503);
  });
});

describe("the Responses object", () => {
  const config = testConfig();
  const expectComplete = (object: Json) => {
    for (const key of RESPONSE_KEYS) expect(object, `missing ${key}`).toHaveProperty(key);
    expect(typeof object.id).toBe("string");
    expect(typeof object.created_at).toBe("number");
    expect(typeof object.presence_penalty).toBe("number");
    expect(typeof object.frequency_penalty).toBe("number");
    expect(typeof object.conversation).toBe("string");
    expect(Array.isArray(object.output)).toBe(true);
    expect(object.usage).toMatchObject({ input_tokens_details: { cached_tokens: expect.any(Number) }, output_tokens_details: { reasoning_tokens: expect.any(Number) } });
  };

  it("carries every field in JSON answers and in every stream event with a response", async () => {
    const tools = [{ type: "function", name: "lookup", parameters: { type: "object", properties: {} } }];
    const json = await callJson<Json>("/v1/responses", { json: { input: "complete?", tools }, config, user: "wire" });
    expectComplete(json.body);
    expect(json.body.tools).toEqual([{ type: "function", name: "lookup", parameters: { type: "object", properties: {} }, strict: null }]);

    const events = await readSse(await call("/v1/responses", { json: { input: "complete stream?", stream: true, tools }, config, user: "wire" }));
    const withResponse = events.map((event) => event.data as Json).filter((data) => typeof data === "object" && "response" in data);
    expect(withResponse.map((data) => data.type)).toEqual(["response.created", "response.in_progress", "response.completed"]);
    for (const data of withResponse) expectComplete(data.response as Json);
  });
});

describe("a failure after the stream began", () => {
  const config = testConfig();

  const streamOf = async (input: string) => (await readSse(await call("/v1/responses", { json: { input, stream: true }, config, user: "wire" }))).map((event) => event.data);

  it("ends a streamed response with response.failed, then [DONE]", async () => {
    const events = await streamOf("break #fail-midstream");
    expect(events.at(-1)).toBe("[DONE]");
    const failed = events.at(-2) as Json;
    expect(failed).toMatchObject({ type: "response.failed", response: { status: "failed", error: { code: "server_error", message: expect.any(String) } } });
    for (const event of events.filter((data): data is Json => typeof data === "object" && (data as Json).type === "error")) {
      expect(Object.keys(event).sort()).toEqual(["code", "message", "param", "sequence_number", "type"]);
    }
  });

  it("closes what the stream began as incomplete, and the failed response holds it", async () => {
    for (const input of ["partial #fail-midstream", "partial #drop"]) {
      const events = (await streamOf(input)).filter((data): data is Json => typeof data === "object");
      type ItemEvent = { item: Json; output_index: number };
      const added = events.filter((data) => data.type === "response.output_item.added") as ItemEvent[];
      const done = events.filter((data) => data.type === "response.output_item.done") as ItemEvent[];
      // Every item announced is done before the failure (a Chat Completions backend's search first:
      // Parley's own), the message with the text the deltas gave.
      const ids = (list: ItemEvent[]) => list.map((data) => [data.output_index, data.item.id]);
      expect(ids(done), input).toEqual(ids(added));
      expect(unlessSearch(done.map((data) => data.item)).length, input).toBe(1);
      const text = events.filter((data) => data.type === "response.output_text.delta").map((data) => data.delta).join("");
      expect(text, input).not.toBe("");
      expect(done.at(-1)!.item, input).toMatchObject({ type: "message", status: "incomplete", content: [{ type: "output_text", text }] });
      const failed = events.at(-1) as { type: string; response: { output: Json[]; output_text: string } };
      expect(failed.type, input).toBe("response.failed");
      expect(failed.response.output, input).toEqual(done.map((data) => data.item));
      expect(failed.response.output_text, input).toBe(text);
    }
  });

  it("reports a dropped connection as SPEC's 503, in streams and in JSON answers", async () => {
    const events = await streamOf("cut #drop");
    expect(events.at(-2)).toMatchObject({ type: "response.failed", response: { status: "failed", error: { code: "server_error", message: expect.stringContaining("Unable to connect to the inference backend") } } });
    const json = await callJson<{ detail: Json }>("/v1/query", { json: { query: "cut #drop" }, config, user: "wire" });
    expect(json.status).toBe(503);
    expect(json.body.detail.response).toBe("Unable to connect to the inference backend");
    const query = (await readSse(await call("/v1/streaming_query", { json: { query: "cut #drop" }, config, user: "wire" }))).map((event) => event.data as { event: string; data: Json });
    expect(query.at(-1)).toMatchObject({ event: "error", data: { status_code: 503, response: "Unable to connect to the inference backend" } });
  });

  it("lets the official client see the failure", async () => {
    const stream = client(config).responses.stream({ input: "break again #fail-midstream" } as never);
    await expect(stream.finalResponse()).rejects.toThrow();
  });
});

describe("configured secrets", () => {
  // The second is as short as the original's e2e configurations write it: shown nowhere either.
  it.each(["sk-wire-fidelity-configured-key-0123456789", "xyzzy"])("never reach a client or a log line, even when the backend echoes them (%s)", async (key) => {
    const config = testConfig({ inference_backend: { api_key: key } });
    const lines: string[] = [];
    for (const method of ["error", "warn", "log", "info"] as const) {
      vi.spyOn(console, method).mockImplementation((...parts: unknown[]) => void lines.push(parts.map(String).join(" ")));
    }
    const json = await call("/v1/query", { json: { query: "which key? #bad-key" }, config, user: "wire" });
    expect(json.status).toBe(500);
    const text = await json.text();
    expect(text).not.toContain(key);
    expect(text).toContain("[redacted]");
    const stream = await call("/v1/responses", { json: { input: "which key? #bad-key", stream: true }, config, user: "wire" });
    expect(await stream.text()).not.toContain(key);
    // The backend did receive the key it was given.
    expect(JSON.stringify(await backendRequests(inject("backendUrl")))).toContain(key);
    expect(lines.join("\n")).not.toContain(key);
    vi.restoreAllMocks();
  });
});

describe("configurations written for the original system", () => {
  it("grant interrupt with streaming_query", async () => {
    const config = testConfig({ authorization: { access_rules: [{ role: "*", actions: ["streaming_query"] }] } });
    const interrupt = await callJson<{ detail: Json }>("/v1/streaming_query/interrupt", { json: { request_id: crypto.randomUUID() }, config, user: "wire" });
    expect(interrupt.status).toBe(404);
    expect(interrupt.body.detail.response).toBe("Streaming Request not found");
  });

  it("grant model_override in lower case, as the original system writes it", async () => {
    const rules = (actions: string[]) => testConfig({ authorization: { access_rules: [{ role: "*", actions: ["query", ...actions] }] } });
    const body = { query: "override", model: "parley-large", provider: "scripted" };
    expect((await callJson("/v1/query", { json: body, config: rules([]), user: "wire" })).status).toBe(403);
    expect((await callJson("/v1/query", { json: body, config: rules(["model_override"]), user: "wire" })).status).toBe(200);
    expect((await callJson("/v1/query", { json: body, config: rules(["MODEL_OVERRIDE"]), user: "wire" })).status).toBe(200);
  });

  it("count as a model override on /v1/responses only a provider/model, not the bare model every OpenAI client sends", async () => {
    const config = testConfig({ authorization: { access_rules: [{ role: "*", actions: ["responses"] }] } });
    const bare = await callJson<{ model: string }>("/v1/responses", { json: { input: "override?", model: "parley-large" }, config, user: "wire" });
    expect([bare.status, bare.body.model]).toEqual([200, "parley-large"]);
    const qualified = await callJson<{ detail: Json }>("/v1/responses", { json: { input: "override?", model: "scripted/parley-large" }, config, user: "wire" });
    expect([qualified.status, qualified.body.detail.response]).toEqual([403, "This instance does not permit overriding model/provider in the query request (missing permission: model_override). Please remove the model and provider fields from your request."]);
  });

  it("read an empty list of access rules as no authorization, under every module", async () => {
    const config = testConfig({ authorization: { access_rules: [] } });
    expect((await callJson("/v1/query", { json: { query: "open?" }, config, user: "wire" })).status).toBe(200);
    expect((await callJson("/v1/models", { config, user: "wire" })).status).toBe(200);
  });
});

describe("a turn blocked by a shield", () => {
  it("reports the quotas left like any other turn", async () => {
    const config = testConfig({
      shields: [{ name: "guard" }],
      quota_handlers: { limiters: [{ type: "user_limiter", name: "daily", initial_quota: 1000, quota_increase: 0, period: "1 day" }] },
    });
    const blocked = await callJson<{ available_quotas: Record<string, number> }>("/v1/query", { json: { query: "#unsafe please" }, config, user: "wire-shield" });
    expect(blocked.status).toBe(200);
    expect(blocked.body.available_quotas).toEqual({ daily: 1000 });
  });
});
