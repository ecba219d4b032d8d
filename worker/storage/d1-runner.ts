// D1 through drizzle's SQLite dialect. D1 has no interactive transactions, but a batch runs as one.
// Each call goes out on its own, from the request that makes it: a Worker must never let one
// request wait on I/O that another request started (workerd binds I/O to its request, and a
// request left waiting on a cancelled one hangs), so statements are not pooled across requests.
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import type { SQL } from "drizzle-orm";
import type { Row, SqlRunner } from "./sql-runner.ts";

// drizzle 0.45's db.batch() cannot take raw sql with parameters (SQLiteRaw has no prepared
// statement to bind), so statements are rendered with drizzle's SQLite dialect and sent to D1 as is.
const dialect = new SQLiteAsyncDialect();

export function d1Runner(binding: D1Database): SqlRunner {
  const prepare = (statement: SQL) => {
    const query = dialect.sqlToQuery(statement);
    return binding.prepare(query.sql).bind(...query.params);
  };
  return {
    query: async (statement) => (await prepare(statement).all<Row>()).results,
    atomic: async (statements) => (await binding.batch<Row>(statements.map(prepare))).map((result) => result.results),
    // The binding belongs to the Worker, not to this store.
    close: async () => {},
  };
}
