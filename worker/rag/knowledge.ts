// The operator's knowledge sources in one shape, whichever configuration form declared them (the
// deprecated byok_rag/rag/portal/reranker sections or the unified 0.7.0 `rag` section). Clients name
// stores by rag_id; the backend knows them by vector_db_id.
import type { ResponseOutputItem, ResponseStreamEvent } from "openai/resources/responses/responses";
import { isUnifiedRag, PORTAL_RAG_ID, type Config } from "../config/schema.ts";

export interface KnowledgeStore {
  /** The id clients use. */
  ragId: string;
  /** The backend's vector store id. */
  vectorDbId: string;
  kind: "byok" | "portal";
  scoreMultiplier: number;
  /** How many chunks one inline search asks this store for (SPEC "Limits": BYOK 10, portal 5). */
  fetchLimit: number;
}

/** Settings of the knowledge portal source (SPEC "portal"; unified form: rag.okp). */
export interface PortalSettings {
  url: string | null;
  /** true: chunk URLs are built from the chunk's parent id; false: the chunk's reference URL. */
  offline: boolean;
  /** Solr boolean query ANDed into every portal search. */
  chunkFilterQuery: string | null;
}

export interface RetrievalSettings {
  /** Final number of inline chunks after merging the stores. */
  maxChunks: number;
  /** max_num_results of the file_search tool. */
  toolMaxChunks: number;
  reranker: { enabled: boolean; model: string };
}

export interface KnowledgeSources {
  stores: KnowledgeStore[];
  /** rag ids searched before every model call. */
  inline: string[];
  /** rag ids offered to the model through file_search. */
  tool: string[];
  /**
   * Neither list is configured: the tool covers every store, the backend's as it lists them
   * (rag/backend-stores.ts) besides the configured ones in `tool`.
   */
  everyBackendStore: boolean;
  /** Present when the portal source is configured or listed. */
  portal: PortalSettings | null;
  retrieval: RetrievalSettings;
}

// SPEC "Limits": the constants of the deprecated form; the unified form makes them settings.
const BYOK_FETCH_LIMIT = 10;
const PORTAL_FETCH_LIMIT = 5;
const INLINE_MAX_CHUNKS = 10;
const TOOL_MAX_CHUNKS = 10;
const DEFAULT_RERANKER = { enabled: false, model: "cross-encoder/ms-marco-MiniLM-L6-v2" };

const cache = new WeakMap<Config, KnowledgeSources>();

export function knowledgeSources(config: Config): KnowledgeSources {
  let sources = cache.get(config);
  if (!sources) cache.set(config, (sources = buildSources(config)));
  return sources;
}

function buildSources(config: Config): KnowledgeSources {
  const rag = config.rag;
  let byok: Array<{ rag_id: string; vector_db_id: string; score_multiplier: number }>;
  let portalConfig: { portal_url?: string; offline: boolean; chunk_filter_query?: string; vector_db_id: string } | undefined;
  let inline: string[];
  let tool: string[];
  let limits: { byok: number; portal: number };
  let retrieval: RetrievalSettings;
  if (rag && isUnifiedRag(rag)) {
    byok = rag.byok.stores;
    portalConfig = rag.okp;
    inline = rag.retrieval.inline.sources;
    tool = rag.retrieval.tool.sources;
    limits = { byok: rag.byok.max_chunks, portal: rag.okp.max_chunks };
    retrieval = {
      maxChunks: rag.retrieval.inline.max_chunks,
      toolMaxChunks: rag.retrieval.tool.max_chunks,
      reranker: rag.retrieval.inline.reranker,
    };
  } else {
    byok = config.byok_rag;
    portalConfig = config.portal;
    inline = rag?.inline ?? [];
    tool = rag?.tool ?? [];
    limits = { byok: BYOK_FETCH_LIMIT, portal: PORTAL_FETCH_LIMIT };
    retrieval = { maxChunks: INLINE_MAX_CHUNKS, toolMaxChunks: TOOL_MAX_CHUNKS, reranker: config.reranker ?? DEFAULT_RERANKER };
  }
  const stores: KnowledgeStore[] = byok.map((store) => ({
    ragId: store.rag_id,
    vectorDbId: store.vector_db_id,
    kind: "byok",
    scoreMultiplier: store.score_multiplier,
    fetchLimit: limits.byok,
  }));
  const portalListed = inline.includes(PORTAL_RAG_ID) || tool.includes(PORTAL_RAG_ID);
  let portal: PortalSettings | null = null;
  if (portalListed || config.portal) {
    stores.push({
      ragId: PORTAL_RAG_ID,
      vectorDbId: portalConfig?.vector_db_id ?? "portal-rag",
      kind: "portal",
      // SPEC "Retrieval behaviour": portal scores are never rescaled.
      scoreMultiplier: 1,
      fetchLimit: limits.portal,
    });
    portal = {
      url: portalConfig?.portal_url ?? null,
      offline: portalConfig?.offline ?? true,
      chunkFilterQuery: portalConfig?.chunk_filter_query ?? null,
    };
  }
  // SPEC: with neither list given, every store is registered for the tool strategy (REFERENCE:
  // every store of the backend; the configured ones also when the backend does not list them).
  const everyBackendStore = inline.length === 0 && tool.length === 0;
  if (everyBackendStore) tool = stores.map((store) => store.ragId);
  return { stores, inline, tool, everyBackendStore, portal, retrieval };
}

/** The configured store a client or backend id names, if any. */
export function findStore(config: Config, id: string): KnowledgeStore | undefined {
  const stores = knowledgeSources(config).stores;
  return stores.find((store) => store.ragId === id) ?? stores.find((store) => store.vectorDbId === id);
}

/** Whether an id names the read-only portal source (SPEC "Retrieval behaviour"); "okp" is reserved even unconfigured. */
export function isPortalStore(config: Config, id: string): boolean {
  return id === PORTAL_RAG_ID || findStore(config, id)?.kind === "portal";
}

/** Client store id → backend id; ids that name no configured store are taken as backend ids. */
export function toBackendStoreId(config: Config, id: string): string {
  return knowledgeSources(config).stores.find((store) => store.ragId === id)?.vectorDbId ?? id;
}

/** Backend store id → the id clients use. */
export function toClientStoreId(config: Config, id: string): string {
  return knowledgeSources(config).stores.find((store) => store.vectorDbId === id)?.ragId ?? id;
}

/**
 * A backend event as clients (and the conversation's record) see it: the results of its
 * file_search_call items name their stores by the client's ids (SPEC responses rule 7: ids are
 * the service's "in requests and responses"). Other events are returned as they are.
 */
export function withClientStoreIds(config: Config, event: ResponseStreamEvent): ResponseStreamEvent {
  const item = (found: ResponseOutputItem): ResponseOutputItem => {
    if (found.type !== "file_search_call" || !found.results) return found;
    const results = found.results.map((result) => {
      const named = (result as { vector_store_id?: unknown }).vector_store_id;
      return typeof named === "string" ? { ...result, vector_store_id: toClientStoreId(config, named) } : result;
    });
    return { ...found, results };
  };
  switch (event.type) {
    case "response.output_item.added":
    case "response.output_item.done":
      return event.item.type === "file_search_call" ? { ...event, item: item(event.item) } : event;
    case "response.completed":
    case "response.incomplete":
    case "response.failed":
      return event.response.output.some((found) => found.type === "file_search_call") ? { ...event, response: { ...event.response, output: event.response.output.map(item) } } : event;
    default:
      return event;
  }
}
