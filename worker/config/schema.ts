import { z } from "zod";
import { parseInterval } from "./interval.ts";

// workerd forbids eval/new Function. zod decides per object schema, when the schema is built,
// whether to compile a fast parser, so this must run before any schema below is created.
z.config({ jitless: true });

// ---------------------------------------------------------------------------------------------
// Building blocks
// ---------------------------------------------------------------------------------------------

const nonEmpty = () => z.string().min(1, "must not be empty");

/** A credential. Kept apart from nonEmpty so the schema reads as documentation of what is secret. */
const secret = () => z.string().min(1, "must not be empty");

const NUMERIC_TEXT = /^[+-]?\d+(?:\.\d+)?$/;

/** Numbers may arrive as text when they come from a `${env.NAME}` reference. */
const numeric = <T extends z.ZodNumber>(schema: T) =>
  z.preprocess(
    (value) => (typeof value === "string" && NUMERIC_TEXT.test(value.trim()) ? Number(value) : value),
    schema,
  );

/** Likewise for switches: `${env.NAME}` yields "true" or "false". */
const flag = () =>
  z.preprocess((value) => (value === "true" ? true : value === "false" ? false : value), z.boolean());

const int = (min: number) => numeric(z.number().int().min(min));
const seconds = () => numeric(z.number().positive());
const ratio = () => numeric(z.number().min(0).max(1));
const port = () => numeric(z.number().int().min(1).max(65_535));

function parsedUrl(value: string): URL | null {
  try {
    return new URL(value);
  } catch {
    return null;
  }
}

const httpUrl = () =>
  z.string().refine((value) => {
    const url = parsedUrl(value);
    return url !== null && (url.protocol === "http:" || url.protocol === "https:");
  }, "expected an http or https URL");

// Plain http is tolerated only where nothing leaves the machine: local test key servers.
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]"]);

const httpsUrl = () =>
  z.string().refine((value) => {
    const url = parsedUrl(value);
    if (url === null) return false;
    return url.protocol === "https:" || (url.protocol === "http:" && LOOPBACK_HOSTS.has(url.hostname));
  }, "expected an https URL");

/** Flags the second and later items sharing a name, at the item's own path. */
function uniqueNames<T>(name: (item: T) => string, field: string, what: string) {
  return (items: T[], ctx: z.RefinementCtx) => {
    const seen = new Set<string>();
    items.forEach((item, index) => {
      const value = name(item);
      if (seen.has(value)) {
        ctx.addIssue({ code: "custom", message: `duplicate ${what} "${value}"`, path: [index, field] });
      }
      seen.add(value);
    });
  };
}

function sqliteOrPostgres(value: { sqlite?: unknown; postgres?: unknown }, ctx: z.RefinementCtx) {
  if (value.sqlite !== undefined && value.postgres !== undefined) {
    ctx.addIssue({ code: "custom", message: "configure sqlite or postgres, not both", path: ["postgres"] });
  }
}

// ---------------------------------------------------------------------------------------------
// Storage
// ---------------------------------------------------------------------------------------------

export const SqliteSchema = z.strictObject({ db_path: nonEmpty() });

export const PostgresSchema = z.strictObject({
  host: nonEmpty().default("localhost"),
  port: port().default(5432),
  db: nonEmpty(),
  user: nonEmpty(),
  password: secret().optional(),
  namespace: nonEmpty().default("public"),
  ssl_mode: z.enum(["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]).default("prefer"),
  gss_encmode: z.enum(["disable", "prefer", "require"]).default("prefer"),
  ca_cert_path: nonEmpty().optional(),
  // Extension: Workers cannot open raw TCP to most hosts, so Postgres is reached over a WebSocket relay.
  ws_proxy: nonEmpty().optional(),
});

/** Both absent means the Worker's own D1 database. */
export const DatabaseSchema = z
  .strictObject({ sqlite: SqliteSchema.optional(), postgres: PostgresSchema.optional() })
  .superRefine(sqliteOrPostgres);

/** Both absent means in-memory A2A state. */
export const A2AStateSchema = z
  .strictObject({ sqlite: SqliteSchema.optional(), postgres: PostgresSchema.optional() })
  .superRefine(sqliteOrPostgres);

const CACHE_TYPES = ["noop", "memory", "sqlite", "postgres"] as const;

export const ConversationCacheSchema = z
  .strictObject({
    type: z.enum(CACHE_TYPES),
    memory: z.strictObject({ max_entries: int(1).default(1000) }).optional(),
    sqlite: SqliteSchema.optional(),
    postgres: PostgresSchema.optional(),
  })
  .superRefine((cache, ctx) => {
    if ((cache.type === "sqlite" || cache.type === "postgres") && cache[cache.type] === undefined) {
      ctx.addIssue({ code: "custom", message: `required when type is ${cache.type}`, path: [cache.type] });
    }
    // A section for a type that is not selected is almost always a half-finished edit.
    for (const other of ["memory", "sqlite", "postgres"] as const) {
      if (other !== cache.type && cache[other] !== undefined) {
        ctx.addIssue({ code: "custom", message: `not used when type is ${cache.type}`, path: [other] });
      }
    }
  });

// ---------------------------------------------------------------------------------------------
// Service and backend
// ---------------------------------------------------------------------------------------------

export const ServiceSchema = z.strictObject({
  host: nonEmpty().default("0.0.0.0"),
  port: port().default(8080),
  base_url: httpUrl().optional(),
  auth_enabled: flag().default(false),
  workers: int(1).default(1),
  color_log: flag().default(true),
  access_log: flag().default(true),
  tls_config: z
    .strictObject({
      tls_certificate_path: nonEmpty().optional(),
      tls_key_path: nonEmpty().optional(),
      tls_key_password: secret().optional(),
    })
    .prefault({}),
  root_path: z
    .string()
    .regex(/^$|^\/.*[^/]$/, 'must be empty or start with "/" and not end with "/"')
    .default(""),
  cors: z
    .strictObject({
      allow_origins: z.array(nonEmpty()).default(["*"]),
      allow_credentials: flag().default(false),
      allow_methods: z.array(nonEmpty()).default(["*"]),
      allow_headers: z.array(nonEmpty()).default(["*"]),
    })
    .prefault({}),
});

export const InferenceBackendSchema = z.strictObject({
  url: httpUrl(),
  api_key: secret().optional(),
  use_as_library_client: flag().default(false),
  library_client_config_path: nonEmpty().optional(),
  timeout: seconds().default(180),
  max_retries: int(0).default(2),
  retry_delay: numeric(z.number().min(0)).default(1),
  allow_degraded_mode: flag().default(false),
  config: z
    .strictObject({
      baseline: z.enum(["default", "empty"]).default("default"),
      profile: nonEmpty().optional(),
      native_override: z.record(z.string(), z.unknown()).optional(),
    })
    .prefault({}),
});

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

export const InferenceProviderSchema = z.strictObject({
  type: nonEmpty(),
  api_key_env: z.string().regex(ENV_NAME, "expected an environment variable name").optional(),
  allowed_models: z.array(nonEmpty()).optional(),
  extra: z.record(z.string(), z.unknown()).optional(),
});

export const InferenceSchema = z
  .strictObject({
    default_model: nonEmpty().optional(),
    default_provider: nonEmpty().optional(),
    context_windows: z.record(nonEmpty(), int(1)).default({}),
    providers: z.array(InferenceProviderSchema).default([]),
  })
  .superRefine((inference, ctx) => {
    // A model id means nothing without its provider and the other way round.
    if (inference.default_model !== undefined && inference.default_provider === undefined) {
      ctx.addIssue({ code: "custom", message: "required when default_model is set", path: ["default_provider"] });
    }
    if (inference.default_provider !== undefined && inference.default_model === undefined) {
      ctx.addIssue({ code: "custom", message: "required when default_provider is set", path: ["default_model"] });
    }
  });

// ---------------------------------------------------------------------------------------------
// Authentication and authorization
// ---------------------------------------------------------------------------------------------

export const AUTH_MODULES = [
  "noop",
  "noop-with-token",
  "jwk-token",
  "api-key-token",
  "k8s",
  "rh-identity",
  "trusted-proxy",
] as const;

export const RoleRuleSchema = z
  .strictObject({
    jsonpath: z.string().startsWith("$", 'must start with "$"'),
    operator: z.enum(["equals", "contains", "in", "match"]),
    negate: flag().default(false),
    value: z.json(),
    roles: z
      .array(nonEmpty().refine((role) => role !== "*", '"*" cannot be granted by a rule'))
      .min(1, "must list at least one role"),
  })
  .superRefine((rule, ctx) => {
    // Catch at load time what would otherwise fail on the first request that reaches the rule.
    if (rule.operator === "in" && !Array.isArray(rule.value)) {
      ctx.addIssue({ code: "custom", message: 'must be a list for operator "in"', path: ["value"] });
    }
    if (rule.operator === "match") {
      if (typeof rule.value !== "string") {
        ctx.addIssue({ code: "custom", message: 'must be a regular expression for operator "match"', path: ["value"] });
      } else {
        try {
          new RegExp(rule.value);
        } catch {
          ctx.addIssue({ code: "custom", message: "invalid regular expression", path: ["value"] });
        }
      }
    }
  });

export const JwkConfigSchema = z.strictObject({
  url: httpsUrl(),
  jwt_configuration: z
    .strictObject({
      user_id_claim: nonEmpty().default("user_id"),
      username_claim: nonEmpty().default("username"),
      role_rules: z.array(RoleRuleSchema).default([]),
    })
    .prefault({}),
});

export const AuthenticationSchema = z
  .strictObject({
    module: z.enum(AUTH_MODULES).default("noop"),
    skip_tls_verification: flag().default(false),
    skip_for_health_probes: flag().default(false),
    skip_for_metrics: flag().default(false),
    k8s_cluster_api: httpUrl().optional(),
    k8s_ca_cert_path: nonEmpty().optional(),
    jwk_config: JwkConfigSchema.optional(),
    api_key_config: z.strictObject({ api_key: secret() }).optional(),
    rh_identity_config: z
      .strictObject({
        required_entitlements: z.array(nonEmpty()).default([]),
        max_header_size: int(1).default(8192),
      })
      .optional(),
    trusted_proxy_config: z
      .strictObject({
        user_header: nonEmpty().default("x-forwarded-user"),
        // null, omitted or empty: every account with a valid token may assert identities.
        allowed_service_accounts: z
          .array(z.strictObject({ namespace: nonEmpty(), name: nonEmpty() }))
          .nullable()
          .optional(),
      })
      .optional(),
  })
  .superRefine((auth, ctx) => {
    if (auth.module === "jwk-token" && auth.jwk_config === undefined) {
      ctx.addIssue({ code: "custom", message: "required when module is jwk-token", path: ["jwk_config"] });
    }
    if (auth.module === "api-key-token" && auth.api_key_config === undefined) {
      ctx.addIssue({ code: "custom", message: "required when module is api-key-token", path: ["api_key_config"] });
    }
  });

export const AccessRuleSchema = z.strictObject({
  role: nonEmpty(),
  actions: z.array(nonEmpty()),
});

export const AuthorizationSchema = z.strictObject({
  access_rules: z.array(AccessRuleSchema).default([]),
});

// ---------------------------------------------------------------------------------------------
// Behaviour
// ---------------------------------------------------------------------------------------------

export const CustomizationSchema = z.strictObject({
  profile_path: nonEmpty().optional(),
  disable_query_system_prompt: flag().default(false),
  disable_shield_ids_override: flag().default(false),
  system_prompt_path: nonEmpty().optional(),
  system_prompt: z.string().optional(),
  agent_card_path: nonEmpty().optional(),
  // The agent card has its own, evolving schema; it is checked where the card is served.
  agent_card_config: z.record(z.string(), z.unknown()).optional(),
  custom_profile: z
    .strictObject({
      path: nonEmpty().optional(),
      prompts: z.record(nonEmpty(), z.string()).default({}),
    })
    .optional(),
});

const ApprovalPolicySchema = z.union([
  z.enum(["always", "never"]),
  z.strictObject({
    always: z.array(nonEmpty()).default([]),
    never: z.array(nonEmpty()).default([]),
  }),
]);

export const McpServerSchema = z.strictObject({
  name: nonEmpty(),
  provider_id: nonEmpty().default("model-context-protocol"),
  url: httpUrl(),
  // Values are a file holding the credential, or one of the words kubernetes, client, oauth.
  authorization_headers: z.record(nonEmpty(), nonEmpty()).default({}),
  headers: z.array(nonEmpty()).default([]),
  require_approval: ApprovalPolicySchema.default("never"),
  timeout: seconds().optional(),
});

export const McpServersSchema = z
  .array(McpServerSchema)
  .default([])
  .superRefine(uniqueNames((server) => server.name, "name", "MCP server name"));

export const ApprovalsSchema = z.strictObject({
  approval_timeout_seconds: int(1).default(600),
  approval_retention_days: int(0).default(30),
});

export const CompactionSchema = z.strictObject({
  enabled: flag().default(false),
  threshold_ratio: ratio().default(0.8),
  token_floor: int(0).default(4096),
  buffer_turns: int(0).default(4),
  buffer_max_ratio: ratio().default(0.5),
});

export const ShieldSchema = z.strictObject({
  name: nonEmpty(),
  model: nonEmpty().optional(),
  provider_id: nonEmpty().optional(),
  input: flag().default(true),
  output: flag().default(false),
  message: nonEmpty().optional(),
});

/** Extension: shields run through the backend's moderation endpoint, in list order. */
export const ShieldsSchema = z
  .array(ShieldSchema)
  .default([])
  .superRefine(uniqueNames((shield) => shield.name, "name", "shield name"));

// ---------------------------------------------------------------------------------------------
// Quotas
// ---------------------------------------------------------------------------------------------

/** Output is the period in seconds, whatever form the operator wrote. */
const IntervalSchema = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const result = parseInterval(value);
  if (result === null) {
    ctx.addIssue({
      code: "custom",
      message: 'expected a positive interval such as "1 day", "12 hours", "30 minutes" or a number of seconds',
    });
    return z.NEVER;
  }
  return result;
});

export const QuotaLimiterSchema = z.strictObject({
  type: z.enum(["user_limiter", "cluster_limiter"]),
  name: nonEmpty(),
  initial_quota: int(0),
  quota_increase: int(0),
  period: IntervalSchema,
});

export const QuotaHandlersSchema = z
  .strictObject({
    sqlite: SqliteSchema.optional(),
    postgres: PostgresSchema.optional(),
    limiters: z
      .array(QuotaLimiterSchema)
      .default([])
      .superRefine(uniqueNames((limiter) => limiter.name, "name", "limiter name")),
    scheduler: z
      .strictObject({
        period: int(1).default(1),
        database_reconnection_count: int(0).default(10),
        database_reconnection_delay: numeric(z.number().min(0)).default(1),
      })
      .prefault({}),
    enable_token_history: flag().default(false),
  })
  .superRefine(sqliteOrPostgres);

// ---------------------------------------------------------------------------------------------
// Data collection and telemetry
// ---------------------------------------------------------------------------------------------

export const DataCollectorSchema = z
  .strictObject({
    enabled: flag().default(false),
    ingress_server_url: httpUrl().optional(),
    ingress_server_auth_token: secret().optional(),
    ingress_content_service_name: nonEmpty().optional(),
    collection_interval: int(1).default(7200),
    cleanup_after_send: flag().default(true),
    connection_timeout_seconds: int(1).default(30),
  })
  .superRefine((collector, ctx) => {
    if (!collector.enabled) return;
    for (const field of ["ingress_server_url", "ingress_content_service_name"] as const) {
      if (collector[field] === undefined) {
        ctx.addIssue({ code: "custom", message: "required when the data collector is enabled", path: [field] });
      }
    }
  });

export const UserDataCollectionSchema = z
  .strictObject({
    feedback_enabled: flag().default(false),
    feedback_storage: nonEmpty().optional(),
    transcripts_enabled: flag().default(false),
    transcripts_storage: nonEmpty().optional(),
    data_collector: DataCollectorSchema.prefault({}),
  })
  .superRefine((collection, ctx) => {
    if (collection.feedback_enabled && collection.feedback_storage === undefined) {
      ctx.addIssue({ code: "custom", message: "required when feedback_enabled is true", path: ["feedback_storage"] });
    }
    if (collection.transcripts_enabled && collection.transcripts_storage === undefined) {
      ctx.addIssue({
        code: "custom",
        message: "required when transcripts_enabled is true",
        path: ["transcripts_storage"],
      });
    }
  });

export const SplunkSchema = z
  .strictObject({
    enabled: flag().default(false),
    url: httpUrl().optional(),
    token_path: nonEmpty().optional(),
    index: nonEmpty().optional(),
    source: nonEmpty().default("parley"),
    timeout: seconds().default(5),
    verify_ssl: flag().default(true),
  })
  .superRefine((splunk, ctx) => {
    if (!splunk.enabled) return;
    for (const field of ["url", "token_path", "index"] as const) {
      if (splunk[field] === undefined) {
        ctx.addIssue({ code: "custom", message: "required when splunk is enabled", path: [field] });
      }
    }
  });

// ---------------------------------------------------------------------------------------------
// Knowledge (RAG)
// ---------------------------------------------------------------------------------------------

/** The id that names the knowledge portal source in rag lists. */
export const PORTAL_RAG_ID = "okp";

const DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-mpnet-base-v2";
const DEFAULT_EMBEDDING_DIMENSION = 768;

// pgvector connection fields; left unset they fall back to the backend's own settings.
const pgvectorFields = {
  host: nonEmpty().optional(),
  port: port().optional(),
  db: nonEmpty().optional(),
  user: nonEmpty().optional(),
  password: secret().optional(),
};

const storeFields = {
  rag_id: nonEmpty(),
  embedding_model: nonEmpty().default(DEFAULT_EMBEDDING_MODEL),
  embedding_dimension: int(1).default(DEFAULT_EMBEDDING_DIMENSION),
  vector_db_id: nonEmpty(),
  db_path: nonEmpty().optional(),
  score_multiplier: numeric(z.number().positive()).default(1),
  ...pgvectorFields,
};

function faissNeedsDbPath(store: { db_path?: string }, isFaiss: boolean, ctx: z.RefinementCtx) {
  if (isFaiss && store.db_path === undefined) {
    ctx.addIssue({ code: "custom", message: "required for a faiss store", path: ["db_path"] });
  }
}

export const ByokRagEntrySchema = z
  .strictObject({
    ...storeFields,
    rag_type: z.enum(["inline::faiss", "remote::pgvector"]).default("inline::faiss"),
  })
  .superRefine((store, ctx) => faissNeedsDbPath(store, store.rag_type === "inline::faiss", ctx));

export const ByokRagSchema = z
  .array(ByokRagEntrySchema)
  .default([])
  .superRefine(uniqueNames((store) => store.rag_id, "rag_id", "rag_id"));

export const RerankerSchema = z.strictObject({
  enabled: flag().default(false),
  model: nonEmpty().default("cross-encoder/ms-marco-MiniLM-L6-v2"),
});

const portalFields = {
  portal_url: httpUrl().optional(),
  // true: chunk URLs are built from the chunk's parent id; false: the chunk's reference URL.
  offline: flag().default(true),
  chunk_filter_query: nonEmpty().optional(),
  vector_db_id: nonEmpty().default("portal-rag"),
};

export const PortalSchema = z.strictObject(portalFields);

/** Deprecated since 0.7.0: lists of rag ids (byok_rag ids or "okp") per strategy. */
export const LegacyRagSchema = z.strictObject({
  inline: z.array(nonEmpty()).default([]),
  tool: z.array(nonEmpty()).default([]),
});

export const RagStoreSchema = z
  .strictObject({ ...storeFields, backend: z.enum(["faiss", "pgvector"]).default("faiss") })
  .superRefine((store, ctx) => faissNeedsDbPath(store, store.backend === "faiss", ctx));

/** The 0.7.0 form: stores, retrieval strategies, portal and reranker in one section. */
export const UnifiedRagSchema = z.strictObject({
  byok: z
    .strictObject({
      max_chunks: int(1).default(10),
      stores: z
        .array(RagStoreSchema)
        .default([])
        .superRefine(uniqueNames((store) => store.rag_id, "rag_id", "rag_id")),
    })
    .prefault({}),
  retrieval: z
    .strictObject({
      inline: z
        .strictObject({
          sources: z.array(nonEmpty()).default([]),
          max_chunks: int(1).default(10),
          reranker: RerankerSchema.prefault({}),
        })
        .prefault({}),
      tool: z
        .strictObject({
          sources: z.array(nonEmpty()).default([]),
          max_chunks: int(1).default(10),
        })
        .prefault({}),
    })
    .prefault({}),
  okp: z.strictObject({ ...portalFields, max_chunks: int(1).default(5) }).prefault({}),
});

const UNIFIED_RAG_KEYS = ["byok", "retrieval", "okp"];

/**
 * Either form. The form is picked by its keys before validating, so a mistake is reported
 * against the form the operator was writing (a plain union would instead blame `inline` for
 * being unknown to the unified form whenever the deprecated form has a wrong type in it).
 */
export const RagSchema = z
  .looseObject({})
  .transform((rag, ctx): LegacyRagConfig | UnifiedRagConfig => {
    const unified = UNIFIED_RAG_KEYS.some((key) => key in rag);
    const result = (unified ? UnifiedRagSchema : LegacyRagSchema).safeParse(rag);
    if (result.success) return result.data;
    for (const issue of result.error.issues) ctx.addIssue({ ...issue });
    return z.NEVER;
  });

// ---------------------------------------------------------------------------------------------
// Everything else
// ---------------------------------------------------------------------------------------------

export const RlsapiV1Schema = z.strictObject({
  allow_verbose_infer: flag().default(false),
  // Unset: quotas are charged to the user id.
  quota_subject: z.enum(["org_id", "system_id"]).optional(),
});

export const AzureEntraIdSchema = z.strictObject({
  tenant_id: nonEmpty(),
  client_id: nonEmpty(),
  client_secret: secret(),
  scope: nonEmpty().default("https://cognitiveservices.azure.com/.default"),
});

export const SkillsSchema = z.strictObject({ paths: z.array(nonEmpty()).default([]) });

// ---------------------------------------------------------------------------------------------
// The document
// ---------------------------------------------------------------------------------------------

export const ConfigSchema = z
  .strictObject({
    name: nonEmpty().default("Parley"),
    service: ServiceSchema.prefault({}),
    inference_backend: InferenceBackendSchema,
    inference: InferenceSchema.prefault({}),
    authentication: AuthenticationSchema.prefault({}),
    /** Absent: every authenticated user may do everything. */
    authorization: AuthorizationSchema.optional(),
    customization: CustomizationSchema.prefault({}),
    mcp_servers: McpServersSchema,
    approvals: ApprovalsSchema.prefault({}),
    compaction: CompactionSchema.prefault({}),
    /** Absent: no conversation cache (the v2 endpoints answer "not configured"). */
    conversation_cache: ConversationCacheSchema.optional(),
    database: DatabaseSchema.prefault({}),
    a2a_state: A2AStateSchema.optional(),
    quota_handlers: QuotaHandlersSchema.prefault({}),
    user_data_collection: UserDataCollectionSchema.prefault({}),
    byok_rag: ByokRagSchema,
    rag: RagSchema.optional(),
    portal: PortalSchema.optional(),
    reranker: RerankerSchema.optional(),
    rlsapi_v1: RlsapiV1Schema.prefault({}),
    splunk: SplunkSchema.prefault({}),
    deployment_environment: nonEmpty().default("development"),
    azure_entra_id: AzureEntraIdSchema.optional(),
    skills: SkillsSchema.prefault({}),
    shields: ShieldsSchema,
  })
  .superRefine((config, ctx) => {
    const rag = config.rag;
    if (rag !== undefined && isUnifiedRag(rag)) {
      // Two places to declare the same stores would leave readers guessing which one wins.
      for (const [section, present] of [
        ["byok_rag", config.byok_rag.length > 0],
        ["portal", config.portal !== undefined],
        ["reranker", config.reranker !== undefined],
      ] as const) {
        if (present) {
          ctx.addIssue({
            code: "custom",
            message: "deprecated section; cannot be combined with the unified rag section",
            path: [section],
          });
        }
      }
      const known = new Set([PORTAL_RAG_ID, ...rag.byok.stores.map((store) => store.rag_id)]);
      checkRagIds(rag.retrieval.inline.sources, known, ["rag", "retrieval", "inline", "sources"], ctx);
      checkRagIds(rag.retrieval.tool.sources, known, ["rag", "retrieval", "tool", "sources"], ctx);
    } else if (rag !== undefined) {
      const known = new Set([PORTAL_RAG_ID, ...config.byok_rag.map((store) => store.rag_id)]);
      checkRagIds(rag.inline, known, ["rag", "inline"], ctx);
      checkRagIds(rag.tool, known, ["rag", "tool"], ctx);
    }
  });

function checkRagIds(ids: string[], known: Set<string>, path: (string | number)[], ctx: z.RefinementCtx) {
  ids.forEach((id, index) => {
    if (!known.has(id)) {
      ctx.addIssue({
        code: "custom",
        message: `unknown rag id "${id}" (expected a configured rag_id or "${PORTAL_RAG_ID}")`,
        path: [...path, index],
      });
    }
  });
}

/** Tells the 0.7.0 rag form from the deprecated lists. */
export function isUnifiedRag(rag: RagConfig): rag is UnifiedRagConfig {
  return "retrieval" in rag;
}

export type Config = z.output<typeof ConfigSchema>;
export type ServiceConfig = z.output<typeof ServiceSchema>;
export type InferenceBackendConfig = z.output<typeof InferenceBackendSchema>;
export type InferenceConfig = z.output<typeof InferenceSchema>;
export type InferenceProviderConfig = z.output<typeof InferenceProviderSchema>;
export type AuthModule = (typeof AUTH_MODULES)[number];
export type AuthenticationConfig = z.output<typeof AuthenticationSchema>;
export type JwkConfig = z.output<typeof JwkConfigSchema>;
export type RoleRule = z.output<typeof RoleRuleSchema>;
export type AuthorizationConfig = z.output<typeof AuthorizationSchema>;
export type AccessRule = z.output<typeof AccessRuleSchema>;
export type CustomizationConfig = z.output<typeof CustomizationSchema>;
export type McpServerConfig = z.output<typeof McpServerSchema>;
export type ApprovalsConfig = z.output<typeof ApprovalsSchema>;
export type CompactionConfig = z.output<typeof CompactionSchema>;
export type ConversationCacheConfig = z.output<typeof ConversationCacheSchema>;
export type SqliteConfig = z.output<typeof SqliteSchema>;
export type PostgresConfig = z.output<typeof PostgresSchema>;
export type DatabaseConfig = z.output<typeof DatabaseSchema>;
export type A2AStateConfig = z.output<typeof A2AStateSchema>;
export type QuotaLimiterConfig = z.output<typeof QuotaLimiterSchema>;
export type QuotaHandlersConfig = z.output<typeof QuotaHandlersSchema>;
export type DataCollectorConfig = z.output<typeof DataCollectorSchema>;
export type UserDataCollectionConfig = z.output<typeof UserDataCollectionSchema>;
export type ByokRagEntryConfig = z.output<typeof ByokRagEntrySchema>;
export type RagStoreConfig = z.output<typeof RagStoreSchema>;
export type LegacyRagConfig = z.output<typeof LegacyRagSchema>;
export type UnifiedRagConfig = z.output<typeof UnifiedRagSchema>;
export type RagConfig = z.output<typeof RagSchema>;
export type PortalConfig = z.output<typeof PortalSchema>;
export type RerankerConfig = z.output<typeof RerankerSchema>;
export type RlsapiV1Config = z.output<typeof RlsapiV1Schema>;
export type SplunkConfig = z.output<typeof SplunkSchema>;
export type AzureEntraIdConfig = z.output<typeof AzureEntraIdSchema>;
export type SkillsConfig = z.output<typeof SkillsSchema>;
export type ShieldConfig = z.output<typeof ShieldSchema>;
