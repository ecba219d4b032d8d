// The registered-MCP-servers repository against the test Postgres (the server, else an embedded
// PGlite), reached as a Worker reaches it: the Neon driver over a WebSocket, through the local
// WebSocket-to-TCP relay. Nothing is skipped.
import { neonConfig } from "@neondatabase/serverless";
import { afterAll, beforeAll } from "vitest";
import { WebSocket } from "ws";
import { openStore } from "../../worker/storage/open-store.ts";
import type { PostgresSettings } from "../../worker/storage/store.ts";
import { applyPostgresMigrations, createTestNamespace, dropNamespace, testPostgresSettings } from "../fakes/postgres.ts";
import { startWsRelay, type WsRelay } from "../fakes/ws-relay.ts";
import { describeMcpServersStoreContract } from "../mcp-servers-store-contract.ts";

if (typeof globalThis.WebSocket === "undefined") neonConfig.webSocketConstructor = WebSocket;

// openStore takes the Worker env; with postgres settings the D1 binding is never touched.
const NO_D1 = {} as { DB: D1Database };

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

// Made on first use: a failing beforeAll would only mark the tests skipped.
function postgres(): Promise<PostgresSettings> {
  migrated ??= (async () => {
    namespace = await createTestNamespace();
    await applyPostgresMigrations(namespace);
    return testPostgresSettings(namespace, relay.url);
  })();
  return migrated;
}

describeMcpServersStoreContract("registered MCP servers in Postgres", async () => openStore(NO_D1, { postgres: await postgres() }));
