// The backend's own vector stores, for the tool strategy's fallback (REFERENCE "Knowledge": with
// neither an inline nor a tool list configured, the model's file_search covers every store the
// backend has, as the original does). The original lists them before every model call; here the
// list is kept per isolate for STORE_LIST_TTL_MS (README "Knowledge"), so a turn costs no extra
// round trip to the backend but the first of each period. A store created or deleted through this
// gateway refreshes the list at once; one made on the backend directly shows within that time.
import type { Backends } from "../backends/providers.ts";
import { log } from "../log.ts";

export const STORE_LIST_TTL_MS = 30_000;
/** The most stores one listing reads (one page of OpenAI's list at its largest). */
export const MAX_LISTED_STORES = 100;

interface Listing {
  at: number;
  /** Backend store ids; null when the backend could not list them (the configured stores apply). */
  ids: Promise<string[] | null>;
}

const listings = new WeakMap<Backends, Listing>();

/**
 * The ids of the stores the backend serving vector stores has, at most MAX_LISTED_STORES of them;
 * null when no backend serves vector stores or the listing failed (logged; tried again after the
 * TTL, so that a backend without the API is not asked on every turn).
 */
export function listedStores(backends: Backends): Promise<string[] | null> {
  const now = Date.now();
  const kept = listings.get(backends);
  if (kept && now - kept.at < STORE_LIST_TTL_MS) return kept.ids;
  const ids = listStores(backends);
  listings.set(backends, { at: now, ids });
  return ids;
}

/** Forgets the kept list: the next turn lists again (after a store was created or deleted here). */
export function forgetListedStores(backends: Backends): void {
  listings.delete(backends);
}

async function listStores(backends: Backends): Promise<string[] | null> {
  const backend = backends.apis.vector_stores;
  if (!backend) return null;
  try {
    const page = await backend.client.vectorStores.list({ limit: MAX_LISTED_STORES }, { maxRetries: 0 });
    return page.data.slice(0, MAX_LISTED_STORES).map((store) => store.id);
  } catch (error) {
    log.warn(`knowledge: could not list the stores of provider "${backend.id}" for the file_search tool; offering the configured stores only`, error);
    return null;
  }
}
