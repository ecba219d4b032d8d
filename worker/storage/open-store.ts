// Opens the record store the configuration names: D1 unless `database.postgres` is set.
import { errors } from "../errors.ts";
import { log } from "../log.ts";
import { d1Runner } from "./d1-runner.ts";
import { postgresRunner } from "./postgres-runner.ts";
import type { SqlRunner } from "./sql-runner.ts";
import { createSqlStore } from "./sql-store.ts";
import type { DatabaseSettings, Store } from "./store.ts";

export function openStore(env: { DB: D1Database }, database: DatabaseSettings | undefined): Store {
  // `sqlite` settings also mean D1: the Workers runtime has no local file database, and D1 is the
  // SQLite it offers (wrangler dev keeps it under .wrangler/state; db_path has no effect).
  const runner = database?.postgres ? postgresRunner(database.postgres) : d1Runner(env.DB);
  return createSqlStore(reporting(runner, database?.postgres ? "database.postgres" : "D1 (binding DB)"));
}

/**
 * A runner whose failures (a database that cannot be reached, a query it refuses) reach clients as
 * the original system's 500 "Database query failed", naming the store the configuration chose,
 * and the operator's log with their cause, rather than as an unexplained internal error.
 */
function reporting(runner: SqlRunner, store: string): SqlRunner {
  const failed = (error: unknown): never => {
    log.error(`the record store (${store}) failed`, error);
    throw errors.databaseFailed(store);
  };
  return {
    query: (statement) => runner.query(statement).catch(failed),
    atomic: (statements) => runner.atomic(statements).catch(failed),
    close: () => runner.close(),
  };
}
