// The Store contract against D1 inside workerd (the default backend), with the migrations wrangler
// applies (migrations/d1, handed in by vitest.config.ts as TEST_MIGRATIONS).
import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll, expect, it } from "vitest";
import { openStore } from "../../worker/storage/open-store.ts";
import { describeStoreContract } from "../store-contract.ts";

// test/worker/setup.ts applies them too; applying is idempotent, and this file then stands alone.
beforeAll(async () => {
  await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
});

describeStoreContract("D1 store", () => openStore(env, undefined));

it("sqlite settings select D1 as well", async () => {
  const store = openStore(env, { sqlite: { db_path: "/var/lib/parley/parley.db" } });
  await store.settings.set("sqlite-maps-to-d1", "yes");
  expect(await openStore(env, undefined).settings.get("sqlite-maps-to-d1")).toBe("yes");
  await store.close();
});
