// Development module for clients that always send a token: the token is required and passed on
// (e.g. to MCP servers), but not validated, so the identity stays the noop placeholder.
import { bearerToken } from "./bearer.ts";
import { noopIdentity } from "./noop.ts";
import type { Authenticator, AuthenticationConfig } from "./types.ts";

export function noopWithTokenAuthenticator(_settings: AuthenticationConfig): Authenticator {
  return async function noopWithToken(request) {
    return noopIdentity(request, bearerToken(request));
  };
}
