// Knowledge management (SPEC "Endpoints" /v1/rags, /v1/vector-stores, /v1/files; REFERENCE
// "Knowledge (RAG)"): thin adapters over the backend's OpenAI-compatible vector store and file API.
// Store ids cross the boundary translated: clients use the configured rag_id, the backend the
// vector_db_id; stores the configuration does not name keep their backend id on both sides.
import { Hono, type Context } from "hono";
import { APIError, NotFoundError, toStreamingFile } from "openai";
import type { VectorStore } from "openai/resources/vector-stores/vector-stores";
import type { VectorStoreFile } from "openai/resources/vector-stores/files";
import * as z from "zod";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import type { Config } from "../config/schema.ts";
import { ApiError, errors } from "../errors.ts";
import { guard } from "../middleware.ts";
import { streamFilePart } from "../multipart.ts";
import { apiBackend, notServed, routeMissing } from "../backends/providers.ts";
import { backendError, resourceCall } from "../turn/backend-errors.ts";
import { forgetListedStores } from "../rag/backend-stores.ts";
import { isPortalStore, toBackendStoreId, toClientStoreId } from "../rag/knowledge.ts";
import { readJson } from "../validation.ts";

export const knowledge = new Hono<AppEnv>();

/** REFERENCE "Knowledge": uploads of at most 100 MiB. */
export const MAX_UPLOAD_BYTES = 100 * 1024 * 1024;
const MAX_PAIRS = 16;
const SECONDS_PER_DAY = 86_400;

// ---------------------------------------------------------------------------------------------
// Bodies (OpenAI's limits on names, metadata and attributes, so the backend never has to refuse)
// ---------------------------------------------------------------------------------------------

const atMostPairs = (pairs: Record<string, unknown>) => Object.keys(pairs).length <= MAX_PAIRS;
const KeySchema = z.string().min(1, "must not be empty").max(64);
const NameSchema = z.string().min(1, "must not be empty").max(256);

const MetadataSchema = z.record(KeySchema, z.string().max(512)).refine(atMostPairs, `at most ${MAX_PAIRS} pairs`);

const AttributesSchema = z
  .record(KeySchema, z.union([z.string().max(512), z.number(), z.boolean()]))
  .refine(atMostPairs, `at most ${MAX_PAIRS} pairs`);

const ChunkingStrategySchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("auto") }),
  z.strictObject({
    type: z.literal("static"),
    static: z
      .strictObject({ max_chunk_size_tokens: z.int().min(100).max(4096), chunk_overlap_tokens: z.int().min(0) })
      .refine((chunking) => chunking.chunk_overlap_tokens <= chunking.max_chunk_size_tokens / 2, {
        message: "must not exceed half of max_chunk_size_tokens",
        path: ["chunk_overlap_tokens"],
      }),
  }),
]);

export const CreateStoreSchema = z.strictObject({
  name: NameSchema,
  // Llama Stack's store settings; sent only when given, as top-level fields (its extra_body form).
  embedding_model: z.string().min(1).nullish(),
  embedding_dimension: z.int().min(1).nullish(),
  provider_id: z.string().min(1).nullish(),
  chunking_strategy: ChunkingStrategySchema.nullish(),
  metadata: MetadataSchema.nullish(),
});

export const UpdateStoreSchema = z
  .strictObject({
    name: NameSchema.optional(),
    /** Unix time; null removes the expiry. */
    expires_at: z.int().positive().nullable().optional(),
    metadata: MetadataSchema.optional(),
  })
  .refine((body) => Object.values(body).some((value) => value !== undefined), "expected at least one of name, expires_at, metadata");

export const AddFileSchema = z.strictObject({
  file_id: z.string().min(1, "must not be empty"),
  attributes: AttributesSchema.nullish(),
  chunking_strategy: ChunkingStrategySchema.nullish(),
});

/** The object without its null and undefined fields: the backend gets only what the client set. */
function defined<T extends Record<string, unknown>>(fields: T): { [K in keyof T]?: NonNullable<T[K]> } {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== null && value !== undefined)) as {
    [K in keyof T]?: NonNullable<T[K]>;
  };
}

// ---------------------------------------------------------------------------------------------
// Views
// ---------------------------------------------------------------------------------------------

function storeView(config: Config, store: VectorStore) {
  return {
    id: toClientStoreId(config, store.id),
    name: store.name,
    created_at: store.created_at,
    last_active_at: store.last_active_at,
    expires_at: store.expires_at ?? null,
    status: store.status,
    usage_bytes: store.usage_bytes,
    metadata: store.metadata ?? {},
  };
}

/** REFERENCE's RAG info: the store's view without metadata, with its object type. */
function ragView(config: Config, store: VectorStore) {
  const { metadata: _metadata, ...view } = storeView(config, store);
  return { ...view, object: store.object };
}

function storeFileView(config: Config, file: VectorStoreFile) {
  return {
    id: file.id,
    vector_store_id: toClientStoreId(config, file.vector_store_id),
    status: file.status,
    attributes: file.attributes ?? {},
    last_error: file.last_error,
    object: "vector_store.file" as const,
  };
}

// ---------------------------------------------------------------------------------------------
// Backend calls
// ---------------------------------------------------------------------------------------------

/** The backend holding vector stores (README "Providers": inference_backend, or a provider serving them), and the configuration. */
function storesBackend(c: Context<AppEnv>) {
  const rt = c.get("rt");
  return { config: rt.config, backends: rt.backends, backend: apiBackend(rt.backends, "vector_stores").client };
}

/** A call about vector stores (resourceCall). */
const fromBackend = <T>(call: () => Promise<T>, notFound?: () => ApiError | Promise<ApiError>) => resourceCall("vector_stores", call, notFound);

/** Every item of a paginated backend list. */
async function allItems<T>(pages: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of pages) items.push(item);
  return items;
}

interface StoreRef {
  /** As the client named it, for messages. */
  id: string;
  backendId: string;
}

function pathStore(c: Context<AppEnv>): StoreRef {
  const id = c.req.param("vector_store_id") ?? "";
  return { id, backendId: toBackendStoreId(c.get("rt").config, id) };
}

/** The path store, refused when it is the read-only portal source. */
function writableStore(c: Context<AppEnv>): StoreRef {
  const store = pathStore(c);
  if (isPortalStore(c.get("rt").config, store.id)) throw errors.readOnlyStore(store.id);
  return store;
}

const storeNotFound = (store: StoreRef) => errors.notFound("Vector Store", store.id);

/**
 * A 404 from a call on a store's file means either is missing; the backend's wording is not
 * reliable across implementations, so the store is looked up to tell which.
 */
function fileNotFound(c: Context<AppEnv>, store: StoreRef, fileId: string) {
  return async (): Promise<ApiError> => {
    const { backend } = storesBackend(c);
    const exists = await backend.vectorStores.retrieve(store.backendId).then(
      () => true,
      (error: unknown) => (error instanceof NotFoundError ? false : Promise.reject(backendError(error))),
    );
    return exists ? errors.notFound("File", fileId) : storeNotFound(store);
  };
}

// ---------------------------------------------------------------------------------------------
// RAG sources
// ---------------------------------------------------------------------------------------------

knowledge.get("/v1/rags", guard(ACTIONS.listRags), async (c) => {
  const { config, backend } = storesBackend(c);
  const stores = await fromBackend(() => allItems(backend.vectorStores.list({ limit: 100 })));
  return c.json({ rags: stores.map((store) => toClientStoreId(config, store.id)) });
});

knowledge.get("/v1/rags/:rag_id", guard(ACTIONS.getRag), async (c) => {
  const { config, backend } = storesBackend(c);
  const id = c.req.param("rag_id");
  const store = await fromBackend(
    () => backend.vectorStores.retrieve(toBackendStoreId(config, id)),
    () => errors.notFound("Rag", id),
  );
  return c.json(ragView(config, store));
});

// ---------------------------------------------------------------------------------------------
// Vector stores
// ---------------------------------------------------------------------------------------------

knowledge.get("/v1/vector-stores", guard(ACTIONS.readVectorStores), async (c) => {
  const { config, backend } = storesBackend(c);
  const stores = await fromBackend(() => allItems(backend.vectorStores.list({ limit: 100 })));
  return c.json({ data: stores.map((store) => storeView(config, store)), object: "list" });
});

knowledge.post("/v1/vector-stores", guard(ACTIONS.manageVectorStores), async (c) => {
  const { config, backends, backend } = storesBackend(c);
  const body = await readJson(c, CreateStoreSchema);
  // The openai types know only OpenAI's fields; the extension fields ride along in the JSON body.
  const store = await fromBackend(() => backend.vectorStores.create(defined(body)));
  forgetListedStores(backends);
  return c.json(storeView(config, store));
});

knowledge.get("/v1/vector-stores/:vector_store_id", guard(ACTIONS.readVectorStores), async (c) => {
  const { config, backend } = storesBackend(c);
  const store = pathStore(c);
  return c.json(storeView(config, await fromBackend(() => backend.vectorStores.retrieve(store.backendId), () => storeNotFound(store))));
});

knowledge.put("/v1/vector-stores/:vector_store_id", guard(ACTIONS.manageVectorStores), async (c) => {
  const { config, backend } = storesBackend(c);
  const store = writableStore(c);
  const body = await readJson(c, UpdateStoreSchema);
  const update: { name?: string; metadata?: Record<string, string>; expires_after?: { anchor: "last_active_at"; days: number } | null } = {};
  if (body.name !== undefined) update.name = body.name;
  if (body.metadata !== undefined) update.metadata = body.metadata;
  if (body.expires_at === null) update.expires_after = null;
  else if (body.expires_at !== undefined) {
    // The backend expresses expiry as whole days after the last activity, and this update is
    // activity: the store expires at the first day boundary at or after expires_at.
    const remaining = body.expires_at - Math.floor(Date.now() / 1000);
    if (remaining <= 0) throw errors.invalidValue("expires_at: must be in the future");
    update.expires_after = { anchor: "last_active_at", days: Math.ceil(remaining / SECONDS_PER_DAY) };
  }
  const updated = await fromBackend(() => backend.vectorStores.update(store.backendId, update), () => storeNotFound(store));
  return c.json(storeView(config, updated));
});

knowledge.delete("/v1/vector-stores/:vector_store_id", guard(ACTIONS.manageVectorStores), async (c) => {
  const { backends, backend } = storesBackend(c);
  const store = writableStore(c);
  const result = await fromBackend(() => backend.vectorStores.delete(store.backendId), () => storeNotFound(store));
  forgetListedStores(backends);
  return c.json({
    deleted: result.deleted,
    vector_store_id: store.id,
    response: result.deleted ? "Vector store deleted successfully" : "Vector store could not be deleted",
  });
});

// ---------------------------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------------------------

const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/;

knowledge.post("/v1/files", guard(ACTIONS.manageFiles), async (c) => {
  const upload = await streamFilePart(c.req.raw, "file", MAX_UPLOAD_BYTES);
  const type = CONTROL_CHARACTERS.test(upload.type) ? "application/octet-stream" : upload.type;
  let file;
  try {
    file = await apiBackend(c.get("rt").backends, "files").client.files.create(
      { file: toStreamingFile(upload.body, upload.filename || "upload", { type }), purpose: "assistants" },
      { signal: upload.signal },
    );
  } catch (error) {
    // A backend that stopped taking the file leaves the rest of the upload unread.
    await upload.release();
    // Cutting the stream at the limit fails the backend call too; the cut is the real reason.
    const cut = upload.failure();
    if (cut) throw cut;
    if (error instanceof APIError && error.status === 413) throw errors.fileTooLarge(MAX_UPLOAD_BYTES);
    if (error instanceof APIError && routeMissing(error)) throw notServed("files");
    throw backendError(error);
  }
  return c.json({
    id: file.id,
    filename: file.filename,
    bytes: file.bytes,
    created_at: file.created_at,
    purpose: "assistants",
    object: "file",
  });
});

knowledge.post("/v1/vector-stores/:vector_store_id/files", guard(ACTIONS.manageVectorStores), async (c) => {
  const { config, backend } = storesBackend(c);
  const store = writableStore(c);
  const body = await readJson(c, AddFileSchema);
  const file = await fromBackend(
    () => backend.vectorStores.files.create(store.backendId, { ...defined(body), file_id: body.file_id }),
    fileNotFound(c, store, body.file_id),
  );
  return c.json(storeFileView(config, file));
});

knowledge.get("/v1/vector-stores/:vector_store_id/files", guard(ACTIONS.readVectorStores), async (c) => {
  const { config, backend } = storesBackend(c);
  const store = pathStore(c);
  const files = await fromBackend(() => allItems(backend.vectorStores.files.list(store.backendId, { limit: 100 })), () => storeNotFound(store));
  return c.json({ data: files.map((file) => storeFileView(config, file)), object: "list" });
});

knowledge.get("/v1/vector-stores/:vector_store_id/files/:file_id", guard(ACTIONS.readVectorStores), async (c) => {
  const { config, backend } = storesBackend(c);
  const store = pathStore(c);
  const fileId = c.req.param("file_id");
  const file = await fromBackend(
    () => backend.vectorStores.files.retrieve(fileId, { vector_store_id: store.backendId }),
    fileNotFound(c, store, fileId),
  );
  return c.json(storeFileView(config, file));
});

knowledge.delete("/v1/vector-stores/:vector_store_id/files/:file_id", guard(ACTIONS.manageVectorStores), async (c) => {
  const { backend } = storesBackend(c);
  const store = writableStore(c);
  const fileId = c.req.param("file_id");
  const result = await fromBackend(
    () => backend.vectorStores.files.delete(fileId, { vector_store_id: store.backendId }),
    fileNotFound(c, store, fileId),
  );
  return c.json({
    deleted: result.deleted,
    vector_store_id: store.id,
    file_id: fileId,
    response: result.deleted ? "File removed from the vector store" : "File could not be removed from the vector store",
  });
});
