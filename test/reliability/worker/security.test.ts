// Security (RELIABILITY.md "Security"): the JWT attack set and generated garbage tokens (all 401),
// identity-header and trusted-proxy abuse, configured secrets searched for by value in every
// answer, error cause and log line, MCP registration refusing every spelling of an internal
// address, and other users' conversations, feedback, approvals, streams, A2A tasks and quotas out of
// reach. Generated inputs come from fast-check with the suite's seed (RELIABILITY_SEED).
import fc from "fast-check";
import { exportJWK, generateKeyPair, type JWK } from "jose";
import { describe, expect, inject, it, vi } from "vitest";
import { call, callJson, readSse, settle, testConfig } from "../../worker/helpers.ts";
import { envelopeProblem, figure, inBatches, scaled, SEED } from "./suite.ts";

type Json = Record<string, unknown>;

const tokens = inject("tokens");
const cluster = inject("clusterApi");
const mcp = inject("mcp");

const b64url = (data: string | Uint8Array) => {
  const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
};
const encodeJson = (value: unknown) => b64url(JSON.stringify(value));

async function hmac(alg: "HS256" | "HS384" | "HS512", key: Uint8Array, input: string): Promise<string> {
  const hash = { HS256: "SHA-256", HS384: "SHA-384", HS512: "SHA-512" }[alg];
  const cryptoKey = await crypto.subtle.importKey("raw", key, { name: "HMAC", hash }, false, ["sign"]);
  return b64url(new Uint8Array(await crypto.subtle.sign("HMAC", cryptoKey, new TextEncoder().encode(input))));
}

describe("the JWT attack set", () => {
  const jwk = testConfig({
    authentication: {
      module: "jwk-token",
      jwk_config: { url: inject("jwksUrl"), jwt_configuration: { user_id_claim: "user_id", username_claim: "username" } },
    },
  });
  const GARBAGE = scaled(300, 3_000);

  it(`refuses every forged, broken, expired, premature, oversized and generated token with 401 (${GARBAGE} generated)`, { timeout: 300_000 }, async () => {
    // The key set the identity provider publishes: what an attacker has too.
    const published = ((await (await fetch(inject("jwksUrl"))).json()) as { keys: Array<JWK & { kid: string }> }).keys[0]!;
    const kid = published.kid;
    const now = Math.floor(Date.now() / 1000);
    const claims = { user_id: "attacker", username: "mallory", exp: now + 3600, iat: now };
    const [goodHeader, goodPayload, goodSignature] = tokens.good.split(".");
    const attacker = await generateKeyPair("RS256", { extractable: true });
    const attackerJwk = await exportJWK(attacker.publicKey);
    // Signed by hand (jose refuses to make some of these), with a key the provider never published.
    const signAttacker = async (header: Json, payload: Json) => {
      const input = `${encodeJson({ alg: "RS256", ...header })}.${encodeJson(payload)}`;
      const signature = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", attacker.privateKey, new TextEncoder().encode(input));
      return `${input}.${b64url(new Uint8Array(signature))}`;
    };
    const unsigned = (header: Json, payload: Json, signature = "") => `${encodeJson(header)}.${encodeJson(payload)}.${signature}`;
    const publishedText = JSON.stringify(published);
    const modulus = Uint8Array.from(atob(published.n!.replace(/-/g, "+").replace(/_/g, "/")), (char) => char.charCodeAt(0));
    const confusion = async (alg: "HS256" | "HS384" | "HS512", key: Uint8Array) => {
      const input = `${encodeJson({ alg, typ: "JWT", kid })}.${encodeJson(claims)}`;
      return `${input}.${await hmac(alg, key, input)}`;
    };
    const pad = (bytes: number) => ({ ...claims, pad: "x".repeat(bytes) });

    const named: Array<[string, string]> = [
      ["alg none", unsigned({ alg: "none", typ: "JWT", kid }, claims)],
      ["alg None", unsigned({ alg: "None", kid }, claims)],
      ["alg NONE with a signature", unsigned({ alg: "NONE", kid }, claims, goodSignature)],
      ["alg none on the good token's payload", `${encodeJson({ alg: "none", kid })}.${goodPayload}.`],
      ["HS256 keyed with the published JWK", await confusion("HS256", new TextEncoder().encode(publishedText))],
      ["HS256 keyed with the modulus", await confusion("HS256", modulus)],
      ["HS384 keyed with the published JWK", await confusion("HS384", new TextEncoder().encode(publishedText))],
      ["HS512 keyed with the modulus", await confusion("HS512", modulus)],
      ["expired", tokens.expired],
      ["expired a second ago", await signAttacker({ kid }, { ...claims, exp: now - 1 })],
      ["not yet valid (nbf in an hour), forged", await signAttacker({ kid }, { ...claims, nbf: now + 3600 })],
      ["unknown kid", tokens.unknownKey],
      ["kid path traversal", await signAttacker({ kid: "../../../../dev/null" }, claims)],
      ["kid injection", await signAttacker({ kid: "' OR '1'='1" }, claims)],
      ["no kid, attacker's key", await signAttacker({}, claims)],
      ["attacker's key embedded in the header (jwk)", await signAttacker({ kid, jwk: attackerJwk }, claims)],
      ["attacker's key set named in the header (jku)", await signAttacker({ kid, jku: "https://attacker.example/jwks.json" }, claims)],
      ["attacker's certificate named in the header (x5u)", await signAttacker({ kid, x5u: "https://attacker.example/cert.pem" }, claims)],
      ["forged signature", tokens.forged],
      ["tampered payload, original signature", `${goodHeader}.${encodeJson({ ...JSON.parse(atob(goodPayload!.replace(/-/g, "+").replace(/_/g, "/"))), user_id: "user-jwk-admin" })}.${goodSignature}`],
      ["signature removed", `${goodHeader}.${goodPayload}.`],
      ["signature truncated", `${goodHeader}.${goodPayload}.${goodSignature!.slice(0, 20)}`],
      ["signature of another token", `${goodHeader}.${goodPayload}.${tokens.admin.split(".")[2]}`],
      ["header swapped for HS256, original signature", `${encodeJson({ alg: "HS256", typ: "JWT", kid })}.${goodPayload}.${goodSignature}`],
      ["missing user_id", tokens.missingClaim],
      ["critical header the gateway does not know", await signAttacker({ kid, crit: ["x-unknown"], "x-unknown": 1 }, claims)],
      ["unencoded payload (b64: false)", await signAttacker({ kid, b64: false, crit: ["b64"] }, claims)],
      ["two parts", `${goodHeader}.${goodPayload}`],
      ["four parts", `${tokens.good}.extra`],
      ["empty parts", ".."],
      ["JWE-shaped (five parts)", `${goodHeader}.${goodPayload}.a.b.c`],
      ["header not JSON", `${b64url("not json")}.${goodPayload}.${goodSignature}`],
      ["payload not JSON", `${goodHeader}.${b64url("not json")}.${goodSignature}`],
      ["payload a JSON array", `${goodHeader}.${b64url("[1,2]")}.${goodSignature}`],
      ["not base64url", "!!!.###.$$$"],
      ["oversized forged, 8 KiB", await signAttacker({ kid }, pad(8 * 1024))],
      ["oversized forged, 64 KiB", await signAttacker({ kid }, pad(64 * 1024))],
      ["oversized forged, 1 MiB", await signAttacker({ kid }, pad(1024 * 1024))],
      ["oversized garbage, 256 KiB", "a".repeat(256 * 1024)],
    ];
    // Claims of the wrong shape, signed by the attacker under the real kid (forged): never accepted.
    for (const [name, payload] of [
      ["exp as a string", { ...claims, exp: String(now + 3600) }],
      ["user_id an object", { ...claims, user_id: { id: "x" } }],
      ["user_id empty", { ...claims, user_id: "" }],
      ["no exp", { user_id: "attacker", username: "mallory" }],
    ] as const) {
      named.push([`forged, ${name}`, await signAttacker({ kid }, payload as Json)]);
    }
    // Validly signed but broken tokens cannot be made without the provider's key; the provider's
    // own expired, unknown-key and missing-claim tokens (test/global-setup.ts) stand for them.

    const header = fc.record(
      {
        alg: fc.oneof(fc.constantFrom("RS256", "ES256", "PS256", "EdDSA", "HS256", "none", "", "RS1", "rs256"), fc.string()),
        kid: fc.oneof(fc.constant(kid), fc.string(), fc.integer()),
        typ: fc.constantFrom("JWT", "at+jwt", "JWE", ""),
        crit: fc.array(fc.string(), { maxLength: 2 }),
        jwk: fc.constant(attackerJwk),
        b64: fc.boolean(),
      },
      { requiredKeys: ["alg"] },
    );
    const payload = fc.record(
      {
        user_id: fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.constant("user-jwk-admin")),
        username: fc.string(),
        exp: fc.oneof(fc.integer({ min: now - 10_000, max: now + 10_000 }), fc.string(), fc.double()),
        nbf: fc.integer({ min: now - 10_000, max: now + 10_000 }),
        realm_access: fc.constant({ roles: ["admin"] }),
      },
      { requiredKeys: [] },
    );
    const garbage = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.tuple(header, payload, fc.oneof(fc.constant(""), fc.constant(goodSignature!), fc.base64String({ maxLength: 400 }))).map(([h, p, s]) => unsigned(h, p, s.replace(/=/g, ""))),
      fc.tuple(fc.base64String(), fc.base64String(), fc.base64String()).map((parts) => parts.join(".")),
      // Reassembled parts of real tokens; the valid token itself (header.payload.signature in order) is no attack.
      fc.array(fc.constantFrom(goodHeader!, goodPayload!, goodSignature!, tokens.admin.split(".")[1]!), { minLength: 1, maxLength: 5 }).map((parts) => parts.join(".")).filter((token) => token !== tokens.good),
    );
    const generated = fc.sample(garbage, { seed: SEED, numRuns: GARBAGE }).map((token, i): [string, string] => [`generated ${i}`, token]);

    const failures: string[] = [];
    const all = [...named, ...generated];
    await inBatches(all, 8, async ([name, token]) => {
      // Only what a client can put in the header reaches the gateway: a token with spaces or line
      // breaks cannot be sent (and would be "No token found" anyway).
      const value = `Bearer ${token}`;
      if (!/^[\x21-\x7e \t]*$/.test(value)) return;
      for (const path of name.startsWith("generated") ? ["/authorized"] : ["/authorized", "/v1/query"]) {
        const response = await call(path, { method: "POST", config: jwk, headers: { Authorization: value }, ...(path === "/v1/query" ? { json: { query: "am I in?" } } : {}) });
        const text = await response.text();
        const problem = response.status !== 401 ? `answered ${response.status} ${text.slice(0, 200)}` : envelopeProblem(401, response.headers.get("Content-Type"), text);
        if (problem) failures.push(`${name} on ${path}: ${problem}`);
      }
    });
    // Authorization header forms that carry no token, or two.
    for (const value of ["Bearer", "Bearer ", "Basic dXNlcjpwYXNz", "Bearer a b", `Bearer ${tokens.good}, Bearer ${tokens.forged}`, `Token ${tokens.good}`, `Bearer\u0009`]) {
      const response = await call("/authorized", { method: "POST", config: jwk, headers: { Authorization: value } });
      if (response.status !== 401) failures.push(`Authorization "${value.slice(0, 40)}" answered ${response.status}`);
      await response.text();
    }
    // The control: the provider's good token is accepted.
    expect((await call("/authorized", { method: "POST", config: jwk, token: tokens.good })).status).toBe(200);
    figure("JWT attack set", all.length + 7, failures.length, `${named.length} named attacks (also on /v1/query), ${generated.length} generated, 7 header forms`);
    expect(failures).toEqual([]);
  });
});

describe("identity headers", () => {
  const CASES = scaled(200, 2_000);
  const rh = testConfig({ authentication: { module: "rh-identity", rh_identity_config: { required_entitlements: ["rhel"] } } });
  const field = fc.oneof(fc.string({ maxLength: 40 }), fc.string({ minLength: 250, maxLength: 300 }), fc.constantFrom("", " ", "a\u0000b", "admin", "\u202eadmin"), fc.integer(), fc.constant(null), fc.constant({ nested: true }));
  const identity = fc.record(
    {
      identity: fc.record(
        {
          type: fc.oneof(fc.constantFrom("User", "System", "ServiceAccount", "Associate", "user", ""), fc.integer()),
          org_id: field,
          account_number: field,
          user: fc.record({ user_id: field, username: field }, { requiredKeys: [] }),
          system: fc.record({ cn: field }, { requiredKeys: [] }),
          service_account: fc.record({ client_id: field, username: field }, { requiredKeys: [] }),
          internal: fc.constant({ org_id: "elevated" }),
        },
        { requiredKeys: [] },
      ),
      entitlements: fc.dictionary(fc.constantFrom("rhel", "ansible", "__proto__", "constructor"), fc.record({ is_entitled: fc.oneof(fc.boolean(), fc.constant("true"), fc.constant(1)) })),
    },
    { requiredKeys: [] },
  );
  const headerValue = fc.oneof(
    identity.map((document) => btoa(unescape(encodeURIComponent(JSON.stringify(document))))),
    identity.map((document) => btoa(unescape(encodeURIComponent(JSON.stringify(document)))).replace(/=+$/, "")),
    fc.string({ maxLength: 100 }).filter((text) => /^[\x20-\x7e]*$/.test(text)),
    fc.base64String({ maxLength: 400 }),
    fc.integer({ min: 8_000, max: 40_000 }).map((length) => btoa("x".repeat(length)).slice(0, length)),
  );

  it(`rh-identity: ${CASES} generated identity headers are 400, 401 or 403 in the envelope, or the identity they say`, { timeout: 300_000 }, async () => {
    const values = fc.sample(headerValue, { seed: SEED, numRuns: CASES });
    const failures: string[] = [];
    await inBatches(values, 8, async (value, i) => {
      const response = await call("/authorized", { method: "POST", config: rh, headers: { "x-rh-identity": value } });
      const text = await response.text();
      if (response.status === 200) {
        // Accepted: it must be exactly who the document names, entitled as required.
        const document = JSON.parse(decodeURIComponent(escape(atob(value.padEnd(Math.ceil(value.length / 4) * 4, "="))))) as { identity: Json & { type: string }; entitlements?: Record<string, { is_entitled: unknown }> };
        const { user_id } = JSON.parse(text) as { user_id: string };
        const expected = { User: (document.identity.user as Json)?.user_id, System: (document.identity.system as Json)?.cn, ServiceAccount: (document.identity.service_account as Json)?.client_id }[document.identity.type];
        if (user_id !== expected) failures.push(`case ${i}: accepted as ${user_id}, the document names ${String(expected)}`);
        if (document.entitlements?.rhel?.is_entitled !== true) failures.push(`case ${i}: accepted without the required entitlement`);
      } else if (![400, 401, 403].includes(response.status)) {
        failures.push(`case ${i}: answered ${response.status} ${text.slice(0, 200)}`);
      } else {
        const problem = envelopeProblem(response.status, response.headers.get("Content-Type"), text);
        if (problem) failures.push(`case ${i}: ${problem}`);
      }
    });
    figure("rh-identity header abuse", values.length, failures.length);
    expect(failures).toEqual([]);
  });

  it("headers that assert an identity change nothing under the other modules", async () => {
    const asserting = { "x-rh-identity": btoa(JSON.stringify({ identity: { type: "User", user: { user_id: "admin", username: "admin" } } })), "X-Forwarded-User": "admin", "X-Remote-User": "admin", "X-User-Id": "admin" };
    const jwk = testConfig({ authentication: { module: "jwk-token", jwk_config: { url: inject("jwksUrl"), jwt_configuration: { user_id_claim: "user_id", username_claim: "username" } } } });
    const k8s = testConfig({ authentication: { module: "k8s", k8s_cluster_api: `${cluster.url}/ok`, k8s_service_account_token: cluster.serviceToken } });
    const failures: string[] = [];
    const checks: Array<[string, string, Record<string, string>, string]> = [
      ["jwk-token", jwk, { Authorization: `Bearer ${tokens.good}` }, "user-jwk-1"],
      ["k8s", k8s, { Authorization: "Bearer user.identity-check" }, "uid-identity-check"],
      ["noop", testConfig(), {}, "00000000-0000-0000-0000-000"],
    ];
    for (const [module, config, credential, expected] of checks) {
      const { status, body } = await callJson<{ user_id: string }>("/authorized", { method: "POST", config, headers: { ...asserting, ...credential } });
      if (status !== 200 || body.user_id !== expected) failures.push(`${module}: answered ${status} as ${body.user_id} (expected ${expected})`);
    }
    figure("identity headers under other modules", checks.length, failures.length);
    expect(failures).toEqual([]);
  });

  it("trusted-proxy: only an allowed proxy's token lets a header name the user", async () => {
    const proxy = (allowed: unknown) =>
      testConfig({
        authentication: { module: "trusted-proxy", k8s_cluster_api: `${cluster.url}/ok`, k8s_service_account_token: cluster.serviceToken, trusted_proxy_config: { allowed_service_accounts: allowed } },
      });
    const allowed = proxy([{ namespace: "auth", name: "oauth-proxy" }]);
    const open = proxy([]);
    const cases: Array<[string, string, Record<string, string>, number, string?]> = [
      ["a user's own token with the header", allowed, { Authorization: "Bearer user.mallory", "X-Forwarded-User": "admin" }, 403],
      ["a user's own token with the header, empty allow-list", open, { Authorization: "Bearer user.mallory", "X-Forwarded-User": "admin" }, 403],
      ["another namespace's account", allowed, { Authorization: "Bearer sa.apps.oauth-proxy", "X-Forwarded-User": "admin" }, 403],
      ["a rejected token", allowed, { Authorization: "Bearer forged.token", "X-Forwarded-User": "admin" }, 401],
      ["no token", allowed, { "X-Forwarded-User": "admin" }, 401],
      ["the header alone under a Basic scheme", allowed, { Authorization: "Basic c2EuYXV0aC5vYXV0aC1wcm94eQ==", "X-Forwarded-User": "admin" }, 401],
      ["no user header", allowed, { Authorization: "Bearer sa.auth.oauth-proxy" }, 401],
      ["a blank user header", allowed, { Authorization: "Bearer sa.auth.oauth-proxy", "X-Forwarded-User": "   " }, 401],
      ["a control character", allowed, { Authorization: "Bearer sa.auth.oauth-proxy", "X-Forwarded-User": "ad\u0001min" }, 400],
      ["an over-long user", allowed, { Authorization: "Bearer sa.auth.oauth-proxy", "X-Forwarded-User": "a".repeat(300) }, 400],
      ["a list of users (the header sent twice)", allowed, { Authorization: "Bearer sa.auth.oauth-proxy", "X-Forwarded-User": "alice, admin" }, 200, "alice, admin"],
      ["the allowed proxy", allowed, { Authorization: "Bearer sa.auth.oauth-proxy", "X-Forwarded-User": "pat" }, 200, "pat"],
    ];
    const failures: string[] = [];
    for (const [name, config, headers, status, user] of cases) {
      const response = await call("/authorized", { method: "POST", config, headers });
      const text = await response.text();
      if (response.status !== status) failures.push(`${name}: answered ${response.status} ${text.slice(0, 200)} (expected ${status})`);
      else if (status === 200 && (JSON.parse(text) as { user_id: string }).user_id !== user) failures.push(`${name}: identified as ${text}`);
      else if (status !== 200) {
        const problem = envelopeProblem(response.status, response.headers.get("Content-Type"), text);
        if (problem) failures.push(`${name}: ${problem}`);
      }
    }
    figure("trusted-proxy abuse", cases.length, failures.length);
    expect(failures).toEqual([]);
  });
});

describe("configured secrets", () => {
  const secrets = {
    backendKey: "sk-reliability-backend-key-7c1d5e9a",
    apiKey: "reliability-api-key-2b8f4c6d0e1a",
    ingressToken: "reliability-ingress-token-5a3c7e9b",
    hecToken: "reliability-hec-token-1f2e3d4c5b6a",
    entraSecret: "reliability-entra-secret-9d8c7b6a",
    mcpToken: mcp.token,
    clusterToken: cluster.serviceToken,
  };
  const label = `secrets-${crypto.randomUUID().slice(0, 8)}`;
  const common = {
    inference_backend: { api_key: `\${env.PARLEY_RELIABILITY_BACKEND_KEY:=${secrets.backendKey}}`, timeout: 2 },
    user_data_collection: {
      feedback_enabled: true,
      feedback_storage: "/tmp/data/feedback",
      transcripts_enabled: true,
      transcripts_storage: "/tmp/data/transcripts",
      data_collector: { enabled: true, ingress_server_url: `${inject("ingressUrl")}/upload/${label}`, ingress_server_auth_token: secrets.ingressToken, ingress_content_service_name: "parley", collection_interval: 600 },
    },
    splunk: { enabled: true, url: `${inject("hec").url}/${label}/services/collector/event`, token_path: `\${env.PARLEY_RELIABILITY_HEC:=${secrets.hecToken}}`, index: "parley", timeout: 2 },
    azure_entra_id: { tenant_id: "tenant", client_id: "client", client_secret: secrets.entraSecret, scope: "https://cognitiveservices.azure.com/.default" },
    mcp_servers: [
      { name: "held", url: `${mcp.base}/auth/${label}/mcp`, authorization_headers: { Authorization: `\${env.PARLEY_RELIABILITY_MCP:=Bearer ${secrets.mcpToken}}` } },
      { name: "held-down", url: mcp.downUrl, authorization_headers: { Authorization: `\${env.PARLEY_RELIABILITY_MCP:=Bearer ${secrets.mcpToken}}` } },
    ],
  };
  const configs: Array<[string, string, Record<string, string>]> = [
    ["noop", testConfig(common), {}],
    ["api-key-token", testConfig({ ...common, authentication: { module: "api-key-token", api_key_config: { api_key: secrets.apiKey } } }), { Authorization: `Bearer ${secrets.apiKey}` }],
    ["k8s", testConfig({ ...common, authentication: { module: "k8s", k8s_cluster_api: `${cluster.url}/ok`, k8s_service_account_token: cluster.serviceToken } }), { Authorization: "Bearer user.secret-keeper" }],
  ];

  /** Every way a value could show: as is, base64, URL-encoded, JSON-escaped. */
  const forms = (value: string) => [value, btoa(value), encodeURIComponent(value), JSON.stringify(value).slice(1, -1)];

  it("never appear in an answer, an error cause or a log line", { timeout: 300_000 }, async () => {
    const lines: string[] = [];
    for (const method of ["error", "warn", "log", "info", "debug"] as const) {
      vi.spyOn(console, method).mockImplementation((...parts: unknown[]) => void lines.push(parts.map((part) => (part instanceof Error ? `${part.stack}` : typeof part === "string" ? part : JSON.stringify(part))).join(" ")));
    }
    const answers: Array<{ what: string; text: string }> = [];
    const record = async (what: string, response: Response) => {
      const headers = [...response.headers].map(([name, value]) => `${name}: ${value}`).join("\n");
      answers.push({ what, text: `${response.status}\n${headers}\n${await response.text()}` });
    };
    const requests: Array<[string, string, Json?]> = [
      ["GET", "/"],
      ["GET", "/v1/info"],
      ["GET", "/v1/config"],
      ["GET", "/v1/models"],
      ["GET", "/v1/providers"],
      ["GET", "/v1/providers/scripted"],
      ["GET", "/v1/tools"],
      ["GET", "/v1/mcp-servers"],
      ["GET", "/v1/mcp-auth/client-options"],
      ["GET", "/readiness"],
      ["GET", "/metrics"],
      ["GET", "/.well-known/agent-card.json"],
      ["POST", "/authorized"],
      ["POST", "/v1/query", { query: "plain" }],
      ["POST", "/v1/query", { query: "which key? #bad-key" }],
      ["POST", "/v1/query", { query: "broken #garbled" }],
      ["POST", "/v1/query", { query: "failing #status=500" }],
      ["POST", "/v1/query", { query: "headers please #call-tool:headers" }],
      ["POST", "/v1/streaming_query", { query: "which key? #bad-key" }],
      ["POST", "/v1/streaming_query", { query: "broken mid-stream #fail-midstream" }],
      ["POST", "/v1/streaming_query", { query: "headers please #call-tool:headers" }],
      ["POST", "/v1/responses", { input: "which key? #bad-key", stream: true }],
      ["POST", "/v1/responses", { input: "headers please #call-tool:headers" }],
      ["POST", "/v1/responses", { input: "which key? #bad-key" }],
      ["POST", "/v1/infer", { question: "which key? #bad-key" }],
      ["POST", "/a2a", { jsonrpc: "2.0", id: "1", method: "message/send", params: { message: { kind: "message", messageId: "m", role: "user", parts: [{ kind: "text", text: "which key? #bad-key" }] } } }],
      ["POST", "/v1/feedback", { conversation_id: "0".repeat(48), user_question: "q", llm_response: "a", sentiment: 1 }],
      ["POST", "/v1/mcp-servers", { name: "leak", url: "https://mcp.example.com/", authorization_headers: { Authorization: `Bearer ${secrets.backendKey}` } }],
      ["POST", "/v1/query", { query: "wrong", unknown_field: secrets.apiKey }],
    ];
    let tried = 0;
    for (const [module, config, credential] of configs) {
      for (const [method, path, json] of requests) {
        tried++;
        await record(`${module} ${method} ${path} ${json ? JSON.stringify(json).slice(0, 60) : ""}`, await call(path, { method, config, headers: credential, ...(json ? { json } : {}) }));
      }
      // The same requests with a wrong credential: every refusal path.
      tried++;
      await record(`${module} wrong credential`, await call("/v1/query", { config, headers: { Authorization: "Bearer wrong-credential" }, json: { query: "x" } }));
    }
    await settle();
    vi.restoreAllMocks();

    const failures: string[] = [];
    // The harness reached what it searches: each configuration loaded and answered, and the tool that
    // repeats its request headers was reached with the held credential.
    for (const [module] of configs) {
      const plain = answers.find((answer) => answer.what.startsWith(`${module} POST /v1/query {"query":"plain"}`));
      if (!plain?.text.startsWith("200")) failures.push(`${module}: the plain question was not answered: ${plain?.text.slice(0, 300)}`);
    }
    for (const [name, value] of Object.entries(secrets)) {
      const found = (text: string) => forms(value).find((form) => text.includes(form));
      for (const answer of answers) {
        const form = found(answer.text);
        if (form) failures.push(`${name} in the answer to ${answer.what}: ...${answer.text.slice(Math.max(0, answer.text.indexOf(form) - 120), answer.text.indexOf(form) + form.length + 20)}...`);
      }
      for (const line of lines) if (found(line)) failures.push(`${name} in a log line: ${line.slice(0, 300)}`);
    }
    figure("configured secrets searched for by value", tried, failures.length, `${Object.keys(secrets).length} secrets x 4 encodings in ${answers.length} answers and ${lines.length} log lines`);
    expect(failures).toEqual([]);
  });
});

describe("MCP registration of internal addresses", () => {
  const CASES = scaled(300, 3_000);
  const octet = fc.integer({ min: 0, max: 255 });
  const internalV4 = fc.oneof(
    fc.tuple(fc.constant(127), octet, octet, octet),
    fc.tuple(fc.constant(10), octet, octet, octet),
    fc.tuple(fc.constant(172), fc.integer({ min: 16, max: 31 }), octet, octet),
    fc.tuple(fc.constant(192), fc.constant(168), octet, octet),
    fc.tuple(fc.constant(169), fc.constant(254), octet, octet),
    fc.tuple(fc.constant(100), fc.integer({ min: 64, max: 127 }), octet, octet),
    fc.tuple(fc.integer({ min: 224, max: 255 }), octet, octet, octet),
    fc.constant([0, 0, 0, 0] as [number, number, number, number]),
  );
  const spelled = fc.tuple(internalV4, fc.constantFrom("dotted", "integer", "hex", "octal", "hex-parts", "short", "zero-padded", "trailing-dot", "mapped-v6", "mapped-v6-hex", "nat64", "6to4", "compat-v6")).map(([[a, b, c, d], how]) => {
    const n = ((a << 24) >>> 0) + (b << 16) + (c << 8) + d;
    const hex = (value: number) => value.toString(16);
    switch (how) {
      case "integer":
        return String(n);
      case "hex":
        return `0x${hex(n)}`;
      case "octal":
        return [a, b, c, d].map((part) => `0${part.toString(8)}`).join(".");
      case "hex-parts":
        return [a, b, c, d].map((part) => `0x${hex(part)}`).join(".");
      case "short":
        return `${a}.${(b << 16) + (c << 8) + d}`;
      case "zero-padded":
        return [a, b, c, d].map((part) => String(part).padStart(3, "0")).join(".");
      case "trailing-dot":
        return `${a}.${b}.${c}.${d}.`;
      case "mapped-v6":
        return `[::ffff:${a}.${b}.${c}.${d}]`;
      case "mapped-v6-hex":
        return `[::ffff:${hex((a << 8) + b)}:${hex((c << 8) + d)}]`;
      case "nat64":
        return `[64:ff9b::${hex((a << 8) + b)}:${hex((c << 8) + d)}]`;
      case "6to4":
        return `[2002:${hex((a << 8) + b)}:${hex((c << 8) + d)}::1]`;
      case "compat-v6":
        return `[::${a}.${b}.${c}.${d}]`;
      default:
        return `${a}.${b}.${c}.${d}`;
    }
  });
  const v6 = fc.constantFrom("[::1]", "[0:0:0:0:0:0:0:1]", "[::]", "[fe80::1]", "[fe80::1%25eth0]", "[fc00::1]", "[fd12:3456::1]", "[ff02::1]", "[0000::0001]", "[::ffff:7f00:1]", "[64:ff9b::a9fe:a9fe]");
  const names = fc.constantFrom("localhost", "LOCALHOST", "localhost.", "api.localhost", "printer.local", "db.internal", "metadata.google.internal", "metadata", "kubernetes.default.svc", "my-service.ns.svc", "intranet", "127.0.0.1.nip.io", "10.0.0.1.nip.io", "app.127.0.0.1.sslip.io", "169.254.169.254.nip.io", "localtest.me");
  const host = fc.oneof(spelled, v6, names);
  const url = fc.tuple(host, fc.constantFrom("", ":80", ":8080", ":443"), fc.constantFrom("/mcp", "/", "", "/a/../mcp"), fc.constantFrom("http", "https", "HTTP", "HtTpS"), fc.constantFrom("", "user@", "public.example.com@", "user:pass@")).map(
    ([h, port, path, scheme, userinfo]) => `${scheme}://${userinfo}${h}${port}${path}`,
  );
  const tricks = fc.constantFrom(
    "http://%31%32%37.0.0.1/mcp",
    "http://\uff11\uff12\uff17.0.0.1/mcp",
    "http:\\\\127.0.0.1\\mcp",
    "http://127.0.0.1\t/mcp",
    "http://0/mcp",
    "http://[::ffff:169.254.169.254]/latest/meta-data",
    "http://169.254.169.254/latest/meta-data/",
    "http://metadata.google.internal/computeMetadata/v1/",
  );
  const config = testConfig({ mcp_servers: [] });

  it(`refuses ${CASES} generated spellings of internal addresses with 422, registering none`, { timeout: 300_000 }, async () => {
    const urls = fc.sample(fc.oneof({ weight: 9, arbitrary: url }, { weight: 1, arbitrary: tricks }), { seed: SEED, numRuns: CASES });
    const failures: string[] = [];
    await inBatches(urls, 8, async (target, i) => {
      const register = await call("/v1/mcp-servers", { json: { name: `internal-${i}`, url: target }, config, user: "registrar" });
      const text = await register.text();
      if (register.status !== 422) failures.push(`POST /v1/mcp-servers ${target}: answered ${register.status} ${text.slice(0, 200)}`);
      else if (envelopeProblem(422, register.headers.get("Content-Type"), text)) failures.push(`POST /v1/mcp-servers ${target}: ${envelopeProblem(422, register.headers.get("Content-Type"), text)}`);
      if (i % 5 === 0) {
        // A client's own mcp tool is held to the same rule.
        const tool = await call("/v1/responses", { json: { input: "use it", tools: [{ type: "mcp", server_label: "internal", server_url: target }] }, config, user: "registrar" });
        const toolText = await tool.text();
        if (tool.status !== 422) failures.push(`responses mcp tool ${target}: answered ${tool.status} ${toolText.slice(0, 200)}`);
      }
    });
    const listed = await callJson<{ servers: Array<{ name: string }> }>("/v1/mcp-servers", { config, user: "registrar" });
    if (listed.body.servers.length !== 0) failures.push(`registered: ${listed.body.servers.map((server) => server.name).join(", ")}`);
    figure("MCP registration of internal addresses", urls.length + Math.ceil(urls.length / 5), failures.length, `${urls.length} registrations, ${Math.ceil(urls.length / 5)} client mcp tools`);
    expect(failures).toEqual([]);
  });
});

describe("other users' data", () => {
  const k8sUser = (name: string) => `Bearer user.${name}`;
  const ACTIONS = ["query", "streaming_query", "responses", "feedback", "get_conversation", "list_conversations", "update_conversation", "delete_conversation", "a2a_jsonrpc", "read_quotas", "info"];
  const config = testConfig({
    authentication: { module: "k8s", k8s_cluster_api: `${cluster.url}/ok`, k8s_service_account_token: cluster.serviceToken },
    authorization: { access_rules: [{ role: "*", actions: ACTIONS }] },
    user_data_collection: { feedback_enabled: true, feedback_storage: "/tmp/data/feedback" },
    quota_handlers: { limiters: [{ type: "user_limiter", name: "isolation", initial_quota: 100_000, quota_increase: 0, period: "1 day" }] },
    mcp_servers: [{ name: "gated", url: `${mcp.base}/s/isolation-${crypto.randomUUID().slice(0, 8)}/mcp`, require_approval: "always" }],
  });
  const slowConfig = testConfig({
    inference_backend: { url: inject("slowBackendUrl") },
    authentication: { module: "k8s", k8s_cluster_api: `${cluster.url}/ok`, k8s_service_account_token: cluster.serviceToken },
    authorization: { access_rules: [{ role: "*", actions: ACTIONS }] },
  });

  it("are out of reach: conversations, feedback, approvals, streams, A2A tasks and quotas", { timeout: 300_000 }, async () => {
    const tag = crypto.randomUUID().slice(0, 8);
    const alice = { Authorization: k8sUser(`alice-${tag}`) };
    const mallory = { Authorization: k8sUser(`mallory-${tag}`) };
    const as = (who: Record<string, string>) => ({ config, headers: who });

    // Alice's data: a conversation, a response, a pending approval, a running stream, an A2A task.
    const conversation = await callJson<{ conversation_id: string }>("/v1/query", { ...as(alice), json: { query: "alice's secret plan" } });
    const id = conversation.body.conversation_id;
    const response = await callJson<{ id: string; conversation: string; output: Array<{ type: string; id: string }> }>("/v1/responses", { ...as(alice), json: { input: "run it #call-tool:echo:{\"text\":\"x\"}", conversation: `conv_${id}` } });
    const approval = response.body.output.find((item) => item.type === "mcp_approval_request");
    expect(approval, JSON.stringify(response.body)).toBeDefined();
    const task = await callJson<{ result: { id: string; contextId: string } }>("/a2a", { ...as(alice), json: { jsonrpc: "2.0", id: "a", method: "message/send", params: { message: { kind: "message", messageId: "m1", role: "user", parts: [{ kind: "text", text: "alice's task" }] } } } });
    const stream = await call("/v1/streaming_query", { config: slowConfig, headers: alice, json: { query: "a long stream of alice one two three four five six seven eight" } });
    const reader = stream.body!.pipeThrough(new TextDecoderStream()).getReader();
    let head = "";
    while (!head.includes("request_id")) head += (await reader.read()).value ?? "";
    const requestId = /"request_id":"([^"]+)"/.exec(head)![1]!;

    const attempts: Array<[string, () => Promise<Response>, (status: number, text: string) => boolean]> = [
      ...["v1", "v2", "v3"].map((v): [string, () => Promise<Response>, (status: number) => boolean] => [`GET /${v}/conversations/{alice}`, () => call(`/${v}/conversations/${id}`, as(mallory)), (status) => status === 403]),
      ...["v1", "v2"].map((v): [string, () => Promise<Response>, (status: number) => boolean] => [`PUT /${v}/conversations/{alice}`, () => call(`/${v}/conversations/${id}`, { ...as(mallory), method: "PUT", json: { topic_summary: "owned" } }), (status) => status === 403]),
      ...["v1", "v2"].map((v): [string, () => Promise<Response>, (status: number) => boolean] => [`DELETE /${v}/conversations/{alice}`, () => call(`/${v}/conversations/${id}`, { ...as(mallory), method: "DELETE" }), (status) => status === 403]),
      ["GET /v1/conversations lists none of alice's", () => call("/v1/conversations", as(mallory)), (status, text) => status === 200 && !text.includes(id)],
      ["GET /v2/conversations lists none of alice's", () => call("/v2/conversations", as(mallory)), (status, text) => status === 200 && !text.includes(id)],
      ["POST /v1/query continuing alice's", () => call("/v1/query", { ...as(mallory), json: { query: "what did she say?", conversation_id: id } }), (status) => status === 403],
      ["POST /v1/streaming_query continuing alice's", () => call("/v1/streaming_query", { ...as(mallory), json: { query: "what did she say?", conversation_id: id } }), (status) => status === 403],
      ["POST /v1/responses continuing alice's conversation", () => call("/v1/responses", { ...as(mallory), json: { input: "what did she say?", conversation: `conv_${id}` } }), (status) => status === 403],
      ["POST /v1/responses from alice's response", () => call("/v1/responses", { ...as(mallory), json: { input: "what did she say?", previous_response_id: response.body.id } }), (status) => status === 403 || status === 404],
      ["POST /v1/feedback on alice's conversation", () => call("/v1/feedback", { ...as(mallory), json: { conversation_id: id, user_question: "q", llm_response: "a", sentiment: -1 } }), (status) => status === 403],
      ["approving alice's tool call in his own conversation", () => call("/v1/responses", { ...as(mallory), json: { input: [{ type: "mcp_approval_response", approval_request_id: approval!.id, approve: true }], conversation: undefined } }), (status) => status === 404],
      ["approving alice's tool call from her response", () => call("/v1/responses", { ...as(mallory), json: { input: [{ type: "mcp_approval_response", approval_request_id: approval!.id, approve: true }], previous_response_id: response.body.id } }), (status) => status === 403 || status === 404],
      ["interrupting alice's stream", () => call("/v1/streaming_query/interrupt", { ...as(mallory), json: { request_id: requestId } }), (status) => status === 403],
      ["A2A tasks/get of alice's task", () => call("/a2a", { ...as(mallory), json: { jsonrpc: "2.0", id: "g", method: "tasks/get", params: { id: task.body.result.id } } }), (status, text) => status === 200 && text.includes("-32001")],
      ["A2A tasks/cancel of alice's task", () => call("/a2a", { ...as(mallory), json: { jsonrpc: "2.0", id: "c", method: "tasks/cancel", params: { id: task.body.result.id } } }), (status, text) => status === 200 && text.includes('"error"')],
      ["A2A tasks/resubscribe to alice's task", () => call("/a2a", { ...as(mallory), headers: { ...mallory, Accept: "text/event-stream" }, json: { jsonrpc: "2.0", id: "r", method: "tasks/resubscribe", params: { id: task.body.result.id } } }), (status, text) => status === 200 && text.includes('"error"') && !text.includes("alice")],
      ["A2A message/send into alice's contextId", () => call("/a2a", { ...as(mallory), json: { jsonrpc: "2.0", id: "s", method: "message/send", params: { message: { kind: "message", messageId: "m2", role: "user", contextId: task.body.result.contextId, parts: [{ kind: "text", text: "and?" }] } } } }), (status, text) => status === 200 && text.includes("[user_turns=1]")],
      ["GET /v1/quotas/isolation/{alice}", () => call(`/v1/quotas/isolation/uid-alice-${tag}`, as(mallory)), (status) => status === 403],
    ];
    const failures: string[] = [];
    for (const [name, attempt, ok] of attempts) {
      const answer = await attempt();
      const text = answer.headers.get("Content-Type")?.startsWith("text/event-stream") ? JSON.stringify(await readSse(answer)) : await answer.text();
      if (!ok(answer.status, text)) failures.push(`${name}: answered ${answer.status} ${text.slice(0, 300)}`);
      else if (answer.status >= 400 && envelopeProblem(answer.status, answer.headers.get("Content-Type"), text)) failures.push(`${name}: ${envelopeProblem(answer.status, answer.headers.get("Content-Type"), text)}`);
      if (text.includes("secret plan")) failures.push(`${name}: the answer quotes alice's conversation`);
    }

    // Alice's data is as she left it: the stream finishes, her history is whole, her approval is hers to answer.
    let rest = head;
    for (;;) {
      const step = await reader.read();
      if (step.done) break;
      rest += step.value;
    }
    if (!rest.includes('"event":"end"')) failures.push(`alice's stream did not finish: ${rest.slice(-200)}`);
    const history = await callJson<{ chat_history: unknown[]; conversation_id: string }>(`/v1/conversations/${id}`, as(alice));
    if (history.status !== 200 || history.body.chat_history.length !== 2) failures.push(`alice's conversation: ${history.status} with ${history.body.chat_history?.length} turns (expected 2)`);
    const approved = await call("/v1/responses", { ...as(alice), json: { input: [{ type: "mcp_approval_response", approval_request_id: approval!.id, approve: true }], previous_response_id: response.body.id } });
    // The configured server's call is not shown in the answer (UPSTREAM: stripped); her record has it.
    const recorded = await callJson<{ chat_history: Array<{ tool_results: Array<{ status?: string }> }> }>(`/v1/conversations/${id}`, as(alice));
    const ran = recorded.body.chat_history?.at(-1)?.tool_results.some((result) => result.status === "success");
    if (approved.status !== 200 || !ran) failures.push(`alice's approval: ${approved.status} ${(await approved.text()).slice(0, 300)}`);
    const own = await callJson<{ result: { status: { state: string } } }>("/a2a", { ...as(alice), json: { jsonrpc: "2.0", id: "g2", method: "tasks/get", params: { id: task.body.result.id } } });
    if (own.body.result?.status?.state !== "completed") failures.push(`alice's A2A task: ${JSON.stringify(own.body).slice(0, 200)}`);

    figure("other users' data out of reach", attempts.length + 4, failures.length, `${attempts.length} attempts by another user, 4 checks that the owner's data is intact`);
    expect(failures).toEqual([]);
  });
});
