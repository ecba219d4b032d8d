// What a retrieved chunk looks like to clients (SPEC "RAG chunk", REFERENCE "referenced document"),
// built the same way whether the gateway searched (inline) or the model did (file_search).
import type { Config } from "../config/schema.ts";
import { findStore, knowledgeSources, toClientStoreId, type KnowledgeStore } from "./knowledge.ts";

export type { AttributeValue, ChunkAttributes, RagChunk, ReferencedDocument } from "../domain/conversation.ts";
import type { AttributeValue, RagChunk, ReferencedDocument } from "../domain/conversation.ts";

/** One search result, in the backend's terms. */
export interface SearchHit {
  fileId: string;
  filename: string;
  score: number;
  text: string;
  attributes: Record<string, AttributeValue>;
}

export interface Retrieved {
  chunk: RagChunk;
  document: ReferencedDocument;
}

function text(attributes: Record<string, AttributeValue>, ...keys: string[]): string | null {
  for (const key of keys) {
    const value = attributes[key];
    if (typeof value === "string" && value.length > 0) return value;
  }
  return null;
}

/**
 * `path` resolved against `base` as a link is (the original's urljoin): an absolute path replaces
 * the base's path (`http://okp:8081/solr` + `/documentation/x` → `http://okp:8081/documentation/x`),
 * a relative one joins the base's folder, a whole URL stands as it is.
 */
function joinUrl(base: string, path: string): string {
  try {
    return new URL(path, base).href;
  } catch {
    return path;
  }
}

/**
 * The chunk's document URL. Portal chunks follow `offline` (REFERENCE "Knowledge"): offline
 * deployments cannot send readers to the public portal, so the URL is rebuilt from the chunk's
 * parent id against the configured portal URL; online ones use the chunk's reference URL.
 */
function documentUrl(config: Config, store: KnowledgeStore | undefined, attributes: Record<string, AttributeValue>): string | null {
  const portal = store?.kind === "portal" ? knowledgeSources(config).portal : null;
  if (!portal) return text(attributes, "doc_url", "reference_url", "url");
  if (portal.offline) {
    const parent = text(attributes, "parent_id", "source_path");
    if (portal.url && parent) return joinUrl(portal.url, parent);
    return text(attributes, "doc_url", "reference_url");
  }
  return text(attributes, "reference_url", "doc_url");
}

/** A search hit from `store` (or from an unconfigured backend store `backendStoreId`) as chunk and document. */
export function retrievedFromHit(config: Config, backendStoreId: string | null, hit: SearchHit, score = hit.score): Retrieved {
  const store = backendStoreId === null ? undefined : findStore(config, backendStoreId);
  const source = store?.ragId ?? (backendStoreId === null ? "file_search" : toClientStoreId(config, backendStoreId));
  const url = documentUrl(config, store, hit.attributes);
  const documentId =
    text(hit.attributes, "document_id") ?? (store?.kind === "portal" ? text(hit.attributes, "parent_id") : null) ?? hit.fileId;
  return {
    chunk: { content: hit.text, source, score, attributes: { ...hit.attributes, doc_url: url ?? "", document_id: documentId } },
    document: {
      doc_url: url,
      doc_title: text(hit.attributes, "title", "doc_title") ?? (hit.filename || null),
      source,
      document_id: documentId,
    },
  };
}

/** Referenced documents without repeats of the same (doc_url, doc_title); the first one wins. */
export function uniqueDocuments(documents: Iterable<ReferencedDocument>): ReferencedDocument[] {
  const seen = new Set<string>();
  const unique: ReferencedDocument[] = [];
  for (const document of documents) {
    const key = JSON.stringify([document.doc_url, document.doc_title]);
    if (seen.has(key)) continue;
    seen.add(key);
    unique.push(document);
  }
  return unique;
}
