// The k8s, identity-header (rh-identity) and trusted-proxy modules, driven through HTTP against the
// fake cluster API (test/fakes/cluster-api.ts), and the configuration errors of their settings.
import { describe, expect, inject, it } from "vitest";
import { call, callJson, testConfig } from "./helpers.ts";

const cluster = inject("clusterApi");

const unauthorized = (cause: string) => ({
  status: 401,
  body: { detail: { response: "Missing or invalid credentials provided by client", cause } },
});
const endpointForbidden = (who: string) => ({
  status: 403,
  body: { detail: { response: "User does not have permission to access this endpoint", cause: `User ${who} is not authorized to access this endpoint.` } },
});

const authorized = (config: string, init: { token?: string; headers?: Record<string, string> } = {}) =>
  callJson("/authorized", { method: "POST", config, ...init });

async function reviews(): Promise<{ tokenReviews: Record<string, number>; accessReviews: Record<string, number> }> {
  return (await fetch(`${cluster.url}/_stats`)).json();
}

describe("k8s", () => {
  const k8s = (mode = "ok") =>
    testConfig({ authentication: { module: "k8s", k8s_cluster_api: `${cluster.url}/${mode}`, k8s_service_account_token: cluster.serviceToken } });

  it("authenticates with a TokenReview and a SubjectAccessReview of /ls-access", async () => {
    expect(await authorized(k8s(), { token: "user.w-alice" })).toEqual({
      status: 200,
      body: { user_id: "uid-w-alice", username: "w-alice", skip_userid_check: false },
    });
  });

  it("answers 401 for a token the cluster rejects, and without a token", async () => {
    expect(await authorized(k8s(), { token: "expired-or-forged" })).toEqual(unauthorized("Invalid or expired cluster token"));
    expect(await authorized(k8s())).toEqual(unauthorized("No Authorization header found"));
  });

  it("answers 403 when the cluster denies access to /ls-access", async () => {
    expect(await authorized(k8s(), { token: "denied.w-bob" })).toEqual(endpointForbidden("uid-w-bob"));
  });

  it("answers 503 when the cluster API is down or unreachable", async () => {
    expect(await authorized(k8s("down"), { token: "user.w-a" })).toEqual({
      status: 503,
      body: {
        detail: {
          response: "Unable to connect to the cluster API",
          cause: "Cluster API unavailable: the server is currently unable to handle the request (status 503)",
        },
      },
    });
    const unreachable = testConfig({
      authentication: { module: "k8s", k8s_cluster_api: "http://127.0.0.1:9", k8s_service_account_token: cluster.serviceToken },
    });
    const { status, body } = await authorized(unreachable, { token: "user.w-a" });
    expect(status).toBe(503);
    expect(body).toMatchObject({ detail: { response: "Unable to connect to the cluster API" } });
  });

  it("waits for a slow cluster API", async () => {
    expect((await authorized(k8s("slow"), { token: "user.w-slow" })).status).toBe(200);
  });

  it("answers 500 when the cluster API refuses the service's own credential", async () => {
    const { status, body } = await authorized(k8s("unauthorized"), { token: "user.w-a" });
    expect(status).toBe(500);
    expect(body).toEqual({ detail: { response: "Internal server error", cause: "Cluster API request failed: Unauthorized (status 401)" } });
  });

  it("reviews a token once for a run of requests", async () => {
    for (let i = 0; i < 4; i++) expect((await callJson("/v1/info", { config: k8s(), token: "user.w-cached" })).status).toBe(200);
    const counts = await reviews();
    expect(counts.tokenReviews["user.w-cached"]).toBe(1);
    expect(counts.accessReviews["w-cached"]).toBe(1);
  });

  it("applies access rules to cluster users (the implicit * role)", async () => {
    const ruled = testConfig({
      authentication: { module: "k8s", k8s_cluster_api: `${cluster.url}/ok`, k8s_service_account_token: cluster.serviceToken },
      authorization: { access_rules: [{ role: "*", actions: ["info"] }] },
    });
    expect((await callJson("/v1/info", { config: ruled, token: "user.w-ruled" })).status).toBe(200);
    expect(await callJson("/v1/models", { config: ruled, token: "user.w-ruled" })).toEqual(endpointForbidden("uid-w-ruled"));
  });

  it("keeps the service's credential out of /v1/config", async () => {
    const response = await call("/v1/config", { config: k8s(), token: "user.w-config" });
    expect(response.status).toBe(200);
    expect(await response.text()).not.toContain(cluster.serviceToken);
  });
});

describe("rh-identity", () => {
  const rh = (rh_identity_config: Record<string, unknown> = {}) => testConfig({ authentication: { module: "rh-identity", rh_identity_config } });
  const encode = (document: unknown) => btoa(typeof document === "string" ? document : JSON.stringify(document));
  const USER = { identity: { type: "User", org_id: "org-1", user: { user_id: "rh-u-1", username: "rh-jdoe" } }, entitlements: { rhel: { is_entitled: true } } };
  const SYSTEM = { identity: { type: "System", org_id: "org-2", system: { cn: "rh-machine-1" } } };
  const withIdentity = (config: string, value: string) => authorized(config, { headers: { "x-rh-identity": value } });
  const bad = (response: string) => ({ status: 400, body: { detail: { response, cause: expect.any(String) } } });

  it("authenticates User and System identities", async () => {
    expect(await withIdentity(rh(), encode(USER))).toEqual({ status: 200, body: { user_id: "rh-u-1", username: "rh-jdoe", skip_userid_check: false } });
    expect(await withIdentity(rh(), encode(SYSTEM))).toMatchObject({ status: 200, body: { user_id: "rh-machine-1", username: "rh-machine-1" } });
  });

  it("answers 401 without the header", async () => {
    expect(await authorized(rh())).toEqual(unauthorized("Missing x-rh-identity header"));
  });

  it("answers 400, never 500, for every malformed header", async () => {
    const value = encode(USER);
    expect(await withIdentity(rh({ max_header_size: value.length - 1 }), value)).toEqual(bad("x-rh-identity header exceeds maximum allowed size"));
    expect(await withIdentity(rh(), "%%% not base64 %%%")).toEqual(bad("Invalid base64 encoding in x-rh-identity header"));
    expect(await withIdentity(rh(), encode("{not json"))).toEqual(bad("Invalid JSON in x-rh-identity header"));
    expect(await withIdentity(rh(), encode({ identity: { type: "User", user: { username: "x" } } }))).toEqual({
      status: 400,
      body: { detail: { response: "Invalid identity data", cause: expect.stringContaining("identity.user.user_id") } },
    });
    expect(await withIdentity(rh(), encode({ identity: { type: "User", user: { user_id: "a\u0001b", username: "x" } } }))).toEqual(bad("Invalid identity data"));
    expect(await withIdentity(rh(), encode({ identity: { type: "System", system: { cn: "c" } } }))).toEqual(bad("Invalid identity data"));
    expect(await withIdentity(rh(), encode("null"))).toEqual(bad("Invalid identity data"));
  });

  it("answers 403 when a required entitlement is missing", async () => {
    const config = rh({ required_entitlements: ["rhel", "ansible"] });
    expect(await withIdentity(config, encode(USER))).toEqual({
      status: 403,
      body: { detail: { response: "Insufficient entitlements", cause: "Missing required entitlements: ansible" } },
    });
    const entitled = { ...USER, entitlements: { rhel: { is_entitled: true }, ansible: { is_entitled: true } } };
    expect((await withIdentity(config, encode(entitled))).status).toBe(200);
  });
});

describe("trusted-proxy", () => {
  const proxy = (allowed_service_accounts: unknown, user_header?: string) =>
    testConfig({
      authentication: {
        module: "trusted-proxy",
        k8s_cluster_api: `${cluster.url}/ok`,
        k8s_service_account_token: cluster.serviceToken,
        trusted_proxy_config: { allowed_service_accounts, ...(user_header ? { user_header } : {}) },
      },
    });
  const ALLOWED = [{ namespace: "auth", name: "oauth-proxy" }];

  it("lets an allowed proxy assert the user of its header", async () => {
    expect(await authorized(proxy(ALLOWED), { token: "sa.auth.oauth-proxy", headers: { "X-Forwarded-User": "pat" } })).toEqual({
      status: 200,
      body: { user_id: "pat", username: "pat", skip_userid_check: true },
    });
    expect((await authorized(proxy(ALLOWED, "X-Remote-User"), { token: "sa.auth.oauth-proxy", headers: { "X-Remote-User": "quinn" } })).body).toMatchObject({
      user_id: "quinn",
    });
  });

  it("answers 403 for a service account not on the list", async () => {
    expect(await authorized(proxy(ALLOWED), { token: "sa.apps.intruder", headers: { "X-Forwarded-User": "pat" } })).toEqual(
      endpointForbidden("system:serviceaccount:apps:intruder"),
    );
  });

  it("lets every account with a valid token assert users when the list is null or empty", async () => {
    for (const list of [null, []]) {
      expect((await authorized(proxy(list), { token: "sa.apps.anyone", headers: { "X-Forwarded-User": "rob" } })).status).toBe(200);
    }
  });

  it("answers 401 for a rejected token or a missing user header", async () => {
    expect(await authorized(proxy(ALLOWED), { token: "bogus", headers: { "X-Forwarded-User": "pat" } })).toEqual(
      unauthorized("Invalid or expired proxy service account token"),
    );
    // The configured spelling of the header (default X-Forwarded-User, as in the original system).
    expect(await authorized(proxy(ALLOWED), { token: "sa.auth.oauth-proxy" })).toEqual(unauthorized("Missing required header 'X-Forwarded-User'"));
    expect(await authorized(proxy(ALLOWED, "X-Remote-User"), { token: "sa.auth.oauth-proxy" })).toEqual(unauthorized("Missing required header 'X-Remote-User'"));
  });

  it("answers 401 in the original system's words without an Authorization header, and without a bearer token in it", async () => {
    expect(await authorized(proxy(ALLOWED), { headers: { "X-Forwarded-User": "pat" } })).toEqual(unauthorized("Missing Authorization header"));
    expect(await authorized(proxy(ALLOWED), { headers: { Authorization: "", "X-Forwarded-User": "pat" } })).toEqual(unauthorized("Missing Authorization header"));
    expect(await authorized(proxy(ALLOWED), { headers: { Authorization: "Basic abc", "X-Forwarded-User": "pat" } })).toEqual(
      unauthorized("No token found in Authorization header"),
    );
  });

  it("answers 401 for a review without a user or without a username", async () => {
    expect(await authorized(proxy(ALLOWED), { token: "nouser", headers: { "X-Forwarded-User": "pat" } })).toEqual(
      unauthorized("Invalid service account token: missing user information"),
    );
    expect(await authorized(proxy(ALLOWED), { token: "emptyname", headers: { "X-Forwarded-User": "pat" } })).toEqual(
      unauthorized("Invalid service account token: missing username"),
    );
  });
});

describe("configuration of the modules", () => {
  const notLoaded = async (config: string, keys: string) => {
    expect(await callJson("/v1/info", { config })).toEqual({
      status: 500,
      body: { detail: { response: "Configuration is not loaded", cause: `configuration has not been initialized: invalid keys ${keys}` } },
    });
  };

  it("k8s and trusted-proxy need the cluster API address and the service's credential", async () => {
    await notLoaded(testConfig({ authentication: { module: "k8s" } }), "authentication.k8s_cluster_api, authentication.k8s_service_account_token");
    await notLoaded(
      testConfig({ authentication: { module: "trusted-proxy", k8s_cluster_api: "https://api.example.com:6443", trusted_proxy_config: {} } }),
      "authentication.k8s_service_account_token",
    );
  });

  it("rh-identity and trusted-proxy need their sections, as in the original", async () => {
    await notLoaded(testConfig({ authentication: { module: "rh-identity" } }), "authentication.rh_identity_config");
    await notLoaded(
      testConfig({ authentication: { module: "trusted-proxy", k8s_cluster_api: "https://api.example.com:6443", k8s_service_account_token: "t0ken-value" } }),
      "authentication.trusted_proxy_config",
    );
  });

  it("the cluster API is https, or http on loopback only", async () => {
    await notLoaded(
      testConfig({ authentication: { module: "k8s", k8s_cluster_api: "http://api.example.com", k8s_service_account_token: "t0ken-value" } }),
      "authentication.k8s_cluster_api",
    );
  });

  it("a role rule value of the wrong shape is a configuration error", async () => {
    const rules = (rule: Record<string, unknown>) =>
      testConfig({
        authentication: {
          module: "jwk-token",
          jwk_config: { url: "https://keys.example.com/jwks.json", jwt_configuration: { role_rules: [{ jsonpath: "$.org", roles: ["r"], ...rule }] } },
        },
      });
    await notLoaded(rules({ operator: "in", value: "acme" }), "authentication.jwk_config.jwt_configuration.role_rules.0.value");
    await notLoaded(rules({ operator: "match", value: "(?>atomic)" }), "authentication.jwk_config.jwt_configuration.role_rules.0.value");
    // The right shape loads: the request is then only missing its token. So does equals with a
    // scalar, which the original loads too (it never holds; the load warns).
    expect((await callJson("/v1/info", { config: rules({ operator: "in", value: [["acme"]] }) })).status).toBe(401);
    expect((await callJson("/v1/info", { config: rules({ operator: "equals", value: "acme" }) })).status).toBe(401);
  });
});
