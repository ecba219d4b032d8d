// The inline reranker (SPEC "reranker"; unified form rag.retrieval.inline.reranker). The configured
// model is a cross-encoder, which cannot run inside a Worker (no model weights, no native inference,
// 128 MB of memory), so the gateway reranks lexically instead: Okapi BM25 of the question over the
// candidate chunks, blended half and half with the stores' own (already multiplied) scores. It is
// deterministic, needs no model, and therefore cannot fail on a missing or misnamed one; the
// configured model name is only reported.
//
// Why blend rather than replace: vector scores carry the semantic match BM25 cannot see, and BM25
// rewards chunks that contain the question's exact terms (product names, error codes), which
// embedding search tends to blur. Scores themselves are left as the stores gave them; only the
// order changes.
import type { RagChunk } from "./documents.ts";

// Conventional BM25 parameters.
const K1 = 1.2;
const B = 0.75;
const LEXICAL_WEIGHT = 0.5;

// Words too common to say anything about relevance; the list is short on purpose.
const STOP_WORDS = new Set(
  ("a an and are as at be by can do does for from how i in is it its me my of on or so that the this to was what " +
    "when where which who why will with you your").split(" "),
);

export function terms(text: string): string[] {
  return text
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((word) => word.length > 1 && !STOP_WORDS.has(word));
}

/** The chunks in reranked order (a new array; ties keep their incoming order). */
export function rerank(question: string, chunks: readonly RagChunk[]): RagChunk[] {
  const queryTerms = [...new Set(terms(question))];
  if (chunks.length < 2 || queryTerms.length === 0) return [...chunks];

  const documents = chunks.map((chunk) => {
    const counts = new Map<string, number>();
    const words = terms(chunk.content);
    for (const word of words) counts.set(word, (counts.get(word) ?? 0) + 1);
    return { counts, length: words.length };
  });
  const averageLength = documents.reduce((sum, doc) => sum + doc.length, 0) / documents.length || 1;
  const idf = new Map(
    queryTerms.map((term) => {
      const containing = documents.filter((doc) => doc.counts.has(term)).length;
      return [term, Math.log(1 + (documents.length - containing + 0.5) / (containing + 0.5))];
    }),
  );
  const lexical = documents.map((doc) =>
    queryTerms.reduce((sum, term) => {
      const frequency = doc.counts.get(term) ?? 0;
      if (frequency === 0) return sum;
      return sum + idf.get(term)! * ((frequency * (K1 + 1)) / (frequency + K1 * (1 - B + (B * doc.length) / averageLength)));
    }, 0),
  );

  const maxLexical = Math.max(...lexical);
  const maxScore = Math.max(...chunks.map((chunk) => chunk.score));
  const blended = chunks.map((chunk, index) => ({
    chunk,
    index,
    value:
      (1 - LEXICAL_WEIGHT) * (maxScore > 0 ? chunk.score / maxScore : 0) +
      LEXICAL_WEIGHT * (maxLexical > 0 ? lexical[index]! / maxLexical : 0),
  }));
  blended.sort((a, b) => b.value - a.value || a.index - b.index);
  return blended.map((entry) => entry.chunk);
}
