// One QuotaDO per (limiter, subject): the token counter of a user or of the whole cluster. All
// checks and consumptions of one counter run here one at a time, so parallel answers never lose
// an update, and the period catch-up happens on every touch, so a missed cron run never locks a
// subject out.
import { DurableObject } from "cloudflare:workers";
import { catchUp, initialState, type LimiterSpec, type QuotaState } from "../worker/quota/periods.ts";

export interface QuotaReading extends QuotaState {
  /** True on the first touch of this counter: the caller registers it for the cron scheduler. */
  created: boolean;
}

export class QuotaDO extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec("CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), available INTEGER NOT NULL, next_reset_at INTEGER NOT NULL)");
  }

  /** The counter brought up to date. */
  async read(spec: LimiterSpec, now: number): Promise<QuotaReading> {
    return this.update(spec, now, 0);
  }

  /** Subtracts what an answer used (input + output tokens) and returns what is left. */
  async consume(spec: LimiterSpec, tokens: number, now: number): Promise<QuotaReading> {
    return this.update(spec, now, tokens);
  }

  private update(spec: LimiterSpec, now: number, tokens: number): QuotaReading {
    const row = this.sql.exec<{ available: number; next_reset_at: number }>("SELECT available, next_reset_at FROM counter").toArray()[0];
    const stored = row ? { available: row.available, nextResetAt: row.next_reset_at } : initialState(spec, now);
    const { state } = catchUp(stored, spec, now);
    const next = { available: state.available - tokens, nextResetAt: state.nextResetAt };
    this.sql.exec(
      "INSERT INTO counter (id, available, next_reset_at) VALUES (1, ?, ?) ON CONFLICT (id) DO UPDATE SET available = excluded.available, next_reset_at = excluded.next_reset_at",
      next.available,
      next.nextResetAt,
    );
    return { ...next, created: !row };
  }
}
