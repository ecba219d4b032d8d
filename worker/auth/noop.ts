// Development module: no credentials at all. The identity is REFERENCE "Identity defaults", which
// is what clients of the established implementation expect from /authorized.
import { errors } from "../errors.ts";
import type { AuthContext, Authenticator, AuthenticationConfig } from "./types.ts";

export const DEFAULT_USER_ID = "00000000-0000-0000-0000-000";
export const DEFAULT_USERNAME = "lightspeed-user";

/**
 * The placeholder identity of the noop modules: `?user_id=` lets a developer act as several users.
 * An empty one is refused (UPSTREAM: 400 "user_id cannot be empty", here in SPEC's envelope).
 */
export function noopIdentity(request: Request, token: string | null): AuthContext {
  const requested = new URL(request.url).searchParams.get("user_id");
  if (requested === "") throw errors.emptyUserId();
  return {
    userId: requested ?? DEFAULT_USER_ID,
    username: DEFAULT_USERNAME,
    roles: [],
    // The placeholder id is not a UUID; checks on the id's format would reject every request.
    skipUserIdCheck: true,
    token,
  };
}

export function noopAuthenticator(_settings: AuthenticationConfig): Authenticator {
  return async function noop(request) {
    return noopIdentity(request, null);
  };
}
