// Inference providers (worker/backends/providers.ts, provider-models.ts): the configuration keys
// under `extra`, the backends built from them, model listing with health, and routing, against
// scripted backends (one of them a chat-only server, one address with nothing listening).
import { createServer } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callModel } from "../../worker/backends/model-call.ts";
import { listProviderModels, probeProviders } from "../../worker/backends/provider-models.ts";
import { apiBackend, buildBackends, notServed, routeModel, unservedApiError, type Backends } from "../../worker/backends/providers.ts";
import { parseConfig } from "../../worker/config/load.ts";
import type { Config } from "../../worker/config/schema.ts";
import { ApiError } from "../../worker/errors.ts";
import { backendError } from "../../worker/turn/backend-errors.ts";
import { collect } from "../../worker/turn/collect.ts";
import { listenOn } from "../fakes/listen.ts";
import { startScriptedBackend, type ScriptedBackend } from "../fakes/scripted-backend.ts";

/** Nothing listens on the discard port: a provider that is down. */
const DOWN_URL = "http://127.0.0.1:9/v1";

let main: ScriptedBackend;
let ollama: ScriptedBackend;

beforeAll(async () => {
  main = await startScriptedBackend();
  // Lists models as Ollama does (bare ids, owned_by) and serves nothing but chat.
  ollama = await startScriptedBackend({ chatOnly: true, modelStyle: "openai", rejectStreamOptions: true });
});
afterAll(async () => {
  await Promise.all([main.close(), ollama.close()]);
});

function parse(document: Record<string, unknown>): { ok: true; config: Config } | { ok: false; problems: Array<{ path: string; message: string }> } {
  const parsed = parseConfig(JSON.stringify({ inference_backend: { url: main.url, max_retries: 0 }, ...document }), {});
  return parsed.ok ? { ok: true, config: parsed.config } : parsed;
}

function problemsOf(document: Record<string, unknown>, env: Record<string, unknown> = {}): Array<{ path: string; message: string }> {
  const parsed = parse(document);
  if (!parsed.ok) return parsed.problems;
  const built = buildBackends(parsed.config, env);
  return built.ok ? [] : built.problems;
}

function backendsOf(document: Record<string, unknown>, env: Record<string, unknown> = {}): Backends {
  const parsed = parse(document);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  const built = buildBackends(parsed.config, env);
  if (!built.ok) throw new Error(JSON.stringify(built.problems));
  return built.backends;
}

const providers = (...entries: unknown[]) => ({ inference: { providers: entries } });

describe("configuration", () => {
  it("validates the keys Parley reads under extra, naming the key", () => {
    const cases: Array<[unknown, string, RegExp]> = [
      [{ type: "x", extra: { url: "ftp://nope" } }, "inference.providers.0.extra.url", /http or https/],
      [{ type: "x", extra: { url: main.url, wire: "grpc" } }, "inference.providers.0.extra.wire", /responses|chat/],
      [{ type: "x", extra: { url: main.url, stream_usage: false } }, "inference.providers.0.extra.stream_usage", /only used with wire "chat"/],
      [{ type: "x", extra: { serves: ["moderations"] } }, "inference.providers.0.extra.serves", /requires url/],
      [{ type: "x", extra: { url: main.url, serves: ["embeddings"] } }, "inference.providers.0.extra.serves.0", /moderations/],
      [{ type: "x", extra: { url: main.url, timeout: -1 } }, "inference.providers.0.extra.timeout", /.+/],
      [{ type: "inference_backend", extra: { url: main.url } }, "inference.providers.0.type", /names the default backend/],
    ];
    for (const [entry, path, message] of cases) {
      const problems = problemsOf(providers(entry));
      expect(problems.map((problem) => problem.path), JSON.stringify(entry)).toContain(path);
      expect(problems.find((problem) => problem.path === path)!.message).toMatch(message);
    }
  });

  it("refuses two providers claiming one id or one API, and stores apart from their files", () => {
    expect(problemsOf(providers({ type: "a", extra: { url: main.url } }, { type: "a", extra: { url: ollama.url } }))).toEqual([
      { path: "inference.providers.1.type", message: 'duplicate provider "a": a provider with its own url needs a type of its own' },
    ]);
    expect(problemsOf(providers({ type: "a", extra: { url: main.url, serves: ["moderations"] } }, { type: "b", extra: { url: ollama.url, serves: ["moderations"] } }))[0]).toEqual({
      path: "inference.providers.1.extra.serves",
      message: '"moderations" is already served by provider "a"',
    });
    expect(problemsOf(providers({ type: "a", extra: { url: main.url, serves: ["vector_stores"] } }, { type: "b", extra: { url: ollama.url, serves: ["files"] } }))[0]!.path).toBe(
      "inference.providers.1.extra.serves",
    );
    // Providers without a url may share a type, as before.
    expect(problemsOf(providers({ type: "a", allowed_models: ["x"] }, { type: "a" }))).toEqual([]);
  });

  it("reads each key from the Worker secret api_key_env names, and fails the load when it is unset", () => {
    expect(problemsOf(providers({ type: "openai", api_key_env: "OPENAI_KEY", extra: { url: ollama.url } }))).toEqual([
      { path: "inference.providers.0.api_key_env", message: "environment variable OPENAI_KEY is not set" },
    ]);
    const parsed = parse(providers({ type: "openai", api_key_env: "OPENAI_KEY", extra: { url: ollama.url } }));
    if (!parsed.ok) throw new Error("expected the document to parse");
    const built = buildBackends(parsed.config, { OPENAI_KEY: "sk-provider-key-0123456789" });
    if (!built.ok) throw new Error("expected the backends to build");
    expect(built.secrets).toEqual(["sk-provider-key-0123456789"]);
    expect(built.backends.all[1]!.client.apiKey).toBe("sk-provider-key-0123456789");
    expect(built.backends.default.client.apiKey).toBe("not-needed");
  });

  it("refuses at load what needs an API no backend serves: shields and knowledge stores on a chat-only default", () => {
    const chatDefault = { type: "ollama", extra: { url: main.url, wire: "chat" } };
    expect(problemsOf({ ...providers(chatDefault), shields: [{ name: "guard" }] })).toEqual([
      { path: "shields", message: expect.stringMatching(/no backend serves one: inference_backend speaks Chat Completions \(provider "ollama"\); list "moderations" under extra.serves/) },
    ]);
    expect(problemsOf({ ...providers(chatDefault), byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/x" }], rag: { inline: ["docs"] } })[0]!.path).toBe("rag");
    // Served by another provider, or by one the shield names: fine.
    expect(problemsOf({ ...providers(chatDefault, { type: "openai", extra: { url: ollama.url, serves: ["moderations"] } }), shields: [{ name: "guard" }] })).toEqual([]);
    expect(problemsOf({ ...providers(chatDefault, { type: "openai", extra: { url: ollama.url } }), shields: [{ name: "guard", provider_id: "openai" }] })).toEqual([]);
  });

  it("warns about extra keys that do nothing, and api_key_env on a provider without a url", () => {
    const parsed = parse(providers({ type: "openai", api_key_env: "K", extra: { organization: "acme", api_key: "sk-inline" } }));
    if (!parsed.ok) throw new Error("expected the document to parse");
    const built = buildBackends(parsed.config, {});
    expect(built.ok && built.warnings).toEqual([
      'inference.providers.0.extra: organization, api_key have no effect (README "Providers")',
      "inference.providers.0.api_key_env has no effect: the provider has no url of its own, inference_backend.api_key is used",
    ]);
  });

  it("treats a provider at inference_backend's url as that backend, and refuses two keys for it", () => {
    const backends = backendsOf(providers({ type: "scripted", extra: { url: `${main.url}/`, wire: "chat", stream_usage: false, timeout: 30 } }));
    expect(backends.all).toHaveLength(1);
    expect(backends.default).toMatchObject({ id: "scripted", isDefault: true, wire: "chat", includeUsage: false, timeoutMs: 30_000 });
    expect(problemsOf({ inference_backend: { url: main.url, api_key: "k1" }, ...providers({ type: "s", api_key_env: "K2", extra: { url: main.url } }) }, { K2: "k2" })[0]!.message).toMatch(/give the key once/);
  });
});

describe("backends and routing", () => {
  const mixed = () =>
    backendsOf(
      providers(
        { type: "ollama", allowed_models: ["parley-small"], extra: { url: ollama.url, wire: "chat", stream_usage: false, timeout: 20 } },
        { type: "scripted", extra: { wire: "chat" } },
      ),
    );

  it("keeps inference_backend alone as one Responses backend serving every API", () => {
    const backends = backendsOf({});
    expect(backends.all.map((backend) => [backend.id, backend.wire, backend.isDefault])).toEqual([["inference_backend", "responses", true]]);
    expect(backends.apis).toEqual({ moderations: backends.default, vector_stores: backends.default, files: backends.default });
    expect(routeModel(backends, { identifier: "scripted/parley-small", provider_id: "scripted", provider_resource_id: "parley-small" })).toMatchObject({
      backend: backends.default,
      model: "scripted/parley-small",
      wire: "responses",
    });
  });

  it("takes the original system's backend section and bare server URL (no /v1) as they are written", async () => {
    const server = main.url.replace(/\/v1$/, "");
    const parsed = parseConfig(JSON.stringify({ llama_stack: { url: server, use_as_library_client: false } }), {});
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
    const built = buildBackends(parsed.config, {});
    if (!built.ok) throw new Error(JSON.stringify(built.problems));
    expect(built.backends.default.url).toBe(main.url);
    expect((await built.backends.default.client.models.list()).data.map((model) => model.id)).toContain("scripted/parley-small");
    // A URL with a path of its own is the API's base as given.
    expect(backendsOf({ inference_backend: { url: `${server}/openai/v1/` } }).default.url).toBe(`${server}/openai/v1`);
  });

  it("routes a provider's models to its own endpoint by their bare id, others to the default", async () => {
    const backends = mixed();
    const { models } = await listProviderModels(backends);
    expect(models.map((model) => model.identifier)).toEqual(["scripted/parley-small", "scripted/parley-large", "scripted/parley-embed", "ollama/parley-small"]);
    const own = models.find((model) => model.identifier === "ollama/parley-small")!;
    expect(own).toMatchObject({ provider_id: "ollama", provider_resource_id: "parley-small", model_type: "llm" });
    expect(routeModel(backends, own)).toMatchObject({ backend: { id: "ollama" }, model: "parley-small", wire: "chat", includeUsage: false, timeoutMs: 20_000 });
    // A provider without a url chooses the wire its models are called with on the default backend.
    expect(routeModel(backends, models[0]!)).toMatchObject({ backend: { id: "inference_backend" }, model: "scripted/parley-small", wire: "chat", includeUsage: true });
  });

  it("sends moderations, vector stores and files to the provider that serves them, or says none does", () => {
    const backends = mixed();
    expect(apiBackend(backends, "moderations").id).toBe("inference_backend");
    expect(apiBackend(backends, "moderations", "ollama").id).toBe("ollama");
    const chatDefault = backendsOf(providers({ type: "ollama", extra: { url: main.url, wire: "chat" } }, { type: "kb", extra: { url: ollama.url, serves: ["vector_stores"] } }));
    expect(apiBackend(chatDefault, "vector_stores").id).toBe("kb");
    expect(apiBackend(chatDefault, "files").id).toBe("kb");
    const refused = (() => {
      try {
        apiBackend(chatDefault, "moderations");
      } catch (error) {
        return error;
      }
    })();
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ status: 501, cause: 'No configured provider serves moderations: list "moderations" under extra.serves of a provider that has them' });
    expect(notServed("files").status).toBe(501);
  });

  it("turns a backend without the API into a clear 501, not a 500", async () => {
    const backends = backendsOf(providers({ type: "ollama", extra: { url: ollama.url, wire: "chat", serves: ["moderations"] } }));
    const moderations = apiBackend(backends, "moderations");
    const failure = await moderations.client.moderations.create({ input: "x" }, { maxRetries: 0 }).catch((error: unknown) => error);
    expect(unservedApiError(failure, "moderations", moderations)).toMatchObject({ status: 501, cause: expect.stringContaining('Provider "ollama" does not serve moderations (it answered 404)') });
    // A missing store is a missing store, not a missing API.
    const missing = await backendsOf({}).default.client.vectorStores.retrieve("vs_nope", { maxRetries: 0 }).catch((error: unknown) => error);
    expect(unservedApiError(missing, "vector_stores", backendsOf({}).default)).toBeNull();
  });
});

describe("several providers, one down", () => {
  const config = () =>
    providers(
      { type: "ollama", extra: { url: ollama.url, wire: "chat", stream_usage: false } },
      { type: "remote", extra: { url: DOWN_URL, wire: "chat" } },
    );

  it("lists the models of the providers that answer and says which one is down", async () => {
    const listing = await listProviderModels(backendsOf(config()));
    expect(listing.models.map((model) => model.identifier)).toEqual([
      "scripted/parley-small",
      "scripted/parley-large",
      "scripted/parley-embed",
      "ollama/parley-small",
      "ollama/parley-large",
      "ollama/parley-embed",
    ]);
    expect(listing.providers.map((provider) => [provider.backend.id, provider.cause])).toEqual([
      ["inference_backend", null],
      ["ollama", null],
      ["remote", "Connection error while trying to reach backend service."],
    ]);
    expect(await probeProviders(backendsOf(config()))).toEqual([
      { provider_id: "inference_backend", status: "ok", message: "Responses backend reachable, 3 models" },
      { provider_id: "ollama", status: "ok", message: "Chat Completions backend reachable, 3 models" },
      { provider_id: "remote", status: "error", message: "Connection error while trying to reach backend service." },
    ]);
  });

  it("fails only the down provider's models; the others still answer", async () => {
    const backends = backendsOf(config());
    const answer = async (identifier: string, streaming: boolean) => {
      const [provider, ...rest] = identifier.split("/");
      const route = routeModel(backends, { identifier, provider_id: provider!, provider_resource_id: rest.join("/") });
      const stream = await callModel(backends, route, { model: identifier, input: "hello" }, streaming, { signal: new AbortController().signal });
      return collect(stream, new AbortController().signal, async () => undefined);
    };
    for (const streaming of [true, false]) {
      expect((await answer("ollama/parley-small", streaming)).text).toBe("[user_turns=1] You said: hello");
      expect((await answer("scripted/parley-small", streaming)).text).toBe("[user_turns=1] You said: hello");
      const down = await answer("remote/parley-small", streaming).catch((error: unknown) => backendError(error));
      expect(down).toMatchObject({ status: 503, response: "Unable to connect to the inference backend" });
    }
  });

  it("remembers a failed provider for a few seconds when there are others, never when it is alone", async () => {
    const flaky = await startScriptedBackend();
    const outage = (down: boolean) => fetch(flaky.url.replace(/\/v1$/, "/__outage"), { method: "POST", body: JSON.stringify({ down }) });
    try {
      const several = backendsOf(providers({ type: "flaky", extra: { url: flaky.url } }));
      const alone = backendsOf({ inference_backend: { url: flaky.url, max_retries: 0 } });
      await outage(true);
      expect((await listProviderModels(several)).providers[1]!.cause).toBe("Connection error while trying to reach backend service.");
      expect((await listProviderModels(alone)).providers[0]!.cause).not.toBeNull();
      await outage(false);
      const remembered = (await listProviderModels(several)).providers[1]!;
      expect(remembered.cause).toBe("Connection error while trying to reach backend service.");
      expect(backendError(remembered.error)).toMatchObject({ status: 503 });
      expect((await listProviderModels(several, { fresh: true })).providers[1]!.cause).toBeNull();
      expect((await listProviderModels(alone)).providers[0]!.cause).toBeNull();
    } finally {
      await flaky.close();
    }
  });

  it("with one backend down and nothing else, lists nothing and keeps the failure to map as before", async () => {
    const backends = backendsOf({ inference_backend: { url: DOWN_URL, max_retries: 0 } });
    const listing = await listProviderModels(backends);
    expect(listing.models).toEqual([]);
    expect(backendError(listing.providers[0]!.error)).toMatchObject({ status: 503 });
  });
});

/** A server that answers every request with `body` (200) as the content type given. */
async function answeringServer(type: string, body: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((_, res) => res.writeHead(200, { "content-type": type }).end(body));
  const port = await listenOn(server);
  return { url: `http://127.0.0.1:${port}/v1`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

describe("a provider whose model list cannot be read", () => {
  it.each([
    ["a page that is not JSON", "text/html", "<html>sign in</html>", "the inference backend's model list could not be read: Invalid input: expected object, received string"],
    ["no list", "application/json", '{"data":null}', "the inference backend's model list could not be read at data: Invalid input: expected array, received null"],
    ["entries without ids", "application/json", '{"data":[{"object":"model"}]}', "the inference backend's model list could not be read at data.0.id: Invalid input: expected string, received undefined"],
  ])("says so (%s) instead of listing no models, alone or beside others", async (_, type, body, cause) => {
    const server = await answeringServer(type, body);
    try {
      const alone = await listProviderModels(backendsOf({ inference_backend: { url: server.url, max_retries: 0 } }));
      expect(alone.providers[0]!.cause).toBe(cause);
      // A turn's model choice then fails with SPEC's 500 and that cause, not "Model not found".
      expect(backendError(alone.providers[0]!.error)).toMatchObject({ status: 500, cause });
      const several = backendsOf(providers({ type: "odd", extra: { url: server.url } }));
      expect((await listProviderModels(several)).providers[1]!.cause).toBe(cause);
      // Remembered for a while beside the others, as the kind of failure it was.
      expect(backendError((await listProviderModels(several)).providers[1]!.error)).toMatchObject({ status: 500, cause });
    } finally {
      await server.close();
    }
  });
});

describe("a streamed call answered with a body that holds no event", () => {
  it.each(["responses", "chat"])("is refused in the %s wire, not read as an empty answer", async (wire) => {
    const server = await answeringServer("text/plain", "hello");
    try {
      const backends = backendsOf(providers({ type: "plain", extra: { url: server.url, wire } }));
      const route = routeModel(backends, { identifier: "plain/m", provider_id: "plain", provider_resource_id: "m" });
      const stream = await callModel(backends, route, { model: "plain/m", input: "hello" }, true, { signal: new AbortController().signal });
      const collected = await collect(stream, new AbortController().signal, async () => undefined);
      expect(collected.status).toBe("failed");
      expect(collected.error).toMatchObject({ status: 500, cause: "the inference backend's stream ended without any event" });
    } finally {
      await server.close();
    }
  });
});

// The configurations of README "Providers" (recipes), exactly as printed there: each must load.
const RECIPES: Record<string, string> = {
  openai: `
inference_backend:
  url: https://api.openai.com/v1
inference:
  default_provider: openai
  default_model: gpt-4o-mini
  providers:
    - type: openai
      api_key_env: OPENAI_API_KEY
      allowed_models: [gpt-4o-mini, gpt-4o]
      extra:
        url: https://api.openai.com/v1
`,
  ollama: `
inference_backend:
  url: http://127.0.0.1:11434/v1
inference:
  default_provider: ollama
  default_model: llama3.2:latest
  providers:
    - type: ollama
      extra:
        url: http://127.0.0.1:11434/v1
        wire: chat
`,
  vllm: `
inference_backend:
  url: http://127.0.0.1:8000/v1
inference:
  default_provider: vllm
  default_model: meta-llama/Llama-3.1-8B-Instruct
  providers:
    - type: vllm
      extra:
        url: http://127.0.0.1:8000/v1
        wire: chat
`,
  llamaStack: `
inference_backend:
  url: http://127.0.0.1:8321/v1
inference:
  default_provider: ollama
  default_model: llama3.2:3b
`,
  mixed: `
inference_backend:
  url: http://127.0.0.1:11434/v1
inference:
  default_provider: ollama
  default_model: llama3.2:latest
  providers:
    - type: ollama
      extra:
        url: http://127.0.0.1:11434/v1
        wire: chat
    - type: openai
      api_key_env: OPENAI_API_KEY
      allowed_models: [gpt-4o-mini]
      extra:
        url: https://api.openai.com/v1
        serves: [moderations]
shields:
  - name: moderation
    model: omni-moderation-latest
`,
};

describe("the README recipes", () => {
  const build = (name: string) => {
    const parsed = parseConfig(`name: Parley\nauthentication:\n  module: noop\n${RECIPES[name]}`, {});
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
    const built = buildBackends(parsed.config, { OPENAI_API_KEY: "sk-recipe-key-0123456789" });
    if (!built.ok) throw new Error(JSON.stringify(built.problems));
    expect(built.warnings).toEqual([]);
    return built.backends;
  };
  const summary = (backends: Backends) => ({
    backends: backends.all.map((backend) => `${backend.id} ${backend.wire} ${backend.url}`),
    apis: Object.fromEntries(Object.entries(backends.apis).map(([api, backend]) => [api, backend?.id ?? null])),
  });

  it("load as documented", () => {
    expect(summary(build("openai"))).toEqual({ backends: ["openai responses https://api.openai.com/v1"], apis: { moderations: "openai", vector_stores: "openai", files: "openai" } });
    expect(build("openai").default.client.apiKey).toBe("sk-recipe-key-0123456789");
    expect(summary(build("ollama"))).toEqual({ backends: ["ollama chat http://127.0.0.1:11434/v1"], apis: { moderations: null, vector_stores: null, files: null } });
    expect(summary(build("vllm"))).toEqual({ backends: ["vllm chat http://127.0.0.1:8000/v1"], apis: { moderations: null, vector_stores: null, files: null } });
    expect(summary(build("llamaStack"))).toEqual({ backends: ["inference_backend responses http://127.0.0.1:8321/v1"], apis: { moderations: "inference_backend", vector_stores: "inference_backend", files: "inference_backend" } });
    expect(summary(build("mixed"))).toEqual({
      backends: ["ollama chat http://127.0.0.1:11434/v1", "openai responses https://api.openai.com/v1"],
      apis: { moderations: "openai", vector_stores: null, files: null },
    });
  });
});
