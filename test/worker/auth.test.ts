import { describe, expect, it } from "vitest";
import { inject } from "vitest";
import { call, callJson, testConfig } from "./helpers.ts";

const tokens = inject("tokens");
const unauthorized = (cause: string) => ({
  status: 401,
  body: { detail: { response: "Missing or invalid credentials provided by client", cause } },
});

const jwk = (extra: Record<string, unknown> = {}) =>
  testConfig({
    authentication: {
      module: "jwk-token",
      jwk_config: {
        url: inject("jwksUrl"),
        jwt_configuration: {
          user_id_claim: "user_id",
          username_claim: "username",
          role_rules: [{ jsonpath: "$.realm_access.roles[*]", operator: "contains", value: "admin", roles: ["admin"] }],
        },
      },
      ...extra,
    },
    authorization: {
      access_rules: [
        { role: "*", actions: ["info"] },
        { role: "admin", actions: ["admin"] },
      ],
    },
  });

describe("jwk-token", () => {
  it("accepts a valid token and reports its claims", async () => {
    expect(await callJson("/authorized", { method: "POST", config: jwk(), token: tokens.good })).toEqual({
      status: 200,
      body: { user_id: "user-jwk-1", username: "alice", skip_userid_check: false },
    });
  });

  it.each([
    ["expired", tokens.expired, "Token has expired"],
    ["forged", tokens.forged, "Invalid token signature"],
    ["unknown key", tokens.unknownKey, "Token signed by unknown key"],
    ["missing claim", tokens.missingClaim, "Token missing claim: user_id"],
  ])("rejects a token that is %s", async (_name, token, cause) => {
    expect(await callJson("/authorized", { method: "POST", config: jwk(), token })).toEqual(unauthorized(cause));
  });

  it("rejects requests without a header or without a token", async () => {
    expect(await callJson("/v1/info", { config: jwk() })).toEqual(unauthorized("No Authorization header found"));
    expect(await callJson("/v1/info", { config: jwk(), headers: { Authorization: "Basic abc" } })).toEqual(
      unauthorized("No token found in Authorization header"),
    );
  });

  it("reports an unreachable key server", async () => {
    const config = testConfig({
      authentication: { module: "jwk-token", jwk_config: { url: "http://127.0.0.1:9/jwks.json" } },
    });
    expect(await callJson("/v1/info", { config, token: tokens.good })).toEqual(unauthorized("Unable to reach authentication key server"));
  });

  it("grants actions through role rules and denies the rest with 403", async () => {
    expect((await callJson("/v1/info", { config: jwk(), token: tokens.good })).status).toBe(200);
    expect(await callJson("/v1/models", { config: jwk(), token: tokens.good })).toEqual({
      status: 403,
      body: {
        detail: {
          response: "User does not have permission to access this endpoint",
          cause: "User user-jwk-1 is not authorized to access this endpoint.",
        },
      },
    });
    expect((await callJson("/v1/models", { config: jwk(), token: tokens.admin })).status).toBe(200);
  });

  it("grants roles through the original's rules: Python patterns and paths without \"$\"", async () => {
    const config = (rule: Record<string, unknown>) =>
      testConfig({
        authentication: {
          module: "jwk-token",
          jwk_config: { url: inject("jwksUrl"), jwt_configuration: { role_rules: [{ ...rule, roles: ["admin"] }] } },
        },
        authorization: { access_rules: [{ role: "*", actions: ["info"] }, { role: "admin", actions: ["admin"] }] },
      });
    for (const rule of [
      { jsonpath: "realm_access.roles[*]", operator: "match", value: "(?i)^ADMIN$" },
      { jsonpath: "$.username", operator: "match", value: "^(?P<c>r)oo(?P=c)?t" },
    ]) {
      expect((await callJson("/v1/models", { config: config(rule), token: tokens.admin })).status).toBe(200);
      expect((await callJson("/v1/models", { config: config(rule), token: tokens.good })).status).toBe(403);
    }
  });

  it("reports a key the key server published but workerd cannot import as malformed keys, not a 500", async () => {
    const config = testConfig({
      authentication: { module: "jwk-token", jwk_config: { url: inject("jwksUrl").replace("/jwks.json", "/malformed-jwks.json") } },
    });
    for (const path of ["/authorized", "/v1/query"]) {
      expect(await callJson(path, { method: "POST", config, token: tokens.good, json: { query: "q" } })).toEqual(unauthorized("Authentication keys are malformed"));
    }
  });

  it("lets probes skip authentication only when configured", async () => {
    expect((await callJson("/liveness", { config: jwk() })).status).toBe(401);
    expect(await callJson("/liveness", { config: jwk({ skip_for_health_probes: true }) })).toEqual({ status: 200, body: { alive: true } });
    // Skipping is for probes that send no credential: one that sends a wrong one is refused (UPSTREAM §8).
    expect((await callJson("/liveness", { config: jwk({ skip_for_health_probes: true }), token: "not-a-jwt" })).status).toBe(401);
    expect((await callJson("/readiness", { config: jwk({ skip_for_health_probes: true }), token: tokens.admin })).status).not.toBe(401);
  });
});

describe("api-key-token", () => {
  const config = testConfig({ authentication: { module: "api-key-token", api_key_config: { api_key: "parley-test-key-123" } } });

  it("accepts the configured key and never echoes it", async () => {
    const { status, body } = await callJson("/authorized", { method: "POST", config, token: "parley-test-key-123" });
    expect(status).toBe(200);
    expect(JSON.stringify(body)).not.toContain("parley-test-key-123");
  });

  it("rejects a wrong key and a missing header", async () => {
    expect(await callJson("/authorized", { method: "POST", config, token: "wrong" })).toEqual(unauthorized("Invalid API Key"));
    expect(await callJson("/authorized", { method: "POST", config })).toEqual(unauthorized("No Authorization header found"));
  });
});

describe("noop-with-token", () => {
  const config = testConfig({ authentication: { module: "noop-with-token" } });

  it("needs a bearer token but does not validate it", async () => {
    expect(await callJson("/authorized", { method: "POST", config })).toEqual(unauthorized("No Authorization header found"));
    expect(await callJson("/authorized", { method: "POST", config, token: "anything", user: "u-9" })).toMatchObject({
      status: 200,
      body: { user_id: "u-9", username: "lightspeed-user" },
    });
  });

  it("refuses an empty ?user_id= (noop too), rather than acting as the default user", async () => {
    const empty = { status: 400, body: { detail: { response: "user_id cannot be empty", cause: "The user_id query parameter is empty: give a user id, or leave the parameter out for the default user." } } };
    expect(await callJson("/authorized?user_id=", { method: "POST", config, token: "anything" })).toEqual(empty);
    expect(await callJson("/v1/conversations?user_id=")).toEqual(empty);
  });
});

describe("endpoints of the original system without an authorize decorator", () => {
  it("answers GET /a2a/health and GET /v1/feedback/status without credentials (UPSTREAM §8)", async () => {
    expect(await callJson("/a2a/health", { config: jwk() })).toMatchObject({ status: 200, body: { status: "healthy" } });
    expect(await callJson("/v1/feedback/status", { config: jwk() })).toEqual({ status: 200, body: { functionality: "feedback", status: { enabled: false } } });
    // A credential sent anyway changes nothing, even a wrong one.
    expect((await call("/v1/feedback/status", { config: jwk(), token: "not-a-jwt" })).status).toBe(200);
  });

  it("keeps PUT /v1/feedback/status behind admin", async () => {
    const put = { method: "PUT", config: jwk(), json: { status: false } };
    expect(await callJson("/v1/feedback/status", put)).toEqual(unauthorized("No Authorization header found"));
    expect((await callJson("/v1/feedback/status", { ...put, token: tokens.good })).status).toBe(403);
  });
});

describe("GET /a2a (the agent card at the JSON-RPC path)", () => {
  it("authenticates and needs a2a_jsonrpc, as POST /a2a does; the well-known card stays open", async () => {
    const rules = (actions: string[]) => testConfig({ customization: { agent_card_path: "agent-card.yaml" }, authentication: { module: "api-key-token", api_key_config: { api_key: "a2a-card-key-123" } }, authorization: { access_rules: [{ role: "*", actions }] } });
    expect(await callJson("/a2a", { config: rules(["a2a_jsonrpc"]) })).toEqual(unauthorized("No Authorization header found"));
    expect((await callJson("/a2a", { config: rules(["query"]), token: "a2a-card-key-123" })).status).toBe(403);
    expect(await callJson("/a2a", { config: rules(["a2a_jsonrpc"]), token: "a2a-card-key-123" })).toMatchObject({ status: 200, body: { url: expect.stringMatching(/\/a2a$/) } });
    expect((await call("/.well-known/agent-card.json", { config: rules(["query"]) })).status).toBe(200);
  });
});
