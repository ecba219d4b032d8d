// Named leases in the record store, so that periodic work (the data exporter) runs in one place at
// a time across every instance. A lease names its holder and an expiry: a holder that dies stops
// renewing, and once the expiry passes anyone may take the lease over.
// Follows sql-store.ts's rules: SQL that SQLite and Postgres both run, writes that RETURN a row.
import { sql } from "drizzle-orm";
import { isoField, textField, toIso } from "./rows.ts";
import type { leases } from "./schema-d1.ts";
import type { SqlRunner } from "./sql-runner.ts";

export type Lease = typeof leases.$inferSelect;

export interface LeasesStore {
  /**
   * Takes the lease when nobody holds it, its expiry has passed (at `now`), or `holder` already
   * holds it; true when `holder` now holds it until `expiresAt`. One statement, so of two racing
   * holders exactly one wins.
   */
  acquire(name: string, holder: string, expiresAt: string | Date, now: string | Date): Promise<boolean>;
  /**
   * Moves the expiry of a lease `holder` still holds; false when it was taken over (or released),
   * and the holder must stop the work the lease guards.
   */
  renew(name: string, holder: string, expiresAt: string | Date): Promise<boolean>;
  /** Gives the lease up if `holder` holds it; false otherwise. */
  release(name: string, holder: string): Promise<boolean>;
  get(name: string): Promise<Lease | null>;
}

export function leasesStore(db: SqlRunner): LeasesStore {
  return {
    acquire: async (name, holder, expiresAt, now) => {
      // Both timestamps go through toIso, so on D1 (ISO text) the comparison is also chronological.
      const rows = await db.query(sql`
        INSERT INTO leases (name, holder, expires_at) VALUES (${name}, ${holder}, ${toIso(expiresAt)})
        ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
        WHERE leases.expires_at <= ${toIso(now)} OR leases.holder = excluded.holder
        RETURNING holder`);
      return rows.length > 0;
    },

    renew: async (name, holder, expiresAt) =>
      (
        await db.query(sql`
          UPDATE leases SET expires_at = ${toIso(expiresAt)}
          WHERE name = ${name} AND holder = ${holder}
          RETURNING name`)
      ).length > 0,

    release: async (name, holder) =>
      (await db.query(sql`DELETE FROM leases WHERE name = ${name} AND holder = ${holder} RETURNING name`)).length > 0,

    get: async (name) => {
      const [row] = await db.query(sql`SELECT * FROM leases WHERE name = ${name}`);
      return row ? { name: textField(row, "name"), holder: textField(row, "holder"), expiresAt: isoField(row, "expires_at") } : null;
    },
  };
}
