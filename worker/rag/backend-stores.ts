// The backend's own vector stores, for the tool strategy's fallback (REFERENCE "Knowledge": with
// neither an inline nor a tool list configured, the model's file_search covers every store the
// backend has, as the original does). The original lists them before every model call; here the
// list is kept per isolate for STORE_LIST_TTL_MS (README "Knowledge"), so a turn costs no extra
// round trip to the backend but the first of each period. A store created or deleted through this
// gateway refreshes the list at once; one made on the backend directly shows within that time.
import { LIST_TIMEOUT_MS } from "../backends/provider-models.ts";
import type { Backends } from "../backends/providers.ts";
import { log } from "../log.ts";

export const STORE_LIST_TTL_MS = 30_000;
/** The most stores one listing reads (one page of OpenAI's list at its largest). */
export const MAX_LISTED_STORES = 100;

interface Listing {
  at: number;
  /** Backend store ids; null when the backend could not list them (the configured stores apply). */
  ids: string[] | null;
}

// Settled, plain data only (as provider-models.ts keeps its listings): workerd ties a request's I/O
// to that request, so a turn never awaits a listing another request started. Turns that find no
// fresh list at the same moment each list once.
const listings = new WeakMap<Backends, Listing>();
/** How many times the gateway changed the stores: a listing begun before a change is not kept. */
const changes = new WeakMap<Backends, number>();

/**
 * The ids of the stores the backend serving vector stores has, at most MAX_LISTED_STORES of them;
 * null when no backend serves vector stores or the listing failed (logged; tried again after the
 * TTL, so that a backend without the API is not asked on every turn).
 */
export async function listedStores(backends: Backends): Promise<string[] | null> {
  const kept = listings.get(backends);
  if (kept && Date.now() - kept.at < STORE_LIST_TTL_MS) return kept.ids;
  const at = Date.now();
  const changed = changes.get(backends) ?? 0;
  const ids = await listStores(backends);
  if ((changes.get(backends) ?? 0) === changed) listings.set(backends, { at, ids });
  return ids;
}

/** Forgets the kept list: the next turn lists again (after a store was created or deleted here). */
export function forgetListedStores(backends: Backends): void {
  listings.delete(backends);
  changes.set(backends, (changes.get(backends) ?? 0) + 1);
}

async function listStores(backends: Backends): Promise<string[] | null> {
  const backend = backends.apis.vector_stores;
  if (!backend) return null;
  try {
    // Bounded as a probe is: a store API that hangs costs a turn this much once per TTL, not its whole time-out.
    const page = await backend.client.vectorStores.list({ limit: MAX_LISTED_STORES }, { maxRetries: 0, timeout: Math.min(LIST_TIMEOUT_MS, backend.timeoutMs) });
    return page.data.slice(0, MAX_LISTED_STORES).map((store) => store.id);
  } catch (error) {
    log.warn(`knowledge: could not list the stores of provider "${backend.id}" for the file_search tool; offering the configured stores only`, error);
    return null;
  }
}
