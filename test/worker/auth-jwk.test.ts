// The jwk-token module against key sets of the tests' own (test/fakes/jwks-server.ts, "sets"): the
// algorithms it accepts, its 401 causes (UPSTREAM §8), and how its cached key set outlives a key
// server that fails.
import { exportJWK, generateKeyPair, importJWK, SignJWT, type CryptoKey, type JWK, type JWTPayload } from "jose";
import { afterEach, beforeAll, describe, expect, inject, it, vi } from "vitest";
import type { SetMode } from "../fakes/jwks-server.ts";
import { callJson, testConfig } from "./helpers.ts";

const SERVER = new URL(inject("jwksUrl")).origin;
const CLAIMS = { user_id: "u-alg", username: "algy" };

const unauthorized = (cause: string) => ({
  status: 401,
  body: { detail: { response: "Missing or invalid credentials provided by client", cause } },
});

/** Every asymmetric JWS algorithm jose signs and verifies with in workerd. */
const ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"] as const;
type Algorithm = (typeof ALGORITHMS)[number];

/** One private key per algorithm, published under the kid `key-<alg>` with its alg. */
const signing = new Map<Algorithm, CryptoKey>();
const published: JWK[] = [];

beforeAll(async () => {
  // One RSA and one Ed25519 key serve every algorithm of their kind, as a provider may publish them.
  const rsa = await generateKeyPair("RS256", { extractable: true });
  const rsaPrivate = await exportJWK(rsa.privateKey);
  const ed = await generateKeyPair("EdDSA", { extractable: true });
  const edPrivate = await exportJWK(ed.privateKey);
  for (const alg of ALGORITHMS) {
    let publicJwk: JWK;
    if (alg.startsWith("RS") || alg.startsWith("PS")) {
      signing.set(alg, (await importJWK(rsaPrivate, alg)) as CryptoKey);
      publicJwk = await exportJWK(rsa.publicKey);
    } else if (alg.startsWith("Ed")) {
      signing.set(alg, (await importJWK(edPrivate, alg)) as CryptoKey);
      publicJwk = await exportJWK(ed.publicKey);
    } else {
      const pair = await generateKeyPair(alg, { extractable: true });
      signing.set(alg, pair.privateKey);
      publicJwk = await exportJWK(pair.publicKey);
    }
    published.push({ ...publicJwk, kid: `key-${alg}`, alg, use: "sig" });
  }
});

function sign(alg: Algorithm, claims: JWTPayload = CLAIMS, header: { kid?: string } = {}): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg, typ: "JWT", kid: `key-${alg}`, ...header })
    .setIssuedAt()
    .setExpirationTime("2 days")
    .sign(signing.get(alg)!);
}

/** A key set of this test's own, published with every key of `published`. */
async function keySet(keys: JWK[] = published) {
  const base = `${SERVER}/sets/${crypto.randomUUID()}`;
  const put = async (path: string, body: string) => {
    const response = await fetch(`${base}${path}`, { method: "PUT", body });
    await response.arrayBuffer();
  };
  await put("", JSON.stringify({ keys }));
  const config = testConfig({
    authentication: {
      module: "jwk-token",
      jwk_config: { url: `${base}/jwks.json`, jwt_configuration: { user_id_claim: "user_id", username_claim: "username" } },
    },
  });
  return {
    config,
    setMode: (mode: SetMode) => put("/mode", mode),
    requests: async () => ((await (await fetch(`${base}/requests`)).json()) as { requests: number }).requests,
    authorized: (token: string) => callJson("/authorized", { method: "POST", config, token }),
  };
}

const b64url = (text: string) => btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
/** The probe's junk token: a header naming a key nobody published, an empty payload, no signature. */
const JUNK = `${b64url('{"alg":"RS256","kid":"x123"}')}.e30.AAAA`;
const ok = { status: 200, body: { user_id: "u-alg", username: "algy", skip_userid_check: false } };

/** Moves the clock `ms` on (only Date: timers and the key server's timeout stay real). */
function later(ms: number): void {
  if (!vi.isFakeTimers()) vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
  vi.setSystemTime(Date.now() + ms);
}
afterEach(() => {
  vi.useRealTimers();
});

describe("jwk-token algorithms", () => {
  it.each(ALGORITHMS)("accepts a token signed with %s", async (alg) => {
    const set = await keySet();
    expect(await set.authorized(await sign(alg))).toEqual(ok);
  });

  it("accepts a token without kid by the first key of its algorithm", async () => {
    const set = await keySet();
    expect(await set.authorized(await sign("ES384", CLAIMS, { kid: undefined }))).toEqual(ok);
  });

  it("refuses a token whose alg is not the alg of the key its kid names", async () => {
    const set = await keySet();
    // The RSA key of key-RS256 signed it, under PS256: the key is published for RS256 only.
    expect(await set.authorized(await sign("PS256", CLAIMS, { kid: "key-RS256" }))).toEqual(unauthorized("Token signed by unknown key"));
  });

  it("refuses symmetric and unsigned tokens, saying their algorithm is not supported", async () => {
    const set = await keySet();
    const hs256 = await new SignJWT(CLAIMS)
      .setProtectedHeader({ alg: "HS256", kid: "key-RS256" })
      .setExpirationTime("1h")
      .sign(new TextEncoder().encode("a-shared-secret-of-enough-length!"));
    const none = `${b64url('{"alg":"none","kid":"key-RS256"}')}.${b64url(JSON.stringify(CLAIMS))}.`;
    const es256k = `${b64url('{"alg":"ES256K","kid":"key-ES256"}')}.${b64url(JSON.stringify(CLAIMS))}.AAAA`;
    for (const token of [hs256, none, es256k]) {
      expect(await set.authorized(token)).toEqual(unauthorized("Token algorithm is not supported"));
    }
  });
});

describe("jwk-token causes (UPSTREAM §8)", () => {
  it("a token that cannot be decoded", async () => {
    const set = await keySet();
    for (const token of ["not-a-jwt", "a.b.c", `${b64url("not json")}.e30.AAAA`]) {
      expect(await set.authorized(token)).toEqual(unauthorized("Token could not be decoded"));
    }
  });

  it("claims that fail validation other than expiry", async () => {
    const set = await keySet();
    const now = Math.floor(Date.now() / 1000);
    expect(await set.authorized(await sign("RS256", { ...CLAIMS, nbf: now + 3600 }))).toEqual(unauthorized("Token validation failed"));
    // Issued in the future, as the original's claim check refuses; issued now is fine.
    const issuedAt = (iat: number) =>
      new SignJWT(CLAIMS).setProtectedHeader({ alg: "ES256", kid: "key-ES256" }).setIssuedAt(iat).setExpirationTime(now + 7200).sign(signing.get("ES256")!);
    expect(await set.authorized(await issuedAt(now + 3600))).toEqual(unauthorized("Token validation failed"));
    expect(await set.authorized(await issuedAt(now))).toEqual(ok);
    const stringExp = await new SignJWT({ ...CLAIMS, exp: String(now + 3600) } as unknown as JWTPayload)
      .setProtectedHeader({ alg: "ES256", kid: "key-ES256" })
      .sign(signing.get("ES256")!);
    expect(await set.authorized(stringExp)).toEqual(unauthorized("Token validation failed"));
  });

  it.each([
    ["down", "Unable to reach authentication key server"],
    ["500", "Unable to reach authentication key server"],
    ["invalid-json", "Authentication key server returned invalid data"],
    ["not-a-key-set", "Authentication keys are malformed"],
  ] as const)("a key server that is %s", async (mode, cause) => {
    const set = await keySet();
    await set.setMode(mode);
    expect(await set.authorized(await sign("RS256"))).toEqual(unauthorized(cause));
  });

  it("a key server slower than 5 s", { timeout: 20_000 }, async () => {
    const set = await keySet();
    await set.setMode("slow");
    expect(await set.authorized(await sign("RS256"))).toEqual(unauthorized("Unable to reach authentication key server"));
  });
});

describe("jwk-token key set cache", () => {
  it("keeps the known keys when a token naming an unknown key cannot refresh them (the probe)", async () => {
    const set = await keySet();
    const good = await sign("RS256");
    expect(await set.authorized(good)).toEqual(ok);
    later(31_000);
    await set.setMode("down");
    expect(await set.authorized(JUNK)).toEqual(unauthorized("Unable to reach authentication key server"));
    // Every valid token still passes, and the junk no longer reaches the key server.
    expect(await set.authorized(good)).toEqual(ok);
    expect(await set.authorized(JUNK)).toEqual(unauthorized("Unable to reach authentication key server"));
    expect(await set.authorized(good)).toEqual(ok);
    expect(await set.requests()).toBe(2);
    // Back, and 30 s on: the refresh answers that nobody published the key.
    await set.setMode("ok");
    later(31_000);
    expect(await set.authorized(JUNK)).toEqual(unauthorized("Token signed by unknown key"));
    expect(await set.authorized(JUNK)).toEqual(unauthorized("Token signed by unknown key"));
    expect(await set.requests()).toBe(3);
  });

  it("lets concurrent requests share one refresh, and the next ones not wait for a slow key server", { timeout: 30_000 }, async () => {
    const set = await keySet();
    const good = await sign("ES256");
    expect(await set.authorized(good)).toEqual(ok);
    later(31_000);
    await set.setMode("slow");
    const answers = await Promise.all([set.authorized(JUNK), set.authorized(JUNK), set.authorized(good), set.authorized(JUNK)]);
    expect(answers).toEqual([
      unauthorized("Unable to reach authentication key server"),
      unauthorized("Unable to reach authentication key server"),
      ok,
      unauthorized("Unable to reach authentication key server"),
    ]);
    expect(await set.requests()).toBe(2);
    const started = performance.now();
    expect(await set.authorized(JUNK)).toEqual(unauthorized("Unable to reach authentication key server"));
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(await set.requests()).toBe(2);
  });

  it("asks a key server that is down at most once per 5 s before it has any keys", async () => {
    const set = await keySet();
    await set.setMode("down");
    const good = await sign("RS256");
    expect(await set.authorized(good)).toEqual(unauthorized("Unable to reach authentication key server"));
    expect(await set.authorized(good)).toEqual(unauthorized("Unable to reach authentication key server"));
    expect(await set.requests()).toBe(1);
    await set.setMode("ok");
    later(6_000);
    expect(await set.authorized(good)).toEqual(ok);
    expect(await set.requests()).toBe(2);
  });

  it("serves expired keys it cannot fetch again until an hour after they were fetched", async () => {
    const set = await keySet();
    const good = await sign("EdDSA");
    expect(await set.authorized(good)).toEqual(ok);
    await set.setMode("down");
    later(11 * 60_000);
    expect(await set.authorized(good)).toEqual(ok);
    later(40 * 60_000);
    expect(await set.authorized(good)).toEqual(ok);
    expect(await set.requests()).toBe(3);
    later(10 * 60_000);
    expect(await set.authorized(good)).toEqual(unauthorized("Unable to reach authentication key server"));
    await set.setMode("ok");
    later(31_000);
    expect(await set.authorized(good)).toEqual(ok);
  });
});
