// Retrieval for a turn (SPEC "Retrieval behaviour", REFERENCE "Knowledge (RAG)"). Inline: the
// gateway searches the inline stores itself before the model call and hands the model a numbered
// context block. Tool: the model searches through file_search, and the results come back inside
// the response's file_search_call items; fileSearchDocuments turns those into the same chunks.
import type { VectorStoreSearchParams } from "openai/resources/vector-stores/vector-stores";
import type { Config } from "../config/schema.ts";
import { MAX_SEARCH_RESULTS } from "../backends/file-search.ts";
import { apiBackend } from "../backends/providers.ts";
import type { Runtime } from "../runtime.ts";
import { findStore, knowledgeSources, toBackendStoreId, type KnowledgeStore } from "./knowledge.ts";
import { retrievedFromHit, uniqueDocuments, type AttributeValue, type RagChunk, type ReferencedDocument, type Retrieved } from "./documents.ts";
import { rerank } from "./rerank.ts";
import { DEFAULT_SOLR, parseBooleanQuery, searchFilter, type SearchFilter, type SolrMode, type SolrQuery } from "./solr.ts";
import { log } from "../log.ts";

export type { RagChunk, ReferencedDocument } from "./documents.ts";

export interface InlineRetrievalRequest {
  /** The user's question as text (without attachments). */
  question: string;
  /**
   * The request's parsed `solr` (parseSolr); default mode hybrid, no filter. Its mode and filter,
   * ANDed with portal.chunk_filter_query, go to the portal store only: they are the portal's (Solr)
   * query language, and BYOK stores carry attributes of their own that such filters would not match.
   */
  solr?: SolrQuery | null;
  /** The request's vector_store_ids (client or backend ids): only these inline stores are searched. */
  vectorStoreIds?: readonly string[] | null;
}

export interface Retrieval {
  chunks: RagChunk[];
  referencedDocuments: ReferencedDocument[];
  /** The numbered context block to append after the question; null when nothing was found. */
  context: string | null;
}

const nothing = (): Retrieval => ({ chunks: [], referencedDocuments: [], context: null });

/**
 * The portal's search modes in the backend's words. `search_mode` is Llama Stack's extension of the
 * search request; it is sent to the portal store only, the one SPEC gives a mode, so BYOK stores
 * stay plain OpenAI-compatible searches.
 */
const BACKEND_SEARCH_MODES: Record<SolrMode, string> = { semantic: "vector", hybrid: "hybrid", lexical: "keyword" };

type StaticFilter = { ok: true; filter: SearchFilter | null } | { ok: false; problem: string };
const staticFilters = new WeakMap<Config, StaticFilter>();

/** portal.chunk_filter_query parsed once per configuration (inline searches here, tool searches in turn/tools.ts). */
export function staticFilter(config: Config): StaticFilter {
  let result = staticFilters.get(config);
  if (!result) {
    const query = knowledgeSources(config).portal?.chunkFilterQuery ?? null;
    result = query === null ? { ok: true, filter: null } : parseBooleanQuery(query);
    staticFilters.set(config, result);
  }
  return result;
}

/** The inline stores a request may search, in configuration order. */
function inlineStores(config: Config, vectorStoreIds: readonly string[] | null | undefined): KnowledgeStore[] {
  const sources = knowledgeSources(config);
  const stores = sources.inline.flatMap((ragId) => sources.stores.filter((store) => store.ragId === ragId));
  if (!vectorStoreIds) return stores;
  const wanted = new Set(vectorStoreIds.map((id) => toBackendStoreId(config, id)));
  return stores.filter((store) => wanted.has(store.vectorDbId));
}

async function searchStore(rt: Pick<Runtime, "config" | "backends">, store: KnowledgeStore, question: string, solr: SolrQuery): Promise<Retrieved[]> {
  const params: VectorStoreSearchParams & { search_mode?: string } = {
    query: question,
    max_num_results: Math.min(store.fetchLimit, MAX_SEARCH_RESULTS),
    ranking_options: { score_threshold: 0 },
  };
  if (store.kind === "portal") {
    const configured = staticFilter(rt.config);
    // Searching without the operator's filter could show readers what it exists to hide.
    if (!configured.ok) throw new Error(`portal chunk_filter_query is invalid: ${configured.problem}`);
    const filters = searchFilter(solr, configured.filter);
    if (filters) params.filters = filters;
    params.search_mode = BACKEND_SEARCH_MODES[solr.mode];
  }
  const page = await apiBackend(rt.backends, "vector_stores").client.vectorStores.search(store.vectorDbId, params);
  return page.data.map((result) =>
    retrievedFromHit(
      rt.config,
      store.vectorDbId,
      {
        fileId: result.file_id,
        filename: result.filename,
        score: result.score,
        text: result.content.map((part) => part.text).join("\n"),
        attributes: result.attributes ?? {},
      },
      // SPEC: portal and BYOK scores are not comparable; the multiplier weighs BYOK stores only.
      store.kind === "byok" ? result.score * store.scoreMultiplier : result.score,
    ),
  );
}

/**
 * Searches every inline store (restricted by the request's vector_store_ids) in parallel, merges
 * the results by score, reranks them when the reranker is enabled and keeps the configured maximum.
 * A store that fails is skipped with a warning: a turn without some context beats no answer.
 */
export async function inlineRetrieval(rt: Pick<Runtime, "config" | "backends">, request: InlineRetrievalRequest): Promise<Retrieval> {
  const stores = inlineStores(rt.config, request.vectorStoreIds);
  if (stores.length === 0 || request.question.trim() === "") return nothing();
  const solr = request.solr ?? DEFAULT_SOLR;
  const settled = await Promise.allSettled(stores.map((store) => searchStore(rt, store, request.question, solr)));
  const merged: Retrieved[] = [];
  settled.forEach((outcome, index) => {
    if (outcome.status === "fulfilled") merged.push(...outcome.value);
    else log.warn(`inline RAG: skipping store ${stores[index]!.ragId}: ${describeFailure(outcome.reason)}`);
  });
  // Array.prototype.sort is stable: equal scores keep store order, then each store's own ranking.
  merged.sort((a, b) => b.chunk.score - a.chunk.score);

  const settings = knowledgeSources(rt.config).retrieval;
  let ordered = merged;
  if (settings.reranker.enabled) {
    noteLexicalReranker(rt.config, settings.reranker.model);
    try {
      const byChunk = new Map(merged.map((entry) => [entry.chunk, entry]));
      ordered = rerank(request.question, merged.map((entry) => entry.chunk)).map((chunk) => byChunk.get(chunk)!);
    } catch (error) {
      log.warn(`inline RAG: reranking failed, keeping the stores' order: ${describeFailure(error)}`);
    }
  }
  const kept = ordered.slice(0, settings.maxChunks);
  const chunks = kept.map((entry) => entry.chunk);
  return { chunks, referencedDocuments: uniqueDocuments(kept.map((entry) => entry.document)), context: formatContext(chunks) };
}

const rerankerNoted = new WeakSet<Config>();

/** Says once per configuration that the configured cross-encoder is not what reranks (see rerank.ts). */
function noteLexicalReranker(config: Config, model: string): void {
  if (rerankerNoted.has(config)) return;
  rerankerNoted.add(config);
  log.info(`inline RAG: reranker model ${model} cannot run in a Worker; reranking lexically (BM25) instead`);
}

function describeFailure(reason: unknown): string {
  return reason instanceof Error ? `${reason.name}: ${reason.message}` : String(reason);
}

function attributeText(value: AttributeValue): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}

/** The numbered block the model reads: per chunk its document id, source, score, attributes and text. */
export function formatContext(chunks: readonly RagChunk[]): string | null {
  if (chunks.length === 0) return null;
  const blocks = chunks.map((chunk, index) => {
    const { document_id, ...rest } = chunk.attributes;
    const attributes = Object.entries(rest)
      .filter(([, value]) => value !== "")
      .map(([key, value]) => `${key}=${attributeText(value)}`)
      .join("; ");
    return [
      `[${index + 1}] document_id: ${document_id} | source: ${chunk.source} | score: ${Number(chunk.score.toFixed(4))}`,
      `attributes: ${attributes || "(none)"}`,
      chunk.content,
    ].join("\n");
  });
  return ["Relevant documents, most relevant first:", ...blocks].join("\n\n");
}

/** The question as the model receives it with inline context. */
export function withContext(question: string, context: string | null): string {
  return context === null ? question : `${question}\n\n${context}`;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function scalarAttributes(value: unknown): Record<string, AttributeValue> {
  if (!isRecord(value)) return {};
  return Object.fromEntries(
    Object.entries(value).filter((entry): entry is [string, AttributeValue] => ["string", "number", "boolean"].includes(typeof entry[1])),
  );
}

/**
 * Chunks and referenced documents from the `file_search_call` items of a backend response (or of
 * stored history), with store ids in the client's form. A result names its store by
 * `vector_store_id` where the backend says it; otherwise the sole store in `searchedStoreIds` (the
 * file_search tool's vector_store_ids, either id form) is assumed, and failing that the source is
 * "file_search". Scores are the backend's: it ranked the stores itself, so no multiplier applies.
 */
export function fileSearchDocuments(
  config: Config,
  items: readonly unknown[],
  searchedStoreIds: readonly string[] = [],
): { chunks: RagChunk[]; referencedDocuments: ReferencedDocument[] } {
  const fallbackStore = searchedStoreIds.length === 1 ? toBackendStoreId(config, searchedStoreIds[0]!) : null;
  const retrieved: Retrieved[] = [];
  for (const item of items) {
    if (!isRecord(item) || item.type !== "file_search_call" || !Array.isArray(item.results)) continue;
    for (const result of item.results) {
      if (!isRecord(result)) continue;
      const named = typeof result.vector_store_id === "string" ? result.vector_store_id : null;
      const backendStoreId = named === null ? fallbackStore : (findStore(config, named)?.vectorDbId ?? named);
      retrieved.push(
        retrievedFromHit(config, backendStoreId, {
          fileId: typeof result.file_id === "string" ? result.file_id : "",
          filename: typeof result.filename === "string" ? result.filename : "",
          score: typeof result.score === "number" ? result.score : 0,
          text: typeof result.text === "string" ? result.text : "",
          attributes: scalarAttributes(result.attributes),
        }),
      );
    }
  }
  return { chunks: retrieved.map((entry) => entry.chunk), referencedDocuments: uniqueDocuments(retrieved.map((entry) => entry.document)) };
}
