/** A write the current state forbids: an existing prompt id, another user's conversation. */
export class StoreConflictError extends Error {
  override name = "StoreConflictError";
}
