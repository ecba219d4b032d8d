// JWTs signed by an identity provider, verified against the key set it publishes (SPEC
// "Authentication" 3). Identity comes from the configured claims, roles from role_rules.
//
// skip_tls_verification cannot apply here: workerd's fetch always verifies certificates.
import { createRemoteJWKSet, errors as joseErrors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from "jose";
import { ApiError, errors } from "../errors.ts";
import { bearerToken } from "./bearer.ts";
import { rolesFromClaims } from "./role-rules.ts";
import type { Authenticator, AuthenticationSettings, JwtConfiguration } from "./types.ts";

/** Signature algorithms accepted; SPEC leaves them open, these are what identity providers issue. */
export const ACCEPTED_ALGORITHMS = ["RS256", "ES256"];

// One key set per URL per isolate: keys fetched for one request serve the next ones, and jose
// refetches by itself on an unknown kid (at most every 30 s) and when the set is 10 minutes old.
const keySets = new Map<string, JWTVerifyGetKey>();

function keySetFor(url: string): JWTVerifyGetKey {
  let keySet = keySets.get(url);
  if (keySet === undefined) {
    keySet = createRemoteJWKSet(new URL(url));
    keySets.set(url, keySet);
  }
  return keySet;
}

const keyServerFailed = () => errors.unauthorized("Authentication key server returned invalid data");

/**
 * The key set, with every failure that is the key server's (unreachable, timeout, non-200, not JSON,
 * not a key set, unusable key) turned into one error; "no such key" stays jose's, for the token.
 */
function withKeyServerErrors(url: string, keySet: JWTVerifyGetKey): JWTVerifyGetKey {
  return async (header, token) => {
    try {
      return await keySet(header, token);
    } catch (error) {
      if (error instanceof joseErrors.JWKSNoMatchingKey || error instanceof joseErrors.JWKSMultipleMatchingKeys) throw error;
      // The client only learns that the key server failed; the operator needs to know why.
      console.warn(`key set ${url} unusable: ${error instanceof Error ? error.message : String(error)}`);
      throw keyServerFailed();
    }
  };
}

async function verify(token: string, keySet: JWTVerifyGetKey): Promise<JWTPayload> {
  const options = { algorithms: ACCEPTED_ALGORITHMS };
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

/** The SPEC 401 cause for a jose failure; anything unexpected is rethrown (a 500 is honest then). */
function tokenError(error: unknown): unknown {
  if (error instanceof ApiError) return error;
  if (error instanceof joseErrors.JWTExpired) return errors.unauthorized("Token has expired");
  if (error instanceof joseErrors.JWKSNoMatchingKey) return errors.unauthorized("Token signed by unknown key");
  if (error instanceof joseErrors.JWSSignatureVerificationFailed) return errors.unauthorized("Invalid token signature");
  // Another algorithm (HS256, none, ...) cannot carry a signature this gateway accepts.
  if (error instanceof joseErrors.JOSEAlgNotAllowed || error instanceof joseErrors.JOSENotSupported) {
    return errors.unauthorized("Invalid token signature");
  }
  if (error instanceof joseErrors.JWTClaimValidationFailed) {
    return errors.unauthorized(error.claim === "nbf" ? "Token is not yet valid" : `Token claim ${error.claim} is invalid`);
  }
  // Not three base64url parts, header or payload not JSON objects, ...
  if (error instanceof joseErrors.JWSInvalid || error instanceof joseErrors.JWTInvalid) return errors.unauthorized("Token is malformed");
  return error;
}

function claim(payload: JWTPayload, name: string): string {
  const value = payload[name];
  if (typeof value === "string" && value !== "") return value;
  // Numeric subject ids exist (some providers issue them); they are still identities.
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  throw errors.unauthorized(`Token missing claim: ${name}`);
}

function requiredConfig(settings: AuthenticationSettings): { url: string; jwt: JwtConfiguration } {
  const config = settings.jwk_config;
  if (!config) {
    throw new ApiError(500, "Authentication module not available", "authentication.jwk_config is required by module jwk-token");
  }
  return { url: config.url, jwt: config.jwt_configuration };
}

export function jwkTokenAuthenticator(settings: AuthenticationSettings): Authenticator {
  const { url, jwt } = requiredConfig(settings);
  const keySet = withKeyServerErrors(url, keySetFor(url));
  return async function jwkToken(request) {
    const token = bearerToken(request);
    const payload = await verify(token, keySet);
    return {
      userId: claim(payload, jwt.user_id_claim),
      username: claim(payload, jwt.username_claim),
      roles: rolesFromClaims(payload, jwt.role_rules),
      skipUserIdCheck: false,
      token,
    };
  };
}
