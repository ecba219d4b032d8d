// Writing one feedback or transcript object: the JSON into R2, then its row in the data_objects
// index the exporter reads. The object always goes first, so an indexed row never points at
// nothing. A row that could not be written leaves an unindexed object behind, which is never
// exported; it is not deleted, because a write whose answer was lost may have succeeded, and
// deleting its object would leave a row pointing at nothing.
import { dataObjectsStore, type DataObjectKind } from "../storage/data-objects-store.ts";
import type { SqlRunner } from "../storage/sql-runner.ts";

/** What writing needs: the R2 bucket (env.DATA) and the record store's SQL runner (store.sql). */
export interface DataDeps {
  bucket: Pick<R2Bucket, "put" | "head">;
  sql: SqlRunner;
}

export interface DataObjectWrite {
  key: string;
  kind: DataObjectKind;
  /** The object's JSON document. */
  body: string;
  /** When the data was made (the index's created_at; exports go oldest first). */
  createdAt: string | Date;
}

/** Throws when the object or its row could not be written; false when the row already existed. */
export async function writeDataObject(deps: DataDeps, object: DataObjectWrite): Promise<boolean> {
  const bytes = new TextEncoder().encode(object.body);
  await deps.bucket.put(object.key, bytes, { httpMetadata: { contentType: "application/json" } });
  return dataObjectsStore(deps.sql).record({ key: object.key, kind: object.kind, bytes: bytes.byteLength, createdAt: object.createdAt });
}
