// The data exporter (SPEC "Exported data", UPSTREAM "Exporter"): when
// user_data_collection.data_collector.enabled, feedback and transcripts not yet sent are packed into
// gzip tarballs and uploaded to the ingress server every collection_interval seconds. The cron
// trigger (worker/scheduled.ts) calls runDataExport every minute; it decides whether a run is due.
//
// - Nothing is lost: objects are marked sent (or deleted, with cleanup_after_send) only after the
//   ingress server answered 202. A server that is down, slow or answers anything else leaves them
//   for the next run, RETRY_AFTER_FAILURE_SECONDS later.
// - Nothing is sent twice in normal operation: runs hold a lease (one run at a time across every
//   instance and every location). An upload that may have arrived without its 202 being seen (an
//   answer after the timeout, a dropped connection, a crash between the 202 and the mark) is
//   repeated exactly: a batch's membership is recorded in the index before its upload, and a run
//   sends a recorded batch, as recorded, before it puts newer objects into new batches. Its name
//   derives from its objects' keys, so the repeat carries the same name and a receiver can drop it.
// - Bounded: a batch holds at most BATCH_MAX_OBJECTS objects and BATCH_MAX_BYTES bytes of JSON (an
//   object larger than that goes alone), and a run sends at most MAX_BATCHES_PER_RUN batches. A
//   run that stops at that limit with more waiting is continued at the next cron tick rather than
//   after collection_interval. These bounds keep the tarball within a Worker's memory and CPU, and
//   a run within the per-invocation subrequest limit (each object is one R2 read).
// - When and how the last run ended is kept in the record store's settings (every instance reads
//   it), as { last_run_at, outcome }.
import * as z from "zod";
import type { DataCollectorConfig, UserDataCollectionConfig } from "../config/schema.ts";
import { dataObjectsStore, type DataObject, type DataObjectsStore } from "../storage/data-objects-store.ts";
import { leasesStore } from "../storage/leases-store.ts";
import type { Store } from "../storage/store.ts";
import { buildArchive } from "./archive.ts";
import { uploadArchive } from "./ingress.ts";
import { log } from "../log.ts";

/** Objects per tarball. */
export const BATCH_MAX_OBJECTS = 200;
/** Bytes of JSON per tarball (before compression). */
export const BATCH_MAX_BYTES = 4 * 1024 * 1024;
/** Tarballs per run. */
export const MAX_BATCHES_PER_RUN = 3;
/** After a failed upload the next attempt waits this long (or collection_interval, if shorter). */
export const RETRY_AFTER_FAILURE_SECONDS = 300;
/** The lease outlives one upload (connection_timeout_seconds) by this much, for reading and marking. */
export const LEASE_MARGIN_SECONDS = 300;
/**
 * With cleanup_after_send, the rows of sent objects are kept this long after the objects are
 * deleted (so a late retry of a transcript write sees it was written and sent), then pruned.
 */
export const SENT_ROW_RETENTION_DAYS = 7;
/** Rows pruned per run. */
export const PRUNE_MAX_ROWS = 500;

export const EXPORT_LEASE = "data_export";
export const EXPORT_STATE_SETTING = "data_export.state";

export interface ExportLimits {
  maxObjects: number;
  maxBytes: number;
  maxBatches: number;
}

export const EXPORT_LIMITS: ExportLimits = { maxObjects: BATCH_MAX_OBJECTS, maxBytes: BATCH_MAX_BYTES, maxBatches: MAX_BATCHES_PER_RUN };

const ExportStateSchema = z.object({
  last_run_at: z.string(),
  /** drained: nothing left; more: stopped at the per-run limit; failed: an upload or read failed. */
  outcome: z.enum(["drained", "more", "failed"]),
});
type ExportState = z.output<typeof ExportStateSchema>;

export interface ExportDeps {
  bucket: Pick<R2Bucket, "get" | "delete">;
  store: Pick<Store, "sql" | "settings">;
}

export interface BatchReport {
  archive: string;
  objects: number;
  bytes: number;
  /** Indexed objects R2 no longer had; their rows were removed. */
  missing: number;
  sent: boolean;
  /** Why the upload failed. */
  reason?: string;
}

export type ExportRun =
  | { status: "disabled" }
  | { status: "not_due"; nextRunAt: string }
  /** Another run holds the lease. */
  | { status: "busy" }
  | { status: "ran"; outcome: ExportState["outcome"] | "lease_lost"; batches: BatchReport[] };

function parseState(text: string | null): ExportState | null {
  if (text === null) return null;
  try {
    const parsed = ExportStateSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** When the next run is due, in epoch ms (0: now). */
function nextRunAt(state: ExportState | null, collector: DataCollectorConfig): number {
  if (state === null) return 0;
  const last = Date.parse(state.last_run_at);
  if (Number.isNaN(last)) return 0;
  switch (state.outcome) {
    case "more":
      return last;
    case "failed":
      return last + Math.min(RETRY_AFTER_FAILURE_SECONDS, collector.collection_interval) * 1000;
    case "drained":
      return last + collector.collection_interval * 1000;
  }
}

/** The oldest objects that fit one batch: at most maxBytes in all, except that the first always goes. */
function takeBatch(candidates: readonly DataObject[], limits: ExportLimits): DataObject[] {
  const batch: DataObject[] = [];
  let bytes = 0;
  for (const object of candidates) {
    if (batch.length > 0 && bytes + object.bytes > limits.maxBytes) break;
    batch.push(object);
    bytes += object.bytes;
  }
  return batch;
}

/**
 * What goes next: a recorded batch whose upload may have arrived, exactly as recorded, else a new
 * batch of the oldest objects in none. `last`: nothing else waits behind it.
 */
async function nextBatch(objects: DataObjectsStore, limits: ExportLimits): Promise<{ batch: DataObject[]; last: boolean }> {
  const recorded = await objects.recordedBatch();
  if (recorded.length > 0) return { batch: recorded, last: false };
  const candidates = await objects.unbatched(limits.maxObjects);
  const batch = takeBatch(candidates, limits);
  return { batch, last: batch.length === candidates.length && candidates.length < limits.maxObjects };
}

/**
 * One exporter run, if one is due at `now` (the cron's scheduled time). Unexpected failures of the
 * record store are thrown; everything about R2 reads and the ingress server is handled and logged.
 */
export async function runDataExport(
  deps: ExportDeps,
  collection: UserDataCollectionConfig,
  now: Date,
  limits: ExportLimits = EXPORT_LIMITS,
): Promise<ExportRun> {
  const collector = collection.data_collector;
  if (!collector.enabled) return { status: "disabled" };
  const { settings, sql } = deps.store;
  const readNext = async () => nextRunAt(parseState(await settings.get(EXPORT_STATE_SETTING)), collector);
  const due = await readNext();
  if (now.getTime() < due) return { status: "not_due", nextRunAt: new Date(due).toISOString() };

  // Time moves on from the scheduled time as the run does.
  const started = Date.now();
  const clock = () => now.getTime() + (Date.now() - started);
  const leaseUntil = () => new Date(clock() + (collector.connection_timeout_seconds + LEASE_MARGIN_SECONDS) * 1000);
  const leases = leasesStore(sql);
  const holder = crypto.randomUUID();
  if (!(await leases.acquire(EXPORT_LEASE, holder, leaseUntil(), new Date(clock())))) return { status: "busy" };
  try {
    // Another instance may have finished a run between the first look and taking the lease.
    const dueNow = await readNext();
    if (now.getTime() < dueNow) return { status: "not_due", nextRunAt: new Date(dueNow).toISOString() };
    const objects = dataObjectsStore(sql);
    if (collector.cleanup_after_send) await pruneSent(deps.bucket, objects, new Date(clock() - SENT_ROW_RETENTION_DAYS * 86_400_000));

    const batches: BatchReport[] = [];
    let outcome: ExportState["outcome"] | "lease_lost" = "more";
    while (true) {
      if (batches.length >= limits.maxBatches) break;
      if (!(await leases.renew(EXPORT_LEASE, holder, leaseUntil()))) {
        log.error("data export: the lease was taken over by another run; stopping");
        outcome = "lease_lost";
        break;
      }
      const { batch, last } = await nextBatch(objects, limits);
      if (batch.length === 0) {
        outcome = "drained";
        break;
      }
      const report = await exportBatch(deps.bucket, objects, collector, batch, clock);
      batches.push(report);
      if (!report.sent) {
        outcome = "failed";
        break;
      }
      if (last) {
        outcome = "drained";
        break;
      }
    }
    if (outcome !== "lease_lost") {
      const state: ExportState = { last_run_at: now.toISOString(), outcome };
      await settings.set(EXPORT_STATE_SETTING, JSON.stringify(state));
    }
    return { status: "ran", outcome, batches };
  } finally {
    await leases.release(EXPORT_LEASE, holder).catch((error: unknown) => log.warn("data export: could not release the lease; it expires on its own", error));
  }
}

async function exportBatch(
  bucket: ExportDeps["bucket"],
  objects: DataObjectsStore,
  collector: DataCollectorConfig,
  batch: DataObject[],
  clock: () => number,
): Promise<BatchReport> {
  const bytes = batch.reduce((sum, object) => sum + object.bytes, 0);
  let archive;
  try {
    archive = await buildArchive(bucket, batch);
  } catch (error) {
    log.error(`data export: reading ${batch.length} object(s) from R2 failed; they are retried at the next run`, error);
    return { archive: "", objects: batch.length, bytes, missing: 0, sent: false, reason: "R2 read failed" };
  }
  if (archive.missing.length > 0) {
    log.warn(`data export: ${archive.missing.length} indexed object(s) no longer exist in R2 and are dropped from the index: ${archive.missing.map((o) => o.key).join(", ")}`);
    await objects.remove(archive.missing.map((object) => object.key));
  }
  const report = { archive: archive.name, objects: archive.included.length, bytes, missing: archive.missing.length };
  if (archive.included.length === 0) return { ...report, sent: true };
  const keys = archive.included.map((object) => object.key);
  // From here on the receiver may get it, whatever this run learns: recorded, it goes again as is.
  // (A recorded batch some of whose objects R2 lost since goes without them, under its new name.)
  await objects.recordBatch(keys, archive.name);
  const result = await uploadArchive(collector, archive);
  if (!result.ok) {
    log.warn(`data export: ingress server did not accept ${archive.name} (${archive.included.length} object(s)): ${result.reason}; retried later`);
    return { ...report, sent: false, reason: result.reason };
  }
  await objects.markSent(keys, archive.name, new Date(clock()));
  if (collector.cleanup_after_send) {
    // Rows are already marked: a failed delete leaves objects that pruneSent removes later.
    await bucket.delete(keys).catch((error: unknown) => log.warn(`data export: could not delete ${keys.length} sent object(s) yet`, error));
  }
  log.info(`data export: sent ${archive.name} with ${keys.length} object(s)${result.requestId ? ` (ingress request ${result.requestId})` : ""}`);
  return { ...report, sent: true };
}

/** Drops the rows of objects sent long ago, deleting the objects again first in case a delete failed. */
async function pruneSent(bucket: ExportDeps["bucket"], objects: DataObjectsStore, before: Date): Promise<void> {
  const old = await objects.sentBefore(before, PRUNE_MAX_ROWS);
  if (old.length === 0) return;
  const keys = old.map((object) => object.key);
  try {
    await bucket.delete(keys);
  } catch (error) {
    log.warn(`data export: could not delete ${keys.length} sent object(s); kept for the next run`, error);
    return;
  }
  await objects.remove(keys);
}
