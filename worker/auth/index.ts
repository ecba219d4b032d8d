// Picks the authentication module named by `authentication.module`.
import { ApiError } from "../errors.ts";
import { apiKeyTokenAuthenticator } from "./api-key-token.ts";
import { jwkTokenAuthenticator } from "./jwk-token.ts";
import { noopAuthenticator } from "./noop.ts";
import { noopWithTokenAuthenticator } from "./noop-with-token.ts";
import type { AuthenticationModule, Authenticator, AuthenticationSettings } from "./types.ts";

export type * from "./types.ts";
export { isAllowed } from "./rbac.ts";

/**
 * Modules the configuration accepts but this release does not implement: every request fails with
 * a 500 that says so, rather than letting anyone in or blaming the client's credentials.
 */
function notImplemented(module: AuthenticationModule): Authenticator {
  return async function unavailable() {
    throw new ApiError(500, "Authentication module not available", `authentication.module ${module} is not implemented in this release`);
  };
}

/**
 * The authenticator for these settings. Throws ApiError 500 when the chosen module's own section
 * (jwk_config, api_key_config) is missing, which config validation should already have caught.
 */
export function createAuthenticator(settings: AuthenticationSettings): Authenticator {
  switch (settings.module) {
    case "noop":
      return noopAuthenticator(settings);
    case "noop-with-token":
      return noopWithTokenAuthenticator(settings);
    case "jwk-token":
      return jwkTokenAuthenticator(settings);
    case "api-key-token":
      return apiKeyTokenAuthenticator(settings);
    case "k8s":
    case "rh-identity":
    case "trusted-proxy":
      return notImplemented(settings.module);
  }
}
