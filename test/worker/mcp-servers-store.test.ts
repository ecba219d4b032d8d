// The registered-MCP-servers repository against D1 inside workerd, with the migrations wrangler applies.
import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll } from "vitest";
import { openStore } from "../../worker/storage/open-store.ts";
import { describeMcpServersStoreContract } from "../mcp-servers-store-contract.ts";

beforeAll(async () => {
  await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
});

describeMcpServersStoreContract("registered MCP servers in D1", () => openStore(env, undefined));
