// D1 through drizzle-orm/d1. D1 has no interactive transactions, but a batch runs as one.
import { drizzle } from "drizzle-orm/d1";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import type { Row, SqlRunner } from "./sql-runner.ts";

export function d1Runner(binding: D1Database): SqlRunner {
  const db = drizzle(binding);
  // drizzle 0.45's db.batch() cannot take raw sql with parameters (SQLiteRaw has no prepared
  // statement to bind), so the batch is rendered with drizzle's SQLite dialect and sent to D1 as is.
  const dialect = new SQLiteAsyncDialect();
  return {
    query: (statement) => db.all<Row>(statement),
    atomic: async (statements) => {
      const prepared = statements.map((statement) => {
        const query = dialect.sqlToQuery(statement);
        return binding.prepare(query.sql).bind(...query.params);
      });
      return (await binding.batch<Row>(prepared)).map((result) => result.results);
    },
    // The binding belongs to the Worker, not to this store.
    close: async () => {},
  };
}
