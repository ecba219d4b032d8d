import * as z from "zod";
import { actionNamed } from "../auth/actions.ts";
import { pythonRegex } from "../auth/python-regex.ts";
import { AgentCardConfigSchema } from "./agent-card.ts";
import { intervalSeconds, wholePositive } from "./interval.ts";
import { secret } from "./secrets.ts";

// workerd forbids eval/new Function. zod decides per object schema, when the schema is built,
// whether to compile a fast parser, so this must run before any schema below is created.
z.config({ jitless: true });

// ---------------------------------------------------------------------------------------------
// Building blocks
// ---------------------------------------------------------------------------------------------

const nonEmpty = () => z.string().min(1, "must not be empty");


const NUMERIC_TEXT = /^[+-]?\d+(?:\.\d+)?$/;

/** Numbers may arrive as text when they come from a `${env.NAME}` reference. */
const numeric = <T extends z.ZodNumber>(schema: T) =>
  z.preprocess(
    (value) => (typeof value === "string" && NUMERIC_TEXT.test(value.trim()) ? Number(value) : value),
    schema,
  );

/**
 * Switches take what the original's pydantic takes for a boolean: true/false, the words it reads
 * as either (any case; also what a `${env.NAME}` reference yields) and 1/0.
 */
const PYDANTIC_BOOLEAN_WORDS = { truthy: ["true", "1", "yes", "on", "y", "t"], falsy: ["false", "0", "no", "off", "n", "f"], case: "insensitive" as const };
const booleanWords = z.stringbool(PYDANTIC_BOOLEAN_WORDS);
const flag = () =>
  z.preprocess(
    (value) => (typeof value === "string" ? (booleanWords.safeParse(value).data ?? value) : value === 0 || value === 1 ? value === 1 : value),
    z.boolean({ error: "expected a boolean (true/false, yes/no, on/off, 1/0)" }),
  );

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

/** `missing`: the message when the field is absent, in place of "required". */
const httpUrl = (missing?: string) =>
  z.string(missing ? { error: (issue) => (issue.input === undefined ? missing : undefined) } : undefined).refine((value) => {
    const url = parsedUrl(value);
    return url !== null && (url.protocol === "http:" || url.protocol === "https:");
  }, "expected an http or https URL");

// Plain http is tolerated only where nothing leaves the machine: local test key servers.
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "[::1]"]);
/** Whether a URL's hostname never leaves the machine. */
export const isLoopback = (hostname: string) => LOOPBACK_HOSTS.has(hostname) || /^127\.\d+\.\d+\.\d+$/.test(hostname);

const httpsUrl = () =>
  z.string().refine((value) => {
    const url = parsedUrl(value);
    if (url === null) return false;
    return url.protocol === "https:" || (url.protocol === "http:" && isLoopback(url.hostname));
  }, "expected an https URL");

/**
 * Flags the second and later items sharing a name, at the item's own path (`field` within it, when
 * the item is not the name itself). With `ignoringCase`, names that differ only in case are the same
 * (header names), and the message names the one listed first.
 */
function uniqueNames<T>(name: (item: T) => string, field: string | null, what: string, ignoringCase = false) {
  return (items: T[], ctx: z.RefinementCtx) => {
    const seen = new Map<string, string>();
    items.forEach((item, index) => {
      const value = name(item);
      const key = ignoringCase ? value.toLowerCase() : value;
      const first = seen.get(key);
      if (first === undefined) {
        seen.set(key, value);
        return;
      }
      const message = ignoringCase ? `duplicate ${what} "${value}" (${what} names are compared ignoring case; "${first}" is listed)` : `duplicate ${what} "${value}"`;
      ctx.addIssue({ code: "custom", message, path: field === null ? [index] : [index, field] });
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

const TLS_REQUIRED = new Set(["require", "verify-ca", "verify-full"]);

export const PostgresSchema = z
  .strictObject({
    host: nonEmpty().default("localhost"),
    port: port().default(5432),
    db: nonEmpty(),
    user: nonEmpty(),
    password: secret().optional(),
    // Quoted in search_path, so hyphens are fine; nothing that could break out of the startup options.
    namespace: z
      .string()
      .regex(/^[A-Za-z_][A-Za-z0-9_$-]{0,62}$/, "expected a plain schema name")
      .default("public"),
    ssl_mode: z.enum(["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]).default("prefer"),
    gss_encmode: z.enum(["disable", "prefer", "require"]).default("prefer"),
    ca_cert_path: nonEmpty().optional(),
    // Extension: Workers cannot open raw TCP to most hosts, so Postgres is reached over a WebSocket relay.
    ws_proxy: z
      .string()
      .refine((value) => ["ws:", "wss:"].includes(parsedUrl(value)?.protocol ?? ""), "expected a ws:// or wss:// URL (the relay, e.g. wss://relay.example.com)")
      .optional(),
  })
  .superRefine((settings, ctx) => {
    // A plain ws:// hop is acceptable under a TLS ssl_mode only when it never leaves the machine.
    const proxy = settings.ws_proxy === undefined ? null : parsedUrl(settings.ws_proxy);
    if (proxy?.protocol === "ws:" && TLS_REQUIRED.has(settings.ssl_mode) && !isLoopback(proxy.hostname)) {
      ctx.addIssue({ code: "custom", message: `ssl_mode ${settings.ssl_mode} needs a wss:// relay`, path: ["ws_proxy"] });
    }
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

export const MemoryCacheSchema = z.strictObject({ max_entries: int(1).default(1000) });

export const ConversationCacheSchema = z
  .strictObject({
    // As in the original, no type and no backend is a valid (empty) section (the /v2 views then answer 500).
    type: z.enum(CACHE_TYPES).optional(),
    memory: MemoryCacheSchema.optional(),
    sqlite: SqliteSchema.optional(),
    postgres: PostgresSchema.optional(),
  })
  .superRefine((cache, ctx) => {
    if (cache.type !== undefined && cache.type !== "noop" && cache[cache.type] === undefined) {
      ctx.addIssue({ code: "custom", message: `required when type is ${cache.type}`, path: [cache.type] });
    }
    // A section for a type that is not selected is almost always a half-finished edit.
    for (const other of ["memory", "sqlite", "postgres"] as const) {
      if (other !== cache.type && cache[other] !== undefined) {
        ctx.addIssue({ code: "custom", message: cache.type === undefined ? "type: required when a cache backend is configured" : `not used when type is ${cache.type}`, path: [other] });
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
    // Browsers refuse credentials with a wildcard origin; the original refuses the setting (its words).
    .refine((cors) => !(cors.allow_credentials && cors.allow_origins.includes("*")), {
      message: "Invalid CORS configuration: allow_credentials can not be set to true when allow origins contains the '*' wildcard.",
      path: ["allow_credentials"],
    })
    .prefault({}),
});

export const InferenceBackendSchema = z.strictObject({
  // The original system's library mode (use_as_library_client) ran the backend inside its process;
  // a Worker cannot, so a configuration written for that mode names what to give instead.
  url: httpUrl("required: the URL of an OpenAI-compatible backend (a Worker cannot run the backend as a library, use_as_library_client)"),
  api_key: secret().optional(),
  use_as_library_client: flag().default(false),
  library_client_config_path: nonEmpty().optional(),
  timeout: seconds().default(180),
  max_retries: int(0).default(5),
  retry_delay: numeric(z.number().min(0)).default(2),
  allow_degraded_mode: flag().default(false),
  /** The original pinned its backend connection's TLS version and ciphers; a Worker's fetch cannot (inert). */
  tls_security_profile: z.strictObject({ type: nonEmpty().optional(), minTLSVersion: nonEmpty().optional(), ciphers: z.array(nonEmpty()).optional() }).optional(),
  config: z
    .strictObject({
      baseline: z.enum(["default", "empty", "byo-llm"]).default("default"),
      profile: nonEmpty().optional(),
      native_override: z.record(z.string(), z.unknown()).optional(),
    })
    .prefault({}),
});

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** How a provider's models are called: OpenAI's Responses API or Chat Completions. */
export const PROVIDER_WIRES = ["responses", "chat"] as const;
/** The backend APIs besides the model call, which one backend serves for the whole gateway. */
export const PROVIDER_APIS = ["moderations", "vector_stores", "files"] as const;
/** The provider id the default backend (inference_backend) has unless a provider entry names it. */
export const DEFAULT_BACKEND_ID = "inference_backend";

/**
 * Extension: what Parley reads from a provider's `extra` (README "Providers"). SPEC leaves `extra`
 * free-form, so other keys still load; they do nothing, and the load says so in a warning.
 */
export const ProviderExtraSchema = z
  .looseObject({
    /** The provider's own OpenAI-compatible endpoint (base URL with /v1). Absent: served by inference_backend. */
    url: httpUrl().optional(),
    /** Default "responses". */
    wire: z.enum(PROVIDER_WIRES).optional(),
    /** Chat Completions only: ask for a usage chunk (stream_options.include_usage); default true. */
    stream_usage: flag().optional(),
    /** Seconds; default inference_backend.timeout. */
    timeout: seconds().optional(),
    /** APIs this provider serves for the whole gateway instead of inference_backend. */
    serves: z.array(z.enum(PROVIDER_APIS)).optional(),
  })
  .superRefine((extra, ctx) => {
    if (extra.stream_usage !== undefined && extra.wire !== "chat") {
      ctx.addIssue({ code: "custom", message: 'only used with wire "chat"', path: ["stream_usage"] });
    }
    if (extra.serves !== undefined && extra.url === undefined) {
      ctx.addIssue({ code: "custom", message: "requires url: a provider without its own endpoint is served by inference_backend", path: ["serves"] });
    }
    extra.serves?.forEach((api, index) => {
      if (extra.serves!.indexOf(api) !== index) ctx.addIssue({ code: "custom", message: `"${api}" is listed twice`, path: ["serves", index] });
    });
  });

/** The keys of `extra` Parley acts on; the others are reported as having no effect. */
export const PROVIDER_EXTRA_KEYS: readonly string[] = Object.keys(ProviderExtraSchema.shape);

export type ProviderWire = (typeof PROVIDER_WIRES)[number];
export type ProviderApi = (typeof PROVIDER_APIS)[number];
export type ProviderExtraConfig = z.output<typeof ProviderExtraSchema>;

export const InferenceProviderSchema = z
  .strictObject({
    /** The provider's id: what `provider/model` and default_provider name. */
    type: nonEmpty(),
    /** The original's newer configurations give the id apart from the kind in `type`: then it is the id. */
    id: nonEmpty().optional(),
    /** The Worker secret or variable holding the provider's key (providers with their own url). */
    api_key_env: z.string().regex(ENV_NAME, "expected an environment variable name").optional(),
    allowed_models: z.array(nonEmpty()).optional(),
    extra: ProviderExtraSchema.optional(),
  })
  .transform(({ id, ...provider }) => (id === undefined ? provider : { ...provider, type: id }));

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
    // A provider with its own endpoint owns its id: `provider/model` must lead to one backend.
    const endpoints = new Set(inference.providers.filter((provider) => provider.extra?.url !== undefined).map((provider) => provider.type));
    const seen = new Set<string>();
    inference.providers.forEach((provider, index) => {
      if (provider.type === DEFAULT_BACKEND_ID && provider.extra?.url !== undefined) {
        ctx.addIssue({ code: "custom", message: `"${DEFAULT_BACKEND_ID}" names the default backend; give this provider another type`, path: ["providers", index, "type"] });
      }
      if (seen.has(provider.type) && endpoints.has(provider.type)) {
        ctx.addIssue({ code: "custom", message: `duplicate provider "${provider.type}": a provider with its own url needs a type of its own`, path: ["providers", index, "type"] });
      }
      seen.add(provider.type);
    });
    for (const api of PROVIDER_APIS) {
      const serving = inference.providers.flatMap((provider, index) => (provider.extra?.serves?.includes(api) ? [index] : []));
      for (const index of serving.slice(1)) {
        ctx.addIssue({ code: "custom", message: `"${api}" is already served by provider "${inference.providers[serving[0]!]!.type}"`, path: ["providers", index, "extra", "serves"] });
      }
    }
    // A file is attached to a vector store on the backend that holds both.
    const holder = (api: (typeof PROVIDER_APIS)[number]) => inference.providers.findIndex((provider) => provider.extra?.serves?.includes(api));
    const stores = holder("vector_stores");
    const files = holder("files");
    if (stores !== files && stores >= 0 && files >= 0) {
      ctx.addIssue({ code: "custom", message: "vector_stores and files must be served by the same provider (files are attached to its stores)", path: ["providers", files, "extra", "serves"] });
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

/** Modules that review tokens with the cluster API, with the service's own credential. */
const CLUSTER_MODULES: ReadonlySet<string> = new Set(["k8s", "trusted-proxy"]);

// A role rule compares the LIST of values its JSONPath selects, as the original system does (see
// worker/auth/role-rules.ts). Values of a shape the original loads but that never match load too
// (the load warns, worker/auth/role-rules.ts roleRuleWarnings); shapes it cannot compare at all are
// refused here. `match` patterns are Python's, checked as the matcher compiles them.
export const RoleRuleSchema = z
  .strictObject({
    // jsonpath_ng reads a path without "$" from the root; so does the matcher.
    jsonpath: nonEmpty(),
    operator: z.enum(["equals", "contains", "in", "match"]),
    negate: flag().default(false),
    value: z.json(),
    roles: z
      .array(nonEmpty().refine((role) => role !== "*", '"*" cannot be granted by a rule'))
      .min(1, "must list at least one role")
      // The original refuses a role listed twice.
      .superRefine(uniqueNames((role) => role, null, "role")),
  })
  .superRefine((rule, ctx) => {
    if (rule.operator === "in" && !Array.isArray(rule.value)) {
      ctx.addIssue({
        code: "custom",
        message: 'must be a list of lists for operator "in": the list of values the path selects must equal one of them (write [[x], [y]])',
        path: ["value"],
      });
    }
    if (rule.operator === "match") {
      if (typeof rule.value !== "string") {
        ctx.addIssue({ code: "custom", message: 'must be a regular expression for operator "match"', path: ["value"] });
      } else {
        const compiled = pythonRegex(rule.value);
        if (!compiled.ok) ctx.addIssue({ code: "custom", message: compiled.problem, path: ["value"] });
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
      // A validly signed token without `exp` would be a credential that never expires.
      require_exp: flag().default(true),
    })
    .prefault({}),
});

export const RhIdentityConfigSchema = z.strictObject({
  required_entitlements: z.array(nonEmpty()).default([]),
  /** Applies to the header as sent (its base64 form). */
  max_header_size: int(1).default(8192),
});

export const TrustedProxyConfigSchema = z.strictObject({
  // The original system's spelling: causes and /v1/config show it as configured.
  user_header: nonEmpty().default("X-Forwarded-User"),
  // null, omitted or empty: every account with a valid token may assert identities.
  allowed_service_accounts: z
    .array(z.strictObject({ namespace: nonEmpty(), name: nonEmpty() }))
    .nullable()
    .optional(),
});

/** SPEC calls the JWK module `jwk`; the original system's configurations say `jwk-token`. */
const AuthModuleSchema = z.preprocess((module) => (module === "jwk" ? "jwk-token" : module), z.enum(AUTH_MODULES));

export const AuthenticationSchema = z
  .strictObject({
    module: AuthModuleSchema.default("noop"),
    // Loaded for configurations of the original system; a Worker's fetch always verifies
    // certificates against the public roots (see worker/auth/cluster-api.ts).
    skip_tls_verification: flag().default(false),
    skip_for_health_probes: flag().default(false),
    skip_for_metrics: flag().default(false),
    // https, or http on loopback (kubectl proxy): the callers' tokens travel to it.
    k8s_cluster_api: httpsUrl().optional(),
    k8s_ca_cert_path: nonEmpty().optional(),
    // The service's own credential for TokenReview and SubjectAccessReview calls (a Worker does
    // not run in the cluster, so there is no mounted service-account token to fall back on).
    k8s_service_account_token: secret().optional(),
    jwk_config: JwkConfigSchema.optional(),
    api_key_config: z.strictObject({ api_key: secret() }).optional(),
    rh_identity_config: RhIdentityConfigSchema.optional(),
    trusted_proxy_config: TrustedProxyConfigSchema.optional(),
  })
  .superRefine((auth, ctx) => {
    if (auth.module === "jwk-token" && auth.jwk_config === undefined) {
      ctx.addIssue({ code: "custom", message: "required when module is jwk-token", path: ["jwk_config"] });
    }
    if (auth.module === "api-key-token" && auth.api_key_config === undefined) {
      ctx.addIssue({ code: "custom", message: "required when module is api-key-token", path: ["api_key_config"] });
    }
    // The original requires these sections too ({} takes every default).
    if (auth.module === "rh-identity" && auth.rh_identity_config === undefined) {
      ctx.addIssue({ code: "custom", message: "required when module is rh-identity", path: ["rh_identity_config"] });
    }
    if (auth.module === "trusted-proxy" && auth.trusted_proxy_config === undefined) {
      ctx.addIssue({ code: "custom", message: "required when module is trusted-proxy", path: ["trusted_proxy_config"] });
    }
    if (CLUSTER_MODULES.has(auth.module)) {
      if (auth.k8s_cluster_api === undefined) {
        ctx.addIssue({
          code: "custom",
          message: `required when module is ${auth.module}: a Worker runs outside the cluster, so the API address must be given`,
          path: ["k8s_cluster_api"],
        });
      }
      if (auth.k8s_service_account_token === undefined) {
        ctx.addIssue({
          code: "custom",
          message: `required when module is ${auth.module}: the service's own token for TokenReview calls, as \${env.NAME}`,
          path: ["k8s_service_account_token"],
        });
      }
    }
  });

export type RhIdentityConfig = z.output<typeof RhIdentityConfigSchema>;
export type TrustedProxyConfig = z.output<typeof TrustedProxyConfigSchema>;

/** An action name in any letter case (SPEC writes MODEL_OVERRIDE, the original system model_override). */
const ActionSchema = z.string().transform((name, ctx) => {
  const action = actionNamed(name);
  if (action === null) {
    ctx.addIssue({ code: "custom", message: `unknown action "${name}"` });
    return z.NEVER;
  }
  return action;
});

export const AccessRuleSchema = z.strictObject({
  role: nonEmpty(),
  actions: z.array(ActionSchema),
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
  agent_card_config: AgentCardConfigSchema.optional(),
  custom_profile: z
    .strictObject({
      path: nonEmpty().optional(),
      prompts: z.record(nonEmpty(), z.string()).default({}),
    })
    .optional(),
});

/** authorization_headers values that name how a credential is obtained rather than where it is. */
export const MCP_CREDENTIAL_KEYWORDS = ["kubernetes", "client", "oauth"] as const;

/**
 * Why a policy's lists contradict each other (a tool in both always and never), or null. The one
 * rule for the configuration's servers and a request's own `mcp` tools.
 */
export function approvalListsConflict(lists: { always: readonly string[]; never: readonly string[] }): string | null {
  const both = lists.always.filter((tool) => lists.never.includes(tool));
  return both.length > 0 ? `Tools cannot be in both always and never lists: {${both.map((tool) => `'${tool}'`).join(", ")}}` : null;
}

const ApprovalPolicySchema = z.union([
  z.enum(["always", "never"]),
  z
    .strictObject({
      always: z.array(nonEmpty()).default([]),
      never: z.array(nonEmpty()).default([]),
    })
    .superRefine((policy, ctx) => {
      const conflict = approvalListsConflict(policy);
      if (conflict) ctx.addIssue({ code: "custom", message: conflict });
    }),
]);

export const McpServerSchema = z.strictObject({
  name: nonEmpty(),
  provider_id: nonEmpty().default("model-context-protocol"),
  url: httpUrl(),
  // Values are one of the words kubernetes, client, oauth, or where the credential is: a file shipped
  // with the deployment, or the credential itself through a `${env.NAME}` reference (a secret).
  // Values are read stripped of surrounding blanks, as the original reads them (" client " is the keyword).
  authorization_headers: z
    .record(nonEmpty(), z.preprocess((value) => (typeof value === "string" ? value.trim() : value), z.union([z.enum(MCP_CREDENTIAL_KEYWORDS), secret()])))
    .default({}),
  // Header names are case-insensitive; the original refuses one listed twice in any case.
  headers: z
    .array(nonEmpty())
    .default([])
    .superRefine(uniqueNames((header) => header, null, "header", true)),
  require_approval: ApprovalPolicySchema.default("never"),
  timeout: seconds().optional(),
});

/**
 * Extension: where MCP servers may be. Registered servers and client-provided `mcp` tools that name a
 * loopback, link-local, private or metadata address are refused unless their host is listed here.
 */
export const McpSecuritySchema = z.strictObject({
  /** Hostnames or literal IP addresses (e.g. 127.0.0.1, localhost, mcp.internal) allowed although internal. */
  allowed_internal_hosts: z.array(nonEmpty()).default([]),
});

export const McpServersSchema = z
  .array(McpServerSchema)
  .default([])
  .superRefine(uniqueNames((server) => server.name, "name", "MCP server name"));

/** Output is the period in seconds, whatever form the operator wrote (PostgreSQL interval input). */
const IntervalSchema = z.union([z.string(), z.number()]).transform((value, ctx) => {
  const seconds = intervalSeconds(value);
  if (seconds === null) {
    ctx.addIssue({ code: "custom", message: 'expected a PostgreSQL interval such as "1 day", "12 hours", "1 mon", "01:00:00", "P1D" or a number of seconds' });
    return z.NEVER;
  }
  const whole = wholePositive(seconds);
  if (whole === null) {
    const need = seconds <= 0 ? "must be longer than zero" : "must be a whole number of seconds";
    ctx.addIssue({ code: "custom", message: `${need} (it is ${seconds} seconds)` });
    return z.NEVER;
  }
  return whole;
});

/**
 * SPEC's names, or the original's newer ones: durations ("60 seconds", "7 days"), or the retention
 * in seconds. One form of each setting, not several. Output: SPEC's names (retention in days, a
 * fraction for a duration shorter than a day).
 */
export const ApprovalsSchema = z
  .strictObject({
    approval_timeout_seconds: int(1).optional(),
    approval_retention_days: int(0).optional(),
    approval_timeout: IntervalSchema.optional(),
    approval_retention: IntervalSchema.optional(),
    approval_retention_seconds: int(0).optional(),
  })
  .superRefine((approvals, ctx) => {
    for (const forms of [
      ["approval_timeout_seconds", "approval_timeout"],
      ["approval_retention_days", "approval_retention", "approval_retention_seconds"],
    ] as const) {
      const given = forms.filter((name) => approvals[name] !== undefined);
      if (given.length > 1) ctx.addIssue({ code: "custom", path: [given[1]!], message: `give one of ${given.join(", ")}, not several` });
    }
  })
  .transform((approvals) => {
    const retentionSeconds = approvals.approval_retention ?? approvals.approval_retention_seconds;
    return {
      approval_timeout_seconds: approvals.approval_timeout ?? approvals.approval_timeout_seconds ?? 300,
      approval_retention_days: retentionSeconds !== undefined ? retentionSeconds / 86_400 : (approvals.approval_retention_days ?? 30),
    };
  });

export const CompactionSchema = z.strictObject({
  enabled: flag().default(false),
  threshold_ratio: ratio().default(0.7),
  token_floor: int(0).default(4096),
  buffer_turns: int(0).default(4),
  buffer_max_ratio: ratio().default(0.3),
});

/**
 * The original system's own shields (its newer configurations; not moderation resources): a
 * question classifier and regex redaction, run by Parley (worker/turn/shields.ts), and Granite
 * Guardian, validated only (the original does not run it either).
 */
export const LCORE_SHIELD_KINDS = ["question_validity", "redaction", "granite_guardian"] as const;

/** A JavaScript regular expression (the original's are Python's: the common syntax is the same). */
const pattern = () =>
  z.string().superRefine((source, ctx) => {
    try {
      new RegExp(source);
    } catch (error) {
      ctx.addIssue({ code: "custom", message: `not a valid regular expression: ${error instanceof Error ? error.message : String(error)}` });
    }
  });

export const QuestionValidityShieldSchema = z.strictObject({
  name: nonEmpty(),
  provider_id: z.literal("question_validity"),
  config: z.strictObject({
    model_id: nonEmpty(),
    model_prompt: nonEmpty().optional(),
    invalid_question_response: nonEmpty().optional(),
  }),
});

export const RedactionShieldSchema = z.strictObject({
  name: nonEmpty(),
  provider_id: z.literal("redaction"),
  config: z
    .strictObject({
      rules: z.array(z.strictObject({ pattern: pattern(), replacement: z.string(), case_sensitive: flag().nullable().default(null) })).default([]),
      case_sensitive: flag().default(false),
    })
    .prefault({}),
});

const GraniteGuardianShieldSchema = z.strictObject({
  name: nonEmpty(),
  provider_id: z.literal("granite_guardian"),
  config: z.looseObject({ url: nonEmpty(), api_key: secret().optional(), risks: z.array(z.looseObject({ name: nonEmpty() })).min(1) }),
});

/** Parley's moderation shield: a check through a backend's moderation endpoint. */
export const ModerationShieldSchema = z.strictObject({
  name: nonEmpty(),
  model: nonEmpty().optional(),
  provider_id: nonEmpty()
    .refine((id) => !(LCORE_SHIELD_KINDS as readonly string[]).includes(id), { message: "names one of the original's shield types, which take a config" })
    .optional(),
  input: flag().default(true),
  output: flag().default(false),
  message: nonEmpty().optional(),
});

export const ShieldSchema = z.union([QuestionValidityShieldSchema, RedactionShieldSchema, GraniteGuardianShieldSchema, ModerationShieldSchema]);

/** Shields run in list order: moderation checks through the backend, and the original's own kinds. */
export const ShieldsSchema = z
  .array(ShieldSchema)
  .default([])
  .superRefine(uniqueNames((shield) => shield.name, "name", "shield name"));

// ---------------------------------------------------------------------------------------------
// Quotas
// ---------------------------------------------------------------------------------------------

export const QuotaLimiterSchema = z.strictObject({
  type: z.enum(["user_limiter", "cluster_limiter"]),
  name: nonEmpty(),
  initial_quota: int(0),
  // 0 (the default): each period refills to initial_quota.
  quota_increase: int(0).default(0),
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
    // Where the HEC token is held: a file shipped under config/, or the token itself as ${env.NAME}.
    token_path: secret().optional(),
    index: nonEmpty().optional(),
    source: nonEmpty().default("lightspeed-stack"),
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

export const DEFAULT_EMBEDDING_MODEL = "sentence-transformers/all-mpnet-base-v2";
export const DEFAULT_EMBEDDING_DIMENSION = 768;

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
  // search_mode: the original's newer releases choose how its Solr is queried (keyword, ...);
  // here the portal is a store searched through the backend (warned, config/inert.ts).
  okp: z.strictObject({ ...portalFields, max_chunks: int(1).default(5), search_mode: nonEmpty().optional() }).prefault({}),
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
  // Whose quota /v1/infer draws on: the user's, the identity header's organization or system; null
  // (the default, as in the original system): none.
  quota_subject: z.enum(["user_id", "org_id", "system_id"]).nullable().default(null),
});

export const AzureEntraIdSchema = z.strictObject({
  tenant_id: nonEmpty(),
  client_id: nonEmpty(),
  client_secret: secret(),
  scope: nonEmpty().default("https://cognitiveservices.azure.com/.default"),
});

export const SkillsSchema = z.strictObject({ paths: z.array(nonEmpty()).default([]) });

/** The original's newer releases delegate to remote A2A agents as tools; validated only (inert). */
export const A2AAgentsSchema = z.strictObject({
  agents: z
    .array(z.strictObject({ name: nonEmpty(), url: httpUrl(), auth_token: secret().optional(), timeout: seconds().optional(), max_retries: int(0).optional() }))
    .default([])
    .superRefine(uniqueNames((agent) => agent.name, "name", "agent name")),
});

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
    mcp_security: McpSecuritySchema.prefault({}),
    approvals: ApprovalsSchema.prefault({}),
    compaction: CompactionSchema.prefault({}),
    /** Validated only: conversations live in their Durable Objects, and every view serves them. */
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
    a2a_agents: A2AAgentsSchema.optional(),
    shields: ShieldsSchema,
  })
  .superRefine((config, ctx) => {
    const subject = config.rlsapi_v1.quota_subject;
    if ((subject === "org_id" || subject === "system_id") && config.authentication.module !== "rh-identity") {
      ctx.addIssue({ code: "custom", message: `quota_subject ${subject} needs authentication.module rh-identity (only its identity header carries it)`, path: ["rlsapi_v1", "quota_subject"] });
    }
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
export type McpSecurityConfig = z.output<typeof McpSecuritySchema>;
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
export type ModerationShieldConfig = z.output<typeof ModerationShieldSchema>;
export type QuestionValidityShieldConfig = z.output<typeof QuestionValidityShieldSchema>;
export type RedactionShieldConfig = z.output<typeof RedactionShieldSchema>;

/** Parley's moderation checks; the other kinds (the original's own, LCORE_SHIELD_KINDS) have a `config`. */
export function isModeration(shield: ShieldConfig): shield is ModerationShieldConfig {
  return !("config" in shield);
}

export function isRedaction(shield: ShieldConfig): shield is RedactionShieldConfig {
  return !isModeration(shield) && shield.provider_id === "redaction";
}
