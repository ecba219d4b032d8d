import { describe, expect, it } from "vitest";
import type { RagChunk } from "../../worker/rag/documents.ts";
import { rerank, terms } from "../../worker/rag/rerank.ts";

function chunk(id: string, score: number, content: string): RagChunk {
  return { content, source: "docs", score, attributes: { doc_url: "", document_id: id } };
}

const ids = (chunks: RagChunk[]) => chunks.map((entry) => entry.attributes.document_id);

describe("rerank (lexical)", () => {
  it("lifts a chunk holding the question's terms above better-scored ones without them", () => {
    const chunks = [
      chunk("vague", 0.9, "General notes about clusters and nodes in a deployment."),
      chunk("close", 0.8, "Networking overview for the cluster."),
      chunk("exact", 0.6, "To reset the quota, the quota reset job refills the limiter every period."),
    ];
    expect(ids(rerank("How do I reset the quota?", chunks))).toEqual(["exact", "vague", "close"]);
  });

  it("keeps scores as the stores gave them and does not change the input", () => {
    const chunks = [chunk("a", 0.9, "alpha"), chunk("b", 0.5, "beta gamma")];
    const reranked = rerank("gamma", chunks);
    expect(reranked.map((entry) => entry.score)).toEqual([0.5, 0.9]);
    expect(ids(chunks)).toEqual(["a", "b"]);
  });

  it("is deterministic and keeps ties in incoming order", () => {
    const chunks = [chunk("a", 0.5, "same text"), chunk("b", 0.5, "same text"), chunk("c", 0.5, "same text")];
    expect(ids(rerank("same", chunks))).toEqual(["a", "b", "c"]);
    const mixed = [chunk("x", 0.7, "install openshift"), chunk("y", 0.9, "openshift"), chunk("z", 0.2, "install")];
    expect(ids(rerank("install openshift", mixed))).toEqual(ids(rerank("install openshift", mixed)));
  });

  it("leaves the order alone when the question has no usable terms or there is nothing to compare", () => {
    const chunks = [chunk("a", 0.2, "quota"), chunk("b", 0.9, "other")];
    expect(ids(rerank("how is it?", chunks))).toEqual(["a", "b"]);
    expect(ids(rerank("quota", [chunks[0]!]))).toEqual(["a"]);
    expect(rerank("quota", [])).toEqual([]);
  });

  it("tokenizes case-insensitively on letters and digits, without stop words", () => {
    expect(terms("How does the OpenShift 4.18 installer work?")).toEqual(["openshift", "18", "installer", "work"]);
  });
});
