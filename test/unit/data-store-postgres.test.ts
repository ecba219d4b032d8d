// The exported-data index and leases (test/data-store-contract.ts) against the test Postgres (the
// server, else an embedded PGlite), reached as a Worker reaches it: the Neon driver over a
// WebSocket, through the local relay. The suite has a schema of its own; nothing is skipped.
import { neonConfig } from "@neondatabase/serverless";
import { afterAll, beforeAll } from "vitest";
import { WebSocket } from "ws";
import { postgresRunner } from "../../worker/storage/postgres-runner.ts";
import type { PostgresSettings } from "../../worker/storage/store.ts";
import { applyPostgresMigrations, createTestNamespace, dropNamespace, testPostgresSettings } from "../fakes/postgres.ts";
import { startWsRelay, type WsRelay } from "../fakes/ws-relay.ts";
import { describeDataStoreContract } from "../data-store-contract.ts";

if (typeof globalThis.WebSocket === "undefined") neonConfig.webSocketConstructor = WebSocket;

let relay: WsRelay;
let namespace: string | undefined;
let migrated: Promise<PostgresSettings> | undefined;

beforeAll(async () => {
  relay = await startWsRelay();
});

afterAll(async () => {
  await relay?.close();
  if (namespace) await dropNamespace(namespace);
});

// Made on first use, so an unreachable server fails each test instead of marking them skipped.
function postgres(): Promise<PostgresSettings> {
  migrated ??= (async () => {
    namespace = await createTestNamespace();
    await applyPostgresMigrations(namespace);
    return testPostgresSettings(namespace, relay.url) as PostgresSettings;
  })();
  return migrated;
}

describeDataStoreContract("data_objects and leases on Postgres", async () => postgresRunner(await postgres()));
