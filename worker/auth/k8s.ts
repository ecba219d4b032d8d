// Kubernetes tokens: the cluster API says whose the bearer token is (TokenReview) and whether that
// user may use the service at all (SubjectAccessReview of `get` on the virtual path /ls-access, the
// same for every endpoint; grant it with a ClusterRole's nonResourceURLs). The token is passed on
// (MCP servers with authorization `kubernetes`). Positive answers are cached (review-cache.ts).
import { errors } from "../errors.ts";
import { log } from "../log.ts";
import { bearerToken } from "./bearer.ts";
import { ClusterApi, type ReviewedUser } from "./cluster-api.ts";
import { ReviewCache } from "./review-cache.ts";
import type { AuthenticationConfig, Authenticator } from "./types.ts";

export const ACCESS_PATH = "/ls-access";
export const ACCESS_VERB = "get";

/** OpenShift's bootstrap administrator: its reviews carry no uid. */
const KUBE_ADMIN = "kube:admin";

// Shared by every k8s authenticator of the isolate; keys include the API address.
const reviewed = new ReviewCache<{ userId: string; username: string }>();

/** Says, once per configuration load, which settings a Worker cannot honour. */
export function warnAboutTls(settings: AuthenticationConfig): void {
  if (settings.k8s_ca_cert_path !== undefined || settings.skip_tls_verification) {
    log.warn(
      `authentication.k8s_ca_cert_path and skip_tls_verification have no effect on Workers: the cluster API at ` +
        `${settings.k8s_cluster_api} must present a publicly trusted certificate (or be plain http on loopback, e.g. kubectl proxy)`,
    );
  }
}

async function userIdOf(api: ClusterApi, user: ReviewedUser): Promise<string> {
  if (user.uid) return user.uid;
  if (user.username === KUBE_ADMIN) return api.clusterId();
  // Some authenticators (static tokens, some OIDC set-ups) give no uid; the username is unique too.
  return user.username;
}

export interface ClusterModuleOptions {
  /** Time limit of one cluster API call (tests shorten it). */
  timeoutMs?: number;
}

export function k8sAuthenticator(settings: AuthenticationConfig, options: ClusterModuleOptions = {}): Authenticator {
  const api = ClusterApi.fromSettings(settings, options.timeoutMs);
  warnAboutTls(settings);
  return async function k8s(request) {
    const token = bearerToken(request);
    const key = await reviewed.key(api.base, token);
    let identity = reviewed.get(key);
    if (identity === undefined) {
      const review = await api.reviewToken(token);
      if (!review.authenticated || !review.user?.username) throw errors.unauthorized("Invalid or expired cluster token");
      const user = review.user;
      const userId = await userIdOf(api, user);
      if (!(await api.mayAccess(user, ACCESS_PATH, ACCESS_VERB))) throw errors.endpointForbidden(userId);
      identity = { userId, username: user.username };
      reviewed.set(key, token, identity);
    }
    return { ...identity, roles: [], skipUserIdCheck: false, token };
  };
}
