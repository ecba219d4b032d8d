// The behaviour of the registered-MCP-servers repository (worker/storage/mcp-servers-store.ts),
// written once and run against D1 (test/worker/mcp-servers-store.test.ts) and Postgres
// (test/unit/mcp-servers-store-postgres.test.ts). Tests share a database, so each uses its own names.
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { mcpServersStore, type McpServersStore } from "../worker/storage/mcp-servers-store.ts";
import type { Store } from "../worker/storage/store.ts";

const unique = (prefix: string) => `${prefix}-${crypto.randomUUID()}`;

export function describeMcpServersStoreContract(name: string, makeStore: () => Store | Promise<Store>): void {
  describe(name, () => {
    let store: Store;
    let servers: McpServersStore;
    beforeEach(async () => {
      store = await makeStore();
      servers = mcpServersStore(store.sql);
    });
    afterEach(async () => {
      await store.close();
    });

    const fields = (name: string) => ({
      name,
      url: "https://mcp.example.com/mcp",
      providerId: "model-context-protocol",
      authorizationHeaders: { Authorization: "client", "X-Cluster-Token": "kubernetes" },
      headers: ["X-Request-Id", "x-tenant"],
      timeout: 12,
      createdBy: "user-1",
    });

    it("create stores every field and get returns it; JSON columns keep their keys' spelling", async () => {
      const name = unique("create");
      const created = await servers.create({ ...fields(name), createdAt: "2025-02-03T04:05:06+01:00" });
      expect(created).toEqual({ ...fields(name), createdAt: "2025-02-03T03:05:06.000Z" });
      expect(await servers.get(name)).toEqual(created);
    });

    it("empty credentials, no forwarded headers and no timeout", async () => {
      const name = unique("bare");
      const created = await servers.create({ ...fields(name), authorizationHeaders: {}, headers: [], timeout: null });
      expect(created).toMatchObject({ authorizationHeaders: {}, headers: [], timeout: null });
      expect(created!.createdAt).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
      expect(await servers.get(name)).toEqual(created);
    });

    it("a taken name is refused (null) and the first registration stands", async () => {
      const name = unique("dup");
      await servers.create(fields(name));
      expect(await servers.create({ ...fields(name), url: "https://other.example.com/mcp" })).toBeNull();
      expect((await servers.get(name))!.url).toBe("https://mcp.example.com/mcp");
    });

    it("of two registrations racing for a name exactly one wins", async () => {
      const name = unique("race");
      const results = await Promise.all([servers.create(fields(name)), servers.create({ ...fields(name), url: "https://b.example.com/" })]);
      expect(results.filter((result) => result !== null)).toHaveLength(1);
    });

    it("list returns registrations oldest first", async () => {
      const first = unique("list-a");
      const second = unique("list-b");
      await servers.create({ ...fields(second), createdAt: "2030-01-02T00:00:00.000Z" });
      await servers.create({ ...fields(first), createdAt: "2030-01-01T00:00:00.000Z" });
      const names = (await servers.list()).map((server) => server.name).filter((n) => n === first || n === second);
      expect(names).toEqual([first, second]);
    });

    it("delete removes the server once", async () => {
      const name = unique("delete");
      await servers.create(fields(name));
      expect(await servers.delete(name)).toBe(true);
      expect(await servers.get(name)).toBeNull();
      expect(await servers.delete(name)).toBe(false);
      expect(await servers.get(unique("never"))).toBeNull();
    });
  });
}
