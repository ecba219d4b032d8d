// The Store contract against the test Postgres (the server on 127.0.0.1:5432, else an embedded
// PGlite: test/fakes/postgres.ts says which), reached the way a Worker reaches it: the Neon driver
// over a WebSocket, through the local WebSocket-to-TCP relay. Nothing here is skipped.
import { getTableConfig as pgTableConfig, type PgTable } from "drizzle-orm/pg-core";
import { getTableConfig as sqliteTableConfig, type SQLiteTable } from "drizzle-orm/sqlite-core";
import pg from "pg";
import { describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import * as d1Schema from "../../worker/storage/schema-d1.ts";
import * as postgresSchema from "../../worker/storage/schema-postgres.ts";
import { openStore } from "../../worker/storage/open-store.ts";
import { StoreConflictError } from "../../worker/storage/store.ts";
import { TEST_POSTGRES } from "../fakes/postgres.ts";
import { postgresSchemaPerFile } from "./postgres-schema.ts";
import { describeStoreContract } from "../store-contract.ts";

// openStore takes the Worker env; with postgres settings the D1 binding is never touched.
const NO_D1 = {} as { DB: D1Database };

const schema = postgresSchemaPerFile();
const postgres = schema.settings;

describeStoreContract("Postgres store (Neon driver through the WebSocket relay)", async () =>
  openStore(NO_D1, { postgres: await postgres() }),
);

describe("Postgres specifics", () => {
  it("the D1 and Postgres schema files define the same tables, columns and keys", () => {
    const shape = (name: string, columns: { name: string; notNull: boolean; primary: boolean }[], pk: string[]) => ({
      name,
      columns: columns.map((c) => `${c.name}${c.notNull ? " not null" : ""}${c.primary ? " primary" : ""}`).sort(),
      pk,
    });
    const d1 = Object.values(d1Schema).map((t) => {
      const c = sqliteTableConfig(t as SQLiteTable);
      return shape(c.name, c.columns, c.primaryKeys.flatMap((k) => k.columns.map((col) => col.name)));
    });
    const postgres = Object.values(postgresSchema).map((t) => {
      const c = pgTableConfig(t as PgTable);
      return shape(c.name, c.columns, c.primaryKeys.flatMap((k) => k.columns.map((col) => col.name)));
    });
    expect(postgres).toEqual(d1);
    expect(d1.map((t) => t.name).sort()).toEqual(
      ["conversations", "data_objects", "leases", "mcp_servers", "prompts", "quota_subjects", "responses", "settings", "stream_requests", "token_usage", "token_usage_applied"],
    );
  });

  it("writes land in the configured namespace, not in public", async () => {
    const settings = await postgres();
    const store = openStore(NO_D1, { postgres: settings });
    try {
      await store.settings.set("namespace-check", settings.namespace);
    } finally {
      await store.close();
    }
    const client = new pg.Client(TEST_POSTGRES);
    await client.connect();
    try {
      const { rows } = await client.query(`SELECT value FROM "${settings.namespace}".settings WHERE key = 'namespace-check'`);
      expect(rows).toEqual([{ value: settings.namespace }]);
      const inPublic = await client.query(
        "SELECT 1 FROM information_schema.tables WHERE table_schema = 'public' AND table_name = 'settings'",
      );
      expect(inPublic.rows).toEqual([]);
    } finally {
      await client.end();
    }
  });

  it("carries U+0000, which Postgres text cannot hold, as U+FFFD in every value it binds, on writes and on reads", async () => {
    const store = openStore(NO_D1, { postgres: await postgres() });
    try {
      const id = `nul_${crypto.randomUUID()}`;
      const userId = `user\u0000${crypto.randomUUID()}`;
      const record = {
        id,
        userId,
        lastUsedModel: "m\u0000",
        lastUsedProvider: "p",
        createdAt: "2025-01-01T00:00:00.000Z",
        lastMessageAt: "2025-01-01T00:00:00.000Z",
        messageCount: 2,
        topicSummary: "a \u0000 b",
        lastResponseId: null,
      };
      await store.conversations.upsertSnapshot(record);
      const kept = { ...record, userId: userId.replace("\u0000", "\ufffd"), lastUsedModel: "m\ufffd", topicSummary: "a \ufffd b" };
      expect(await store.conversations.get(id)).toEqual(kept);
      expect(await store.conversations.list(userId)).toEqual([kept]);
      // An older snapshot of the owner's changes nothing, and is no conflict.
      await store.conversations.upsertSnapshot({ ...record, messageCount: 1 });
      await expect(store.conversations.upsertSnapshot({ ...record, userId: "someone else", messageCount: 3 })).rejects.toBeInstanceOf(StoreConflictError);

      // JSON columns too: the value is reworked before it becomes JSON text.
      const prompt = await store.prompts.create({ promptId: `pmpt_nul_${crypto.randomUUID()}`, prompt: "x\u0000", variables: ["v\u0000"] });
      expect(prompt).toMatchObject({ prompt: "x\ufffd", variables: ["v\ufffd"] });
      const key = `nul\u0000${crypto.randomUUID()}`;
      await store.settings.set(key, "on\u0000");
      expect(await store.settings.get(key)).toBe("on\ufffd");
    } finally {
      await store.close();
    }
  });

  // A namespace that could break out of search_path and a plain ws:// relay off the machine under
  // a TLS ssl_mode are refused when the configuration loads (test/unit/config.test.ts).
  it("takes a wss:// relay, or none, under ssl_mode=require", async () => {
    const settings = await postgres();
    await openStore(NO_D1, { postgres: { ...settings, ssl_mode: "require", ws_proxy: "wss://relay.example.com" } }).close();
    await openStore(NO_D1, { postgres: { ...settings, ssl_mode: "require" } }).close();
  });

  it("the relay refuses targets that are not loopback", async () => {
    const ws = new WebSocket(`${schema.relayUrl()}/v1?address=192.0.2.1:5432`);
    const code = await new Promise<number>((resolve) => ws.on("close", (closeCode) => resolve(closeCode)));
    expect(code).toBe(1008);
  });
});
