// A fake identity provider: serves an RS256 public key set at /jwks.json on 127.0.0.1 and signs
// tokens with it, or with a second key the set does not hold (forged / unknown-key tokens).
// Plain Node (no vitest), so vitest's globalSetup and unit tests can both start it.
//
// Tests inside workerd cannot listen, nor change the shared set without disturbing the tests running
// beside them, so the server also keeps key sets of their own: PUT /sets/<name> publishes its body
// as the key set served at /sets/<name>/jwks.json, PUT /sets/<name>/mode (a SetMode as the body)
// changes how that set is served, and GET /sets/<name>/requests counts the key set requests it got.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { exportJWK, generateKeyPair, SignJWT, type JWTPayload } from "jose";
import { listenOn } from "./listen.ts";

// "rotating" serves both keys without kids, as a provider does mid-rotation; "malformed-key" serves
// the good key's kid with a modulus no RSA key can have.
export type JwksMode = "ok" | "invalid-json" | "500" | "not-a-key-set" | "rotating" | "malformed-key";

/**
 * How a published set is served: "down" drops the connection as a stopped server would, "slow"
 * answers after SLOW_SET_MS (beyond the gateway's 5 s limit).
 */
export type SetMode = "ok" | "down" | "slow" | "500" | "invalid-json" | "not-a-key-set";
export const SLOW_SET_MS = 8_000;

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
  const sets = new Map<string, { body: string; mode: SetMode; served: number }>();
  const servePublished = (req: IncomingMessage, res: ServerResponse, name: string, rest: string) => {
    if (req.method === "PUT") {
      let body = "";
      req.setEncoding("utf8").on("data", (chunk: string) => (body += chunk));
      req.on("end", () => {
        const set = sets.get(name) ?? { body: '{"keys":[]}', mode: "ok", served: 0 };
        if (rest === "") set.body = body;
        else set.mode = body as SetMode;
        sets.set(name, set);
        answer(res, 200, "{}");
      });
      return;
    }
    const set = sets.get(name);
    if (set === undefined) return answer(res, 404, '{"error":"no such set"}');
    if (rest === "/requests") return answer(res, 200, JSON.stringify({ requests: set.served }));
    if (rest !== "/jwks.json") return answer(res, 405, '{"error":"method not allowed"}');
    set.served++;
    switch (set.mode) {
      case "ok":
        return answer(res, 200, set.body);
      case "down":
        return req.socket.destroy();
      case "slow":
        return void setTimeout(() => answer(res, 200, set.body), SLOW_SET_MS).unref();
      case "500":
        return answer(res, 500, '{"error":"internal"}');
      case "invalid-json":
        return answer(res, 200, "{ this is not json");
      case "not-a-key-set":
        return answer(res, 200, JSON.stringify({ issuer: "nobody" }));
    }
  };
  const server = createServer((req, res) => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    const published = /^\/sets\/([\w-]+)(\/mode|\/requests|\/jwks\.json)?$/.exec(path);
    if (published) return servePublished(req, res, published[1]!, published[2] ?? "");
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
