// One QuotaDO per (limiter, subject): the token counter of a user or of the whole cluster. Every
// admission and settlement of one counter runs here one at a time. A turn is admitted only while
// what the counter has left beyond other admitted turns' reservations covers its input (or the
// limiter's whole capacity, when that is less), and its reservation (its input and what its
// answer may add) holds until the turn settles with what it really used: so concurrent turns
// overdraw the counter only by what they use beyond their reservations (README "Token quotas").
// The period catch-up happens on every touch, so a missed cron run never locks a subject out.
import { DurableObject } from "cloudflare:workers";
import { catchUp, initialState, limiterCapacity, type LimiterSpec, type QuotaState } from "../worker/domain/quota-periods.ts";

export interface QuotaReading extends QuotaState {
  /** True on the first touch of this counter: the caller registers it for the cron scheduler. */
  created: boolean;
}

export type Admission =
  | { ok: true; /** Tokens left for this turn: the counter minus what other turns reserved. */ admitted: number; created: boolean; nextResetAt: number }
  | {
      ok: false;
      /** What was left for it (never below zero). */
      available: number;
      /** What it needed left. */
      needed: number;
      /**
       * What turns in progress hold that could come back as they end (their reservations, as far as
       * the counter covers them): with `available`, the most this turn could ever find left.
       */
      held: number;
    };

/**
 * A reservation lapses after this long if its turn never settles (its conversation's Durable Object
 * settles every turn it ran, also after a restart; this bounds what a lost one can hold back).
 */
const RESERVATION_TTL_SECONDS = 3600;
/** Settled reservation ids are remembered this long, so a repeated settlement changes nothing. */
const SETTLED_MEMORY_SECONDS = 86_400;

export class QuotaDO extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(`
      CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), available INTEGER NOT NULL, next_reset_at INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS reservations (id TEXT PRIMARY KEY, tokens INTEGER NOT NULL, expires_at INTEGER NOT NULL);
      CREATE TABLE IF NOT EXISTS settled (id TEXT PRIMARY KEY, at INTEGER NOT NULL);`);
  }

  /** The counter brought up to date. */
  async read(spec: LimiterSpec, now: number): Promise<QuotaReading> {
    return this.update(spec, now, 0);
  }

  /**
   * Admits a turn while what is left beyond other turns' reservations covers `needed` (its input),
   * or the limiter's whole capacity when that is less (a quota smaller than one question's estimate
   * still answers when full, as the original system's small example quotas need), and reserves
   * `reserve` (its input and what its answer may add) until it settles.
   */
  async admit(spec: LimiterSpec, reservationId: string, needed: number, reserve: number, now: number): Promise<Admission> {
    const reading = this.update(spec, now, 0);
    this.sql.exec("DELETE FROM reservations WHERE expires_at <= ?", now);
    const mine = this.sql.exec<{ tokens: number }>("SELECT tokens FROM reservations WHERE id = ?", reservationId).toArray()[0];
    const reserved = this.sql.exec<{ total: number | null }>("SELECT SUM(tokens) AS total FROM reservations WHERE id <> ?", reservationId).one().total ?? 0;
    const admitted = reading.available - reserved;
    const wanted = Math.min(needed, limiterCapacity(spec));
    if (!mine && (admitted <= 0 || admitted < wanted)) {
      return { ok: false, available: Math.max(0, admitted), needed: wanted, held: Math.min(reserved, Math.max(0, reading.available)) };
    }
    if (!mine) this.sql.exec("INSERT INTO reservations (id, tokens, expires_at) VALUES (?, ?, ?)", reservationId, Math.max(1, reserve), now + RESERVATION_TTL_SECONDS);
    return { ok: true, admitted, created: reading.created, nextResetAt: reading.nextResetAt };
  }

  /** Ends a reservation, consuming what the turn used. A repeated settlement changes nothing. */
  async settle(spec: LimiterSpec, reservationId: string, tokens: number, now: number): Promise<QuotaReading> {
    this.sql.exec("DELETE FROM settled WHERE at <= ?", now - SETTLED_MEMORY_SECONDS);
    if (this.sql.exec("SELECT 1 FROM settled WHERE id = ?", reservationId).toArray().length > 0) return this.update(spec, now, 0);
    this.sql.exec("DELETE FROM reservations WHERE id = ?", reservationId);
    this.sql.exec("INSERT INTO settled (id, at) VALUES (?, ?)", reservationId, now);
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
