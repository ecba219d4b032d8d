// The knowledge layer: /v1/rags, /v1/vector-stores, /v1/files through the Worker, and inline / tool
// retrieval against the scripted backend's seeded stores (vs_docs as "docs", portal-rag as "okp").
import { env } from "cloudflare:workers";
import { toStreamingFile } from "openai";
import { afterEach, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { parseSolr } from "../../worker/rag/solr.ts";
import { rerank } from "../../worker/rag/rerank.ts";
import { fileSearchDocuments, inlineRetrieval, withContext, type RagChunk } from "../../worker/rag/retrieval.ts";
import { loadRuntime, type Runtime } from "../../worker/runtime.ts";
import { backendRequests, call, callJson, testConfig } from "./helpers.ts";

interface ErrorBody {
  detail: { response: string; cause: string };
}
type Json = Record<string, unknown>;

const PORTAL_PAGE = "openshift/4.18/installing/bare-metal";

const byokDocs = { rag_id: "docs", vector_db_id: "vs_docs", db_path: "/x", score_multiplier: 2 };
const config = testConfig({
  byok_rag: [byokDocs],
  rag: { inline: ["docs", "okp"], tool: [] },
  portal: { portal_url: "https://portal.example.com", offline: true },
});

async function runtimeFor(configText: string): Promise<Runtime> {
  const result = await loadRuntime({ ...env, PARLEY_CONFIG: configText });
  if (!result.ok) throw new Error(result.problems.join("; "));
  return result.runtime;
}

const summary = (chunks: RagChunk[]) => chunks.map((chunk) => [chunk.source, chunk.attributes.document_id]);

afterEach(() => {
  vi.restoreAllMocks();
});

describe("GET /v1/rags", () => {
  it("lists the backend's stores under their client ids", async () => {
    const { status, body } = await callJson<{ rags: string[] }>("/v1/rags", { config });
    expect(status).toBe(200);
    expect(body.rags).toEqual(expect.arrayContaining(["docs", "okp"]));
    expect(body.rags).not.toContain("vs_docs");
    expect(body.rags).not.toContain("portal-rag");
  });

  it("describes one rag by rag_id or by backend id, and 404s an unknown one", async () => {
    const byRagId = await callJson("/v1/rags/docs", { config });
    expect(byRagId.status).toBe(200);
    expect(Object.keys(byRagId.body).sort()).toEqual(["created_at", "expires_at", "id", "last_active_at", "name", "object", "status", "usage_bytes"]);
    expect(byRagId.body).toMatchObject({ id: "docs", name: "docs", created_at: 1767225600, object: "vector_store", status: "completed", expires_at: null });
    expect(byRagId.body.usage_bytes).toBeGreaterThan(0);
    expect((await callJson("/v1/rags/vs_docs", { config })).body).toMatchObject({ id: "docs", name: "docs" });
    expect((await callJson("/v1/rags/okp", { config })).body).toMatchObject({ id: "okp", name: "portal" });

    const missing = await callJson<ErrorBody>("/v1/rags/nope", { config });
    expect(missing.status).toBe(404);
    expect(missing.body.detail).toEqual({ response: "Rag not found", cause: "Rag with ID nope does not exist" });
  });

  it("answers 503 when the backend is unreachable and 403 without the action", async () => {
    const unreachable = testConfig({ inference_backend: { url: "http://127.0.0.1:1/v1", max_retries: 0 } });
    for (const path of ["/v1/rags", "/v1/rags/docs", "/v1/vector-stores"]) {
      const { status, body } = await callJson<ErrorBody>(path, { config: unreachable });
      expect(status, path).toBe(503);
      expect(body.detail.response).toBe("Unable to connect to the inference backend");
    }
    const onlyList = testConfig({ authorization: { access_rules: [{ role: "*", actions: ["list_rags"] }] } });
    expect((await callJson("/v1/rags", { config: onlyList })).status).toBe(200);
    expect((await callJson("/v1/rags/docs", { config: onlyList })).status).toBe(403);
    expect((await callJson("/v1/vector-stores", { config: onlyList })).status).toBe(403);
    expect((await call("/v1/files", { config: onlyList, method: "POST", body: new FormData() })).status).toBe(403);
  });
});

describe("/v1/vector-stores", () => {
  it("creates, reads, lists, updates and deletes a store", async () => {
    const created = await callJson<Json>("/v1/vector-stores", {
      config,
      json: { name: "kb-lifecycle", metadata: { team: "a" }, embedding_model: "scripted/parley-embed", embedding_dimension: 384, provider_id: "faiss" },
    });
    expect(created.status).toBe(200);
    expect(Object.keys(created.body).sort()).toEqual(["created_at", "expires_at", "id", "last_active_at", "metadata", "name", "status", "usage_bytes"]);
    expect(created.body).toMatchObject({ name: "kb-lifecycle", metadata: { team: "a" }, status: "completed", usage_bytes: 0, expires_at: null });
    const id = created.body.id as string;
    const sent = await backendRequests("/v1/vector_stores", (body) => body.name === "kb-lifecycle");
    expect(sent[0]!.body).toEqual({ name: "kb-lifecycle", metadata: { team: "a" }, embedding_model: "scripted/parley-embed", embedding_dimension: 384, provider_id: "faiss" });

    expect((await callJson(`/v1/vector-stores/${id}`, { config })).body).toEqual(created.body);
    const list = await callJson<{ data: Json[]; object: string }>("/v1/vector-stores", { config });
    expect(list.body.object).toBe("list");
    expect(list.body.data.map((store) => store.id)).toEqual(expect.arrayContaining([id, "docs", "okp"]));

    const renamed = await callJson<Json>(`/v1/vector-stores/${id}`, { config, method: "PUT", json: { name: "kb-renamed" } });
    expect(renamed).toMatchObject({ status: 200, body: { id, name: "kb-renamed", metadata: { team: "a" } } });
    const inThreeDays = Math.floor(Date.now() / 1000) + 2 * 86_400 + 60;
    expect((await callJson(`/v1/vector-stores/${id}`, { config, method: "PUT", json: { expires_at: inThreeDays } })).status).toBe(200);
    const expiry = await backendRequests(`/v1/vector_stores/${id}`, (body) => "expires_after" in body);
    expect(expiry.at(-1)!.body.expires_after).toEqual({ anchor: "last_active_at", days: 3 });

    const deleted = await callJson(`/v1/vector-stores/${id}`, { config, method: "DELETE" });
    expect(deleted).toEqual({ status: 200, body: { deleted: true, vector_store_id: id, response: "Vector store deleted successfully" } });
    for (const method of ["GET", "PUT", "DELETE"]) {
      const gone = await callJson<ErrorBody>(`/v1/vector-stores/${id}`, { config, method, json: method === "PUT" ? { name: "x" } : undefined });
      expect(gone.status, method).toBe(404);
      expect(gone.body.detail).toEqual({ response: "Vector Store not found", cause: `Vector Store with ID ${id} does not exist` });
    }
  });

  it("translates configured ids both ways", async () => {
    const docs = await callJson<Json>("/v1/vector-stores/docs", { config });
    expect(docs.body).toMatchObject({ id: "docs", name: "docs" });
    expect((await callJson("/v1/vector-stores/vs_docs", { config })).body).toEqual(docs.body);
    const files = await callJson<{ data: Json[] }>("/v1/vector-stores/docs/files", { config });
    expect(files.body.data.map((file) => [file.id, file.vector_store_id]).sort()).toEqual([
      ["file-parley-config", "docs"],
      ["file-quota-reset", "docs"],
    ]);
    const file = await callJson<Json>("/v1/vector-stores/docs/files/file-quota-reset", { config });
    expect(file.body).toEqual({
      id: "file-quota-reset",
      vector_store_id: "docs",
      status: "completed",
      attributes: expect.objectContaining({ document_id: "parley-quota-reset" }),
      last_error: null,
      object: "vector_store.file",
    });
  });

  it("keeps the portal store read-only (403) while reading it", async () => {
    expect((await callJson("/v1/vector-stores/okp", { config })).body).toMatchObject({ id: "okp", name: "portal" });
    expect((await callJson("/v1/vector-stores/okp/files", { config })).status).toBe(200);
    const writes: Array<[string, string, unknown]> = [
      ["PUT", "/v1/vector-stores/okp", { name: "mine" }],
      ["DELETE", "/v1/vector-stores/okp", undefined],
      ["PUT", "/v1/vector-stores/portal-rag", { name: "mine" }],
      ["POST", "/v1/vector-stores/okp/files", { file_id: "file-quota-reset" }],
      ["DELETE", "/v1/vector-stores/okp/files/file-openshift-install", undefined],
    ];
    for (const [method, path, json] of writes) {
      const { status, body } = await callJson<ErrorBody>(path, { config, method, json });
      expect(status, `${method} ${path}`).toBe(403);
      expect(body.detail.response).toBe("Vector Store is read-only");
    }
    // Without a portal in the configuration the reserved id is still refused.
    expect((await callJson("/v1/vector-stores/okp", { config: testConfig(), method: "DELETE" })).status).toBe(403);
    expect((await callJson("/v1/vector-stores/portal-rag/files", { config })).status).toBe(200);
  });

  it("answers 422 for bad bodies", async () => {
    const bad: Array<[string, string, unknown, string]> = [
      ["POST", "/v1/vector-stores", {}, "Missing required attributes"],
      ["POST", "/v1/vector-stores", { name: "" }, "Invalid attribute value"],
      ["POST", "/v1/vector-stores", { name: "x".repeat(257) }, "Invalid attribute value"],
      ["POST", "/v1/vector-stores", { name: "a", color: "red" }, "Invalid attribute value"],
      ["POST", "/v1/vector-stores", { name: "a", embedding_dimension: 0 }, "Invalid attribute value"],
      ["POST", "/v1/vector-stores", { name: "a", chunking_strategy: { type: "fancy" } }, "Invalid attribute value"],
      [
        "POST",
        "/v1/vector-stores",
        { name: "a", chunking_strategy: { type: "static", static: { max_chunk_size_tokens: 200, chunk_overlap_tokens: 150 } } },
        "Invalid attribute value",
      ],
      ["POST", "/v1/vector-stores", { name: "a", metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, "Invalid attribute value"],
      ["PUT", "/v1/vector-stores/docs", {}, "Invalid attribute value"],
      ["PUT", "/v1/vector-stores/docs", { expires_at: 1000 }, "Invalid attribute value"],
      ["PUT", "/v1/vector-stores/docs", { name: "a", status: "x" }, "Invalid attribute value"],
      ["POST", "/v1/vector-stores/docs/files", { attributes: {} }, "Missing required attributes"],
      [
        "POST",
        "/v1/vector-stores/docs/files",
        { file_id: "file-quota-reset", attributes: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, i])) },
        "Invalid attribute value",
      ],
      ["POST", "/v1/vector-stores/docs/files", { file_id: "file-quota-reset", attributes: { nested: { a: 1 } } }, "Invalid attribute value"],
    ];
    for (const [method, path, json, response] of bad) {
      const { status, body } = await callJson<ErrorBody>(path, { config, method, json });
      expect(status, JSON.stringify(json)).toBe(422);
      expect(body.detail.response, JSON.stringify(json)).toBe(response);
    }
    const notJson = await callJson<ErrorBody>("/v1/vector-stores", { config, method: "POST", body: "{", headers: { "content-type": "application/json" } });
    expect(notJson.status).toBe(422);
    expect(notJson.body.detail.response).toBe("Invalid request format");
  });
});

describe("/v1/files and vector store files", () => {
  function upload(content: string, filename = "zebras.txt", field = "file", uploadConfig = config) {
    const form = new FormData();
    form.append("purpose", "ignored-by-the-gateway");
    form.append(field, new File([content], filename, { type: "text/plain" }));
    return callJson<Json & ErrorBody>("/v1/files", { config: uploadConfig, method: "POST", body: form });
  }

  it("removes files and stores on the provider that serves them, not on the inference backend (README \"Providers\")", async () => {
    const elsewhere = testConfig({
      inference_backend: { url: inject("openaiStyleBackendUrl") },
      inference: { providers: [{ type: "stores", extra: { url: inject("backendUrl"), serves: ["vector_stores", "files"] } }] },
    });
    const fileId = (await upload("stores live on their own provider", "elsewhere.txt", "file", elsewhere)).body.id as string;
    const store = (await callJson<Json>("/v1/vector-stores", { config: elsewhere, json: { name: "kb-elsewhere" } })).body.id as string;
    expect((await callJson(`/v1/vector-stores/${store}/files`, { config: elsewhere, json: { file_id: fileId } })).status).toBe(200);
    const removed = await callJson(`/v1/vector-stores/${store}/files/${fileId}`, { config: elsewhere, method: "DELETE" });
    expect(removed).toMatchObject({ status: 200, body: { deleted: true } });
    const deleted = await callJson(`/v1/vector-stores/${store}`, { config: elsewhere, method: "DELETE" });
    expect(deleted).toMatchObject({ status: 200, body: { deleted: true } });
  });

  it("uploads a file, adds it to a store, lists, reads and removes it", async () => {
    const uploaded = await upload("zebras graze on the savanna at dawn");
    expect(uploaded.status).toBe(200);
    expect(Object.keys(uploaded.body).sort()).toEqual(["bytes", "created_at", "filename", "id", "object", "purpose"]);
    expect(uploaded.body).toMatchObject({ filename: "zebras.txt", bytes: 35, purpose: "assistants", object: "file" });
    const fileId = uploaded.body.id as string;

    const store = (await callJson<Json>("/v1/vector-stores", { config, json: { name: "kb-files" } })).body.id as string;
    const added = await callJson<Json>(`/v1/vector-stores/${store}/files`, {
      config,
      json: { file_id: fileId, attributes: { kind: "animal", year: 2024, wild: true }, chunking_strategy: { type: "auto" } },
    });
    expect(added).toEqual({
      status: 200,
      body: { id: fileId, vector_store_id: store, status: "completed", attributes: { kind: "animal", year: 2024, wild: true }, last_error: null, object: "vector_store.file" },
    });
    expect((await callJson<{ data: Json[]; object: string }>(`/v1/vector-stores/${store}/files`, { config })).body).toEqual({ data: [added.body], object: "list" });
    expect((await callJson(`/v1/vector-stores/${store}/files/${fileId}`, { config })).body).toEqual(added.body);

    const removed = await callJson(`/v1/vector-stores/${store}/files/${fileId}`, { config, method: "DELETE" });
    expect(removed.body).toMatchObject({ deleted: true, vector_store_id: store, file_id: fileId });
    const gone = await callJson<ErrorBody>(`/v1/vector-stores/${store}/files/${fileId}`, { config });
    expect(gone.status).toBe(404);
    expect(gone.body.detail).toEqual({ response: "File not found", cause: `File with ID ${fileId} does not exist` });
    expect((await callJson(`/v1/vector-stores/${store}`, { config, method: "DELETE" })).status).toBe(200);
  });

  it("tells a missing file from a missing store", async () => {
    const noFile = await callJson<ErrorBody>("/v1/vector-stores/docs/files", { config, json: { file_id: "file-missing" } });
    expect(noFile.status).toBe(404);
    expect(noFile.body.detail.response).toBe("File not found");
    const noStore = await callJson<ErrorBody>("/v1/vector-stores/vs_missing/files", { config, json: { file_id: "file-quota-reset" } });
    expect(noStore.status).toBe(404);
    expect(noStore.body.detail.response).toBe("Vector Store not found");
    expect((await callJson<ErrorBody>("/v1/vector-stores/vs_missing/files", { config })).body.detail.response).toBe("Vector Store not found");
    expect((await callJson<ErrorBody>("/v1/vector-stores/vs_missing/files/file-quota-reset", { config })).body.detail.response).toBe("Vector Store not found");
  });

  it("answers 422 without a file part and 413 for an announced oversize upload", async () => {
    const missing = await upload("x", "a.txt", "document");
    expect(missing.status).toBe(422);
    expect(missing.body.detail).toEqual({ response: "Missing required attributes", cause: "file" });
    const notMultipart = await callJson<ErrorBody>("/v1/files", { config, json: { file: "x" } });
    expect(notMultipart.status).toBe(422);

    const tooLarge = await callJson<ErrorBody>("/v1/files", {
      config,
      method: "POST",
      body: "--b\r\n",
      headers: { "content-type": "multipart/form-data; boundary=b", "content-length": String(200 * 1024 * 1024) },
    });
    expect(tooLarge.status).toBe(413);
    expect(tooLarge.body.detail.response).toBe("File too large");
  });

  it("answers 422 naming the fields, not 413 File too large, for 10,000 small fields before a small file", async () => {
    const form = new FormData();
    for (let index = 0; index < 10_000; index += 1) form.append(`f${index}`, "v");
    form.append("file", new File(["abc"], "a.txt", { type: "text/plain" }));
    const { status, body } = await callJson<ErrorBody>("/v1/files", { config, method: "POST", body: form });
    expect(status).toBe(422);
    expect(body.detail).toEqual({
      response: "Invalid request format",
      cause: "malformed multipart body: the fields before the 'file' part take more than 65536 bytes (too many or too large fields)",
    });
  });

  it("cuts off a streamed upload past 100 MiB (no Content-Length) with 413", async () => {
    const head = new TextEncoder().encode('--b\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n\r\n');
    const block = new Uint8Array(1024 * 1024).fill(97);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent === 0) controller.enqueue(head);
        // 100 MiB + 1 block of file data; the gateway must stop reading before the end.
        if (sent > 101) return controller.close();
        controller.enqueue(block);
        sent += 1;
      },
    });
    const { status, body: answer } = await callJson<ErrorBody>("/v1/files", {
      config,
      method: "POST",
      body,
      headers: { "content-type": "multipart/form-data; boundary=b" },
    });
    expect(status).toBe(413);
    expect(answer.detail.response).toBe("File too large");
  }, 60_000);
});

describe("inline retrieval", () => {
  const question = "how to install and configure the cluster";
  let bulkStoreId = "";

  beforeAll(async () => {
    // A store with 13 chunks that each match one word of the question, to overflow the 10-chunk cap.
    const rt = await runtimeFor(config);
    const words = Array.from({ length: 13 * 40 }, (_, index) => (index % 40 === 0 ? "cluster" : `filler${index}`));
    // A streaming file: a File would make the openai client probe FormData support, which workerd warns about.
    const file = await rt.backend.files.create({ file: toStreamingFile(new Blob([words.join(" ")]).stream(), "bulk.md"), purpose: "assistants" });
    const store = await rt.backend.vectorStores.create({ name: "bulk" });
    await rt.backend.vectorStores.files.create(store.id, { file_id: file.id, attributes: { document_id: "bulk", title: "Bulk" } });
    bulkStoreId = store.id;
  });

  it("merges the inline stores by score with BYOK scores multiplied", async () => {
    const result = await inlineRetrieval(await runtimeFor(config), { question });
    expect(result.chunks[0]).toMatchObject({ source: "docs", score: 6 / 7, attributes: { document_id: "parley-quota-reset" } });
    expect(result.chunks.map((chunk) => chunk.score)).toEqual([6 / 7, 4 / 7, 4 / 7, 3 / 7, 2 / 7, 2 / 7]);
    expect(new Set(summary(result.chunks.slice(1, 3)).map(([source]) => source))).toEqual(new Set(["docs", "okp"]));

    // With the multiplier at 1 the portal's best chunk leads.
    const plain = testConfig({ byok_rag: [{ ...byokDocs, score_multiplier: 1 }], rag: { inline: ["docs", "okp"] }, portal: {} });
    const unweighted = await inlineRetrieval(await runtimeFor(plain), { question });
    expect(unweighted.chunks[0]).toMatchObject({ source: "okp", score: 4 / 7 });
  });

  it("caps the merged chunks at 10 and asks each store for its fetch hint", async () => {
    const withBulk = testConfig({
      byok_rag: [byokDocs, { rag_id: "bulk", vector_db_id: bulkStoreId, db_path: "/y" }],
      rag: { inline: ["docs", "okp", "bulk"] },
      portal: {},
    });
    const marked = `${question} capcheck`;
    const result = await inlineRetrieval(await runtimeFor(withBulk), { question: marked });
    expect(result.chunks).toHaveLength(10);
    expect(summary(result.chunks).filter(([source]) => source === "bulk")).toHaveLength(4);
    const scores = result.chunks.map((chunk) => chunk.score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    const searches = await backendRequests("/search", (body) => body.query === marked);
    expect(searches.map((entry) => entry.body.max_num_results).sort()).toEqual([10, 10, 5]);
    for (const entry of searches) expect(entry.body.ranking_options).toEqual({ score_threshold: 0 });
  });

  it("follows the unified form's limits", async () => {
    const unified = testConfig({
      rag: {
        byok: { max_chunks: 4, stores: [{ ...byokDocs, rag_id: "docs" }] },
        retrieval: { inline: { sources: ["docs", "okp"], max_chunks: 3 } },
        okp: { max_chunks: 2, portal_url: "https://portal.example.com" },
      },
    });
    const marked = `${question} unifiedcheck`;
    const result = await inlineRetrieval(await runtimeFor(unified), { question: marked });
    expect(result.chunks).toHaveLength(3);
    const searches = await backendRequests("/search", (body) => body.query === marked);
    expect(searches.map((entry) => entry.body.max_num_results).sort()).toEqual([2, 4]);
  });

  it("searches inline stores only, restricted by vector_store_ids", async () => {
    const inlineDocs = testConfig({ byok_rag: [byokDocs], rag: { inline: ["docs"], tool: ["okp"] }, portal: {} });
    const docsOnly = await inlineRetrieval(await runtimeFor(inlineDocs), { question });
    expect(new Set(docsOnly.chunks.map((chunk) => chunk.source))).toEqual(new Set(["docs"]));

    const rt = await runtimeFor(config);
    const portalOnly = await inlineRetrieval(rt, { question, vectorStoreIds: ["okp"] });
    expect(new Set(portalOnly.chunks.map((chunk) => chunk.source))).toEqual(new Set(["okp"]));
    expect((await inlineRetrieval(rt, { question, vectorStoreIds: ["vs_docs"] })).chunks.every((chunk) => chunk.source === "docs")).toBe(true);
    expect(await inlineRetrieval(rt, { question, vectorStoreIds: [] })).toEqual({ chunks: [], referencedDocuments: [], context: null });
    expect(await inlineRetrieval(rt, { question: "   " })).toEqual({ chunks: [], referencedDocuments: [], context: null });
    const noInline = testConfig({ byok_rag: [byokDocs], rag: { tool: ["docs"] } });
    expect((await inlineRetrieval(await runtimeFor(noInline), { question })).chunks).toEqual([]);
  });

  it("builds portal URLs from parent_id offline and uses reference_url online", async () => {
    const offline = testConfig({ rag: { inline: ["okp"] }, portal: { portal_url: "https://mirror.example.internal/docs/", offline: true } });
    const online = testConfig({ rag: { inline: ["okp"] }, portal: { portal_url: "https://mirror.example.internal/docs/", offline: false } });
    const offlineResult = await inlineRetrieval(await runtimeFor(offline), { question });
    const onlineResult = await inlineRetrieval(await runtimeFor(online), { question });
    expect(offlineResult.chunks[0]!.attributes.doc_url).toBe(`https://mirror.example.internal/docs/${PORTAL_PAGE}`);
    expect(onlineResult.chunks[0]!.attributes.doc_url).toBe(`https://portal.example.com/${PORTAL_PAGE}`);
    expect(offlineResult.referencedDocuments).toEqual([
      { doc_url: `https://mirror.example.internal/docs/${PORTAL_PAGE}`, doc_title: "Installing OpenShift on bare metal", source: "okp", document_id: PORTAL_PAGE },
    ]);
  });

  it("deduplicates referenced documents, first wins, and formats the context block", async () => {
    const result = await inlineRetrieval(await runtimeFor(config), { question });
    expect(result.chunks).toHaveLength(6);
    expect(result.referencedDocuments).toEqual([
      { doc_url: "https://docs.example.com/parley/quotas", doc_title: "Quota reset schedule", source: "docs", document_id: "parley-quota-reset" },
      expect.anything(),
      expect.anything(),
    ]);
    expect(result.referencedDocuments.map((doc) => doc.document_id).sort()).toEqual(["parley-configuration", "parley-quota-reset", PORTAL_PAGE].sort());
    for (const chunk of result.chunks) expect(typeof chunk.attributes.doc_url).toBe("string");

    const context = result.context!;
    expect(context).toContain("[1] document_id: parley-quota-reset | source: docs | score: 0.8571");
    expect(context).toContain("[6] document_id:");
    expect(context).toContain("doc_url=https://docs.example.com/parley/quotas");
    expect(context).toContain(result.chunks[0]!.content);
    expect(withContext("Q?", context)).toBe(`Q?\n\n${context}`);
    expect(withContext("Q?", null)).toBe("Q?");
  });

  it("sends the request's filter and mode to the portal only, ANDed with chunk_filter_query", async () => {
    const filtered = testConfig({
      byok_rag: [byokDocs],
      rag: { inline: ["docs", "okp"] },
      portal: { chunk_filter_query: 'title:"Installing OpenShift on bare metal" OR title:other' },
    });
    const marked = `${question} filtercheck`;
    const solr = parseSolr({ mode: "lexical", filters: { type: "eq", key: "parent_id", value: PORTAL_PAGE } });
    const result = await inlineRetrieval(await runtimeFor(filtered), { question: marked, solr });
    expect(new Set(result.chunks.map((chunk) => chunk.source))).toEqual(new Set(["docs", "okp"]));
    const [portal] = await backendRequests("/vector_stores/portal-rag/search", (body) => body.query === marked);
    expect(portal!.body.search_mode).toBe("keyword");
    expect(portal!.body.filters).toEqual({
      type: "and",
      filters: [
        { type: "or", filters: [{ type: "eq", key: "title", value: "Installing OpenShift on bare metal" }, { type: "eq", key: "title", value: "other" }] },
        { type: "eq", key: "parent_id", value: PORTAL_PAGE },
      ],
    });
    const [docs] = await backendRequests("/vector_stores/vs_docs/search", (body) => body.query === marked);
    expect(docs!.body).not.toHaveProperty("filters");
    expect(docs!.body).not.toHaveProperty("search_mode");

    const excluded = await inlineRetrieval(await runtimeFor(filtered), { question, solr: parseSolr({ parent_id: "elsewhere" }) });
    expect(excluded.chunks.every((chunk) => chunk.source === "docs")).toBe(true);
  });

  it("skips a failing store with a warning", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    const broken = testConfig({
      byok_rag: [byokDocs, { rag_id: "gone", vector_db_id: "vs_missing", db_path: "/z" }],
      rag: { inline: ["gone", "docs"] },
    });
    const result = await inlineRetrieval(await runtimeFor(broken), { question });
    expect(result.chunks.length).toBeGreaterThan(0);
    expect(result.chunks.every((chunk) => chunk.source === "docs")).toBe(true);
    expect(warn).toHaveBeenCalledWith(expect.stringContaining("skipping store gone"));

  });

  it("refuses at load time a static filter it cannot parse", async () => {
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const badFilter = testConfig({ byok_rag: [byokDocs], rag: { inline: ["docs", "okp"] }, portal: { chunk_filter_query: "product:(x" } });
    const result = await loadRuntime({ ...env, PARLEY_CONFIG: badFilter });
    expect(result.ok).toBe(false);
    expect(result.ok ? [] : result.problems).toEqual([{ path: "portal.chunk_filter_query", message: expect.any(String) }]);
  });

  it("loads a static filter of valid Solr the stores' filters cannot express, and then never searches the portal without it", async () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => undefined);
    // The original's own example: a wildcard (Solr reads it; a vector store filter has no such form).
    const wildcard = testConfig({ byok_rag: [byokDocs], rag: { inline: ["docs", "okp"] }, portal: { chunk_filter_query: "product:*openshift*" } });
    const result = await inlineRetrieval(await runtimeFor(wildcard), { question });
    expect(warn).toHaveBeenCalledWith(expect.stringMatching(/^Configuration loaded; portal\.chunk_filter_query: wildcards are not supported .* the portal store is skipped/));
    expect(result.chunks.length).toBeGreaterThan(0);
    expect(result.chunks.every((chunk) => chunk.source === "docs")).toBe(true);
  });

  it("reranks lexically when the reranker is enabled, whatever its model", async () => {
    vi.spyOn(console, "info").mockImplementation(() => undefined);
    const plain = await inlineRetrieval(await runtimeFor(config), { question });
    const withReranker = testConfig({
      byok_rag: [byokDocs],
      rag: { inline: ["docs", "okp"] },
      portal: { portal_url: "https://portal.example.com" },
      reranker: { enabled: true, model: "no/such-model" },
    });
    const reranked = await inlineRetrieval(await runtimeFor(withReranker), { question });
    expect(summary(reranked.chunks)).toEqual(summary(rerank(question, plain.chunks)));
    expect(reranked.chunks.map((chunk) => chunk.score).sort()).toEqual(plain.chunks.map((chunk) => chunk.score).sort());
  });
});

describe("fileSearchDocuments", () => {
  it("reads file_search_call results with client ids and the portal URL rule", async () => {
    const rt = await runtimeFor(testConfig({ byok_rag: [byokDocs], rag: { tool: ["docs", "okp"] }, portal: { portal_url: "https://mirror.example.internal", offline: true } }));
    const response = await rt.backend.responses.create({
      model: "scripted/parley-small",
      input: "install the gateway configuration #file-search",
      tools: [{ type: "file_search", vector_store_ids: ["vs_docs", "portal-rag"], max_num_results: 10 }],
    });
    const { chunks, referencedDocuments } = fileSearchDocuments(rt.config, response.output);
    expect(chunks).toHaveLength(6);
    expect(chunks[0]).toMatchObject({ source: "docs", score: 0.75, attributes: { document_id: "parley-configuration" } });
    const portal = chunks.find((chunk) => chunk.source === "okp")!;
    expect(portal.attributes.doc_url).toBe(`https://mirror.example.internal/${PORTAL_PAGE}`);
    expect(referencedDocuments.map((doc) => [doc.source, doc.document_id])).toEqual([
      ["docs", "parley-configuration"],
      ["okp", PORTAL_PAGE],
      ["docs", "parley-quota-reset"],
    ]);
  });

  it("falls back to the only searched store when results do not name theirs", async () => {
    const items = [
      { type: "message", content: [] },
      { type: "file_search_call", results: [{ file_id: "f1", filename: "a.md", score: 0.5, text: "t", attributes: { title: "A" } }] },
    ];
    const { config: loaded } = await runtimeFor(config);
    expect(fileSearchDocuments(loaded, items, ["docs"]).chunks[0]).toMatchObject({ source: "docs", attributes: { document_id: "f1", doc_url: "" } });
    expect(fileSearchDocuments(loaded, items, ["vs_docs", "portal-rag"]).chunks[0]!.source).toBe("file_search");
    expect(fileSearchDocuments(loaded, items).referencedDocuments).toEqual([{ doc_url: null, doc_title: "A", source: "file_search", document_id: "f1" }]);
  });
});
