// One export batch as a gzip tarball, streamed object by object from R2 through modern-tar's
// packer and the platform's gzip: only the compressed archive is ever held whole, and a batch is
// bounded (worker/data/export.ts), so it stays within a Worker's memory however much has piled up.
import { createTarPacker } from "modern-tar";
import type { DataObject } from "../storage/data-objects-store.ts";
import { archiveEntryName } from "./object-keys.ts";

export interface Archive {
  /**
   * parley-<first 32 hex of the SHA-256 of the sorted object keys>.tar.gz: the same batch always
   * gets the same name, so a receiver can drop a repeat (the exporter sends a batch again, exactly,
   * when it cannot know whether its upload arrived: see export.ts).
   */
  name: string;
  /** The gzip tarball. */
  data: Blob;
  /** Objects in the archive. */
  included: DataObject[];
  /** Indexed objects R2 no longer has (deleted out of band); not in the archive. */
  missing: DataObject[];
}

export async function archiveName(keys: readonly string[]): Promise<string> {
  const text = [...keys].sort().join("\n");
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  const hex = Array.from(new Uint8Array(digest), (byte) => byte.toString(16).padStart(2, "0")).join("");
  return `parley-${hex.slice(0, 32)}.tar.gz`;
}

/**
 * Packs `objects` (feedback/<uuid>.json, transcripts/<user>/<conversation>/<id>.json; see
 * object-keys.ts). Throws when R2 fails while reading; the batch is then not sent.
 */
export async function buildArchive(bucket: Pick<R2Bucket, "get">, objects: readonly DataObject[]): Promise<Archive> {
  const { readable, controller } = createTarPacker();
  // Read while packing: the packer waits for its output to be consumed.
  const compressed = new Response(readable.pipeThrough(new CompressionStream("gzip"))).blob();
  // Its failure is reported by the await below; this only keeps it from counting as unhandled.
  compressed.catch(() => undefined);
  const included: DataObject[] = [];
  const missing: DataObject[] = [];
  try {
    for (const object of objects) {
      const stored = await bucket.get(object.key);
      if (stored === null) {
        missing.push(object);
        continue;
      }
      const entry = controller.add({
        name: archiveEntryName(object.kind, object.key),
        size: stored.size,
        mtime: new Date(object.createdAt),
        mode: 0o644,
        type: "file",
      });
      await stored.body.pipeTo(entry);
      included.push(object);
    }
    controller.finalize();
  } catch (error) {
    controller.error(error);
    throw error;
  }
  return { name: await archiveName(included.map((object) => object.key)), data: await compressed, included, missing };
}
