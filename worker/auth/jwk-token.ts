// JWTs signed by an identity provider, verified against the key set it publishes (SPEC
// "Authentication" 3). Identity comes from the configured claims, roles from role_rules.
//
// skip_tls_verification cannot apply here: workerd's fetch always verifies certificates.
import { createLocalJWKSet, errors as joseErrors, jwtVerify, type JSONWebKeySet, type JWTPayload } from "jose";
import { ApiError, errors } from "../errors.ts";
import { bearerToken } from "./bearer.ts";
import { rolesFromClaims } from "./role-rules.ts";
import type { Authenticator, AuthenticationConfig, JwkConfig } from "./types.ts";
import { log } from "../log.ts";

/**
 * Every asymmetric JWS algorithm jose verifies with in workerd (UPSTREAM §8 names no list: the key
 * the token names decides). Never `none` nor HS*: a public key set cannot carry a shared secret.
 */
export const ACCEPTED_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA", "Ed25519"];

/**
 * Fetched keys serve KEYS_MAX_AGE_MS before they are fetched again. A key server is asked at most
 * once per REFRESH_INTERVAL_MS per URL, whatever asks (a token naming a key the set lacks, expired
 * keys, a key server that failed before), so no token can make every request wait on it or refetch.
 * Keys that cannot be fetched again serve on until KEYS_STALE_LIMIT_MS after their fetch: the
 * original system's cache lifetime.
 */
const KEYS_MAX_AGE_MS = 600_000;
const REFRESH_INTERVAL_MS = 30_000;
/**
 * While no keys are held every token is refused, so a key server that failed is asked again sooner:
 * a cold isolate is not locked out for REFRESH_INTERVAL_MS by one dropped fetch.
 */
const RETRY_WITHOUT_KEYS_MS = 5_000;
const KEYS_STALE_LIMIT_MS = 3_600_000;
const KEY_SERVER_TIMEOUT_MS = 5_000;
/** How long a request waits on a fetch another request started: that request may be cancelled, and its fetch never settle. */
const SHARED_FETCH_WAIT_MS = KEY_SERVER_TIMEOUT_MS + 1_000;

interface KeySetState {
  /** The last key set fetched, as the JSON the key server sent (plain data). */
  keys?: { jwks: JSONWebKeySet; fetchedAt: number };
  /** When the last fetch started. */
  attemptedAt: number;
  /** The 401 cause of the last fetch's failure; cleared by one that succeeds. */
  failure?: string;
  /** The fetch under way, which concurrent requests wait on rather than fetching too. */
  pending?: Promise<void>;
}

// The key set of each URL, per isolate. Keys are imported per request: a CryptoKey import another
// request started must never be what this one awaits (workerd binds pending work to its request),
// and an import is cheap beside a fetch.
const keySets = new Map<string, KeySetState>();

const UNREACHABLE = "Unable to reach authentication key server";
const INVALID_DATA = "Authentication key server returned invalid data";
const MALFORMED_KEYS = "Authentication keys are malformed";
const UNKNOWN_KEY = "Token signed by unknown key";

const reason = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** The key set at `url`, or the UPSTREAM §8 401 of the way it failed: unreachable (any non-2xx too), not JSON, not a key set. */
async function fetchKeySet(url: string): Promise<JSONWebKeySet> {
  let text: string;
  try {
    const response = await fetch(url, { headers: { Accept: "application/json" }, signal: AbortSignal.timeout(KEY_SERVER_TIMEOUT_MS) });
    if (!response.ok) {
      await response.body?.cancel();
      throw new Error(`answered ${response.status}`);
    }
    text = await response.text();
  } catch (error) {
    // The client only learns that the key server failed; the operator needs to know why.
    log.warn(`key set ${url} could not be fetched: ${reason(error)}`);
    throw errors.unauthorized(UNREACHABLE);
  }
  let jwks: unknown;
  try {
    jwks = JSON.parse(text);
  } catch (error) {
    log.warn(`key set ${url} is not JSON: ${reason(error)}`);
    throw errors.unauthorized(INVALID_DATA);
  }
  try {
    // createLocalJWKSet checks the shape; a set it refuses is the key server's failure too.
    createLocalJWKSet(jwks as JSONWebKeySet);
  } catch (error) {
    log.warn(`key set ${url} is not a key set: ${reason(error)}`);
    throw errors.unauthorized(MALFORMED_KEYS);
  }
  return jwks as JSONWebKeySet;
}

/** Resolves after `ms`, or at once if `promise` settles first; never rejects. */
async function waitAtMost(promise: Promise<void>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([promise.catch(() => undefined), new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Fetches the key set of `url` again unless a fetch started less than REFRESH_INTERVAL_MS ago
 * (RETRY_WITHOUT_KEYS_MS while none are held); waits
 * for one under way. Never throws and never drops the keys already held: the outcome is in the
 * state (new keys, or `failure`).
 */
async function refresh(url: string, state: KeySetState): Promise<void> {
  // The fetch of a request that was cancelled may never settle: past every waiter's deadline it is
  // forgotten, as if never made (it says nothing of the key server), so the next request fetches.
  if (state.pending && Date.now() - state.attemptedAt > SHARED_FETCH_WAIT_MS) {
    state.pending = undefined;
    state.attemptedAt = -Infinity;
  }
  if (state.pending === undefined && Date.now() - state.attemptedAt >= (state.keys ? REFRESH_INTERVAL_MS : RETRY_WITHOUT_KEYS_MS)) {
    state.attemptedAt = Date.now();
    const pending = fetchKeySet(url).then(
      (jwks) => {
        state.keys = { jwks, fetchedAt: Date.now() };
        state.failure = undefined;
      },
      (error: unknown) => {
        state.failure = error instanceof ApiError ? error.cause : UNREACHABLE;
        if (state.keys) {
          const until = new Date(state.keys.fetchedAt + KEYS_STALE_LIMIT_MS).toISOString();
          log.warn(`key set ${url}: keeping the keys fetched at ${new Date(state.keys.fetchedAt).toISOString()} (expired ones serve until ${until})`);
        }
      },
    );
    state.pending = pending;
    void pending.finally(() => {
      if (state.pending === pending) state.pending = undefined;
    });
  }
  if (state.pending) await waitAtMost(state.pending, SHARED_FETCH_WAIT_MS);
}

function stateOf(url: string): KeySetState {
  let state = keySets.get(url);
  if (!state) {
    state = { attemptedAt: -Infinity };
    keySets.set(url, state);
  }
  return state;
}

/**
 * The keys of `url` to verify with: fetched when absent or older than KEYS_MAX_AGE_MS; expired keys
 * that cannot be fetched again still serve up to KEYS_STALE_LIMIT_MS after their fetch.
 */
async function currentKeys(url: string): Promise<{ jwks: JSONWebKeySet; fetchedAt: number }> {
  const state = stateOf(url);
  if (state.keys && Date.now() - state.keys.fetchedAt <= KEYS_MAX_AGE_MS) return state.keys;
  await refresh(url, state);
  const keys = state.keys;
  if (keys && Date.now() - keys.fetchedAt <= KEYS_MAX_AGE_MS) return keys;
  if (keys && Date.now() - keys.fetchedAt <= KEYS_STALE_LIMIT_MS) return keys;
  throw errors.unauthorized(state.failure ?? UNREACHABLE);
}

async function verify(token: string, keys: JSONWebKeySet, requireExp: boolean): Promise<JWTPayload> {
  // jose checks exp whenever it is present; requiredClaims makes its absence a failure too.
  const options = { algorithms: ACCEPTED_ALGORITHMS, requiredClaims: requireExp ? ["exp"] : [] };
  try {
    return issuedInThePast((await jwtVerify(token, createLocalJWKSet(keys), options)).payload);
  } catch (error) {
    // A token without kid that fits several keys (mid-rotation): jose hands out the candidates,
    // and the token is good when one of them verifies it.
    if (error instanceof joseErrors.JWKSMultipleMatchingKeys) {
      for await (const key of error) {
        try {
          return issuedInThePast((await jwtVerify(token, key, options)).payload);
        } catch (candidateError) {
          if (!(candidateError instanceof joseErrors.JWSSignatureVerificationFailed)) throw tokenError(candidateError);
        }
      }
      throw errors.unauthorized("Invalid token signature");
    }
    throw tokenError(error);
  }
}

/**
 * A token issued in the future is refused, as the original's claim check does ("The token is not
 * valid as it was issued in the future", reported as its one claim cause); jose checks `iat` only
 * for its type. No leeway, as for `nbf`.
 */
function issuedInThePast(payload: JWTPayload): JWTPayload {
  if (typeof payload.iat === "number" && payload.iat > Date.now() / 1000) throw errors.unauthorized("Token validation failed");
  return payload;
}

/**
 * The UPSTREAM §8 401 cause for a jose failure. What is not the token's failure is the key's: a key
 * the set lists that cannot be imported (workerd refuses a modulus of the wrong length), is too weak
 * for its algorithm (jose's TypeError) or is private is 401 "Authentication keys are malformed".
 */
function tokenError(error: unknown): unknown {
  if (error instanceof ApiError) return error;
  if (!(error instanceof joseErrors.JOSEError) || error instanceof joseErrors.JWKSInvalid) {
    log.warn(`a key of the key set is unusable: ${reason(error)}`);
    return errors.unauthorized(MALFORMED_KEYS);
  }
  if (error instanceof joseErrors.JWTExpired) return errors.unauthorized("Token has expired");
  if (error instanceof joseErrors.JWKSNoMatchingKey) return errors.unauthorized(UNKNOWN_KEY);
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return errors.unauthorized("Invalid token signature");
  // none, HS*, or an algorithm jose cannot verify with here: no key of a public set can check it.
  if (error instanceof joseErrors.JOSEAlgNotAllowed) return errors.unauthorized("Token algorithm is not supported");
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    // require_exp (Parley's) names the claim as the identity claims do; every other claim failure
    // (nbf ahead, exp not a number, ...) is the original's one cause.
    if (error.reason === "missing") return errors.unauthorized(`Token missing claim: ${error.claim}`);
    return errors.unauthorized("Token validation failed");
  }
  // Not three base64url parts, header or payload not JSON objects, ...
  if (error instanceof joseErrors.JWSInvalid || error instanceof joseErrors.JWTInvalid) return errors.unauthorized("Token could not be decoded");
  // A critical header parameter jose does not know, and the like.
  if (error instanceof joseErrors.JOSENotSupported) return errors.unauthorized("Token format error");
  return error;
}

/** Failures the key set may be behind: fetched again, its keys may serve (see verifyWithKeysOf). */
const STALE_KEYS_CAUSES = new Set([UNKNOWN_KEY, MALFORMED_KEYS]);

/**
 * Verifies against the key set of `url`. When the token names a key the held set lacks (a rotation)
 * or one it cannot use (a key server that published a broken key and has mended it), the set is
 * fetched again, at most every 30 seconds. A refresh that fails keeps the keys held, so a token
 * naming a key nobody published never locks out the tokens of known keys; that token is then told
 * why the key could not be looked for.
 */
async function verifyWithKeysOf(url: string, token: string, requireExp: boolean): Promise<JWTPayload> {
  const keys = await currentKeys(url);
  try {
    return await verify(token, keys.jwks, requireExp);
  } catch (error) {
    if (!(error instanceof ApiError && STALE_KEYS_CAUSES.has(error.cause))) throw error;
    const state = stateOf(url);
    await refresh(url, state);
    if (state.keys && state.keys.fetchedAt > keys.fetchedAt) return verify(token, state.keys.jwks, requireExp);
    throw state.failure ? errors.unauthorized(state.failure) : error;
  }
}

function claim(payload: JWTPayload, name: string): string {
  const value = payload[name];
  if (typeof value === "string" && value !== "") return value;
  // Numeric subject ids exist (some providers issue them); they are still identities.
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  throw errors.unauthorized(`Token missing claim: ${name}`);
}

type JwtConfiguration = JwkConfig["jwt_configuration"];

function requiredConfig(settings: AuthenticationConfig): { url: string; jwt: JwtConfiguration } {
  const config = settings.jwk_config;
  if (!config) {
    throw new ApiError(500, "Authentication module not available", "authentication.jwk_config is required by module jwk-token");
  }
  return { url: config.url, jwt: config.jwt_configuration };
}

export function jwkTokenAuthenticator(settings: AuthenticationConfig): Authenticator {
  const { url, jwt } = requiredConfig(settings);
  return async function jwkToken(request) {
    const token = bearerToken(request);
    const payload = await verifyWithKeysOf(url, token, jwt.require_exp);
    return {
      userId: claim(payload, jwt.user_id_claim),
      username: claim(payload, jwt.username_claim),
      roles: rolesFromClaims(payload, jwt.role_rules),
      skipUserIdCheck: false,
      token,
    };
  };
}
