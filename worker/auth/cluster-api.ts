// The cluster API calls of the k8s and trusted-proxy modules: TokenReview (who holds this token),
// SubjectAccessReview (may that user do this) and, for OpenShift's kube:admin, the cluster id.
// Each call is made with the service's own credential (authentication.k8s_service_account_token).
//
// TLS: a Worker's fetch verifies certificates against the public roots and offers no way to trust
// another CA or to skip verification, so k8s_ca_cert_path and skip_tls_verification have no effect.
// The API must present a publicly trusted certificate, or be reached over http on loopback
// (kubectl proxy) for a local cluster.
import * as z from "zod";
import { ApiError } from "../errors.ts";
import { log } from "../log.ts";
import type { AuthenticationConfig } from "./types.ts";

/** How long one call may take before the request fails with 503 rather than hang. */
export const CLUSTER_API_TIMEOUT_MS = 5_000;

const UNAVAILABLE = "Unable to connect to the cluster API";

const unavailable = (cause: string) => new ApiError(503, UNAVAILABLE, cause);

/** The user a TokenReview vouches for, as the cluster API reported it. */
export interface ReviewedUser {
  username: string;
  uid: string;
  groups: string[];
  extra: Record<string, string[]>;
}

/** authenticated false: the token is not valid. user null: valid, but the API named nobody. */
export type TokenReviewResult = { authenticated: false } | { authenticated: true; user: ReviewedUser | null };

// Wire shapes of the answers (authentication.k8s.io/v1, authorization.k8s.io/v1, config.openshift.io/v1).
// Only what is read is checked; everything else the API adds is ignored.
const TokenReviewAnswer = z.object({
  status: z
    .object({
      authenticated: z.boolean().optional(),
      user: z
        .object({
          username: z.string().optional(),
          uid: z.string().optional(),
          groups: z.array(z.string()).nullish(),
          extra: z.record(z.string(), z.array(z.string())).nullish(),
        })
        .nullish(),
    })
    .optional(),
});

const AccessReviewAnswer = z.object({
  status: z.object({ allowed: z.boolean().optional() }).optional(),
});

const ClusterVersionAnswer = z.object({ spec: z.object({ clusterID: z.string().min(1) }) });

/** The `message` of a Kubernetes Status answer, else the HTTP status text. */
async function reasonOf(response: Response): Promise<string> {
  try {
    const body = (await response.json()) as { message?: unknown };
    if (typeof body?.message === "string" && body.message) return body.message;
  } catch {
    // not a Status object
  }
  return response.statusText || "no reason given";
}

// Cluster ids by API address (plain strings): kube:admin's id never changes.
const clusterIds = new Map<string, string>();

export class ClusterApi {
  readonly base: string;
  readonly #credential: string;
  readonly #timeoutMs: number;

  constructor(base: string, credential: string, timeoutMs = CLUSTER_API_TIMEOUT_MS) {
    // A base path is kept (clusters reached through a proxy under a prefix).
    this.base = base.replace(/\/+$/, "");
    this.#credential = credential;
    this.#timeoutMs = timeoutMs;
  }

  /** The settings' cluster API, or a 500 naming what is missing (config validation catches it first). */
  static fromSettings(settings: AuthenticationConfig, timeoutMs?: number): ClusterApi {
    const { k8s_cluster_api: base, k8s_service_account_token: credential } = settings;
    if (!base || !credential) {
      throw new ApiError(
        500,
        "Authentication module not available",
        `authentication.k8s_cluster_api and authentication.k8s_service_account_token are required by module ${settings.module}`,
      );
    }
    return new ClusterApi(base, credential, timeoutMs);
  }

  /** Sends one call; network failures, time-outs and error answers become SPEC's errors. */
  async #call(method: "GET" | "POST", path: string, body?: unknown): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(`${this.base}${path}`, {
        method,
        headers: {
          Authorization: `Bearer ${this.#credential}`,
          Accept: "application/json",
          ...(body === undefined ? {} : { "Content-Type": "application/json" }),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (error) {
      const reason =
        error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")
          ? `no answer within ${this.#timeoutMs / 1000} s`
          : error instanceof Error
            ? error.message
            : String(error);
      log.warn(`cluster API ${this.base}${path} unreachable: ${reason}`);
      throw unavailable(`Failed to connect to the cluster API: ${reason}`);
    }
    if (!response.ok) {
      const reason = await reasonOf(response);
      if (response.status >= 500 || response.status === 429) {
        log.warn(`cluster API ${this.base}${path} answered ${response.status}: ${reason}`);
        throw unavailable(`Cluster API unavailable: ${reason} (status ${response.status})`);
      }
      // The service's own credential or its permissions are wrong: the operator's problem, not the caller's.
      log.error(
        `cluster API ${this.base}${path} refused the service's call (${response.status}: ${reason}); check ` +
          "authentication.k8s_service_account_token and that its account may create tokenreviews and subjectaccessreviews",
      );
      throw new ApiError(500, "Internal server error", `Cluster API request failed: ${reason} (status ${response.status})`);
    }
    try {
      return await response.json();
    } catch {
      throw unavailable("The cluster API answered with something that is not JSON");
    }
  }

  /** TokenReview: whether the token is valid and whose it is. */
  async reviewToken(token: string): Promise<TokenReviewResult> {
    const answer = TokenReviewAnswer.safeParse(
      await this.#call("POST", "/apis/authentication.k8s.io/v1/tokenreviews", {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenReview",
        spec: { token },
      }),
    );
    if (!answer.success) throw unavailable("The cluster API answered a TokenReview in an unexpected shape");
    const status = answer.data.status;
    if (status?.authenticated !== true) return { authenticated: false };
    const user = status.user;
    if (!user) return { authenticated: true, user: null };
    return {
      authenticated: true,
      user: { username: user.username ?? "", uid: user.uid ?? "", groups: user.groups ?? [], extra: user.extra ?? {} },
    };
  }

  /** SubjectAccessReview of a non-resource path: whether the user may `verb` it. */
  async mayAccess(user: ReviewedUser, path: string, verb: string): Promise<boolean> {
    const answer = AccessReviewAnswer.safeParse(
      await this.#call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
        apiVersion: "authorization.k8s.io/v1",
        kind: "SubjectAccessReview",
        spec: {
          user: user.username,
          groups: user.groups,
          // uid and extra let the authorizer see what the token was limited to (e.g. OpenShift scopes).
          ...(user.uid ? { uid: user.uid } : {}),
          ...(Object.keys(user.extra).length ? { extra: user.extra } : {}),
          nonResourceAttributes: { path, verb },
        },
      }),
    );
    if (!answer.success) throw unavailable("The cluster API answered a SubjectAccessReview in an unexpected shape");
    return answer.data.status?.allowed === true;
  }

  /**
   * The cluster's id (OpenShift ClusterVersion `version`), which stands in for the user id of
   * kube:admin, a user without uid.
   */
  async clusterId(): Promise<string> {
    const known = clusterIds.get(this.base);
    if (known !== undefined) return known;
    let answer: unknown;
    try {
      answer = await this.#call("GET", "/apis/config.openshift.io/v1/clusterversions/version");
    } catch (error) {
      // 404 (not OpenShift) and 403 are the deployment's problem; say which lookup failed.
      if (error instanceof ApiError && error.status === 500) {
        throw new ApiError(500, "Internal server error", `Unable to get the cluster id for kube:admin: ${error.cause}`);
      }
      throw error;
    }
    const parsed = ClusterVersionAnswer.safeParse(answer);
    if (!parsed.success) {
      throw new ApiError(500, "Internal server error", "Unable to get the cluster id for kube:admin: ClusterVersion has no spec.clusterID");
    }
    clusterIds.set(this.base, parsed.data.spec.clusterID);
    return parsed.data.spec.clusterID;
  }
}
