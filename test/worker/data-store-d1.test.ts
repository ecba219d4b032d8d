// The exported-data index and leases (test/data-store-contract.ts) against D1 inside workerd.
import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { beforeAll } from "vitest";
import { d1Runner } from "../../worker/storage/d1-runner.ts";
import { describeDataStoreContract } from "../data-store-contract.ts";

beforeAll(async () => {
  await applyD1Migrations(env.DB, env.TEST_MIGRATIONS);
});

describeDataStoreContract("data_objects and leases on D1", () => d1Runner(env.DB));
