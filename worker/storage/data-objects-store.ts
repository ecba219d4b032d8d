// The index of the feedback and transcript objects kept in R2 and of their export state. R2 cannot
// flag an object in place, so "not yet sent" is a query here: the exporter takes the oldest unsent
// rows, and marks them sent only after the ingress server accepted them.
//
// A row's `archive` names the batch it belongs to from just before that batch's upload: an upload
// whose outcome is unknown (the answer was lost) may have arrived, so the next run must send exactly
// that batch again, under the same name, and a receiver can drop the repeat. Rows in a recorded
// batch are therefore not offered for new batches.
// Follows sql-store.ts's rules: SQL that SQLite and Postgres both run, writes that RETURN a row.
import { sql, type SQL } from "drizzle-orm";
import { isoField, nullableTextField, numberField, textField, toIso } from "./rows.ts";
import type { dataObjects } from "./schema-d1.ts";
import type { Row, SqlRunner } from "./sql-runner.ts";

export const DATA_OBJECT_KINDS = ["feedback", "transcript"] as const;
export type DataObjectKind = (typeof DATA_OBJECT_KINDS)[number];

/** One indexed object, as drizzle's table declares it (timestamps as ISO 8601 UTC). */
export type DataObject = Omit<typeof dataObjects.$inferSelect, "kind"> & { kind: DataObjectKind };

export interface DataObjectsStore {
  /** Indexes an object; false when the key was already indexed (a retried write), which changes nothing. */
  record(object: { key: string; kind: DataObjectKind; bytes: number; createdAt?: string | Date }): Promise<boolean>;
  get(key: string): Promise<DataObject | null>;
  /** Objects not yet sent and in no recorded batch, oldest first (then by key). */
  unbatched(limit: number): Promise<DataObject[]>;
  /** Records that `keys` (those still unsent) make up the archive `archive`, before it is uploaded; returns how many. */
  recordBatch(keys: readonly string[], archive: string): Promise<number>;
  /** The unsent objects of the oldest recorded batch, oldest first; empty when every recorded batch was sent. */
  recordedBatch(): Promise<DataObject[]>;
  /** Marks sent those of `keys` still unsent, in one unit; returns how many it marked. */
  markSent(keys: readonly string[], archive: string, at: string | Date): Promise<number>;
  /** Objects sent before `before`, oldest first. */
  sentBefore(before: string | Date, limit: number): Promise<DataObject[]>;
  /** Removes the rows of `keys` (not the objects); returns how many there were. */
  remove(keys: readonly string[]): Promise<number>;
}

// D1 binds at most 100 parameters per statement; key lists are split below that, and the pieces run
// as one unit (a D1 batch, a Postgres transaction).
const KEYS_PER_STATEMENT = 90;

export function dataObjectsStore(db: SqlRunner): DataObjectsStore {
  const inChunks = async (keys: readonly string[], statement: (list: SQL) => SQL): Promise<number> => {
    if (keys.length === 0) return 0;
    const statements: SQL[] = [];
    for (let i = 0; i < keys.length; i += KEYS_PER_STATEMENT) {
      const list = sql.join(
        keys.slice(i, i + KEYS_PER_STATEMENT).map((key) => sql`${key}`),
        sql`, `,
      );
      statements.push(statement(list));
    }
    const results = await db.atomic(statements as [SQL, ...SQL[]]);
    return results.reduce((sum, rows) => sum + rows.length, 0);
  };

  return {
    record: async (object) => {
      const rows = await db.query(sql`
        INSERT INTO data_objects (key, kind, bytes, created_at)
        VALUES (${object.key}, ${object.kind}, ${object.bytes}, ${toIso(object.createdAt ?? new Date())})
        ON CONFLICT (key) DO NOTHING
        RETURNING key`);
      return rows.length > 0;
    },

    get: async (key) => {
      const [row] = await db.query(sql`SELECT * FROM data_objects WHERE key = ${key}`);
      return row ? decode(row) : null;
    },

    unbatched: async (limit) =>
      (
        await db.query(sql`
          SELECT * FROM data_objects WHERE sent_at IS NULL AND archive IS NULL
          ORDER BY created_at, key LIMIT ${limit}`)
      ).map(decode),

    recordBatch: (keys, archive) =>
      inChunks(
        keys,
        (list) => sql`
          UPDATE data_objects SET archive = ${archive}
          WHERE key IN (${list}) AND sent_at IS NULL
          RETURNING key`,
      ),

    // No limit: a batch was bounded when it was recorded.
    recordedBatch: async () =>
      (
        await db.query(sql`
          SELECT * FROM data_objects WHERE sent_at IS NULL AND archive = (
            SELECT archive FROM data_objects WHERE sent_at IS NULL AND archive IS NOT NULL
            ORDER BY created_at, key LIMIT 1)
          ORDER BY created_at, key`)
      ).map(decode),

    markSent: (keys, archive, at) => {
      const sentAt = toIso(at);
      return inChunks(
        keys,
        (list) => sql`
          UPDATE data_objects SET sent_at = ${sentAt}, archive = ${archive}
          WHERE key IN (${list}) AND sent_at IS NULL
          RETURNING key`,
      );
    },

    sentBefore: async (before, limit) =>
      (
        await db.query(sql`
          SELECT * FROM data_objects WHERE sent_at IS NOT NULL AND sent_at < ${toIso(before)}
          ORDER BY sent_at, key LIMIT ${limit}`)
      ).map(decode),

    remove: (keys) => inChunks(keys, (list) => sql`DELETE FROM data_objects WHERE key IN (${list}) RETURNING key`),
  };
}

function decode(row: Row): DataObject {
  const kind = textField(row, "kind");
  if (!(DATA_OBJECT_KINDS as readonly string[]).includes(kind)) throw new TypeError(`column kind is not a data object kind: ${kind}`);
  return {
    key: textField(row, "key"),
    kind: kind as DataObjectKind,
    bytes: numberField(row, "bytes"),
    createdAt: isoField(row, "created_at"),
    sentAt: row.sent_at == null ? null : isoField(row, "sent_at"),
    archive: nullableTextField(row, "archive"),
  };
}
