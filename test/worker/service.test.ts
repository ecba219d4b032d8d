import { describe, expect, it } from "vitest";
import { call, callJson, testConfig } from "./helpers.ts";

describe("service endpoints with the bundled configuration", () => {
  it("lists the scripted backend's models", async () => {
    const { status, body } = await callJson<{ models: Array<Record<string, unknown>> }>("/v1/models");
    expect(status).toBe(200);
    expect(body.models.map((m) => m.identifier)).toEqual(["scripted/parley-small", "scripted/parley-large", "scripted/parley-embed"]);
    expect(body.models[0]).toMatchObject({ provider_id: "scripted", provider_resource_id: "parley-small", model_type: "llm", type: "model", api_model_type: "llm" });
  });

  it("filters models by model_type, unknown types give an empty list", async () => {
    expect((await callJson<{ models: unknown[] }>("/v1/models?model_type=embedding")).body.models).toHaveLength(1);
    expect((await callJson<{ models: unknown[] }>("/v1/models?model_type=nothing")).body.models).toEqual([]);
    // An empty filter is a type no model has, not a malformed request (REFERENCE "Small resources").
    expect(await callJson<{ models: unknown[] }>("/v1/models?model_type=")).toEqual({ status: 200, body: { models: [] } });
  });

  it("answers info, liveness, readiness and the landing page", async () => {
    expect(await callJson("/v1/info")).toMatchObject({ status: 200, body: { name: "Parley", service_version: "0.1.0", backend_version: "unknown" } });
    expect(await callJson("/liveness")).toEqual({ status: 200, body: { alive: true } });
    expect(await callJson("/readiness")).toMatchObject({ status: 200, body: { ready: true, providers: [] } });
    const page = await call("/");
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(await page.text()).toContain("<h1>Parley</h1>");
  });

  it("answers /authorized without a token", async () => {
    expect(await callJson("/authorized", { method: "POST", user: "u-1" })).toEqual({
      status: 200,
      body: { user_id: "u-1", username: "lightspeed-user", skip_userid_check: true },
    });
  });

  it("answers unknown paths with the error envelope", async () => {
    const { status, body } = await callJson("/v1/nothing-here");
    expect(status).toBe(404);
    expect(body).toEqual({ detail: { response: "Not found", cause: "No endpoint at /v1/nothing-here" } });
  });

  it("answers a method a path does not serve with 405 naming the ones it does", async () => {
    const query = await call("/v1/query");
    expect(query.status).toBe(405);
    expect(query.headers.get("allow")).toBe("POST");
    expect(await query.json()).toEqual({ detail: { response: "Method not allowed", cause: "GET is not allowed on /v1/query; it serves POST" } });
    const detail = await call(`/v3/conversations/${"0".repeat(48)}`, { method: "DELETE" });
    expect(detail.status).toBe(405);
    expect(detail.headers.get("allow")).toBe("GET, HEAD");
    const conversation = await call(`/v1/conversations/${"0".repeat(48)}`, { method: "PATCH" });
    expect(conversation.headers.get("allow")?.split(", ").sort()).toEqual(["DELETE", "GET", "HEAD", "PUT"]);
  });
});

describe("CORS", () => {
  it("answers preflights and tags responses from service.cors", async () => {
    const config = testConfig({ service: { cors: { allow_origins: ["https://app.example.com"], allow_credentials: true } } });
    const preflight = await call("/v1/query", {
      method: "OPTIONS",
      config,
      headers: { Origin: "https://app.example.com", "Access-Control-Request-Method": "POST" },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get("access-control-allow-origin")).toBe("https://app.example.com");
    expect(preflight.headers.get("access-control-allow-credentials")).toBe("true");
    const other = await call("/liveness", { config, headers: { Origin: "https://evil.example.com" } });
    expect(other.headers.get("access-control-allow-origin")).toBeNull();
  });

  it("refuses a preflight asking for what service.cors does not allow, as the original does", async () => {
    const config = testConfig({ service: { cors: { allow_origins: ["https://app.example.com"], allow_methods: ["GET", "POST"], allow_headers: ["Content-Type"] } } });
    const preflight = (origin: string, method: string, headers?: string) =>
      call("/v1/query", {
        method: "OPTIONS",
        config,
        headers: { Origin: origin, "Access-Control-Request-Method": method, ...(headers ? { "Access-Control-Request-Headers": headers } : {}) },
      });
    const refused = await preflight("https://evil.example.com", "DELETE", "x-secret");
    expect([refused.status, await refused.text()]).toEqual([400, "Disallowed CORS origin, method, headers"]);
    const wrongMethod = await preflight("https://app.example.com", "PUT");
    expect([wrongMethod.status, await wrongMethod.text()]).toEqual([400, "Disallowed CORS method"]);
    const allowed = await preflight("https://app.example.com", "POST", "content-type");
    expect(allowed.status).toBe(204);
    expect(allowed.headers.get("access-control-allow-origin")).toBe("https://app.example.com");
  });

  it("tags cross-origin requests only: one without an Origin header gets no CORS headers", async () => {
    const config = testConfig({ service: { cors: { allow_origins: ["*"] } } });
    const browser = await call("/liveness", { config, headers: { Origin: "https://app.example.com" } });
    expect(browser.headers.get("access-control-allow-origin")).toBe("*");
    const client = await call("/liveness", { config });
    expect(client.status).toBe(200);
    expect(client.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("backend down", () => {
  const down = testConfig({ inference_backend: { url: "http://127.0.0.1:9/v1", max_retries: 0 } });

  it("readiness is 503 with the provider's error", async () => {
    const { status, body } = await callJson("/readiness", { config: down });
    expect(status).toBe(503);
    expect(body).toMatchObject({ ready: false, providers: [{ provider_id: "inference_backend", status: "error" }] });
  });

  it("models and info are 503 'Unable to connect to the inference backend'", async () => {
    for (const path of ["/v1/models", "/v1/info"]) {
      const { status, body } = await callJson(path, { config: down });
      expect(status).toBe(503);
      expect(body).toEqual({
        detail: { response: "Unable to connect to the inference backend", cause: "Connection error while trying to reach backend service." },
      });
    }
  });
});

describe("configuration", () => {
  it("a broken configuration makes every endpoint answer 500 'Configuration is not loaded', naming the keys", async () => {
    const broken = testConfig({
      authentication: { module: "jwk-token", jwk_config: { url: "http://example.com/jwks" } },
      inference_backend: { api_key: "sk-not-shown", timeout: "soon" },
    });
    for (const path of ["/v1/models", "/liveness", "/"]) {
      const { status, body } = await callJson(path, { config: broken });
      expect(status).toBe(500);
      expect(body).toEqual({
        detail: {
          response: "Configuration is not loaded",
          cause: "configuration has not been initialized: invalid keys inference_backend.timeout, authentication.jwk_config.url",
        },
      });
    }
  });

  it("names the files a document names that cannot be read together with its other problems, so one pass fixes it", async () => {
    const broken = testConfig({
      inference_backend: { timeout: "soon" },
      customization: { system_prompt_path: "/etc/lightspeed/system_prompt.txt", agent_card_path: "missing-card.yaml" },
    });
    const { status, body } = await callJson<{ detail: { cause: string } }>("/v1/models", { config: broken });
    expect(status).toBe(500);
    expect(body.detail.cause).toBe(
      "configuration has not been initialized: invalid keys inference_backend.timeout, customization.system_prompt_path, customization.agent_card_path",
    );
  });

  it("/v1/config hides every secret", async () => {
    const config = testConfig({
      inference_backend: { api_key: "sk-very-secret-key" },
      database: { postgres: { host: "db", db: "parley", user: "parley", password: "hunter2" } },
      mcp_servers: [{ name: "tickets", url: "http://127.0.0.1:9/mcp?token=querysecret77" }],
    });
    const response = await call("/v1/config", { config });
    const text = await response.text();
    expect(response.status).toBe(200);
    expect(text).not.toContain("sk-very-secret-key");
    expect(text).not.toContain("hunter2");
    expect(text).not.toContain("querysecret77");
    const body = JSON.parse(text) as { configuration: { inference_backend: { api_key: string } } };
    expect(body.configuration.inference_backend.api_key).toBe("**********");
  });
});

describe("credentials held by the deployment", () => {
  const mcp = (value: string) => ({ mcp_servers: [{ name: "files", url: "http://127.0.0.1:9/mcp", authorization_headers: { Authorization: value } }] });

  it("are read from a file shipped under config/, or taken from ${env.NAME}", async () => {
    const { env } = await import("cloudflare:workers");
    const { loadRuntime } = await import("../../worker/runtime.ts");
    const fromFile = await loadRuntime({ ...env, PARLEY_CONFIG: testConfig(mcp("system-prompt.txt")) });
    expect(fromFile.ok && fromFile.runtime.heldSecrets.get("mcp_servers.0.authorization_headers.Authorization")).toMatch(/^You are Parley/);
    const fromEnv = await loadRuntime({ ...env, PARLEY_CONFIG: testConfig(mcp("${env.MCP_TOKEN}")), MCP_TOKEN: "Bearer mcp-secret-token" });
    expect(fromEnv.ok && fromEnv.runtime.heldSecrets.get("mcp_servers.0.authorization_headers.Authorization")).toBe("Bearer mcp-secret-token");
  });

  it("leave their MCP server out, saying how to supply them, when the file cannot be read; the gateway loads", async () => {
    const { env } = await import("cloudflare:workers");
    const { loadRuntime } = await import("../../worker/runtime.ts");
    const loaded = await loadRuntime({ ...env, PARLEY_CONFIG: testConfig(mcp("/var/run/secrets/token")) });
    expect(loaded.ok).toBe(true);
    expect(loaded.ok && loaded.runtime.heldSecrets.size).toBe(0);
    expect((await callJson("/v1/models", { config: testConfig(mcp("/var/run/secrets/token")) })).status).toBe(200);
  });
});

describe("config/parley.example.yaml", () => {
  it("loads, with the files it names and its static filter", async () => {
    const { env } = await import("cloudflare:workers");
    const { loadRuntime } = await import("../../worker/runtime.ts");
    const text = await (await env.CONFIG_FILES.fetch("http://config.invalid/parley.example.yaml")).text();
    const loaded = await loadRuntime({ ...env, PARLEY_CONFIG: text, BACKEND_API_KEY: "sk-example", PG_PASSWORD: "example" });
    expect(loaded.ok ? [] : loaded.problems).toEqual([]);
    if (loaded.ok) expect(loaded.runtime.systemPrompt).toContain("You are Parley");
  });
});
