// Settings that load but that this release does not act on. An operator bringing a configuration
// written for the original system is told, once per isolate that loads it, which of its settings do
// nothing here, rather than finding out by surprise. Entries leave this list as features land.
import type * as z from "zod";
import { DEFAULT_EMBEDDING_DIMENSION, DEFAULT_EMBEDDING_MODEL, InferenceBackendSchema, isModeration, isUnifiedRag, MemoryCacheSchema, PostgresSchema, QuotaHandlersSchema, ServiceSchema, type Config } from "./schema.ts";

/** Whether `value` differs from what `field` of the schema gives when the setting is left out. */
const changed = (value: unknown, field: z.ZodType) => JSON.stringify(value) !== JSON.stringify(field.parse(undefined));

/** A Postgres store reached without a ws_proxy (Neon's own endpoint). */
const unrelayed = (config: Config) => config.database.postgres !== undefined && config.database.postgres.ws_proxy === undefined;

/** Every knowledge store, in either form of the rag sections. */
const stores = (config: Config) => (config.rag !== undefined && isUnifiedRag(config.rag) ? config.rag.byok.stores : config.byok_rag);
type Store = ReturnType<typeof stores>[number];
/** Whether some knowledge store has `set`. */
const anyStore = (set: (store: Store) => boolean) => (config: Config) => stores(config).some(set);

const CHECKS: Array<[name: string, present: (config: Config) => boolean]> = [
  // Workers' fetch always verifies TLS against the public roots.
  ["splunk.verify_ssl", (config) => config.splunk.enabled && !config.splunk.verify_ssl],
  ["inference_backend.use_as_library_client", (config) => config.inference_backend.use_as_library_client],
  // A conversation_cache type enables the /v2 conversation views, which read the conversations
  // themselves (their Durable Objects): whichever backend it names keeps nothing.
  ["conversation_cache.memory.max_entries", (config) => config.conversation_cache?.memory !== undefined && changed(config.conversation_cache.memory.max_entries, MemoryCacheSchema.shape.max_entries)],
  ["conversation_cache.sqlite", (config) => config.conversation_cache?.sqlite !== undefined],
  ["conversation_cache.postgres", (config) => config.conversation_cache?.postgres !== undefined],
  ["a2a_state", (config) => config.a2a_state !== undefined],
  ["azure_entra_id", (config) => config.azure_entra_id !== undefined],
  ["skills.paths", (config) => config.skills.paths.length > 0],
  ["a2a_agents", (config) => (config.a2a_agents?.agents.length ?? 0) > 0],
  // Workers' fetch negotiates TLS itself, against the public roots.
  ["inference_backend.tls_security_profile", (config) => config.inference_backend.tls_security_profile !== undefined],
  ["service.tls_config", (config) => Object.values(config.service.tls_config).some((value) => value !== undefined)],
  ["service.workers", (config) => changed(config.service.workers, ServiceSchema.shape.workers)],
  ["service.root_path", (config) => changed(config.service.root_path, ServiceSchema.shape.root_path)],
  ["authentication.skip_tls_verification", (config) => config.authentication.skip_tls_verification],
  ["authentication.k8s_ca_cert_path", (config) => config.authentication.k8s_ca_cert_path !== undefined],
  // A Worker has no start-up to retry a connection at (SPEC "Limits"): every request reports the
  // backend's state as it finds it, at once, and turn calls are never retried.
  ["inference_backend.max_retries", (config) => changed(config.inference_backend.max_retries, InferenceBackendSchema.shape.max_retries)],
  ["inference_backend.retry_delay", (config) => changed(config.inference_backend.retry_delay, InferenceBackendSchema.shape.retry_delay)],
  ["inference_backend.library_client_config_path", (config) => config.inference_backend.library_client_config_path !== undefined],
  ["inference_backend.config", (config) => changed(config.inference_backend.config, InferenceBackendSchema.shape.config)],
  // Logging is the Workers runtime's (wrangler tail, Logpush); authentication is the module's.
  ["service.color_log", (config) => changed(config.service.color_log, ServiceSchema.shape.color_log)],
  ["service.access_log", (config) => changed(config.service.access_log, ServiceSchema.shape.access_log)],
  ["service.auth_enabled", (config) => config.service.auth_enabled],
  // The cron trigger runs the quota scheduler every minute; its store is the database section's.
  ["quota_handlers.scheduler", (config) => changed(config.quota_handlers.scheduler, QuotaHandlersSchema.shape.scheduler)],
  // Quota counters live in QuotaDO and token history in the database section's store, whatever
  // quota_handlers names.
  ["quota_handlers.sqlite", (config) => config.quota_handlers.sqlite !== undefined],
  ["quota_handlers.postgres", (config) => config.quota_handlers.postgres !== undefined],
  // database.sqlite means D1, which has no file to name.
  ["database.sqlite.db_path", (config) => config.database.sqlite !== undefined],
  ["customization.profile_path", (config) => config.customization.profile_path !== undefined],
  ["customization.custom_profile.path", (config) => config.customization.custom_profile?.path !== undefined],
  // The Postgres store goes through its ws_proxy, which owns the connection to the server; without
  // one, the driver reaches wss://<host>/v2 (Neon's endpoint), always over TLS and on its own port.
  ["database.postgres.gss_encmode", (config) => config.database.postgres !== undefined && changed(config.database.postgres.gss_encmode, PostgresSchema.shape.gss_encmode)],
  ["database.postgres.port", (config) => unrelayed(config) && changed(config.database.postgres?.port, PostgresSchema.shape.port)],
  ["database.postgres.ssl_mode", (config) => unrelayed(config) && changed(config.database.postgres?.ssl_mode, PostgresSchema.shape.ssl_mode)],
  ["database.postgres.ca_cert_path", (config) => config.database.postgres?.ca_cert_path !== undefined],
  // The original validates a Granite Guardian shield's settings and does not run it either.
  ["shields of provider_id granite_guardian (validated, not run)", (config) => config.shields.some((shield) => !isModeration(shield) && shield.provider_id === "granite_guardian")],
  ["rag.okp.search_mode", (config) => config.rag !== undefined && isUnifiedRag(config.rag) && config.rag.okp.search_mode !== undefined],
  // Stores are searched through the backend's vector store API by vector_db_id: how the backend
  // keeps them (a faiss file, a pgvector database, the embedding model) is the backend's business.
  ["knowledge stores' db_path", anyStore((store) => store.db_path !== undefined)],
  ["knowledge stores' rag_type/backend", anyStore((store) => ("rag_type" in store ? store.rag_type !== "inline::faiss" : store.backend !== "faiss"))],
  ["knowledge stores' embedding_model", anyStore((store) => store.embedding_model !== DEFAULT_EMBEDDING_MODEL)],
  ["knowledge stores' embedding_dimension", anyStore((store) => store.embedding_dimension !== DEFAULT_EMBEDDING_DIMENSION)],
  ["knowledge stores' host, port, db, user, password", anyStore((store) => [store.host, store.port, store.db, store.user, store.password].some((value) => value !== undefined))],
];

/** The settings of `config` that have no effect in this release, by dotted name. */
export function inertSettings(config: Config): string[] {
  return CHECKS.filter(([, present]) => present(config)).map(([name]) => name);
}
