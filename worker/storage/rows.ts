// Decoding of driver values into record fields. The drivers disagree on a few types and the store
// hides that: D1 returns ISO text, 0/1 and JSON text; Postgres (through drizzle's neon session)
// returns timestamptz as text like "2025-01-01 10:00:00.123+00", int8 as a decimal string, and
// booleans and jsonb already parsed.
import { sql, type Param } from "drizzle-orm";
import type { Row } from "./sql-runner.ts";

/** Input side: any parseable timestamp becomes the single stored form, ISO 8601 in UTC ("...Z"). */
export function toIso(value: string | Date): string {
  // toISOString throws RangeError on an invalid date, which is the error a caller should see.
  return new Date(value).toISOString();
}

const JSON_TEXT = { mapToDriverValue: (value: unknown) => JSON.stringify(value) };

/**
 * Input side: the value of a JSON column, as a parameter that becomes JSON text only when the
 * statement is rendered, so a runner still sees the value itself (postgres-runner.ts reworks text
 * that Postgres cannot hold, which it could not do inside JSON text).
 */
export function jsonValue(value: unknown): Param {
  return sql.param(value, JSON_TEXT);
}

export function isoField(row: Row, column: string): string {
  const value = row[column];
  if (value instanceof Date) return value.toISOString();
  if (typeof value === "string") {
    // Postgres text form: a space before the time and an offset without minutes.
    const normalized = /^\d{4}-\d\d-\d\d \d/.test(value)
      ? value.replace(" ", "T").replace(/([+-]\d\d)$/, "$1:00")
      : value;
    const date = new Date(normalized);
    if (!Number.isNaN(date.getTime())) return date.toISOString();
  }
  throw new TypeError(`column ${column} is not a timestamp: ${String(value)}`);
}

export function textField(row: Row, column: string): string {
  const value = row[column];
  if (typeof value !== "string") throw new TypeError(`column ${column} is not text: ${String(value)}`);
  return value;
}

export function nullableTextField(row: Row, column: string): string | null {
  return row[column] == null ? null : textField(row, column);
}

export function numberField(row: Row, column: string): number {
  const value = typeof row[column] === "string" ? Number(row[column]) : row[column];
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new TypeError(`column ${column} is not a number: ${String(row[column])}`);
  }
  return value;
}

export function booleanField(row: Row, column: string): boolean {
  return row[column] === true || row[column] === 1;
}

export function stringListField(row: Row, column: string): string[] {
  const raw = row[column];
  const value: unknown = typeof raw === "string" ? JSON.parse(raw) : raw;
  if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) {
    throw new TypeError(`column ${column} is not a list of strings`);
  }
  return value;
}
