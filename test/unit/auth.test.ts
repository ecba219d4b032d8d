import { createServer } from "node:net";
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ApiError } from "../../worker/errors.ts";
import { createAuthenticator } from "../../worker/auth/index.ts";
import { isAllowed } from "../../worker/auth/rbac.ts";
import { rolesFromClaims } from "../../worker/auth/role-rules.ts";
import type { AccessRule, AuthenticationSettings, RoleRule } from "../../worker/auth/types.ts";
import { startJwksServer, type JwksServer } from "../fakes/jwks-server.ts";

const BASE: AuthenticationSettings = {
  module: "noop",
  skip_tls_verification: false,
  skip_for_health_probes: false,
  skip_for_metrics: false,
};

function request(headers: Record<string, string> = {}, query = ""): Request {
  return new Request(`http://parley.test/v1/query${query}`, { headers });
}

const bearer = (token: string) => request({ Authorization: `Bearer ${token}` });

/** The ApiError a promise rejects with (fails the test when it resolves or throws something else). */
async function rejection(promise: Promise<unknown>): Promise<ApiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiError);
  return error as ApiError;
}

async function expect401(promise: Promise<unknown>, cause: string): Promise<void> {
  const error = await rejection(promise);
  expect(error.body).toEqual({ detail: { response: "Missing or invalid credentials provided by client", cause } });
  expect(error.status).toBe(401);
  expect(error.headers["WWW-Authenticate"]).toMatch(/^Bearer /);
}

describe("noop", () => {
  const auth = createAuthenticator(BASE);

  it("needs no header and gives the default identity", async () => {
    expect(await auth(request())).toEqual({
      userId: "00000000-0000-0000-0000-000",
      username: "lightspeed-user",
      roles: [],
      skipUserIdCheck: true,
      token: null,
    });
  });

  it("takes the user id from ?user_id=", async () => {
    expect((await auth(request({}, "?user_id=alice"))).userId).toBe("alice");
    expect((await auth(request({}, "?user_id="))).userId).toBe("00000000-0000-0000-0000-000");
  });

  it("ignores a bearer token", async () => {
    expect((await auth(bearer("abc"))).token).toBeNull();
  });
});

describe("noop-with-token", () => {
  const auth = createAuthenticator({ ...BASE, module: "noop-with-token" });

  it("keeps the token and gives the noop identity", async () => {
    const context = await auth(request({ Authorization: "Bearer tok-123" }, "?user_id=bob"));
    expect(context).toEqual({ userId: "bob", username: "lightspeed-user", roles: [], skipUserIdCheck: true, token: "tok-123" });
  });

  it("accepts the scheme in any case", async () => {
    expect((await auth(request({ Authorization: "bearer tok" }))).token).toBe("tok");
  });

  it("rejects a request without Authorization header", async () => {
    await expect401(auth(request()), "No Authorization header found");
  });

  it.each(["Basic dXNlcjpwYXNz", "Bearer", "Bearer   ", "Bearer two parts", "tok-123", ""])(
    "rejects %j as carrying no token",
    async (header) => {
      await expect401(auth(request({ Authorization: header })), "No token found in Authorization header");
    },
  );
});

describe("api-key-token", () => {
  const auth = createAuthenticator({ ...BASE, module: "api-key-token", api_key_config: { api_key: "s3cret-key" } });

  it("accepts the configured key with a fixed identity and does not pass the key on", async () => {
    expect(await auth(bearer("s3cret-key"))).toEqual({
      userId: "00000000-0000-0000-0000-000",
      username: "lightspeed-user",
      roles: [],
      skipUserIdCheck: true,
      token: null,
    });
  });

  it.each(["wrong", "s3cret-ke", "s3cret-key2", "S3CRET-KEY"])("rejects %j", async (key) => {
    await expect401(auth(bearer(key)), "Invalid API Key");
  });

  it("reports a missing header or token before comparing", async () => {
    await expect401(auth(request()), "No Authorization header found");
    await expect401(auth(request({ Authorization: "Token s3cret-key" })), "No token found in Authorization header");
  });

  it("refuses to run without a configured key", async () => {
    const error = await rejection((async () => createAuthenticator({ ...BASE, module: "api-key-token" }))());
    expect(error.status).toBe(500);
  });
});

describe("modules not in this release", () => {
  it.each(["k8s", "rh-identity", "trusted-proxy"] as const)("%s answers 500 and says so", async (module) => {
    const error = await rejection(createAuthenticator({ ...BASE, module })(bearer("x")));
    expect(error.status).toBe(500);
    expect(error.body.detail).toEqual({
      response: "Authentication module not available",
      cause: `authentication.module ${module} is not implemented in this release`,
    });
  });
});

describe("jwk-token", () => {
  let jwks: JwksServer;
  let caseNo = 0;

  beforeAll(async () => {
    jwks = await startJwksServer();
  });
  afterAll(async () => {
    await jwks.close();
  });

  /** A fresh key-set URL (same server): key sets are cached per URL per isolate. */
  const freshUrl = () => `${jwks.url}?case=${++caseNo}`;

  function jwkAuth(url = freshUrl(), role_rules: RoleRule[] = [], claims = { user_id_claim: "user_id", username_claim: "username" }) {
    return createAuthenticator({ ...BASE, module: "jwk-token", jwk_config: { url, jwt_configuration: { ...claims, role_rules } } });
  }

  const CLAIMS = { user_id: "u-42", username: "alice", realm_access: { roles: ["manager", "dev"] } };

  it("accepts a good token: identity from the configured claims, roles from the rules", async () => {
    const auth = jwkAuth(freshUrl(), [
      { jsonpath: "$.realm_access.roles[*]", operator: "contains", negate: false, value: "manager", roles: ["manager"] },
      { jsonpath: "$.realm_access.roles[*]", operator: "contains", negate: false, value: "admin", roles: ["admin"] },
    ]);
    const token = await jwks.sign(CLAIMS);
    expect(await auth(bearer(token))).toEqual({ userId: "u-42", username: "alice", roles: ["manager"], skipUserIdCheck: false, token });
  });

  it("reads whichever claims are configured", async () => {
    const auth = jwkAuth(freshUrl(), [], { user_id_claim: "sub", username_claim: "preferred_username" });
    const context = await auth(bearer(await jwks.sign({ sub: "abc", preferred_username: "bob" })));
    expect([context.userId, context.username]).toEqual(["abc", "bob"]);
  });

  it("rejects an expired token", async () => {
    await expect401(jwkAuth()(bearer(await jwks.sign(CLAIMS, { expiresIn: "-1h" }))), "Token has expired");
  });

  it("rejects a forged signature (known kid, other key)", async () => {
    await expect401(jwkAuth()(bearer(await jwks.sign(CLAIMS, { key: "other" }))), "Invalid token signature");
  });

  it("rejects a token signed by a key the set does not hold", async () => {
    await expect401(jwkAuth()(bearer(await jwks.sign(CLAIMS, { unknownKey: true }))), "Token signed by unknown key");
  });

  it("rejects a token whose algorithm is not accepted", async () => {
    const hs256 = await new SignJWT(CLAIMS)
      .setProtectedHeader({ alg: "HS256" })
      .setExpirationTime("1h")
      .sign(new TextEncoder().encode("a-shared-secret-of-enough-length!"));
    await expect401(jwkAuth()(bearer(hs256)), "Invalid token signature");
  });

  it("rejects a token that is not a JWT", async () => {
    await expect401(jwkAuth()(bearer("not-a-jwt")), "Token is malformed");
    await expect401(jwkAuth()(bearer("a.b.c")), "Token is malformed");
  });

  it("rejects a token without the user id claim, naming the configured claim", async () => {
    await expect401(jwkAuth()(bearer(await jwks.sign({ username: "alice" }))), "Token missing claim: user_id");
  });

  it("rejects a token without the username claim", async () => {
    await expect401(jwkAuth()(bearer(await jwks.sign({ user_id: "u-1" }))), "Token missing claim: username");
  });

  it("rejects requests without header or token", async () => {
    await expect401(jwkAuth()(request()), "No Authorization header found");
    await expect401(jwkAuth()(request({ Authorization: "Basic abc" })), "No token found in Authorization header");
  });

  it("reports an unreachable key server", async () => {
    const closedPort = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const auth = jwkAuth(`http://127.0.0.1:${closedPort}/jwks.json`);
    await expect401(auth(bearer(await jwks.sign(CLAIMS))), "Authentication key server returned invalid data");
  });

  it.each(["invalid-json", "500", "not-a-key-set"] as const)("reports a key server answering %s", async (mode) => {
    jwks.setBroken(mode);
    try {
      await expect401(jwkAuth()(bearer(await jwks.sign(CLAIMS))), "Authentication key server returned invalid data");
    } finally {
      jwks.setBroken("ok");
    }
  });

  it("fetches the key set once per URL, shared by authenticators", async () => {
    const url = freshUrl();
    const before = jwks.requests();
    const token = await jwks.sign(CLAIMS);
    await jwkAuth(url)(bearer(token));
    await jwkAuth(url)(bearer(token));
    await jwkAuth(url)(bearer(await jwks.sign({ ...CLAIMS, user_id: "u-43" })));
    expect(jwks.requests() - before).toBe(1);
  });

  it("verifies a token without kid against each key that fits (key rotation)", async () => {
    jwks.setBroken("rotating");
    try {
      const auth = jwkAuth();
      expect((await auth(bearer(await jwks.sign(CLAIMS, { kid: null, key: "good" })))).userId).toBe("u-42");
      expect((await auth(bearer(await jwks.sign(CLAIMS, { kid: null, key: "other" })))).userId).toBe("u-42");
      await expect401(auth(bearer(await jwks.sign(CLAIMS, { kid: null, expiresIn: "-1h" }))), "Token has expired");
    } finally {
      jwks.setBroken("ok");
    }
  });

  it("rejects a token without kid whose only candidate key does not verify it", async () => {
    await expect401(jwkAuth()(bearer(await jwks.sign(CLAIMS, { kid: null, key: "other" }))), "Invalid token signature");
  });
});

describe("rolesFromClaims", () => {
  const claims = {
    sub: "u-1",
    email: "alice@example.com",
    org_id: "dummy_corp",
    orgs: ["dummy_corp"],
    level: 3,
    realm_access: { roles: ["manager", "superadmin"] },
    groups: [
      { name: "developers", active: true },
      { name: "qa", active: false },
    ],
  };
  const rule = (jsonpath: string, operator: RoleRule["operator"], value: unknown, negate = false): RoleRule => ({
    jsonpath,
    operator,
    negate,
    value,
    roles: ["granted"],
  });
  const holds = (r: RoleRule) => rolesFromClaims(claims, [r]).includes("granted");

  it("equals compares a singular path's value, or the list of matches", () => {
    expect(holds(rule("$.org_id", "equals", "dummy_corp"))).toBe(true);
    expect(holds(rule("$.org_id", "equals", ["dummy_corp"]))).toBe(true); // the established form
    expect(holds(rule("$.level", "equals", 3))).toBe(true);
    expect(holds(rule("$.level", "equals", "3"))).toBe(false);
    expect(holds(rule("$.realm_access.roles", "equals", ["manager", "superadmin"]))).toBe(true);
    expect(holds(rule("$.realm_access.roles[*]", "equals", ["manager", "superadmin"]))).toBe(true);
    expect(holds(rule("$.realm_access.roles[*]", "equals", "manager"))).toBe(false);
    expect(holds(rule("$.groups[?(@.active)].name", "equals", "developers"))).toBe(true);
    expect(holds(rule("$.realm_access", "equals", { roles: ["manager", "superadmin"] }))).toBe(true);
  });

  it("contains: an element of an array, a substring of a singular string", () => {
    expect(holds(rule("$.realm_access.roles", "contains", "manager"))).toBe(true);
    expect(holds(rule("$.realm_access.roles[*]", "contains", "manager"))).toBe(true);
    expect(holds(rule("$.email", "contains", "@example.com"))).toBe(true);
    expect(holds(rule("$.email", "contains", "@other.org"))).toBe(false);
    // No substring test over a list of matches: "superadmin" is not the role "admin".
    expect(holds(rule("$.realm_access.roles[*]", "contains", "admin"))).toBe(false);
    expect(holds(rule("$.realm_access.roles", "contains", "admin"))).toBe(false);
    expect(holds(rule("$..roles", "contains", "manager"))).toBe(true);
  });

  it("in: a matched value is one of the list", () => {
    expect(holds(rule("$.org_id", "in", ["acme", "dummy_corp"]))).toBe(true);
    expect(holds(rule("$.groups[*].name", "in", ["qa", "ops"]))).toBe(true);
    expect(holds(rule("$.groups[*].name", "in", ["ops"]))).toBe(false);
    expect(holds(rule("$.orgs[*]", "in", [["dummy_corp"]]))).toBe(true); // the established form
  });

  it("match: a regular expression against string values", () => {
    expect(holds(rule("$.email", "match", "@example\\.com$"))).toBe(true);
    expect(holds(rule("$.realm_access.roles[*]", "match", "^super"))).toBe(true);
    expect(holds(rule("$.realm_access.roles", "match", "^mana"))).toBe(true);
    expect(holds(rule("$.level", "match", "3"))).toBe(false);
    expect(holds(rule("$.sub", "match", "^x"))).toBe(false);
  });

  it("negate inverts, also when nothing matched", () => {
    expect(holds(rule("$.org_id", "equals", "dummy_corp", true))).toBe(false);
    expect(holds(rule("$.org_id", "equals", "acme", true))).toBe(true);
    expect(holds(rule("$.missing", "equals", "x"))).toBe(false);
    expect(holds(rule("$.missing", "contains", "x", true))).toBe(true);
  });

  it("collects the roles of every rule that holds, each once", () => {
    const rules: RoleRule[] = [
      { jsonpath: "$.realm_access.roles[*]", operator: "contains", negate: false, value: "manager", roles: ["manager", "reader"] },
      { jsonpath: "$.email", operator: "match", negate: false, value: "@example\\.com$", roles: ["employee", "reader"] },
      { jsonpath: "$.org_id", operator: "equals", negate: false, value: "acme", roles: ["acme"] },
    ];
    expect(rolesFromClaims(claims, rules)).toEqual(["manager", "reader", "employee"]);
    expect(rolesFromClaims(claims, [])).toEqual([]);
  });

  it("ignores a broken rule, even negated, and warns once", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const broken = [
        rule("$.groups[?(", "equals", "x", true),
        rule("$.email", "match", "([unclosed", true),
        rule("$.org_id", "in", "not-a-list", true),
      ];
      const good = rule("$.org_id", "equals", "dummy_corp");
      for (let i = 0; i < 3; i++) {
        expect(rolesFromClaims(claims, [...broken, { ...good, roles: ["ok"] }])).toEqual(["ok"]);
      }
      expect(warn).toHaveBeenCalledTimes(3);
    } finally {
      warn.mockRestore();
    }
  });
});

describe("isAllowed", () => {
  const rules: AccessRule[] = [
    { role: "*", actions: ["query", "info"] },
    { role: "manager", actions: ["admin"] },
    { role: "developer", actions: ["read_prompts", "MODEL_OVERRIDE"] },
  ];

  it("allows everything when no rules are configured", () => {
    expect(isAllowed(undefined, [], "manage_prompts")).toBe(true);
  });

  it("allows nothing with an empty rule list", () => {
    expect(isAllowed([], ["manager"], "query")).toBe(false);
  });

  it("gives the * rule to every user", () => {
    expect(isAllowed(rules, [], "query")).toBe(true);
    expect(isAllowed(rules, [], "read_prompts")).toBe(false);
  });

  it("gives a role its actions only", () => {
    expect(isAllowed(rules, ["developer"], "read_prompts")).toBe(true);
    expect(isAllowed(rules, ["developer"], "MODEL_OVERRIDE")).toBe(true);
    expect(isAllowed(rules, ["developer"], "manage_prompts")).toBe(false);
    expect(isAllowed(rules, ["developer"], "model_override")).toBe(false);
  });

  it("lets the admin action grant every action", () => {
    expect(isAllowed(rules, ["manager"], "manage_prompts")).toBe(true);
    expect(isAllowed(rules, ["manager"], "A2A_JSONRPC")).toBe(true);
    expect(isAllowed(rules, ["dev", "manager"], "admin")).toBe(true);
    expect(isAllowed(rules, ["developer"], "admin")).toBe(false);
  });
});
