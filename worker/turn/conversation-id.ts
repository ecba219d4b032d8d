// SPEC "Conversation identifiers": clients see 48 hex characters; the backend form adds `conv_`.
const NORMALIZED = /^[0-9a-f]{48}$/;
const BACKEND_PREFIX = "conv_";

export function newConversationId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

export function isNormalizedId(id: string): boolean {
  return NORMALIZED.test(id);
}

export function toBackendId(id: string): string {
  return BACKEND_PREFIX + id;
}

/** Accepts either form (the responses endpoint does); null when it is neither. */
export function normalizeAnyForm(id: string): string | null {
  const bare = id.startsWith(BACKEND_PREFIX) ? id.slice(BACKEND_PREFIX.length) : id;
  return isNormalizedId(bare) ? bare : null;
}
