// Positive cluster reviews, remembered briefly per isolate so that a conversation does not pay a
// TokenReview (and SubjectAccessReview) per question. Only successes are kept: a rejected token is
// reviewed again on its next use. Entries are plain data keyed by a SHA-256 hash of the token (the
// token itself is never held), and never outlive REVIEW_TTL_MS nor the token's own `exp`. A token
// revoked in the cluster therefore keeps working here for at most REVIEW_TTL_MS.
import { decodeJwt } from "jose";

/** How long a positive review is trusted. */
export const REVIEW_TTL_MS = 60_000;

/** Bound on the entries per cache; the oldest go first. */
const MAX_ENTRIES = 1_000;

const encoder = new TextEncoder();

function hex(bytes: ArrayBuffer): string {
  return [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

/** When the token says it expires (epoch ms), if it is a JWT with `exp`; read, not verified. */
function tokenExpiry(token: string): number | null {
  try {
    const { exp } = decodeJwt(token);
    return typeof exp === "number" ? exp * 1000 : null;
  } catch {
    return null; // not a JWT: only the TTL applies
  }
}

export class ReviewCache<T> {
  readonly #entries = new Map<string, { value: T; expiresAt: number }>();

  /** The key of a token reviewed at one cluster API address. */
  async key(api: string, token: string): Promise<string> {
    return `${api} ${hex(await crypto.subtle.digest("SHA-256", encoder.encode(token)))}`;
  }

  get(key: string): T | undefined {
    const entry = this.#entries.get(key);
    if (entry === undefined) return undefined;
    if (entry.expiresAt <= Date.now()) {
      this.#entries.delete(key);
      return undefined;
    }
    return entry.value;
  }

  /** Remembers a positive review of `token` (the value must be plain data). */
  set(key: string, token: string, value: T): void {
    const now = Date.now();
    const expiresAt = Math.min(now + REVIEW_TTL_MS, tokenExpiry(token) ?? Infinity);
    if (expiresAt <= now) return;
    this.#entries.delete(key);
    this.#entries.set(key, { value, expiresAt });
    if (this.#entries.size > MAX_ENTRIES) {
      for (const [old, entry] of this.#entries) {
        if (this.#entries.size <= MAX_ENTRIES && entry.expiresAt > now) break;
        this.#entries.delete(old);
      }
    }
  }
}
