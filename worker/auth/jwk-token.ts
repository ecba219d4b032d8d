// JWTs signed by an identity provider, verified against the key set it publishes (SPEC
// "Authentication" 3). Identity comes from the configured claims, roles from role_rules.
//
// skip_tls_verification cannot apply here: workerd's fetch always verifies certificates.
import { createLocalJWKSet, errors as joseErrors, jwtVerify, type JSONWebKeySet, type JWTPayload, type JWTVerifyGetKey } from "jose";
import { ApiError, errors } from "../errors.ts";
import { bearerToken } from "./bearer.ts";
import { rolesFromClaims } from "./role-rules.ts";
import type { Authenticator, AuthenticationConfig, JwkConfig } from "./types.ts";
import { log } from "../log.ts";

/** Signature algorithms accepted; SPEC leaves them open, these are what identity providers issue. */
export const ACCEPTED_ALGORITHMS = ["RS256", "ES256"];

/** How long fetched keys serve before they are fetched again, and how often an unknown or unusable key may refetch. */
const KEYS_MAX_AGE_MS = 600_000;
const UNKNOWN_KID_REFETCH_MS = 30_000;
const KEY_SERVER_TIMEOUT_MS = 5_000;

// The key set of each URL, kept per isolate as the JSON the key server sent (plain data). Keys are
// imported per request: a CryptoKey import another request started must never be what this one
// awaits (workerd binds pending work to its request), and an import is cheap beside a fetch.
const keySets = new Map<string, { jwks: JSONWebKeySet; fetchedAt: number }>();

const keyServerFailed = () => errors.unauthorized("Authentication key server returned invalid data");
const MALFORMED_KEYS = "Authentication keys are malformed";
const UNKNOWN_KEY = "Token signed by unknown key";

async function fetchKeySet(url: string): Promise<{ jwks: JSONWebKeySet; fetchedAt: number }> {
  let jwks: unknown;
  try {
    const response = await fetch(url, { headers: { Accept: "application/json" }, signal: AbortSignal.timeout(KEY_SERVER_TIMEOUT_MS) });
    if (!response.ok) throw new Error(`answered ${response.status}`);
    jwks = await response.json();
    // createLocalJWKSet checks the shape; a set it refuses is the key server's failure too.
    createLocalJWKSet(jwks as JSONWebKeySet);
  } catch (error) {
    // The client only learns that the key server failed; the operator needs to know why.
    log.warn(`key set ${url} unusable: ${error instanceof Error ? error.message : String(error)}`);
    throw keyServerFailed();
  }
  const entry = { jwks: jwks as JSONWebKeySet, fetchedAt: Date.now() };
  keySets.set(url, entry);
  return entry;
}

/** The keys of `url` as jose's key lookup: fetched when absent or older than KEYS_MAX_AGE_MS. */
function keySetFor(url: string): JWTVerifyGetKey {
  return async (header, token) => {
    let entry = keySets.get(url);
    if (!entry || Date.now() - entry.fetchedAt > KEYS_MAX_AGE_MS) entry = await fetchKeySet(url);
    return createLocalJWKSet(entry.jwks)(header, token);
  };
}

async function verify(token: string, keySet: JWTVerifyGetKey, requireExp: boolean): Promise<JWTPayload> {
  // jose checks exp whenever it is present; requiredClaims makes its absence a failure too.
  const options = { algorithms: ACCEPTED_ALGORITHMS, requiredClaims: requireExp ? ["exp"] : [] };
  try {
    return (await jwtVerify(token, keySet, options)).payload;
  } catch (error) {
    // A token without kid that fits several keys (mid-rotation): jose hands out the candidates,
    // and the token is good when one of them verifies it.
    if (error instanceof joseErrors.JWKSMultipleMatchingKeys) {
      for await (const key of error) {
        try {
          return (await jwtVerify(token, key, options)).payload;
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
 * The SPEC 401 cause for a jose failure. What is not the token's failure is the key's: a key the set
 * lists that cannot be imported (workerd refuses a modulus of the wrong length), is too weak for its
 * algorithm (jose's TypeError) or is private is 401 "Authentication keys are malformed" (UPSTREAM).
 */
function tokenError(error: unknown): unknown {
  if (error instanceof ApiError) return error;
  if (!(error instanceof joseErrors.JOSEError) || error instanceof joseErrors.JWKSInvalid) {
    log.warn(`a key of the key set is unusable: ${error instanceof Error ? error.message : String(error)}`);
    return errors.unauthorized(MALFORMED_KEYS);
  }
  if (error instanceof joseErrors.JWTExpired) return errors.unauthorized("Token has expired");
  if (error instanceof joseErrors.JWKSNoMatchingKey) return errors.unauthorized(UNKNOWN_KEY);
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return errors.unauthorized("Invalid token signature");
  // Another algorithm (HS256, none, ...) cannot carry a signature this gateway accepts.
  if (error instanceof joseErrors.JOSEAlgNotAllowed || error instanceof joseErrors.JOSENotSupported) {
    return errors.unauthorized("Invalid token signature");
  }
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    if (error.reason === "missing") return errors.unauthorized(`Token missing claim: ${error.claim}`);
    return errors.unauthorized(error.claim === "nbf" ? "Token is not yet valid" : `Token claim ${error.claim} is invalid`);
  }
  // Not three base64url parts, header or payload not JSON objects, ...
  if (error instanceof joseErrors.JWSInvalid || error instanceof joseErrors.JWTInvalid) return errors.unauthorized("Token is malformed");
  return error;
}

/** Failures the key set may be behind: fetched again, its keys may serve (see verifyWithKeysOf). */
const STALE_KEYS_CAUSES = new Set([UNKNOWN_KEY, MALFORMED_KEYS]);

/**
 * Verifies against the key set of `url`. When the token names a key the cached set lacks (a
 * rotation) or one it cannot use (a key server that published a broken key and has mended it), the
 * set is fetched again once, at most every 30 seconds.
 */
async function verifyWithKeysOf(url: string, token: string, keySet: JWTVerifyGetKey, requireExp: boolean): Promise<JWTPayload> {
  try {
    return await verify(token, keySet, requireExp);
  } catch (error) {
    const fetchedAt = keySets.get(url)?.fetchedAt ?? 0;
    if (!(error instanceof ApiError && STALE_KEYS_CAUSES.has(error.cause)) || Date.now() - fetchedAt < UNKNOWN_KID_REFETCH_MS) throw error;
    keySets.delete(url);
    return verify(token, keySet, requireExp);
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
  const keySet = keySetFor(url);
  return async function jwkToken(request) {
    const token = bearerToken(request);
    const payload = await verifyWithKeysOf(url, token, keySet, jwt.require_exp);
    return {
      userId: claim(payload, jwt.user_id_claim),
      username: claim(payload, jwt.username_claim),
      roles: rolesFromClaims(payload, jwt.role_rules),
      skipUserIdCheck: false,
      token,
    };
  };
}
