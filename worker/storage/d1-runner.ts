// D1 through drizzle's SQLite dialect. D1 has no interactive transactions, but a batch runs as one,
// and every call, single statements included, goes out as a batch through the isolate's group
// commit for that database (group-commit.ts).
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import type { SQL } from "drizzle-orm";
import { GroupCommit } from "./group-commit.ts";
import type { Row, SqlRunner } from "./sql-runner.ts";

// drizzle 0.45's db.batch() cannot take raw sql with parameters (SQLiteRaw has no prepared
// statement to bind), so statements are rendered with drizzle's SQLite dialect and sent to D1 as is.
const dialect = new SQLiteAsyncDialect();

/** One group commit per D1 binding in this isolate (the binding object outlives requests). */
const commits = new WeakMap<D1Database, GroupCommit<D1PreparedStatement, Row[]>>();

/** The group commit of this binding, made on first use. */
function groupCommit(binding: D1Database): GroupCommit<D1PreparedStatement, Row[]> {
  let commit = commits.get(binding);
  if (!commit) {
    commit = new GroupCommit(async (statements) => (await binding.batch<Row>(statements)).map((result) => result.results));
    commits.set(binding, commit);
  }
  return commit;
}

export function d1Runner(binding: D1Database): SqlRunner {
  const group = groupCommit(binding);
  const prepare = (statement: SQL) => {
    const query = dialect.sqlToQuery(statement);
    return binding.prepare(query.sql).bind(...query.params);
  };
  return {
    query: async (statement) => (await group.run([prepare(statement)]))[0]!,
    atomic: (statements) => group.run(statements.map(prepare)),
    // The binding belongs to the Worker, not to this store.
    close: async () => {},
  };
}
