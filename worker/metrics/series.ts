// How recorded figures travel and are stored: as additive rows (family, labels, part, value), so an
// isolate's batch, a shard's table and the merge of every shard are all plain sums. A histogram is
// kept as per-bucket counts (one row per bucket an observation fell in, not the cumulative `le`
// series) plus its sum: an observation touches two rows instead of twelve, and the exposition
// accumulates the buckets. A leaf module: the metrics Durable Object imports it.
import { DURATION_BUCKETS, type Family } from "./families.ts";

/**
 * One additive figure. `labels` is the label set as JSON (an object whose keys follow the family's
 * label order); `part` is "" for a counter or gauge, "sum" or a bucket's upper bound ("0.1" …
 * "120.0", "+Inf") for a histogram.
 */
export type SeriesRow = [family: string, labels: string, part: string, value: number];

/** What an isolate sends a shard: its rows since the last batch, numbered per sending isolate. */
export interface SeriesBatch {
  /** Random per isolate: the shard drops a batch whose seq it has already applied from this sender. */
  sender: string;
  /** Increases with every batch the isolate seals; a re-sent batch keeps its number. */
  seq: number;
  rows: SeriesRow[];
}

export const SUM_PART = "sum";

/** A bucket bound as the text format writes `le` (the original system's client writes 1 as "1.0"). */
export function boundText(bound: number): string {
  if (bound === Infinity) return "+Inf";
  return Number.isInteger(bound) ? `${bound}.0` : String(bound);
}

/** The bucket parts of a histogram, smallest bound first, +Inf last. */
export const BUCKET_PARTS: readonly string[] = [...DURATION_BUCKETS.map(boundText), "+Inf"];

/** The bucket an observation (seconds) falls in. */
export function bucketPart(seconds: number): string {
  const bound = DURATION_BUCKETS.find((upper) => seconds <= upper);
  return bound === undefined ? "+Inf" : boundText(bound);
}

/** The label set of `family` as stored: its labels in order, missing ones empty. */
export function encodeLabels(family: Family, values: Readonly<Record<string, string>>): string {
  const ordered: Record<string, string> = {};
  for (const name of family.labels) ordered[name] = values[name] ?? "";
  return JSON.stringify(ordered);
}

const key = (family: string, labels: string, part: string) => `${family}\u0000${labels}\u0000${part}`;

/** Sums rows by series. Plain data only, so a module-level one may collect many requests' figures. */
export class SeriesSums {
  private rows = new Map<string, SeriesRow>();

  get size(): number {
    return this.rows.size;
  }

  add(family: string, labels: string, part: string, value: number): void {
    if (!Number.isFinite(value)) return;
    const k = key(family, labels, part);
    const row = this.rows.get(k);
    if (row) row[3] += value;
    else this.rows.set(k, [family, labels, part, value]);
  }

  addRows(rows: Iterable<SeriesRow>): void {
    for (const [family, labels, part, value] of rows) this.add(family, labels, part, value);
  }

  /** One more event of a counter (or `amount` of them). */
  count(family: Family, labels: Readonly<Record<string, string>>, amount = 1): void {
    this.add(family.name, encodeLabels(family, labels), "", amount);
  }

  /** One observation of a histogram, in seconds. */
  observe(family: Family, labels: Readonly<Record<string, string>>, seconds: number): void {
    if (!Number.isFinite(seconds) || seconds < 0) return;
    const encoded = encodeLabels(family, labels);
    this.add(family.name, encoded, bucketPart(seconds), 1);
    // A zero-length observation still counts; its sum contribution is nothing.
    if (seconds > 0) this.add(family.name, encoded, SUM_PART, seconds);
  }

  /** Every row, leaving this empty. */
  take(): SeriesRow[] {
    const rows = [...this.rows.values()];
    this.rows = new Map();
    return rows;
  }

  list(): SeriesRow[] {
    return [...this.rows.values()].map((row) => [...row] as SeriesRow);
  }
}
