// A proxy in front of the service (e.g. an OAuth proxy) that has already authenticated the user
// asserts who it is in `user_header`. The proxy proves itself with its service-account token,
// reviewed by the cluster API (TokenReview; no SubjectAccessReview); only the accounts listed in
// `allowed_service_accounts` may assert users, or, when the list is null, omitted or empty, every
// service account with a valid token. A person's own token never may (the original system lets any
// valid token assert any user when the list is empty). The proxy's token is never passed on.
import { ApiError, errors } from "../errors.ts";
import { log } from "../log.ts";
import { TrustedProxyConfigSchema } from "../config/schema.ts";
import { bearerToken } from "./bearer.ts";
import { ClusterApi } from "./cluster-api.ts";
import { warnAboutTls, type ClusterModuleOptions } from "./k8s.ts";
import { ReviewCache } from "./review-cache.ts";
import type { AuthenticationConfig, Authenticator } from "./types.ts";

// Usernames of reviewed proxy tokens, shared by the isolate's authenticators; keys include the API address.
const reviewed = new ReviewCache<string>();

// A user id goes into records and logs: printable, and of a sane length.
const MAX_USER_LENGTH = 256;
const CONTROL = /[\u0000-\u001f\u007f]/;

/** The username the cluster gives a service account's tokens. */
const SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:";
const accountUsername = (account: { namespace: string; name: string }) => `${SERVICE_ACCOUNT_PREFIX}${account.namespace}:${account.name}`;

export function trustedProxyAuthenticator(settings: AuthenticationConfig, options: ClusterModuleOptions = {}): Authenticator {
  const api = ClusterApi.fromSettings(settings, options.timeoutMs);
  warnAboutTls(settings);
  const config = settings.trusted_proxy_config ?? TrustedProxyConfigSchema.parse({});
  const header = config.user_header;
  const allowed = new Set((config.allowed_service_accounts ?? []).map(accountUsername));
  if (allowed.size === 0) {
    log.warn(
      "authentication.trusted_proxy_config.allowed_service_accounts is empty: every service account of the cluster with a valid token may assert any user",
    );
  }
  return async function trustedProxy(request) {
    // The original system's own cause for this module (UPSTREAM §8); an empty header is missing too.
    if (!request.headers.get("Authorization")) throw errors.unauthorized("Missing Authorization header");
    const token = bearerToken(request);
    const key = await reviewed.key(api.base, token);
    let account = reviewed.get(key);
    if (account === undefined) {
      const review = await api.reviewToken(token);
      if (!review.authenticated) throw errors.unauthorized("Invalid or expired proxy service account token");
      if (review.user === null) throw errors.unauthorized("Invalid service account token: missing user information");
      if (!review.user.username) throw errors.unauthorized("Invalid service account token: missing username");
      account = review.user.username;
      reviewed.set(key, token, account);
    }
    // Checked on every request, so a narrowed list applies to cached reviews at once.
    if (allowed.size > 0 ? !allowed.has(account) : !account.startsWith(SERVICE_ACCOUNT_PREFIX)) throw errors.endpointForbidden(account);
    const user = request.headers.get(header)?.trim() ?? "";
    if (user === "") throw errors.unauthorized(`Missing required header '${header}'`);
    if (user.length > MAX_USER_LENGTH || CONTROL.test(user)) {
      throw new ApiError(400, "Invalid user header", `header '${header}' must be at most ${MAX_USER_LENGTH} printable characters`);
    }
    return { userId: user, username: user, roles: [], skipUserIdCheck: true, token: null };
  };
}
