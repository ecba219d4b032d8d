// Starts the fakes the Worker tests talk to (in Node, beside workerd) and hands their addresses and
// pre-signed tokens to the tests with vitest's provide/inject.
import type { TestProject } from "vitest/node";
import type { TestTokens } from "./provided-context.ts";
import { startJwksServer } from "./fakes/jwks-server.ts";
import { applyPostgresMigrations, createTestNamespace, dropNamespace, testPostgresSettings } from "./fakes/postgres.ts";
import { startScriptedBackend } from "./fakes/scripted-backend.ts";
import { startWsRelay } from "./fakes/ws-relay.ts";


export default async function setup(project: TestProject) {
  const backend = await startScriptedBackend();
  // Streams whose timing the tests observe (interrupt, disconnect) come from a slower twin.
  const slowBackend = await startScriptedBackend({ tokenDelayMs: 50 });
  const jwks = await startJwksServer();
  const relay = await startWsRelay();
  // Worker tests with `database.postgres` use a fresh, migrated schema of the real server; an
  // unreachable server fails the run here, it is never skipped.
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
  project.provide("jwksUrl", jwks.url);
  project.provide("wsRelayUrl", relay.url);
  project.provide("tokens", tokens);
  project.provide("postgres", testPostgresSettings(namespace, relay.url));
  return async () => {
    await Promise.all([backend.close(), slowBackend.close(), jwks.close(), relay.close(), dropNamespace(namespace)]);
  };
}
