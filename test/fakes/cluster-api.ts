// A fake Kubernetes API server on 127.0.0.1 for the k8s and trusted-proxy modules: TokenReview
// (authentication.k8s.io/v1), SubjectAccessReview (authorization.k8s.io/v1) and OpenShift's
// ClusterVersion, with the real wire shapes. Plain Node (no vitest), so vitest's globalSetup and
// unit tests can both start it.
//
// How it misbehaves is chosen by the first path segment of the address a test configures, so tests
// running in parallel never change each other's fake: `${url}/ok` answers, `/slow` answers after
// 300 ms, `/hang` after 30 s, `/down` 503, `/throttled` 429, `/unauthorized` 401 (the service's
// credential rejected), `/forbidden` 403, `/garbage` non-JSON, `/not-openshift` 404 on ClusterVersion,
// `/cut` drops the connection once the request has arrived, `/stall-headers` sends 201 and its
// headers at once and then nothing, ever.
// GET `${url}/_stats` reports the reviews made so far (ClusterApiStats), for tests of caching.
//
// Tokens (any other token is not authenticated):
//   user.<name>[.<anything>]  user <name>, uid "uid-<name>", groups [system:authenticated, parley-users]
//                             (SubjectAccessReview allows the group parley-users on GET /ls-access)
//   denied.<name>             user <name>, uid "uid-<name>", groups [system:authenticated]
//   nouid.<name>              user <name> without uid, groups [parley-users]
//   kubeadmin                 user kube:admin without uid, groups [system:cluster-admins, parley-users]
//   sa.<namespace>.<name>     system:serviceaccount:<namespace>:<name>, groups [system:serviceaccounts]
//   nouser                    authenticated, but no user in the answer
//   emptyname                 authenticated, user with an empty username
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { listenOn } from "./listen.ts";

/** The credential the gateway must present (authentication.k8s_service_account_token). */
export const CLUSTER_SERVICE_TOKEN = "parley-fake-cluster-credential-0123456789";
export const CLUSTER_ID = "3c1a7d7e-5f4e-4b63-9a53-0d6d0cbb1f2e";

/** The group that the fake's SubjectAccessReview lets GET /ls-access. */
export const ACCESS_GROUP = "parley-users";

export interface ClusterApiStats {
  /** TokenReviews by reviewed token. */
  tokenReviews: Record<string, number>;
  /** SubjectAccessReviews by user. */
  accessReviews: Record<string, number>;
}

export interface ClusterApiServer {
  /** `http://127.0.0.1:<port>`; append a mode: `${url}/ok`. */
  url: string;
  stats(): ClusterApiStats;
  close(): Promise<void>;
}

interface User {
  username: string;
  uid?: string;
  groups: string[];
}

function userOf(token: string): User | null | "no-user" {
  const [kind, first, second] = token.split(".");
  switch (kind) {
    case "user":
      return first ? { username: first, uid: `uid-${first}`, groups: ["system:authenticated", ACCESS_GROUP] } : null;
    case "denied":
      return first ? { username: first, uid: `uid-${first}`, groups: ["system:authenticated"] } : null;
    case "nouid":
      return first ? { username: first, groups: [ACCESS_GROUP] } : null;
    case "kubeadmin":
      return { username: "kube:admin", groups: ["system:cluster-admins", ACCESS_GROUP] };
    case "sa":
      return first && second
        ? { username: `system:serviceaccount:${first}:${second}`, uid: `uid-sa-${first}-${second}`, groups: ["system:serviceaccounts"] }
        : null;
    case "nouser":
      return "no-user";
    case "emptyname":
      return { username: "", groups: [] };
    default:
      return null;
  }
}

function status(res: ServerResponse, code: number, reason: string, message: string): void {
  res
    .writeHead(code, { "Content-Type": "application/json" })
    .end(JSON.stringify({ kind: "Status", apiVersion: "v1", metadata: {}, status: "Failure", message, reason, code }));
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown> | null> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    const value: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    return value && typeof value === "object" ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

const MODES = new Set(["ok", "slow", "hang", "down", "throttled", "unauthorized", "forbidden", "garbage", "not-openshift", "cut", "stall-headers"]);

export async function startClusterApi(): Promise<ClusterApiServer> {
  const stats: ClusterApiStats = { tokenReviews: {}, accessReviews: {} };
  const timers = new Set<NodeJS.Timeout>();

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://localhost");
    const [, mode = "", ...rest] = url.pathname.split("/");
    const path = `/${rest.join("/")}`;
    if (req.method === "GET" && url.pathname === "/_stats") {
      return void res.writeHead(200, { "Content-Type": "application/json" }).end(JSON.stringify(stats));
    }
    if (!MODES.has(mode)) return status(res, 404, "NotFound", `unknown mode ${mode}`);
    if (mode === "cut") {
      req.resume();
      req.once("end", () => res.socket?.destroy());
      return;
    }
    if (mode === "stall-headers") {
      req.resume();
      res.writeHead(201, { "Content-Type": "application/json" });
      res.flushHeaders();
      return;
    }

    if (mode === "slow" || mode === "hang") {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          timers.delete(timer);
          resolve();
        }, mode === "slow" ? 300 : 30_000);
        timers.add(timer);
      });
      if (res.destroyed || req.destroyed) return;
    }
    if (mode === "down") return status(res, 503, "ServiceUnavailable", "the server is currently unable to handle the request");
    if (mode === "throttled") return status(res, 429, "TooManyRequests", "too many requests, please try again later");
    if (req.headers.authorization !== `Bearer ${CLUSTER_SERVICE_TOKEN}` || mode === "unauthorized") {
      return status(res, 401, "Unauthorized", "Unauthorized");
    }
    if (mode === "forbidden") {
      return status(res, 403, "Forbidden", 'tokenreviews.authentication.k8s.io is forbidden: User "system:serviceaccount:parley:gateway" cannot create resource "tokenreviews"');
    }
    if (mode === "garbage") return void res.writeHead(200, { "Content-Type": "text/html" }).end("<html>proxy error</html>");

    if (req.method === "GET" && path === "/apis/config.openshift.io/v1/clusterversions/version") {
      if (mode === "not-openshift") return status(res, 404, "NotFound", "the server could not find the requested resource");
      return void res
        .writeHead(200, { "Content-Type": "application/json" })
        .end(JSON.stringify({ apiVersion: "config.openshift.io/v1", kind: "ClusterVersion", metadata: { name: "version" }, spec: { clusterID: CLUSTER_ID } }));
    }
    if (req.method !== "POST") return status(res, 405, "MethodNotAllowed", "the server does not allow this method on the requested resource");
    if (!(req.headers["content-type"] ?? "").startsWith("application/json")) return status(res, 415, "UnsupportedMediaType", "expected application/json");
    const body = await readJson(req);
    const spec = (body?.spec ?? null) as Record<string, unknown> | null;

    if (path === "/apis/authentication.k8s.io/v1/tokenreviews") {
      if (body?.apiVersion !== "authentication.k8s.io/v1" || body?.kind !== "TokenReview" || typeof spec?.token !== "string") {
        return status(res, 400, "BadRequest", "expected a TokenReview with spec.token");
      }
      const token = spec.token;
      stats.tokenReviews[token] = (stats.tokenReviews[token] ?? 0) + 1;
      const user = userOf(token);
      const reviewStatus =
        user === null
          ? { authenticated: false, user: {}, error: "[invalid bearer token, token lookup failed]" }
          : user === "no-user"
            ? { authenticated: true }
            : { authenticated: true, user: { ...user, extra: { "authentication.kubernetes.io/pod-name": ["fake-pod"] } }, audiences: ["https://kubernetes.default.svc"] };
      return void res
        .writeHead(201, { "Content-Type": "application/json" })
        .end(JSON.stringify({ kind: "TokenReview", apiVersion: "authentication.k8s.io/v1", metadata: { creationTimestamp: null }, spec: { token }, status: reviewStatus }));
    }

    if (path === "/apis/authorization.k8s.io/v1/subjectaccessreviews") {
      const attributes = spec?.nonResourceAttributes as Record<string, unknown> | undefined;
      if (body?.apiVersion !== "authorization.k8s.io/v1" || body?.kind !== "SubjectAccessReview" || typeof spec?.user !== "string") {
        return status(res, 400, "BadRequest", "expected a SubjectAccessReview with spec.user");
      }
      const user = spec.user;
      stats.accessReviews[user] = (stats.accessReviews[user] ?? 0) + 1;
      const groups = Array.isArray(spec.groups) ? spec.groups : [];
      const allowed = attributes?.path === "/ls-access" && attributes?.verb === "get" && groups.includes(ACCESS_GROUP);
      return void res.writeHead(201, { "Content-Type": "application/json" }).end(
        JSON.stringify({
          kind: "SubjectAccessReview",
          apiVersion: "authorization.k8s.io/v1",
          metadata: { creationTimestamp: null },
          spec,
          status: allowed ? { allowed: true, reason: 'RBAC: allowed by ClusterRoleBinding "parley-users"' } : { allowed: false },
        }),
      );
    }
    return status(res, 404, "NotFound", "the server could not find the requested resource");
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => status(res, 500, "InternalError", String(error)));
  });
  const port = await listenOn(server);

  return {
    url: `http://127.0.0.1:${port}`,
    stats: () => structuredClone(stats),
    close() {
      for (const timer of timers) clearTimeout(timer);
      server.closeAllConnections();
      return new Promise<void>((resolve, reject) => server.close((error) => (error ? reject(error) : resolve())));
    },
  };
}
