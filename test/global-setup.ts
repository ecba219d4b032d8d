// Starts the fakes the Worker tests talk to (in Node, beside workerd) and hands their addresses and
// pre-signed tokens to the tests with vitest's provide/inject.
import type { TestProject } from "vitest/node";
import type { TestTokens } from "./provided-context.ts";
import { CLUSTER_SERVICE_TOKEN, startClusterApi } from "./fakes/cluster-api.ts";
import { startHecCollector } from "./fakes/hec-collector.ts";
import { startIngressServer } from "./fakes/ingress-server.ts";
import { startJwksServer } from "./fakes/jwks-server.ts";
import { startMcpServer } from "./fakes/mcp-server.ts";
import { applyPostgresMigrations, createTestNamespace, dropNamespace, testPostgresSettings } from "./fakes/postgres.ts";
import { startScriptedBackend } from "./fakes/scripted-backend.ts";
import { startWsRelay } from "./fakes/ws-relay.ts";
import { copySwaggerUi } from "../config/copy-swagger-ui.ts";

export default async function setup(project: TestProject) {
  // Swagger UI's files for /docs, copied from node_modules as wrangler's [build] does for dev and deploy.
  await copySwaggerUi();
  const backend = await startScriptedBackend();
  // Streams whose timing the tests observe (interrupt, disconnect) come from a slower twin.
  const slowBackend = await startScriptedBackend({ tokenDelayMs: 50 });
  // Models listed as OpenAI, vLLM and Ollama list them: bare ids, no provider prefix.
  const openaiStyleBackend = await startScriptedBackend({ modelStyle: "openai" });
  // Taken down and brought back by the tests that need an outage (POST /__outage), so it is nobody else's.
  const outageBackend = await startScriptedBackend();
  // Chat Completions only (as Ollama or llama.cpp's server), refusing stream_options: provider tests.
  const chatOnlyBackend = await startScriptedBackend({ chatOnly: true, rejectStreamOptions: true, modelStyle: "openai" });
  const jwks = await startJwksServer();
  // TokenReview / SubjectAccessReview for the k8s and trusted-proxy modules; misbehaviour by path.
  const clusterApi = await startClusterApi();
  const relay = await startWsRelay();
  // The data exporter's upload target and the Splunk HEC: both unpack/check what they get, misbehave on cue.
  const ingress = await startIngressServer();
  const hec = await startHecCollector();
  // A real MCP server (the SDK's, over streamable HTTP): tools, one path requiring a bearer token, one that hangs.
  const mcpServer = await startMcpServer();
  // Worker tests with `database.postgres` use a fresh, migrated schema of the test Postgres: the
  // server on 127.0.0.1:5432 (PGHOST/PGPORT), else an embedded PGlite (test/fakes/postgres.ts says which).
  const namespace = await createTestNamespace();
  await applyPostgresMigrations(namespace);
  const claims = { user_id: "user-jwk-1", username: "alice", realm_access: { roles: ["reader"] } };
  const tokens: TestTokens = {
    good: await jwks.sign(claims),
    admin: await jwks.sign({ user_id: "user-jwk-admin", username: "root", realm_access: { roles: ["admin"] } }),
    expired: await jwks.sign(claims, { expiresIn: "-5m" }),
    forged: await jwks.sign(claims, { key: "other" }),
    unknownKey: await jwks.sign(claims, { unknownKey: true }),
    missingClaim: await jwks.sign({ username: "nobody" }),
  };
  project.provide("backendUrl", backend.url);
  project.provide("slowBackendUrl", slowBackend.url);
  project.provide("openaiStyleBackendUrl", openaiStyleBackend.url);
  project.provide("outageBackendUrl", outageBackend.url);
  project.provide("chatOnlyBackendUrl", chatOnlyBackend.url);
  project.provide("jwksUrl", jwks.url);
  project.provide("clusterApi", { url: clusterApi.url, serviceToken: CLUSTER_SERVICE_TOKEN });
  project.provide("wsRelayUrl", relay.url);
  project.provide("ingressUrl", ingress.url);
  project.provide("hec", { url: hec.url, token: hec.token });
  project.provide("tokens", tokens);
  project.provide("mcp", { base: mcpServer.base, token: mcpServer.token, downUrl: mcpServer.downUrl });
  project.provide("postgres", testPostgresSettings(namespace, relay.url));
  project.provide("reliability", { form: process.env.RELIABILITY === "full" ? "full" : "short", seed: Number(process.env.RELIABILITY_SEED ?? 20261123) });
  return async () => {
    await mcpServer.close();
    await Promise.all([backend.close(), slowBackend.close(), openaiStyleBackend.close(), outageBackend.close(), chatOnlyBackend.close(), jwks.close(), clusterApi.close(), relay.close(), ingress.close(), hec.close(), dropNamespace(namespace)]);
  };
}
