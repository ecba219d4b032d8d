// Texts larger than one value of a Durable Object's SQLite storage (2 MB on Cloudflare; workerd
// takes more locally, so a local run never shows the limit) are kept in chunks of a `blobs` table.
// A column that may hold such a text holds it as it is while it fits, and otherwise a reference to
// its chunks: a JSON text never starts with "@", so the two cannot be confused.

/** Chunks are this many UTF-16 units: at most 1.5 MB of UTF-8 each. */
export const CHUNK_UNITS = 512 * 1024;

/** The table the chunks live in, keyed by the text's key and the chunk's place in it. */
export const CHUNKS_TABLE = "CREATE TABLE IF NOT EXISTS blobs (key TEXT NOT NULL, seq INTEGER NOT NULL, chunk TEXT NOT NULL, PRIMARY KEY (key, seq));";

const REFERENCE = "@chunks:";

/** Stores a text under `key`, a key that holds nothing yet, in chunks. */
export function writeChunks(sql: SqlStorage, key: string, text: string): void {
  let seq = 0;
  for (let start = 0; start < text.length; seq++) {
    let end = Math.min(text.length, start + CHUNK_UNITS);
    // Never between the two halves of a surrogate pair: SQLite stores UTF-8, where half a pair is lost.
    if (end < text.length && /[\uD800-\uDBFF]/.test(text[end - 1]!)) end -= 1;
    sql.exec("INSERT INTO blobs (key, seq, chunk) VALUES (?, ?, ?)", key, seq, text.slice(start, end));
    start = end;
  }
}

/** The text stored under `key`; null when there is none. */
export function readChunks(sql: SqlStorage, key: string): string | null {
  const chunks = sql.exec<{ chunk: string }>("SELECT chunk FROM blobs WHERE key = ? ORDER BY seq", key).toArray();
  return chunks.length === 0 ? null : chunks.map((row) => row.chunk).join("");
}

function deleteChunks(sql: SqlStorage, key: string): void {
  sql.exec("DELETE FROM blobs WHERE key = ?", key);
}

/**
 * What a column keeps of a JSON text: the text while one value holds it, else a reference to its
 * chunks, stored under `key`, a key that holds nothing yet (dropText the value it replaces first).
 */
export function keptText(sql: SqlStorage, key: string, text: string): string {
  if (text.length <= CHUNK_UNITS) return text;
  writeChunks(sql, key, text);
  return REFERENCE + key;
}

/** The JSON text a column keeps (see keptText). */
export function textOf(sql: SqlStorage, kept: string): string {
  if (!kept.startsWith(REFERENCE)) return kept;
  const text = readChunks(sql, kept.slice(REFERENCE.length));
  if (text === null) throw new Error(`stored text ${kept} has lost its chunks`);
  return text;
}

/** Removes the chunks a column's value refers to, if any (with the row that held it, or before replacing it). */
export function dropText(sql: SqlStorage, kept: string): void {
  if (kept.startsWith(REFERENCE)) deleteChunks(sql, kept.slice(REFERENCE.length));
}
