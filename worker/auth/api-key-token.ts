// One shared API key for every caller (service-to-service use). The key identifies no person, so the
// identity is the same fixed placeholder the established implementation uses for this module
// (DEFAULT_USER_ID / DEFAULT_USERNAME, user-id checks skipped).
import { ApiError, errors } from "../errors.ts";
import { bearerToken } from "./bearer.ts";
import { DEFAULT_USER_ID, DEFAULT_USERNAME } from "./noop.ts";
import type { Authenticator, AuthenticationConfig } from "./types.ts";

const encoder = new TextEncoder();

async function sha256(text: string): Promise<Uint8Array> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", encoder.encode(text)));
}

/**
 * Compares two secrets without an early exit. Hashing first makes both sides the same length, so
 * neither the position of the first difference nor the key's length shows in the timing. (workerd's
 * `crypto.subtle.timingSafeEqual` does not exist in Node, where the unit tests run.)
 */
export async function secretsEqual(given: string, expected: string): Promise<boolean> {
  const [a, b] = await Promise.all([sha256(given), sha256(expected)]);
  let difference = 0;
  for (let i = 0; i < a.length; i++) difference |= a[i] ^ b[i];
  return difference === 0;
}

export function apiKeyTokenAuthenticator(settings: AuthenticationConfig): Authenticator {
  const apiKey = settings.api_key_config?.api_key;
  if (!apiKey) {
    // A configuration error, not the client's: answer 500 rather than a 401 that blames the caller.
    throw new ApiError(500, "Authentication module not available", "authentication.api_key_config.api_key is required by module api-key-token");
  }
  return async function apiKeyToken(request) {
    const given = bearerToken(request);
    if (!(await secretsEqual(given, apiKey))) throw errors.unauthorized("Invalid API Key");
    return {
      userId: DEFAULT_USER_ID,
      username: DEFAULT_USERNAME,
      roles: [],
      skipUserIdCheck: true,
      // The bearer is the gateway's own secret, not the caller's: nothing downstream may receive it.
      token: null,
    };
  };
}
