// SPEC "Conversation identifiers": clients see 48 hex characters; the backend form adds `conv_`.
const NORMALIZED = /^[0-9a-f]{48}$/;
const BACKEND_PREFIX = "conv_";

/** `bytes` random bytes as lowercase hex: the body of every id the gateway makes up. */
export function randomHex(bytes: number): string {
  return Array.from(crypto.getRandomValues(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, "0")).join("");
}

export function newConversationId(): string {
  return randomHex(24);
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
