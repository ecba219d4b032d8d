// The one seam between the record store and a database driver. The store writes dialect-neutral
// SQL (the subset SQLite and Postgres share: ON CONFLICT upserts, RETURNING, COALESCE, NULLIF) and a
// runner executes it through drizzle's driver for D1 or for Postgres.
import type { SQL } from "drizzle-orm";

/** A result row keyed by column name, with driver-native values (see rows.ts for the decoding). */
export type Row = Record<string, unknown>;

export interface SqlRunner {
  /** One statement; writes whose effect matters use RETURNING, so "did it happen" is a row count. */
  query(statement: SQL): Promise<Row[]>;
  /** Several statements, all or nothing (a D1 batch, a Postgres transaction); rows per statement. */
  atomic(statements: [SQL, ...SQL[]]): Promise<Row[][]>;
  close(): Promise<void>;
}
