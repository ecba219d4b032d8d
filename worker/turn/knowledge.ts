// The operator's knowledge sources in one shape, whichever configuration form declared them (the
// deprecated byok_rag/rag/portal sections or the unified 0.7.0 `rag` section). Clients name stores
// by rag_id; the backend knows them by vector_db_id.
import { isUnifiedRag, PORTAL_RAG_ID, type Config } from "../config/schema.ts";

export interface KnowledgeStore {
  /** The id clients use. */
  ragId: string;
  /** The backend's vector store id. */
  vectorDbId: string;
  kind: "byok" | "portal";
  scoreMultiplier: number;
}

export interface KnowledgeSources {
  stores: KnowledgeStore[];
  /** rag ids searched before every model call. */
  inline: string[];
  /** rag ids offered to the model through file_search. */
  tool: string[];
}

const cache = new WeakMap<Config, KnowledgeSources>();

export function knowledgeSources(config: Config): KnowledgeSources {
  let sources = cache.get(config);
  if (!sources) cache.set(config, (sources = buildSources(config)));
  return sources;
}

function buildSources(config: Config): KnowledgeSources {
  const rag = config.rag;
  let byok: Array<{ rag_id: string; vector_db_id: string; score_multiplier: number }>;
  let portalDbId: string | undefined;
  let inline: string[];
  let tool: string[];
  if (rag && isUnifiedRag(rag)) {
    byok = rag.byok.stores;
    portalDbId = rag.okp.vector_db_id;
    inline = rag.retrieval.inline.sources;
    tool = rag.retrieval.tool.sources;
  } else {
    byok = config.byok_rag;
    portalDbId = config.portal?.vector_db_id;
    inline = rag?.inline ?? [];
    tool = rag?.tool ?? [];
  }
  const stores: KnowledgeStore[] = byok.map((store) => ({
    ragId: store.rag_id,
    vectorDbId: store.vector_db_id,
    kind: "byok",
    scoreMultiplier: store.score_multiplier,
  }));
  const portalListed = inline.includes(PORTAL_RAG_ID) || tool.includes(PORTAL_RAG_ID);
  if (portalListed || config.portal) {
    stores.push({ ragId: PORTAL_RAG_ID, vectorDbId: portalDbId ?? "portal-rag", kind: "portal", scoreMultiplier: 1 });
  }
  // SPEC: with neither list given, every store is registered for the tool strategy.
  if (inline.length === 0 && tool.length === 0) tool = stores.map((store) => store.ragId);
  return { stores, inline, tool };
}

/** Client store id → backend id; ids that name no configured store are taken as backend ids. */
export function toBackendStoreId(config: Config, id: string): string {
  return knowledgeSources(config).stores.find((store) => store.ragId === id)?.vectorDbId ?? id;
}

/** Backend store id → the id clients use. */
export function toClientStoreId(config: Config, id: string): string {
  return knowledgeSources(config).stores.find((store) => store.vectorDbId === id)?.ragId ?? id;
}
