// Opens the record store the configuration names: D1 unless `database.postgres` is set.
import { d1Runner } from "./d1-runner.ts";
import { postgresRunner } from "./postgres-runner.ts";
import { createSqlStore } from "./sql-store.ts";
import type { DatabaseSettings, Store } from "./store.ts";

export function openStore(env: { DB: D1Database }, database: DatabaseSettings | undefined): Store {
  // `sqlite` settings also mean D1: the Workers runtime has no local file database, and D1 is the
  // SQLite it offers (wrangler dev keeps it under .wrangler/state; db_path has no effect).
  const runner = database?.postgres ? postgresRunner(database.postgres) : d1Runner(env.DB);
  return createSqlStore(runner);
}
