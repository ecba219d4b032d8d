// file_search for backends that cannot run it (Chat Completions): Parley searches the named vector
// stores itself, on the backend that serves vector stores, before the model call. The model gets
// the passages in its system message; the answer carries a `file_search_call` item with the
// results, as a Responses backend's would, so rag_chunks, referenced documents, summaries and
// metrics come out the same.
import type { FileSearchTool, ResponseFileSearchToolCall } from "openai/resources/responses/responses";
import type { VectorStoreSearchParams } from "openai/resources/vector-stores/vector-stores";
import { NotFoundError } from "openai";
import { errors } from "../errors.ts";
import { unservedApiError, type Backend } from "./providers.ts";

/** One result, with the store it came from (Parley's own field, as Llama Stack also sends it). */
export type FileSearchResult = ResponseFileSearchToolCall.Result & { vector_store_id: string };

/** Searches one file_search tool's stores for `query`. */
export type FileSearcher = (tool: FileSearchTool, query: string, signal?: AbortSignal) => Promise<FileSearchResult[]>;

/** The backend's bound for max_num_results, and OpenAI's default. */
export const MAX_SEARCH_RESULTS = 50;
const DEFAULT_RESULTS = 10;

/** A searcher over `backend`'s vector stores (apiBackend(backends, "vector_stores")). */
export function vectorStoreSearcher(backend: Backend): FileSearcher {
  return async (tool, query, signal) => {
    const limit = Math.min(tool.max_num_results ?? DEFAULT_RESULTS, MAX_SEARCH_RESULTS);
    const params: VectorStoreSearchParams = { query, max_num_results: limit };
    if (tool.filters) params.filters = tool.filters;
    const ranking = tool.ranking_options;
    if (ranking && (ranking.ranker !== undefined || ranking.score_threshold !== undefined)) {
      params.ranking_options = {
        ...(ranking.ranker !== undefined ? { ranker: ranking.ranker } : {}),
        ...(ranking.score_threshold !== undefined ? { score_threshold: ranking.score_threshold } : {}),
      };
    }
    const pages = await Promise.all(
      tool.vector_store_ids.map(async (storeId) => {
        try {
          const page = await backend.client.vectorStores.search(storeId, params, { signal, maxRetries: 0 });
          return page.data.map((hit) => ({
            file_id: hit.file_id,
            filename: hit.filename,
            score: hit.score,
            text: hit.content.map((part) => part.text).join("\n"),
            attributes: hit.attributes ?? {},
            vector_store_id: storeId,
          }));
        } catch (error) {
          const unserved = unservedApiError(error, "vector_stores", backend);
          if (unserved) throw unserved;
          if (error instanceof NotFoundError) throw errors.notFound("Vector store", storeId);
          throw error;
        }
      }),
    );
    // Array.prototype.sort is stable: equal scores keep store order, then each store's ranking.
    return pages.flat().sort((a, b) => b.score - a.score).slice(0, limit);
  };
}

/** The completed file_search_call item for a search and what it found. */
export function fileSearchCall(query: string, results: FileSearchResult[]): ResponseFileSearchToolCall {
  const id = `fs_${Array.from(crypto.getRandomValues(new Uint8Array(24)), (byte) => byte.toString(16).padStart(2, "0")).join("")}`;
  return { type: "file_search_call", id, status: "completed", queries: [query], results };
}

/** The passages as the model reads them, or null when nothing was found. */
export function fileSearchContext(results: FileSearchResult[]): string | null {
  if (results.length === 0) return null;
  const passages = results.map((result, index) => `[${index + 1}] ${result.filename ?? result.file_id ?? "document"}\n${result.text ?? ""}`);
  return `Passages found by file search (cite them by number where they help):\n\n${passages.join("\n\n")}`;
}
