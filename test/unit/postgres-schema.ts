// One fresh, migrated schema of the test Postgres for a test file (the server, else an embedded
// PGlite: test/fakes/postgres.ts says which), reached as a Worker reaches it: the Neon driver over
// a WebSocket, through the local WebSocket-to-TCP relay. Dropped after the file's tests.
import { neonConfig } from "@neondatabase/serverless";
import { afterAll, beforeAll } from "vitest";
import { WebSocket } from "ws";
import type { PostgresSettings } from "../../worker/storage/store.ts";
import { applyPostgresMigrations, createTestNamespace, dropNamespace, testPostgresSettings } from "../fakes/postgres.ts";
import { startWsRelay, type WsRelay } from "../fakes/ws-relay.ts";

// Node 22 has a global WebSocket; the driver needs one, so older runtimes get ws.
if (typeof globalThis.WebSocket === "undefined") neonConfig.webSocketConstructor = WebSocket;

/**
 * Registers the file's relay and schema with vitest. `settings()` makes the schema on first use
 * rather than in beforeAll: a failing beforeAll only marks the tests skipped, whereas this way an
 * unreachable Postgres fails every test that needs it.
 */
export function postgresSchemaPerFile(): { settings: () => Promise<PostgresSettings>; relayUrl: () => string } {
  let relay: WsRelay | undefined;
  let namespace: string | undefined;
  let migrated: Promise<PostgresSettings> | undefined;
  beforeAll(async () => {
    relay = await startWsRelay();
  });
  afterAll(async () => {
    await relay?.close();
    if (namespace) await dropNamespace(namespace);
  });
  const relayUrl = () => {
    if (!relay) throw new Error("the WebSocket relay is not running (postgresSchemaPerFile must be called at the top of a test file)");
    return relay.url;
  };
  const settings = () =>
    (migrated ??= (async () => {
      namespace = await createTestNamespace();
      await applyPostgresMigrations(namespace);
      return testPostgresSettings(namespace, relayUrl()) as PostgresSettings;
    })());
  return { settings, relayUrl };
}
