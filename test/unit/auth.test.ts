import { createServer as createHttpServer } from "node:http";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ApiError } from "../../worker/errors.ts";
import { createAuthenticator } from "../../worker/auth/index.ts";
import { isAllowed, mayActOnOthers, OTHERS_ACTION_FOR } from "../../worker/auth/rbac.ts";
import { ReviewCache } from "../../worker/auth/review-cache.ts";
import type { AccessRule, AuthenticationConfig, RoleRule } from "../../worker/auth/types.ts";
import { AuthenticationSchema } from "../../worker/config/schema.ts";
import { CLUSTER_ID, CLUSTER_SERVICE_TOKEN, startClusterApi, type ClusterApiServer } from "../fakes/cluster-api.ts";
import { startJwksServer, type JwksServer } from "../fakes/jwks-server.ts";
import { closedPort, listenOn } from "../fakes/listen.ts";

/** Settings as the configuration schema produces them (defaults filled). */
const settings = (input: Record<string, unknown> = {}): AuthenticationConfig => AuthenticationSchema.parse(input);

const BASE = settings();

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
    expect((await auth(request({}, "?user_id=bob&other=1"))).userId).toBe("bob");
    await expect(auth(request({}, "?user_id="))).rejects.toMatchObject({ status: 400, response: "user_id cannot be empty" });
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
    return createAuthenticator({ ...BASE, module: "jwk-token", jwk_config: { url, jwt_configuration: { ...claims, role_rules, require_exp: true } } });
  }

  const CLAIMS = { user_id: "u-42", username: "alice", realm_access: { roles: ["manager", "dev"] } };

  it("accepts a good token: identity from the configured claims, roles from the rules", async () => {
    const auth = jwkAuth(freshUrl(), [
      { jsonpath: "$.realm_access.roles[*]", operator: "contains", negate: false, value: "manager", roles: ["manager"] },
      { jsonpath: "$.realm_access.roles[*]", operator: "contains", negate: false, value: "admin", roles: ["admin"] },
      { jsonpath: "$.username", operator: "equals", negate: false, value: ["alice"], roles: ["alice"] },
    ]);
    const token = await jwks.sign(CLAIMS);
    expect(await auth(bearer(token))).toEqual({ userId: "u-42", username: "alice", roles: ["manager", "alice"], skipUserIdCheck: false, token });
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

  it("rejects a token whose algorithm is not accepted, saying so", async () => {
    const hs256 = await new SignJWT(CLAIMS)
      .setProtectedHeader({ alg: "HS256" })
      .setExpirationTime("1h")
      .sign(new TextEncoder().encode("a-shared-secret-of-enough-length!"));
    await expect401(jwkAuth()(bearer(hs256)), "Token algorithm is not supported");
  });

  it("rejects a token that is not a JWT", async () => {
    await expect401(jwkAuth()(bearer("not-a-jwt")), "Token could not be decoded");
    await expect401(jwkAuth()(bearer("a.b.c")), "Token could not be decoded");
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
    const port = await closedPort();
    const auth = jwkAuth(`http://127.0.0.1:${port}/jwks.json`);
    await expect401(auth(bearer(await jwks.sign(CLAIMS))), "Unable to reach authentication key server");
  });

  it("fetches again at once after a shared fetch that never settled (its request was cancelled), not 30 s later", { timeout: 20_000 }, async () => {
    const url = freshUrl();
    const realFetch = globalThis.fetch;
    // The first fetch of the set hangs for good, its time-out ignored: what a cancelled request's fetch looks like.
    let hung = 0;
    const spy = vi.spyOn(globalThis, "fetch").mockImplementation((input, init) => {
      if (String(input instanceof Request ? input.url : input) === url && hung++ === 0) return new Promise<Response>(() => undefined);
      return realFetch(input, init);
    });
    try {
      const auth = jwkAuth(url);
      const token = await jwks.sign(CLAIMS);
      await expect401(auth(bearer(token)), "Unable to reach authentication key server");
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(await auth(bearer(token))).toMatchObject({ userId: "u-42" });
      expect(hung).toBe(2);
    } finally {
      spy.mockRestore();
    }
  });

  it.each([
    ["invalid-json", "Authentication key server returned invalid data"],
    ["500", "Unable to reach authentication key server"],
    ["not-a-key-set", "Authentication keys are malformed"],
  ] as const)("reports a key server answering %s", async (mode, cause) => {
    jwks.setBroken(mode);
    try {
      await expect401(jwkAuth()(bearer(await jwks.sign(CLAIMS))), cause);
    } finally {
      jwks.setBroken("ok");
    }
  });

  it("reports a key it cannot use as malformed keys, and takes the mended set 30 s later", async () => {
    const auth = jwkAuth(freshUrl());
    const token = await jwks.sign(CLAIMS);
    jwks.setBroken("malformed-key");
    try {
      await expect401(auth(bearer(token)), "Authentication keys are malformed");
    } finally {
      jwks.setBroken("ok");
    }
    // Still the cached set within the refetch interval; fetched again after it.
    await expect401(auth(bearer(token)), "Authentication keys are malformed");
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 31_000 });
    try {
      expect((await auth(bearer(token))).userId).toBe("u-42");
    } finally {
      vi.useRealTimers();
    }
  });

  it("fetches the key set again for a key it lacks, at most every 30 s", async () => {
    const auth = jwkAuth(freshUrl());
    await auth(bearer(await jwks.sign(CLAIMS)));
    const before = jwks.requests();
    const unknown = await jwks.sign(CLAIMS, { unknownKey: true });
    await expect401(auth(bearer(unknown)), "Token signed by unknown key");
    expect(jwks.requests() - before).toBe(0);
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() + 31_000 });
    try {
      await expect401(auth(bearer(unknown)), "Token signed by unknown key");
      expect(jwks.requests() - before).toBe(1);
      await expect401(auth(bearer(unknown)), "Token signed by unknown key");
      expect(jwks.requests() - before).toBe(1);
    } finally {
      vi.useRealTimers();
    }
  });

  it("gives up on a key set fetch that never settles (its request cancelled), and fetches again 30 s later", async () => {
    const auth = jwkAuth(freshUrl());
    const token = await jwks.sign(CLAIMS);
    vi.useFakeTimers({ toFake: ["Date", "setTimeout", "clearTimeout"], now: Date.now() });
    const hanging = vi.spyOn(globalThis, "fetch").mockReturnValueOnce(new Promise<Response>(() => undefined));
    try {
      const first = expect401(auth(bearer(token)), "Unable to reach authentication key server");
      await vi.advanceTimersByTimeAsync(6_001);
      await first;
      hanging.mockRestore();
      vi.setSystemTime(Date.now() + 31_000);
      expect((await auth(bearer(token))).userId).toBe("u-42");
    } finally {
      hanging.mockRestore();
      vi.useRealTimers();
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

describe("jwk-token: require_exp", () => {
  // The shared fake always sets exp, so these tokens come from a key set of their own.
  let url: string;
  let sign: (claims: Record<string, unknown>, exp?: string) => Promise<string>;
  let close: () => Promise<void>;

  beforeAll(async () => {
    const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
    const jwk = { ...(await exportJWK(publicKey)), alg: "ES256", kid: "no-exp-test" };
    const server = createHttpServer((_req, res) => res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify({ keys: [jwk] })));
    url = `http://127.0.0.1:${await listenOn(server)}/jwks.json`;
    sign = (claims, exp) => {
      const jwt = new SignJWT(claims).setProtectedHeader({ alg: "ES256", kid: "no-exp-test" }).setIssuedAt();
      return (exp ? jwt.setExpirationTime(exp) : jwt).sign(privateKey);
    };
    close = () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    };
  });
  afterAll(() => close());

  const auth = (jwk_config: Record<string, unknown>) => createAuthenticator(settings({ module: "jwk-token", jwk_config: { url, ...jwk_config } }));
  const CLAIMS = { user_id: "u-7", username: "eve" };

  it("is on by default: a validly signed token without exp is refused", async () => {
    expect(settings({ module: "jwk-token", jwk_config: { url } }).jwk_config?.jwt_configuration.require_exp).toBe(true);
    await expect401(auth({})(bearer(await sign(CLAIMS))), "Token missing claim: exp");
    expect((await auth({})(bearer(await sign(CLAIMS, "1h")))).userId).toBe("u-7");
  });

  it("can be turned off; exp is still enforced when present", async () => {
    const lenient = auth({ jwt_configuration: { require_exp: false } });
    expect((await lenient(bearer(await sign(CLAIMS)))).userId).toBe("u-7");
    await expect401(lenient(bearer(await sign(CLAIMS, "-1m"))), "Token has expired");
  });
});

describe("isAllowed", () => {
  const rules: AccessRule[] = [
    { role: "*", actions: ["query", "info"] },
    { role: "manager", actions: ["admin"] },
    { role: "developer", actions: ["read_prompts", "model_override"] },
  ];

  it("allows everything when no rules are configured, except acting on others' conversations", () => {
    expect(isAllowed(undefined, [], "manage_prompts")).toBe(true);
    expect(isAllowed(undefined, [], "admin")).toBe(true);
    for (const action of ["list_other_conversations", "read_other_conversations", "query_other_conversations", "delete_other_conversations"]) {
      expect(isAllowed(undefined, ["manager"], action)).toBe(false);
    }
  });

  it("reads an empty rule list as no rules, as the original does", () => {
    expect(isAllowed([], ["manager"], "query")).toBe(true);
    expect(isAllowed([], ["manager"], "read_other_conversations")).toBe(false);
  });

  it("gives the * rule to every user", () => {
    expect(isAllowed(rules, [], "query")).toBe(true);
    expect(isAllowed(rules, [], "read_prompts")).toBe(false);
  });

  it("gives a role its actions only", () => {
    expect(isAllowed(rules, ["developer"], "read_prompts")).toBe(true);
    expect(isAllowed(rules, ["developer"], "model_override")).toBe(true);
    expect(isAllowed(rules, ["developer"], "manage_prompts")).toBe(false);
  });

  it("lets the admin action grant every action", () => {
    expect(isAllowed(rules, ["manager"], "manage_prompts")).toBe(true);
    expect(isAllowed(rules, ["manager"], "a2a_jsonrpc")).toBe(true);
    expect(isAllowed(rules, ["dev", "manager"], "admin")).toBe(true);
    expect(isAllowed(rules, ["developer"], "admin")).toBe(false);
  });
});

describe("acting on other users' conversations", () => {
  const rules: AccessRule[] = [
    { role: "*", actions: ["query", "get_conversation"] },
    { role: "support", actions: ["list_other_conversations", "read_other_conversations"] },
    { role: "moderator", actions: ["delete_other_conversations", "query_other_conversations"] },
    { role: "operator", actions: ["admin"] },
  ];

  it("maps each operation to the original system's action", () => {
    expect(OTHERS_ACTION_FOR).toEqual({
      list: "list_other_conversations",
      read: "read_other_conversations",
      continue: "read_other_conversations",
      update: "query_other_conversations",
      delete: "delete_other_conversations",
    });
  });

  it("needs a rule that grants it, by name or through admin", () => {
    expect(mayActOnOthers(undefined, [], "read")).toBe(false);
    expect(mayActOnOthers(rules, [], "read")).toBe(false);
    expect(mayActOnOthers(rules, ["support"], "list")).toBe(true);
    expect(mayActOnOthers(rules, ["support"], "read")).toBe(true);
    expect(mayActOnOthers(rules, ["support"], "continue")).toBe(true);
    expect(mayActOnOthers(rules, ["support"], "delete")).toBe(false);
    expect(mayActOnOthers(rules, ["support"], "update")).toBe(false);
    expect(mayActOnOthers(rules, ["moderator"], "delete")).toBe(true);
    expect(mayActOnOthers(rules, ["moderator"], "update")).toBe(true);
    expect(mayActOnOthers(rules, ["moderator"], "read")).toBe(false);
    for (const operation of ["list", "read", "continue", "update", "delete"] as const) {
      expect(mayActOnOthers(rules, ["operator"], operation)).toBe(true);
    }
  });

  it("a rule for * grants it to everyone", () => {
    expect(mayActOnOthers([{ role: "*", actions: ["read_other_conversations"] }], [], "read")).toBe(true);
  });
});

/** The 400 of a malformed identity header: the original system's text, and a cause. */
async function expect400(promise: Promise<unknown>, response: string, cause?: RegExp): Promise<void> {
  const error = await rejection(promise);
  expect(error.status).toBe(400);
  expect(error.body.detail.response).toBe(response);
  if (cause) expect(error.body.detail.cause).toMatch(cause);
}

describe("rh-identity", () => {
  const auth = createAuthenticator(settings({ module: "rh-identity", rh_identity_config: {} }));
  const header = (document: unknown) => Buffer.from(typeof document === "string" ? document : JSON.stringify(document)).toString("base64");
  const withHeader = (value: string) => request({ "x-rh-identity": value });
  const USER = { identity: { type: "User", org_id: "org-1", account_number: "acct-9", user: { user_id: "u-100", username: "jdoe" } } };
  const SYSTEM = { identity: { type: "System", org_id: "org-2", system: { cn: "c1a2-machine" } } };
  const ACCOUNT = { identity: { type: "ServiceAccount", org_id: "org-3", service_account: { client_id: "client-5", username: "service-account-5" } } };

  it("reads a User identity, keeping org id and system id", async () => {
    expect(await auth(withHeader(header(USER)))).toEqual({
      userId: "u-100",
      username: "jdoe",
      roles: [],
      skipUserIdCheck: false,
      token: null,
      rhIdentity: { type: "User", orgId: "org-1", systemId: "u-100", accountNumber: "acct-9" },
    });
  });

  it("reads a System identity: the cn is the id, the account number the name", async () => {
    expect(await auth(withHeader(header(SYSTEM)))).toMatchObject({
      userId: "c1a2-machine",
      username: "c1a2-machine",
      rhIdentity: { type: "System", orgId: "org-2", systemId: "c1a2-machine", accountNumber: "" },
    });
    const withAccount = { identity: { ...SYSTEM.identity, account_number: "acct-1" } };
    expect((await auth(withHeader(header(withAccount)))).username).toBe("acct-1");
  });

  it("reads a ServiceAccount identity", async () => {
    expect(await auth(withHeader(header(ACCOUNT)))).toMatchObject({
      userId: "client-5",
      username: "service-account-5",
      rhIdentity: { type: "ServiceAccount", orgId: "org-3", systemId: "client-5" },
    });
  });

  it("ignores fields it does not read, and an empty org id on a User", async () => {
    const document = { identity: { ...USER.identity, org_id: "", internal: { x: 1 }, user: { ...USER.identity.user, email: "j@example.com" } }, extra: true };
    expect((await auth(withHeader(header(document)))).rhIdentity?.orgId).toBe("");
  });

  it("answers 401 without the header", async () => {
    await expect401(auth(request()), "Missing x-rh-identity header");
    await expect401(auth(withHeader("  ")), "Missing x-rh-identity header");
  });

  it("enforces max_header_size on the base64 form", async () => {
    const value = header(USER);
    const sized = (max: number) => createAuthenticator(settings({ module: "rh-identity", rh_identity_config: { max_header_size: max } }));
    expect((await sized(value.length)(withHeader(value))).userId).toBe("u-100");
    await expect400(sized(value.length - 1)(withHeader(value)), "x-rh-identity header exceeds maximum allowed size", /limit is/);
    // The default, 8192 bytes.
    const big = header({ identity: { ...USER.identity, padding: "x".repeat(7000) } });
    await expect400(auth(withHeader(big)), "x-rh-identity header exceeds maximum allowed size");
  });

  it.each([
    ["characters outside base64", "not base64!"],
    ["missing padding", header(USER).replace(/=+$/, "")],
    ["base64url alphabet", Buffer.from(JSON.stringify({ identity: { type: "User", user: { user_id: "a??>", username: "b" } } })).toString("base64url")],
    ["invalid UTF-8", Buffer.from([0xff, 0xfe, 0x7b, 0x7d]).toString("base64")],
  ])("answers 400 for %s", async (_name, value) => {
    await expect400(auth(withHeader(value)), "Invalid base64 encoding in x-rh-identity header");
  });

  it("answers 400 for JSON that does not parse", async () => {
    await expect400(auth(withHeader(header("{identity: nope"))), "Invalid JSON in x-rh-identity header");
  });

  it.each([
    ["not an object", "[1, 2]", /\(document\)|identity/],
    ["no identity", { entitlements: {} }, /^identity: /],
    ["an unknown type", { identity: { type: "Robot", user: { user_id: "a", username: "b" } } }, /identity\.type: must be User, System or ServiceAccount/],
    ["a User without user", { identity: { type: "User", org_id: "o" } }, /identity\.user: required for type User/],
    ["a User without user_id", { identity: { type: "User", user: { username: "b" } } }, /identity\.user\.user_id/],
    ["a blank username", { identity: { type: "User", user: { user_id: "a", username: "   " } } }, /identity\.user\.username: must not be blank/],
    ["a numeric user_id", { identity: { type: "User", user: { user_id: 42, username: "b" } } }, /identity\.user\.user_id: must be a string/],
    ["an over-long username", { identity: { type: "User", user: { user_id: "a", username: "n".repeat(257) } } }, /at most 256/],
    ["a control character", { identity: { type: "User", user: { user_id: "a\u0007", username: "b" } } }, /control characters/],
    ["DEL", { identity: { type: "User", user: { user_id: "a", username: "b\u007f" } } }, /control characters/],
    ["a System without org_id", { identity: { type: "System", system: { cn: "c" } } }, /identity\.org_id: required for type System/],
    ["a System without cn", { identity: { type: "System", org_id: "o", system: {} } }, /identity\.system\.cn/],
    ["a bad org_id", { identity: { ...USER.identity, org_id: "o\n" } }, /identity\.org_id: must not contain control characters/],
    ["a ServiceAccount without client_id", { identity: { type: "ServiceAccount", service_account: { username: "s" } } }, /identity\.service_account\.client_id/],
    ["malformed entitlements", { ...USER, entitlements: { rhel: true } }, /entitlements\.rhel/],
  ])("answers 400 for %s", async (_name, document, cause) => {
    await expect400(auth(withHeader(header(document))), "Invalid identity data", cause);
  });

  it("never echoes the header's values in the cause", async () => {
    const error = await rejection(auth(withHeader(header({ identity: { type: "User", user: { user_id: "secret-value\u0001", username: "b" } } }))));
    expect(error.body.detail.cause).not.toContain("secret-value");
  });

  it("requires every configured entitlement (403 otherwise)", async () => {
    const entitled = createAuthenticator(settings({ module: "rh-identity", rh_identity_config: { required_entitlements: ["rhel", "ansible"] } }));
    const document = (entitlements: unknown) => header({ ...USER, entitlements });
    const both = { rhel: { is_entitled: true }, ansible: { is_entitled: true, is_trial: false } };
    expect((await entitled(withHeader(document(both)))).userId).toBe("u-100");
    for (const entitlements of [{ rhel: { is_entitled: true } }, { ...both, ansible: { is_entitled: false } }, undefined]) {
      const error = await rejection(entitled(withHeader(document(entitlements))));
      expect(error.status).toBe(403);
      expect(error.body.detail.response).toBe("Insufficient entitlements");
      expect(error.body.detail.cause).toMatch(/^Missing required entitlements: .*ansible/);
    }
  });
});

describe("cluster modules", () => {
  let cluster: ClusterApiServer;
  beforeAll(async () => {
    cluster = await startClusterApi();
  });
  afterAll(() => cluster.close());

  const clusterSettings = (module: "k8s" | "trusted-proxy", mode: string, extra: Record<string, unknown> = {}) =>
    settings({ module, k8s_cluster_api: `${cluster.url}/${mode}`, k8s_service_account_token: CLUSTER_SERVICE_TOKEN, ...extra });
  const unavailable = async (promise: Promise<unknown>, cause: RegExp) => {
    const error = await rejection(promise);
    expect(error.status).toBe(503);
    expect(error.body.detail.response).toBe("Unable to connect to the cluster API");
    expect(error.body.detail.cause).toMatch(cause);
  };
  const quietly = async <T>(work: () => Promise<T>): Promise<T> => {
    const spies = [vi.spyOn(console, "warn").mockImplementation(() => {}), vi.spyOn(console, "error").mockImplementation(() => {})];
    try {
      return await work();
    } finally {
      for (const spy of spies) spy.mockRestore();
    }
  };

  describe("k8s", () => {
    const k8s = (mode = "ok", timeoutMs?: number) => createAuthenticator(clusterSettings("k8s", mode), { timeoutMs });

    it("takes user id and name from the TokenReview and passes the token on", async () => {
      expect(await k8s()(bearer("user.alice"))).toEqual({ userId: "uid-alice", username: "alice", roles: [], skipUserIdCheck: false, token: "user.alice" });
    });

    it("uses the username when the review has no uid, and the cluster id for kube:admin", async () => {
      expect((await k8s()(bearer("nouid.bob"))).userId).toBe("bob");
      expect(await k8s()(bearer("kubeadmin"))).toMatchObject({ userId: CLUSTER_ID, username: "kube:admin" });
    });

    it("answers 401 for a token the cluster does not accept, and for a review without user", async () => {
      await expect401(k8s()(bearer("garbage-token")), "Invalid or expired cluster token");
      await expect401(k8s()(bearer("nouser")), "Invalid or expired cluster token");
      await expect401(k8s()(bearer("emptyname")), "Invalid or expired cluster token");
      await expect401(k8s()(request()), "No Authorization header found");
    });

    it("answers 403 when the SubjectAccessReview of GET /ls-access is denied", async () => {
      const error = await rejection(k8s()(bearer("denied.carol")));
      expect(error.status).toBe(403);
      expect(error.body.detail).toEqual({
        response: "User does not have permission to access this endpoint",
        cause: "User uid-carol is not authorized to access this endpoint.",
      });
    });

    it("caches a positive review briefly, never a negative one", async () => {
      const auth = k8s();
      for (let i = 0; i < 3; i++) await auth(bearer("user.cached-unit"));
      // Another authenticator of the same cluster (a reloaded configuration) shares the cache.
      await k8s()(bearer("user.cached-unit"));
      expect(cluster.stats().tokenReviews["user.cached-unit"]).toBe(1);
      expect(cluster.stats().accessReviews["cached-unit"]).toBe(1);
      for (let i = 0; i < 2; i++) await rejection(auth(bearer("denied.uncached-unit")));
      expect(cluster.stats().accessReviews["uncached-unit"]).toBe(2);
    });

    it("does not cache past the token's own exp", async () => {
      const cache = new ReviewCache<string>();
      const jwt = (exp: number) => `e30.${Buffer.from(JSON.stringify({ exp })).toString("base64url")}.c2ln`;
      const now = Math.floor(Date.now() / 1000);
      for (const [token, kept] of [[jwt(now - 5), false], [jwt(now + 3600), true], ["opaque-token", true]] as const) {
        const key = await cache.key("https://api.example", token);
        cache.set(key, token, "value");
        expect(cache.get(key)).toBe(kept ? "value" : undefined);
      }
      expect(await cache.key("https://api.example", "secret-token")).not.toContain("secret-token");
    });

    it("answers 503 when the cluster API is down, throttled, unreachable or too slow", async () => {
      await quietly(async () => {
        await unavailable(k8s("down")(bearer("user.a")), /^Cluster API unavailable: the server is currently unable to handle the request \(status 503\)$/);
        await unavailable(k8s("throttled")(bearer("user.a")), /\(status 429\)$/);
        await unavailable(k8s("garbage")(bearer("user.a")), /not JSON/);
        await unavailable(k8s("hang", 200)(bearer("user.a")), /^Failed to connect to the cluster API: no answer within 0.2 s$/);
        const closed = createAuthenticator(settings({ module: "k8s", k8s_cluster_api: `http://127.0.0.1:${await closedPort()}`, k8s_service_account_token: CLUSTER_SERVICE_TOKEN }));
        await unavailable(closed(bearer("user.a")), /^Failed to connect to the cluster API: /);
      });
    });

    it("works through a slow cluster API", async () => {
      expect((await k8s("slow")(bearer("user.patient"))).username).toBe("patient");
    });

    it("answers 500 when the cluster refuses the service's own credential", async () => {
      await quietly(async () => {
        for (const [mode, status] of [["unauthorized", 401], ["forbidden", 403]] as const) {
          const error = await rejection(k8s(mode)(bearer("user.a")));
          expect(error.status).toBe(500);
          expect(error.body.detail.response).toBe("Internal server error");
          expect(error.body.detail.cause).toMatch(new RegExp(`^Cluster API request failed: .*\\(status ${status}\\)$`));
        }
        const wrongCredential = createAuthenticator(settings({ module: "k8s", k8s_cluster_api: `${cluster.url}/ok`, k8s_service_account_token: "not-the-right-credential" }));
        expect((await rejection(wrongCredential(bearer("user.a")))).status).toBe(500);
      });
    });

    it("answers 500 for kube:admin outside OpenShift", async () => {
      await quietly(async () => {
        const error = await rejection(k8s("not-openshift")(bearer("kubeadmin")));
        expect(error.status).toBe(500);
        expect(error.body.detail.cause).toMatch(/^Unable to get the cluster id for kube:admin: /);
      });
    });

    it("refuses to run without the cluster address or credential", async () => {
      const error = await rejection((async () => createAuthenticator({ ...BASE, module: "k8s" }))());
      expect(error.status).toBe(500);
    });

    it("warns that a custom CA and skipping TLS verification have no effect", async () => {
      const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
      try {
        createAuthenticator(clusterSettings("k8s", "ok", { k8s_ca_cert_path: "/var/run/ca.crt" }));
        createAuthenticator(clusterSettings("k8s", "ok", { skip_tls_verification: true }));
        expect(warn).toHaveBeenCalledTimes(2);
        expect(String(warn.mock.calls[0][0])).toMatch(/no effect on Workers/);
        createAuthenticator(clusterSettings("k8s", "ok"));
        expect(warn).toHaveBeenCalledTimes(2);
      } finally {
        warn.mockRestore();
      }
    });
  });

  describe("trusted-proxy", () => {
    const proxy = (allowed: unknown, mode = "ok", user_header?: string) =>
      createAuthenticator(
        clusterSettings("trusted-proxy", mode, {
          trusted_proxy_config: { ...(allowed === "omit" ? {} : { allowed_service_accounts: allowed }), ...(user_header ? { user_header } : {}) },
        }),
      );
    const from = (token: string, headers: Record<string, string> = {}) => request({ Authorization: `Bearer ${token}`, ...headers });
    const ALLOWED = [{ namespace: "proxies", name: "oauth-proxy" }];

    it("takes the user from the header when an allowed account's token is valid", async () => {
      const auth = proxy(ALLOWED);
      expect(await auth(from("sa.proxies.oauth-proxy", { "X-Forwarded-User": "  dana  " }))).toEqual({
        userId: "dana",
        username: "dana",
        roles: [],
        skipUserIdCheck: true,
        token: null,
      });
    });

    it("reads the configured header", async () => {
      expect((await proxy(ALLOWED, "ok", "X-Remote-User")(from("sa.proxies.oauth-proxy", { "x-remote-user": "erin" }))).userId).toBe("erin");
    });

    it("answers 403 for a valid account that is not allowed, naming it", async () => {
      const error = await rejection(proxy(ALLOWED)(from("sa.other.impostor", { "X-Forwarded-User": "dana" })));
      expect(error.status).toBe(403);
      expect(error.body.detail.cause).toBe("User system:serviceaccount:other:impostor is not authorized to access this endpoint.");
    });

    it.each([["null", null], ["empty", []], ["omitted", "omit"]])("allows every valid service account, and no person, when the list is %s", async (_name, allowed) => {
      await quietly(async () => {
        expect((await proxy(allowed)(from("sa.any.account", { "X-Forwarded-User": "frank" }))).userId).toBe("frank");
        // The original system lets any valid token assert users here; a person's own token may not.
        const error = await rejection(proxy(allowed)(from("user.someone", { "X-Forwarded-User": "frank" })));
        expect(error.status).toBe(403);
      });
    });

    it("warns when every account may assert users", async () => {
      const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
      try {
        proxy(null);
        expect(String(warn.mock.calls[0]?.[0])).toMatch(/every service account of the cluster/);
      } finally {
        warn.mockRestore();
      }
    });

    it("answers 401 for a token the cluster does not accept, or a review without a user", async () => {
      await expect401(proxy(ALLOWED)(from("nonsense", { "X-Forwarded-User": "g" })), "Invalid or expired proxy service account token");
      await expect401(proxy(ALLOWED)(from("nouser", { "X-Forwarded-User": "g" })), "Invalid service account token: missing user information");
      await expect401(proxy(ALLOWED)(from("emptyname", { "X-Forwarded-User": "g" })), "Invalid service account token: missing username");
      await expect401(proxy(ALLOWED)(request({ "X-Forwarded-User": "g" })), "Missing Authorization header");
    });

    it("answers 401 without the user header, 400 for a malformed one", async () => {
      await expect401(proxy(ALLOWED)(from("sa.proxies.oauth-proxy")), "Missing required header 'X-Forwarded-User'");
      await expect401(proxy(ALLOWED)(from("sa.proxies.oauth-proxy", { "X-Forwarded-User": "   " })), "Missing required header 'X-Forwarded-User'");
      const error = await rejection(proxy(ALLOWED)(from("sa.proxies.oauth-proxy", { "X-Forwarded-User": "x".repeat(300) })));
      expect(error.status).toBe(400);
    });

    it("caches the proxy's review; the allow-list applies on every request", async () => {
      const token = "sa.proxies.cached-proxy";
      await quietly(async () => {
        await proxy(null)(from(token, { "X-Forwarded-User": "h1" }));
        await proxy(null)(from(token, { "X-Forwarded-User": "h2" }));
      });
      expect(cluster.stats().tokenReviews[token]).toBe(1);
      expect((await rejection(proxy(ALLOWED)(from(token, { "X-Forwarded-User": "h3" })))).status).toBe(403);
    });

    it("answers 503 when the cluster API is down", async () => {
      await quietly(() => unavailable(proxy(ALLOWED, "down")(from("sa.proxies.oauth-proxy", { "X-Forwarded-User": "i" })), /status 503/));
    });
  });
});

