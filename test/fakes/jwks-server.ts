// A fake identity provider: serves an RS256 public key set at /jwks.json on 127.0.0.1 and signs
// tokens with it, or with a second key the set does not hold (forged / unknown-key tokens).
// Plain Node (no vitest), so vitest's globalSetup and unit tests can both start it.
import { createServer, type ServerResponse } from "node:http";
import { exportJWK, generateKeyPair, SignJWT, type JWTPayload } from "jose";
import { listenOn } from "./listen.ts";

// "rotating" serves both keys without kids, as a provider does mid-rotation; "malformed-key" serves
// the good key's kid with a modulus no RSA key can have.
export type JwksMode = "ok" | "invalid-json" | "500" | "not-a-key-set" | "rotating" | "malformed-key";

export interface SignOptions {
  /** jose duration ("1h", "-5m", "2 hours ago") or absolute expiry in epoch seconds. Default "1h". */
  expiresIn?: string | number;
  /** kid in the token header (null: none). Default: the served key's kid, or "unknown-key" with unknownKey. */
  kid?: string | null;
  /** Sign with the other key under a kid the served set does not hold: "Token signed by unknown key". */
  unknownKey?: boolean;
  /** "other" signs with the key the set does not hold but keeps the served kid: a forged signature. */
  key?: "good" | "other";
}

export interface JwksServer {
  /** The key set's URL, `http://127.0.0.1:<port>/jwks.json` (query strings are ignored). */
  url: string;
  sign(claims: JWTPayload, opts?: SignOptions): Promise<string>;
  /** How the next requests for the key set are answered. */
  setBroken(mode: JwksMode): void;
  /** Key set requests served so far (to check caching). */
  requests(): number;
  close(): Promise<void>;
}

export const GOOD_KID = "parley-test-key";
const ALG = "RS256";

export async function startJwksServer(): Promise<JwksServer> {
  const good = await generateKeyPair(ALG, { extractable: true });
  const other = await generateKeyPair(ALG, { extractable: true });
  const goodJwk = { ...(await exportJWK(good.publicKey)), alg: ALG, use: "sig" };
  const otherJwk = { ...(await exportJWK(other.publicKey)), alg: ALG, use: "sig" };
  let mode: JwksMode = "ok";
  let served = 0;

  const answer = (res: ServerResponse, status: number, body: string) => {
    res.writeHead(status, { "Content-Type": "application/json" }).end(body);
  };
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    // /malformed-jwks.json: always the "malformed-key" set (for tests that cannot switch modes).
    if (req.method !== "GET" || (path !== "/jwks.json" && path !== "/malformed-jwks.json")) return answer(res, 404, '{"error":"not found"}');
    served++;
    switch (path === "/malformed-jwks.json" ? "malformed-key" : mode) {
      case "ok":
        return answer(res, 200, JSON.stringify({ keys: [{ ...goodJwk, kid: GOOD_KID }] }));
      case "rotating":
        return answer(res, 200, JSON.stringify({ keys: [goodJwk, otherJwk] }));
      case "malformed-key":
        return answer(res, 200, JSON.stringify({ keys: [{ ...goodJwk, kid: GOOD_KID, n: "xyz" }] }));
      case "invalid-json":
        return answer(res, 200, "{ this is not json");
      case "not-a-key-set":
        return answer(res, 200, JSON.stringify({ issuer: "nobody" }));
      case "500":
        return answer(res, 500, '{"error":"internal"}');
    }
  });
  const port = await listenOn(server);

  return {
    url: `http://127.0.0.1:${port}/jwks.json`,
    async sign(claims, opts = {}) {
      const useOther = opts.unknownKey === true || opts.key === "other";
      const kid = opts.kid === undefined ? (opts.unknownKey ? "unknown-key" : GOOD_KID) : opts.kid;
      return new SignJWT(claims)
        .setProtectedHeader(kid === null ? { alg: ALG, typ: "JWT" } : { alg: ALG, typ: "JWT", kid })
        .setIssuedAt()
        .setExpirationTime(opts.expiresIn ?? "1h")
        .sign(useOther ? other.privateKey : good.privateKey);
    },
    setBroken(next) {
      mode = next;
    },
    requests: () => served,
    close() {
      // Clients keep connections alive; without this, close() would wait for them to time out.
      server.closeAllConnections();
      return new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
    },
  };
}
