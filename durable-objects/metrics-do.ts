// One shard of the deployment's metrics (worker/metrics/shards.ts names METRICS_SHARDS of them).
// Isolates everywhere send it batches of additive rows off their answers' path; /metrics reads
// every shard and adds them up. Rows live in the object's SQLite storage, so figures survive
// restarts, deployments and evictions. A batch is applied in one transaction, exactly once: each
// sending isolate numbers its batches and re-sends an unacknowledged one under the same number, so
// a batch applied whose acknowledgement was lost is not counted twice.
import { DurableObject } from "cloudflare:workers";
import type { SeriesBatch, SeriesRow } from "../worker/metrics/series.ts";

// Schema versions: 1 is the first. A later change of the tables migrates from the stored version.
const SCHEMA_VERSION = 1;
const SCHEMA = `
  CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS series (
    family TEXT NOT NULL,
    labels TEXT NOT NULL,
    part TEXT NOT NULL,
    value REAL NOT NULL,
    PRIMARY KEY (family, labels, part)
  ) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS senders (sender TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, seen_at INTEGER NOT NULL) WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS senders_seen_at ON senders (seen_at);
`;

/** A sender (an isolate) silent this long is forgotten; isolates live minutes to hours. */
const SENDER_RETENTION_MS = 7 * 24 * 3600_000;

export class MetricsDO extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(SCHEMA);
    this.sql.exec("INSERT INTO meta (key, value) VALUES ('schema_version', ?) ON CONFLICT (key) DO NOTHING", String(SCHEMA_VERSION));
  }

  /** Adds a batch's rows unless this sender's batch of that number (or a later one) was applied already. */
  async add(batch: SeriesBatch): Promise<{ applied: boolean }> {
    const now = Date.now();
    return this.ctx.storage.transactionSync(() => {
      const last = this.sql.exec<{ last_seq: number }>("SELECT last_seq FROM senders WHERE sender = ?", batch.sender).toArray()[0];
      if (last && last.last_seq >= batch.seq) return { applied: false };
      this.sql.exec(
        "INSERT INTO senders (sender, last_seq, seen_at) VALUES (?, ?, ?) ON CONFLICT (sender) DO UPDATE SET last_seq = excluded.last_seq, seen_at = excluded.seen_at",
        batch.sender,
        batch.seq,
        now,
      );
      for (const [family, labels, part, value] of batch.rows) {
        if (!Number.isFinite(value)) continue;
        this.sql.exec(
          "INSERT INTO series (family, labels, part, value) VALUES (?, ?, ?, ?) ON CONFLICT (family, labels, part) DO UPDATE SET value = value + excluded.value",
          family,
          labels,
          part,
          value,
        );
      }
      this.sql.exec("DELETE FROM senders WHERE seen_at < ?", now - SENDER_RETENTION_MS);
      return { applied: true };
    });
  }

  /** Every row of this shard. */
  async read(): Promise<SeriesRow[]> {
    return this.sql
      .exec<{ family: string; labels: string; part: string; value: number }>("SELECT family, labels, part, value FROM series")
      .toArray()
      .map((row) => [row.family, row.labels, row.part, row.value]);
  }
}
