import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { parseInterval } from "../../worker/config/interval.ts";
import { type ConfigProblem, type ParseConfigResult, parseConfig } from "../../worker/config/load.ts";
import { inertSettings } from "../../worker/config/inert.ts";
import { REDACTED, redactConfig } from "../../worker/config/redact.ts";
import { type Config, isUnifiedRag } from "../../worker/config/schema.ts";

const MINIMAL = "inference_backend:\n  url: http://127.0.0.1:8321/v1\n";

function accepted(result: ParseConfigResult): Config {
  if (!result.ok) throw new Error(`expected the document to parse:\n${lines(result.problems).join("\n")}`);
  return result.config;
}

const lines = (found: ConfigProblem[]) => found.map(({ path, message }) => `${path}: ${message}`);

function problemsOf(result: ParseConfigResult): string[] {
  if (result.ok) throw new Error("expected the document to be rejected");
  return lines(result.problems);
}

const problems = (text: string, env: Record<string, unknown> = {}) => problemsOf(parseConfig(text, env));

// Every section, the deprecated rag form. Secrets come in through the environment.
const FULL = `
name: Full Parley
deployment_environment: production
service:
  host: 127.0.0.1
  port: 9090
  base_url: https://parley.example.com
  auth_enabled: true
  workers: 4
  color_log: false
  access_log: true
  tls_config:
    tls_certificate_path: /certs/tls.crt
    tls_key_path: /certs/tls.key
    tls_key_password: /certs/key-password
  root_path: /parley
  cors:
    allow_origins: [https://app.example.com]
    allow_credentials: true
    allow_methods: [GET, POST]
    allow_headers: [Authorization]
inference_backend:
  url: https://backend.example.com/v1
  api_key: \${env.BACKEND_KEY}
  use_as_library_client: false
  library_client_config_path: /etc/backend.yaml
  timeout: 60
  max_retries: 3
  retry_delay: 2
  allow_degraded_mode: true
  config:
    baseline: empty
    profile: /etc/profile.yaml
    native_override: {telemetry: {enabled: false}}
inference:
  default_model: gpt-test
  default_provider: openai
  context_windows: {gpt-test: 128000}
  providers:
    - type: openai
      api_key_env: OPENAI_API_KEY
      allowed_models: [gpt-test]
      extra: {organization: acme, api_key: sk-extra}
authentication:
  module: jwk-token
  skip_tls_verification: false
  skip_for_health_probes: true
  skip_for_metrics: true
  k8s_cluster_api: https://k8s.example.com:6443
  k8s_ca_cert_path: /var/run/ca.crt
  jwk_config:
    url: https://keys.example.com/jwks.json
    jwt_configuration:
      user_id_claim: sub
      username_claim: preferred_username
      role_rules:
        - {jsonpath: "$.groups[*]", operator: contains, value: admins, roles: [admin]}
        - {jsonpath: "$.email", operator: match, value: "@example\\\\.com$", roles: [staff], negate: false}
        - {jsonpath: "$.tier", operator: in, value: [[gold], [silver]], roles: [paid]}
  api_key_config:
    api_key: \${env.GATEWAY_KEY}
  rh_identity_config:
    required_entitlements: [rhel]
    max_header_size: 4096
  trusted_proxy_config:
    user_header: x-remote-user
    allowed_service_accounts:
      - {namespace: proxies, name: oauth-proxy}
authorization:
  access_rules:
    - {role: admin, actions: [admin, MODEL_OVERRIDE]}
    - {role: "*", actions: [query]}
customization:
  profile_path: /etc/profile.py
  disable_query_system_prompt: true
  disable_shield_ids_override: true
  system_prompt_path: /etc/prompt.txt
  system_prompt: You are helpful.
  agent_card_path: /etc/card.yaml
  agent_card_config: {name: Parley, protocolVersion: 0.3.0}
  custom_profile:
    path: /etc/custom.py
    prompts: {default: Be brief.}
mcp_servers:
  - name: files
    url: http://127.0.0.1:9000/mcp
    authorization_headers: {Authorization: /var/secrets/mcp-token}
    headers: [X-Request-Id]
    require_approval: always
    timeout: 30
  - name: tickets
    provider_id: custom
    url: https://tickets.example.com/mcp
    authorization_headers: {Authorization: client}
    require_approval: {always: [delete_ticket], never: [list_tickets]}
approvals:
  approval_timeout_seconds: 300
  approval_retention_days: 7
compaction:
  enabled: true
  threshold_ratio: 0.7
  token_floor: 2048
  buffer_turns: 3
  buffer_max_ratio: 0.4
conversation_cache:
  type: sqlite
  sqlite: {db_path: /tmp/cache.db}
database:
  postgres:
    host: db.example.com
    port: \${env.PG_PORT}
    db: parley
    user: parley
    password: \${env.PG_PASSWORD}
    namespace: gateway
    ssl_mode: require
    gss_encmode: disable
    ca_cert_path: /certs/pg.crt
    ws_proxy: ws://127.0.0.1:5433
a2a_state:
  sqlite: {db_path: /tmp/a2a.db}
quota_handlers:
  postgres: {db: quota, user: quota, password: quota-password}
  limiters:
    - {type: user_limiter, name: user_daily, initial_quota: 1000, quota_increase: 0, period: 1 day}
    - {type: cluster_limiter, name: cluster_monthly, initial_quota: 100000, quota_increase: 100, period: 1 month}
  scheduler: {period: 5, database_reconnection_count: 3, database_reconnection_delay: 2}
  enable_token_history: true
user_data_collection:
  feedback_enabled: true
  feedback_storage: feedback
  transcripts_enabled: true
  transcripts_storage: transcripts
  data_collector:
    enabled: true
    ingress_server_url: https://ingress.example.com/upload
    ingress_server_auth_token: \${env.INGRESS_TOKEN}
    ingress_content_service_name: parley
    collection_interval: 600
    cleanup_after_send: false
    connection_timeout_seconds: 10
byok_rag:
  - rag_id: docs
    embedding_model: sentence-transformers/all-mpnet-base-v2
    embedding_dimension: 768
    vector_db_id: vs_docs
    db_path: /data/docs.faiss
    score_multiplier: 1.2
  - rag_id: kb
    rag_type: remote::pgvector
    vector_db_id: vs_kb
    host: pg.example.com
    port: 5432
    db: vectors
    user: rag
    password: rag-password
rag:
  inline: [docs, okp]
  tool: [kb]
portal:
  portal_url: https://portal.example.com
  offline: false
  chunk_filter_query: "product:*openshift*"
reranker:
  enabled: true
  model: cross-encoder/ms-marco-MiniLM-L6-v2
rlsapi_v1:
  allow_verbose_infer: true
  quota_subject: user_id
splunk:
  enabled: true
  url: https://splunk.example.com:8088
  token_path: /var/secrets/splunk
  index: parley
  source: parley-test
  timeout: 3
  verify_ssl: false
azure_entra_id:
  tenant_id: tenant
  client_id: client
  client_secret: \${env.ENTRA_SECRET}
  scope: api://parley/.default
skills:
  paths: [/skills]
shields:
  - {name: llama-guard, model: llama-guard-3, provider_id: moderation, output: true, message: Sorry.}
  - {name: input-only}
`;

const FULL_ENV = {
  BACKEND_KEY: "sk-backend-secret",
  GATEWAY_KEY: "gateway-secret",
  PG_PORT: "6543",
  PG_PASSWORD: "pg-secret",
  INGRESS_TOKEN: "ingress-secret",
  ENTRA_SECRET: "entra-secret",
};

const UNIFIED_RAG = `
inference_backend: {url: "http://127.0.0.1:8321/v1"}
rag:
  byok:
    max_chunks: 8
    stores:
      - {rag_id: docs, backend: faiss, vector_db_id: vs_docs, db_path: /data/docs.faiss, score_multiplier: 2}
      - {rag_id: kb, backend: pgvector, vector_db_id: vs_kb, password: "\${env.KB_PASSWORD}"}
  retrieval:
    inline:
      sources: [docs, okp]
      max_chunks: 6
      reranker: {enabled: true, model: cross-encoder/test}
    tool:
      sources: [kb]
  okp:
    portal_url: https://portal.example.com
    offline: true
    chunk_filter_query: "product:*rhel*"
    max_chunks: 4
`;

describe("parseConfig", () => {
  it("accepts the bundled config/parley.yaml and fills defaults", () => {
    const text = readFileSync(new URL("../../config/parley.yaml", import.meta.url).pathname, "utf8");
    const config = accepted(parseConfig(text, { PARLEY_BACKEND_URL: "http://127.0.0.1:8321/v1" }));
    expect(config.inference_backend.url).toBe("http://127.0.0.1:8321/v1");
    expect(config.inference_backend).toMatchObject({ timeout: 180, max_retries: 5, retry_delay: 2 });
    expect(config.service).toMatchObject({ host: "0.0.0.0", port: 8080, workers: 1, root_path: "" });
    expect(config.service.cors.allow_origins).toEqual(["*"]);
    expect(config.authentication.module).toBe("noop");
    expect(config.authorization).toBeUndefined();
    expect(config.mcp_servers).toEqual([]);
    expect(config.shields).toEqual([]);
    expect(config.database).toEqual({});
    expect(config.quota_handlers).toMatchObject({ limiters: [], enable_token_history: false });
    expect(config.quota_handlers.scheduler).toEqual({
      period: 1,
      database_reconnection_count: 10,
      database_reconnection_delay: 1,
    });
    expect(config.user_data_collection.data_collector).toMatchObject({
      enabled: false,
      collection_interval: 7200,
      connection_timeout_seconds: 30,
    });
    expect(config.compaction).toEqual({
      enabled: false,
      threshold_ratio: 0.7,
      token_floor: 4096,
      buffer_turns: 4,
      buffer_max_ratio: 0.3,
    });
    expect(config.approvals).toEqual({ approval_timeout_seconds: 300, approval_retention_days: 30 });
    expect(config.deployment_environment).toBe("development");
  });

  it("accepts a document using every section, with the deprecated rag form", () => {
    const config = accepted(parseConfig(FULL, FULL_ENV));
    expect(config.name).toBe("Full Parley");
    expect(config.inference_backend.api_key).toBe("sk-backend-secret");
    expect(config.database.postgres).toMatchObject({ port: 6543, password: "pg-secret", ws_proxy: "ws://127.0.0.1:5433" });
    expect(config.quota_handlers.limiters.map((limiter) => limiter.period)).toEqual([86_400, 2_592_000]);
    expect(config.quota_handlers.postgres).toMatchObject({ host: "localhost", port: 5432, namespace: "public" });
    expect(config.authentication.jwk_config?.jwt_configuration.role_rules[1]).toMatchObject({
      operator: "match",
      value: "@example\\.com$",
      negate: false,
    });
    expect(config.mcp_servers[0]).toMatchObject({ provider_id: "model-context-protocol", headers: ["X-Request-Id"] });
    expect(config.mcp_servers[1].require_approval).toEqual({ always: ["delete_ticket"], never: ["list_tickets"] });
    expect(config.byok_rag[1]).toMatchObject({ rag_type: "remote::pgvector", embedding_dimension: 768, score_multiplier: 1 });
    expect(config.rag).toEqual({ inline: ["docs", "okp"], tool: ["kb"] });
    expect(config.portal).toMatchObject({ offline: false, vector_db_id: "portal-rag" });
    expect(config.shields[1]).toEqual({ name: "input-only", input: true, output: false });
    expect(config.azure_entra_id?.client_secret).toBe("entra-secret");
  });

  it("accepts the unified 0.7.0 rag form and fills its defaults", () => {
    const config = accepted(parseConfig(UNIFIED_RAG, { KB_PASSWORD: "kb-secret" }));
    const rag = config.rag;
    if (rag === undefined || !isUnifiedRag(rag)) throw new Error("expected the unified rag form");
    expect(rag.byok.stores[1]).toMatchObject({ backend: "pgvector", password: "kb-secret", score_multiplier: 1 });
    expect(rag.retrieval.inline).toEqual({
      sources: ["docs", "okp"],
      max_chunks: 6,
      reranker: { enabled: true, model: "cross-encoder/test" },
    });
    expect(rag.retrieval.tool).toEqual({ sources: ["kb"], max_chunks: 10 });
    expect(rag.okp).toMatchObject({ offline: true, max_chunks: 4, vector_db_id: "portal-rag" });
  });

  it("rejects mixing the unified rag form with the deprecated sections", () => {
    const text = `${UNIFIED_RAG}\nreranker: {enabled: true}\n`;
    expect(problems(text, { KB_PASSWORD: "x" })).toEqual([
      "reranker: deprecated section; cannot be combined with the unified rag section",
    ]);
  });

  it("reports rag mistakes against the form being written", () => {
    expect(problems(`${MINIMAL}rag: {inline: okp}\n`)).toEqual([
      "rag.inline: Invalid input: expected array, received string",
    ]);
    expect(problems(`${MINIMAL}rag: {inline: [okp], retrieval: {inline: {sources: okp}}}\n`)).toEqual([
      "rag.retrieval.inline.sources: Invalid input: expected array, received string",
      "rag.inline: unknown key",
    ]);
  });

  it("rejects rag ids that name no configured store", () => {
    const text = `${MINIMAL}rag: {inline: [okp, missing]}\n`;
    expect(problems(text)).toEqual([
      'rag.inline.1: unknown rag id "missing" (expected a configured rag_id or "okp")',
    ]);
  });

  it("names unknown keys by path, at the top level and nested", () => {
    const text = `${MINIMAL}colour: blue\nservice:\n  prot: 8080\nmcp_servers:\n  - {name: a, url: "http://127.0.0.1:1", extra: 1}\n`;
    expect(problems(text).sort()).toEqual([
      "colour: unknown key",
      "mcp_servers.0.extra: unknown key",
      "service.prot: unknown key",
    ]);
  });

  it("reports wrong types and missing fields by path", () => {
    const text = "service:\n  port: eighty\n  auth_enabled: yes-please\nauthentication:\n  module: magic\n";
    const found = problems(text);
    expect(found).toContain("inference_backend: required");
    expect(found.some((line) => line.startsWith("service.port: ") && line.includes("expected number"))).toBe(true);
    expect(found.some((line) => line.startsWith("service.auth_enabled: ") && line.includes("expected a boolean"))).toBe(true);
    expect(found.some((line) => line.startsWith("authentication.module: "))).toBe(true);
    expect(found).toHaveLength(4);
  });

  it("reports out-of-range numbers", () => {
    const text = `${MINIMAL}service: {port: 70000}\ncompaction: {threshold_ratio: 1.5}\n`;
    const found = problems(text);
    expect(found.map((line) => line.split(":")[0])).toEqual(["service.port", "compaction.threshold_ratio"]);
  });

  it("requires https for the key server unless it is on this machine", () => {
    const jwk = (url: string) =>
      `${MINIMAL}authentication:\n  module: jwk-token\n  jwk_config:\n    url: ${JSON.stringify(url)}\n`;
    expect(problems(jwk("http://keys.example.com/jwks"))).toEqual([
      "authentication.jwk_config.url: expected an https URL",
    ]);
    expect(problems(jwk("not a url"))).toEqual(["authentication.jwk_config.url: expected an https URL"]);
    for (const url of ["https://keys.example.com/jwks", "http://127.0.0.1:9999/jwks", "http://localhost/jwks", "http://[::1]:80/jwks"]) {
      expect(parseConfig(jwk(url), {}).ok, url).toBe(true);
    }
  });

  it("checks fields that depend on each other", () => {
    expect(problems(`${MINIMAL}authentication: {module: jwk-token}\n`)).toEqual([
      "authentication.jwk_config: required when module is jwk-token",
    ]);
    expect(problems(`${MINIMAL}authentication: {module: api-key-token}\n`)).toEqual([
      "authentication.api_key_config: required when module is api-key-token",
    ]);
    expect(problems(`${MINIMAL}inference: {default_model: m}\n`)).toEqual([
      "inference.default_provider: required when default_model is set",
    ]);
    expect(problems(`${MINIMAL}database: {sqlite: {db_path: a}, postgres: {db: d, user: u}}\n`)).toEqual([
      "database.postgres: configure sqlite or postgres, not both",
    ]);
    expect(problems(`${MINIMAL}byok_rag: [{rag_id: a, vector_db_id: v}]\n`)).toEqual([
      "byok_rag.0.db_path: required for a faiss store",
    ]);
  });

  it("accepts the original system's action names in any case, and rejects unknown ones by key", () => {
    const rules = (actions: string) => `${MINIMAL}authorization:\n  access_rules:\n    - {role: "*", actions: [${actions}]}\n`;
    expect(accepted(parseConfig(rules("query, MODEL_OVERRIDE, A2A_JSONRPC, rlsapi_v1_infer, streaming_query, admin"), {})).authorization?.access_rules[0].actions).toEqual([
      "query",
      "model_override",
      "a2a_jsonrpc",
      "rlsapi_v1_infer",
      "streaming_query",
      "admin",
    ]);
    expect(problems(rules("query, get_root"))).toEqual(['authorization.access_rules.0.actions.1: unknown action "get_root"']);
  });

  it("takes SPEC's module name jwk for the JWK module and rejects unknown modules", () => {
    const jwk = `${MINIMAL}authentication:\n  module: jwk\n  jwk_config:\n    url: https://k.example.com\n`;
    expect(accepted(parseConfig(jwk, {})).authentication.module).toBe("jwk-token");
    expect(problems(`${MINIMAL}authentication:\n  module: kerberos\n`)).toEqual([expect.stringMatching(/^authentication\.module: /)]);
  });

  it("checks role rules", () => {
    const rules = (rule: string) =>
      `${MINIMAL}authentication:\n  module: jwk-token\n  jwk_config:\n    url: https://k.example.com\n    jwt_configuration:\n      role_rules: [${rule}]\n`;
    expect(problems(rules('{jsonpath: "$.a", operator: equals, value: [1], roles: ["*"]}'))).toEqual([
      'authentication.jwk_config.jwt_configuration.role_rules.0.roles.0: "*" cannot be granted by a rule',
    ]);
    expect(problems(rules('{jsonpath: "", operator: equals, value: [1], roles: []}'))).toEqual([
      "authentication.jwk_config.jwt_configuration.role_rules.0.jsonpath: must not be empty",
      "authentication.jwk_config.jwt_configuration.role_rules.0.roles: must list at least one role",
    ]);
    expect(problems(rules('{jsonpath: "$.a", operator: match, value: "(", roles: [r]}'))).toEqual([
      expect.stringMatching(/^authentication\.jwk_config\.jwt_configuration\.role_rules\.0\.value: invalid regular expression: /),
    ]);
    expect(problems(rules('{jsonpath: "$.a", operator: match, value: "(?>a)", roles: [r]}'))).toEqual([
      "authentication.jwk_config.jwt_configuration.role_rules.0.value: a Python regular expression JavaScript cannot run: atomic groups (?>…) have no JavaScript form",
    ]);
    // The original's forms: Python patterns, a path without "$", equals with a scalar (never holds).
    const original = rules(
      '{jsonpath: "email", operator: match, value: "(?i)^.+@redhat\\\\.com$", roles: [r]}, ' +
        '{jsonpath: "realm_access.roles[*]", operator: match, value: "(?P<user>adm.*)", roles: [r]}, ' +
        "{jsonpath: $.org_id, operator: equals, value: acme, roles: [r]}",
    );
    expect(accepted(parseConfig(original, {})).authentication.jwk_config?.jwt_configuration.role_rules).toHaveLength(3);
  });

  it("refuses what the original refuses: a role twice in a rule, an MCP header twice in any case, rh-identity and trusted-proxy without their sections", () => {
    const rules = `${MINIMAL}authentication:\n  module: jwk-token\n  jwk_config:\n    url: https://k.example.com\n    jwt_configuration:\n      role_rules: [{jsonpath: $.a, operator: contains, value: x, roles: [admin, reader, admin]}]\n`;
    expect(problems(rules)).toEqual(['authentication.jwk_config.jwt_configuration.role_rules.0.roles.2: duplicate role "admin"']);
    const headers = `${MINIMAL}mcp_servers:\n  - {name: tools, url: "http://127.0.0.1:1", headers: [X-Foo, X-Bar, x-foo]}\n`;
    expect(problems(headers)).toEqual(['mcp_servers.0.headers.2: duplicate header "x-foo" (header names are compared ignoring case; "X-Foo" is listed)']);
    expect(problems(`${MINIMAL}authentication:\n  module: rh-identity\n`)).toEqual(["authentication.rh_identity_config: required when module is rh-identity"]);
    expect(accepted(parseConfig(`${MINIMAL}authentication:\n  module: rh-identity\n  rh_identity_config: {}\n`, {})).authentication.rh_identity_config).toEqual({
      required_entitlements: [],
      max_header_size: 8192,
    });
    const proxy = `${MINIMAL}authentication:\n  module: trusted-proxy\n  k8s_cluster_api: https://api.example.com:6443\n  k8s_service_account_token: t0ken-value\n`;
    expect(problems(proxy)).toEqual(["authentication.trusted_proxy_config: required when module is trusted-proxy"]);
    expect(accepted(parseConfig(`${proxy}  trusted_proxy_config: {}\n`, {})).authentication.trusted_proxy_config).toEqual({ user_header: "X-Forwarded-User" });
  });

  it("requires unique limiter, MCP server and shield names", () => {
    const text = `${MINIMAL}quota_handlers:
  limiters:
    - {type: user_limiter, name: daily, initial_quota: 10, quota_increase: 0, period: 1 day}
    - {type: cluster_limiter, name: daily, initial_quota: 10, quota_increase: 0, period: 1 day}
mcp_servers:
  - {name: tools, url: "http://127.0.0.1:1"}
  - {name: tools, url: "http://127.0.0.1:2"}
shields:
  - {name: guard}
  - {name: guard}
`;
    expect(problems(text)).toEqual([
      'mcp_servers.1.name: duplicate MCP server name "tools"',
      'quota_handlers.limiters.1.name: duplicate limiter name "daily"',
      'shields.1.name: duplicate shield name "guard"',
    ]);
  });

  it("explains a require_approval value that fits neither form", () => {
    const text = `${MINIMAL}mcp_servers: [{name: a, url: "http://127.0.0.1:1", require_approval: sometimes}]\n`;
    const found = problems(text);
    expect(found).toHaveLength(1);
    expect(found[0]).toMatch(/^mcp_servers\.0\.require_approval: .*"always"/);
    const overlap = `${MINIMAL}mcp_servers: [{name: a, url: "http://127.0.0.1:1", require_approval: {always: [x, y], never: [y]}}]\n`;
    expect(problems(overlap)).toEqual(["mcp_servers.0.require_approval: Tools cannot be in both always and never lists: {'y'}"]);
  });

  it("turns a quota period into seconds and rejects one it cannot read", () => {
    const limiter = (period: string) =>
      `${MINIMAL}quota_handlers:\n  limiters:\n    - {type: user_limiter, name: u, initial_quota: 1, quota_increase: 0, period: ${period}}\n`;
    expect(accepted(parseConfig(limiter("12 hours"), {})).quota_handlers.limiters[0].period).toBe(43_200);
    expect(accepted(parseConfig(limiter("90"), {})).quota_handlers.limiters[0].period).toBe(90);
    expect(accepted(parseConfig(limiter('"90"'), {})).quota_handlers.limiters[0].period).toBe(90);
    // quota_increase defaults to 0 (refill to initial_quota each period).
    const refill = `${MINIMAL}quota_handlers:\n  limiters:\n    - {type: user_limiter, name: u, initial_quota: 50, period: 1 day}\n`;
    expect(accepted(parseConfig(refill, {})).quota_handlers.limiters[0].quota_increase).toBe(0);
    expect(problems(limiter("fortnightly"))).toEqual([
      'quota_handlers.limiters.0.period: expected a PostgreSQL interval such as "1 day", "12 hours", "1 mon", "01:00:00", "P1D" or a number of seconds',
    ]);
    // The original's PostgreSQL intervals.
    for (const [period, seconds] of [["1 year", 31_557_600], ["2 mons", 5_184_000], ['"01:00:00"', 3_600], ['"@ 1 hour"', 3_600], ["P1D", 86_400]] as const) {
      expect(accepted(parseConfig(limiter(period), {})).quota_handlers.limiters[0].period).toBe(seconds);
    }
    expect(problems(limiter('"@ 1 hour ago"'))).toEqual(["quota_handlers.limiters.0.period: must be longer than zero (it is -3600 seconds)"]);
    expect(problems(limiter('"00:00:00"'))).toEqual(["quota_handlers.limiters.0.period: must be longer than zero (it is 0 seconds)"]);
    expect(problems(limiter('"1.5"'))).toEqual(["quota_handlers.limiters.0.period: must be a whole number of seconds (it is 1.5 seconds)"]);
  });
});

describe("customization.agent_card_config", () => {
  it("is checked against the A2A card's shape at load, naming each key", () => {
    expect(problems(`${MINIMAL}customization:\n  agent_card_config: {name: 12, skills: notalist, bogus_field: 1}\n`)).toEqual([
      "customization.agent_card_config.name: Invalid input: expected string, received number",
      "customization.agent_card_config.skills: Invalid input: expected array, received string",
      "customization.agent_card_config.bogus_field: unknown key",
    ]);
  });

  it("loads a valid card with the card's defaults", () => {
    const config = accepted(parseConfig(`${MINIMAL}customization:\n  agent_card_config: {name: Agent, skills: [{id: a, name: A, description: Answers}]}\n`, {}));
    expect(config.customization.agent_card_config).toMatchObject({ name: "Agent", protocolVersion: "0.3.0", skills: [{ id: "a", tags: [] }] });
  });
});

describe("environment references", () => {
  it("resolves ${env.NAME} anywhere inside a string", () => {
    const text = "inference_backend:\n  url: http://${env.HOST}:8321/v1\n  api_key: ${env.KEY}\n";
    const config = accepted(parseConfig(text, { HOST: "127.0.0.1", KEY: "sk-1" }));
    expect(config.inference_backend.url).toBe("http://127.0.0.1:8321/v1");
    expect(config.inference_backend.api_key).toBe("sk-1");
  });

  it("reads numbers and switches from variables, which are always text", () => {
    const text = `${MINIMAL}service: {port: "\${env.PORT}", auth_enabled: "\${env.AUTH}"}\n`;
    const config = accepted(parseConfig(text, { PORT: "9000", AUTH: "true" }));
    expect(config.service).toMatchObject({ port: 9000, auth_enabled: true });
  });

  it("reads := and :+ as the original (Llama Stack) does: the fallback for a variable unset or empty, :+ only for one set", () => {
    const text = "inference_backend:\n  url: ${env.URL:=http://127.0.0.1:1/v1}\n";
    expect(accepted(parseConfig(text, {})).inference_backend.url).toBe("http://127.0.0.1:1/v1");
    expect(accepted(parseConfig(text, { URL: "" })).inference_backend.url).toBe("http://127.0.0.1:1/v1");
    expect(accepted(parseConfig(text, { URL: "https://b.example.com" })).inference_backend.url).toBe("https://b.example.com");
    // An empty fallback leaves an optional setting out (the original's None), and names no variable as set.
    const optional = `${MINIMAL}  api_key: \${env.UNSET_KEY:=}\ncustomization: {system_prompt: "prefix\${env.EXTRA:+ and more} suffix"}\n`;
    const unset = accepted(parseConfig(optional, {}));
    expect(unset.inference_backend.api_key).toBeUndefined();
    expect(unset.customization.system_prompt).toBe("prefix suffix");
    expect(accepted(parseConfig(optional, { EXTRA: "yes" })).customization.system_prompt).toBe("prefix and more suffix");
    expect(problems("inference_backend:\n  url: ${env.URL:=}\n", {})).toEqual(["inference_backend.url: required: the URL of an OpenAI-compatible backend (a Worker cannot run the backend as a library, use_as_library_client)"]);
  });

  it("says what to give instead of the original system's library mode, which has no url", () => {
    const text = "inference_backend:\n  use_as_library_client: true\n  library_client_config_path: run.yaml\n";
    expect(problems(text)).toEqual([
      "inference_backend.url: required: the URL of an OpenAI-compatible backend (a Worker cannot run the backend as a library, use_as_library_client)",
    ]);
  });

  it("says a variable is empty when the value it gave fails for being empty", () => {
    const text = [
      "inference_backend:",
      "  url: ${env.URL}",
      "  api_key: ${env.KEY}",
      "mcp_servers:",
      "  - name: tickets",
      "    url: https://mcp.example.com/mcp",
      "    authorization_headers: {Authorization: '${env.MCP_TOKEN}'}",
      "",
    ].join("\n");
    expect(problems(text, { URL: "", KEY: "", MCP_TOKEN: "" })).toEqual([
      "inference_backend.url: environment variable URL is set but empty",
      "inference_backend.api_key: environment variable KEY is set but empty",
      "mcp_servers.0.authorization_headers.Authorization: environment variable MCP_TOKEN is set but empty",
    ]);
    // The original system's section name reports the same.
    expect(problems(text.replace("inference_backend:", "llama_stack:"), { URL: "", KEY: "k", MCP_TOKEN: "t" })).toEqual([
      "inference_backend.url: environment variable URL is set but empty",
    ]);
  });

  it("reports a missing variable once, at the field that names it", () => {
    const text = "inference_backend:\n  url: ${env.PARLEY_BACKEND_URL}\n  api_key: ${env.KEY}\n";
    expect(problems(text, { KEY: { not: "a string" } })).toEqual([
      "inference_backend.url: environment variable PARLEY_BACKEND_URL is not set",
      "inference_backend.api_key: environment variable KEY is not a string",
    ]);
  });
});

describe("document formats", () => {
  it("reads JSON", () => {
    const text = JSON.stringify({ inference_backend: { url: "http://127.0.0.1:8321/v1" }, service: { port: 9000 } });
    expect(accepted(parseConfig(text, {})).service.port).toBe(9000);
  });

  it("reports broken JSON and YAML as one document problem", () => {
    expect(problems('{"inference_backend": ')).toEqual(["document: not valid JSON at line 1, column 23"]);
    expect(problems("a: [1\n")).toEqual([
      "document: Flow sequence in block collection must be sufficiently indented and end with a ] at line 2, column 1",
    ]);
    expect(problems("service: {port: 1}\nservice: {port: 2}\n")).toEqual([
      "document: Map keys must be unique at line 2, column 1",
    ]);
  });

  it("reads YAML as the original system's PyYAML does (YAML 1.1): yes/no/on/off are switches, y and n are text", () => {
    const text = [
      "user_data_collection: {feedback_enabled: yes, feedback_storage: /data/feedback, transcripts_enabled: no}",
      "service: {auth_enabled: On, color_log: OFF}",
      "inference_backend:",
      "  url: http://127.0.0.1:8321/v1",
      "  config: {native_override: {n: 2, y: x, stop: [n]}}",
      "",
    ].join("\n");
    const config = accepted(parseConfig(text, {}));
    expect(config.user_data_collection).toMatchObject({ feedback_enabled: true, transcripts_enabled: false });
    expect(config.service).toMatchObject({ auth_enabled: true, color_log: false });
    expect(config.inference_backend.config.native_override).toEqual({ n: 2, y: "x", stop: ["n"] });
  });

  it("takes for a switch what the original's pydantic takes: its words in any case, from ${env} too, and 1/0", () => {
    const text = [
      "user_data_collection: {feedback_enabled: \"Yes\", feedback_storage: /data/feedback, transcripts_enabled: \"${env.TRANSCRIPTS}\", transcripts_storage: /data/t}",
      "service: {auth_enabled: 1, color_log: \"off\"}",
      "inference_backend: {url: http://127.0.0.1:8321/v1}",
      "",
    ].join("\n");
    const config = accepted(parseConfig(text, { TRANSCRIPTS: "on" }));
    expect(config.user_data_collection).toMatchObject({ feedback_enabled: true, transcripts_enabled: true });
    expect(config.service).toMatchObject({ auth_enabled: true, color_log: false });
    expect(problems(`${MINIMAL}service: {color_log: maybe}\n`)).toEqual(["service.color_log: expected a boolean (true/false, yes/no, on/off, 1/0)"]);
    expect(problems(`${MINIMAL}service: {color_log: 2}\n`)).toHaveLength(1);
  });

  it("says where JSON is broken without quoting it (the text there may be a secret), and reads what YAML reads, as the original does", () => {
    const text = '{\n  "inference_backend": {\n    "url": "http://127.0.0.1:8321/v1",\n    "api_key": "sk-topsecret-0042" "more"\n  }\n}';
    expect(problems(text)).toEqual(["document: not valid JSON at line 4, column 36"]);
    // Not JSON, but YAML's flow style, which the original's PyYAML reads.
    const yaml = '{\n  "inference_backend": {\n    "url": "http://127.0.0.1:8321/v1",\n    "api_key": sk-topsecret-0042,\n  }\n}';
    expect(accepted(parseConfig(yaml, {})).inference_backend.api_key).toBe("sk-topsecret-0042");
  });

  it("reads what the original reads: empty sections, its okp section and rhokp_url, an empty conversation_cache", () => {
    const text = [
      MINIMAL.trimEnd(),
      "customization:",
      "authorization:",
      "splunk: null",
      "azure_entra_id: ~",
      "conversation_cache: {}",
      "rag: {inline: [okp]}",
      "okp:",
      "  rhokp_url: https://okp.example.com",
      "  offline: true",
      "",
    ].join("\n");
    const config = accepted(parseConfig(text, {}));
    expect(config.portal).toMatchObject({ portal_url: "https://okp.example.com", offline: true });
    expect(config.customization.disable_query_system_prompt).toBe(false);
    const unified = accepted(parseConfig(`${MINIMAL}rag: {okp: {rhokp_url: "https://okp.example.com"}}\n`, {}));
    expect(isUnifiedRag(unified.rag!) && unified.rag.okp.portal_url).toBe("https://okp.example.com");
    // As the original: a cache type with no settings for it, or settings without a type, are refused.
    expect(problems(`${MINIMAL}conversation_cache: {type: memory}\n`)).toEqual(["conversation_cache.memory: required when type is memory"]);
    expect(problems(`${MINIMAL}conversation_cache: {memory: {max_entries: 5}}\n`)).toEqual(["conversation_cache.memory: type: required when a cache backend is configured"]);
  });

  it("reads a null setting at any depth as left out, as the original's Optional fields read None", () => {
    // As the original's older example configurations and a pydantic dump of its model write them.
    const text = [
      "inference_backend:",
      "  url: http://127.0.0.1:8321/v1",
      "  api_key: null",
      "  config: {baseline: byo-llm, profile: null}",
      "user_data_collection:",
      "  feedback_enabled: false",
      "  data_collector:",
      "    enabled: false",
      "    ingress_server_url: null",
      "    ingress_server_auth_token:",
      "    ingress_content_service_name: ~",
      "mcp_servers:",
      "  - {name: tools, url: http://127.0.0.1:9000/mcp, authorization_headers: null, timeout: null}",
      "",
    ].join("\n");
    const config = accepted(parseConfig(text, {}));
    expect(config.inference_backend.api_key).toBeUndefined();
    expect(config.user_data_collection.data_collector.ingress_server_url).toBeUndefined();
    expect(config.mcp_servers[0]).toMatchObject({ name: "tools" });
    // A setting that may not be left out is reported missing, not as a null of the wrong type.
    expect(problems("inference_backend: {url: null}\n")).toEqual([expect.stringMatching(/^inference_backend\.url: required/)]);
  });

  it("loads the original's newer settings it does not act on, with their values checked, and names them", () => {
    const text = [
      MINIMAL.trimEnd(),
      "  tls_security_profile: {type: ModernType, minTLSVersion: VersionTLS13, ciphers: [TLS_AES_128_GCM_SHA256]}",
      "a2a_agents:",
      "  agents:",
      "    - {name: openshift-agent, url: http://openshift-ls:8082, timeout: 30, max_retries: 3}",
      "    - {name: ansible-agent, url: http://ansible-ls:8081, auth_token: agent-token-0042}",
      "",
    ].join("\n");
    const result = parseConfig(text, {});
    const config = accepted(result);
    expect(inertSettings(config)).toEqual(["a2a_agents", "inference_backend.tls_security_profile"]);
    expect(result.secrets).toContain("agent-token-0042");
    expect(problems(`${MINIMAL}a2a_agents: {agents: [{name: a, url: not-a-url}, {name: a, url: http://x, token: t}]}\n`)).toEqual([
      "a2a_agents.agents.0.url: expected an http or https URL",
      "a2a_agents.agents.1.token: unknown key",
      'a2a_agents.agents.1.name: duplicate agent name "a"',
    ]);
  });

  it("reads the original's newer forms: the ogx section, agent card security_schemes, approvals as durations, a provider's id", () => {
    const text = [
      "ogx:",
      "  url: http://127.0.0.1:8321",
      "customization:",
      "  agent_card_config:",
      "    security_schemes: {bearer: {type: http, scheme: bearer}}",
      "approvals:",
      "  approval_timeout: 5 second",
      "  approval_retention: 7 days",
      "",
    ].join("\n");
    const config = accepted(parseConfig(text, {}));
    expect(config.inference_backend.url).toBe("http://127.0.0.1:8321");
    expect(config.customization.agent_card_config?.securitySchemes).toEqual({ bearer: { type: "http", scheme: "bearer" } });
    expect(config.approvals).toEqual({ approval_timeout_seconds: 5, approval_retention_days: 7 });
    expect(accepted(parseConfig(`${MINIMAL}approvals: {approval_retention: 10 seconds}\n`, {})).approvals.approval_retention_days).toBe(10 / 86_400);
    expect(accepted(parseConfig(`${MINIMAL}approvals: {approval_retention_seconds: 30}\n`, {})).approvals.approval_retention_days).toBe(30 / 86_400);
    expect(problems(`${MINIMAL}approvals: {approval_timeout: 60 seconds, approval_timeout_seconds: 60}\n`)).toEqual([
      "approvals.approval_timeout: give one of approval_timeout_seconds, approval_timeout, not several",
    ]);
    // The backend's own settings are the backend's to resolve: a variable only it has is no load error.
    const backendOwn = accepted(parseConfig(`${MINIMAL}  config: {native_override: {api_key: "\${env.OPENAI_API_KEY}"}}\n`, {}));
    expect(backendOwn.inference_backend.config.native_override).toEqual({ api_key: "${env.OPENAI_API_KEY}" });
    // A former name beside SPEC's is not taken, and is named for what it is.
    expect(problems(`${MINIMAL}llama_stack:\n  url: http://127.0.0.1:8321\n`)).toEqual(["llama_stack: names the same setting as inference_backend: keep one of the two"]);
    expect(problems(`${MINIMAL}portal: {rhokp_url: "https://a.example.com", portal_url: "https://b.example.com"}\n`)).toEqual(["portal.rhokp_url: names the same setting as portal_url: keep one of the two"]);
    // A provider's id apart from its kind.
    const providers = accepted(parseConfig(`${MINIMAL}inference: {providers: [{type: openai, id: my-openai, api_key_env: OPENAI_API_KEY}]}\n`, { OPENAI_API_KEY: "k" }));
    expect(providers.inference.providers).toEqual([{ type: "my-openai", api_key_env: "OPENAI_API_KEY" }]);
  });

  it("refuses credentials with a wildcard CORS origin, in the original's words", () => {
    expect(problems(`${MINIMAL}service: {cors: {allow_origins: ["*"], allow_credentials: true}}\n`)).toEqual([
      "service.cors.allow_credentials: Invalid CORS configuration: allow_credentials can not be set to true when allow origins contains the '*' wildcard.",
    ]);
    expect(accepted(parseConfig(`${MINIMAL}service: {cors: {allow_origins: ["https://app.example.com"], allow_credentials: true}}\n`, {})).service.cors.allow_credentials).toBe(true);
  });

  it("rejects an empty document and one that is not a mapping", () => {
    expect(problems("")).toEqual(["document: the configuration is empty"]);
    expect(problems("- a\n- b\n")).toHaveLength(1);
    expect(problems("- a\n- b\n")[0]).toMatch(/^document: /);
  });
});

describe("parseInterval", () => {
  it.each([
    ["1 day", 86_400],
    ["2 days", 172_800],
    ["12 hours", 43_200],
    ["1 hour", 3_600],
    ["30 minutes", 1_800],
    ["1 minute", 60],
    ["45 seconds", 45],
    ["1 second", 1],
    ["1 week", 604_800],
    ["2 weeks", 1_209_600],
    ["1 month", 2_592_000],
    ["3 months", 7_776_000],
    ["1 Day", 86_400],
    ["  5 MINUTES ", 300],
    ["1 hour 30 minutes", 5_400],
    ["1 day, 12 hours", 129_600],
    ["1.5 hours", 5_400],
    ["0.1 hours", 360],
    ["45s", 45],
    ["12h", 43_200],
    ["3600", 3_600],
    ["  60 ", 60],
    [90, 90],
    // PostgreSQL interval input, each as EXTRACT(EPOCH FROM interval '…') gives it (PostgreSQL 15):
    // a month is 30 days, a year 365.25 days, and 12 months are a year.
    ["1 year", 31_557_600],
    ["2 mons", 5_184_000],
    ["12 mons", 31_557_600],
    ["13 mons", 34_149_600],
    ["1 mon 2 days", 2_764_800],
    ["1 y 2 mon", 36_741_600],
    ["1.5 years", 47_109_600],
    ["1.1 years", 34_149_600], // a fraction of a year is whole months (1.2 → 1)
    ["0.5 mon", 1_296_000],
    ["1.5 days", 129_600],
    ["1 decade", 315_576_000],
    ["2 weeks 1 day", 1_296_000],
    ["01:00:00", 3_600],
    ["1:30", 5_400],
    ["1:2:3", 3_723],
    ["3 days 04:05:06", 273_906],
    ["1 day 12:00:00", 129_600],
    ["1 day -1 hour", 82_800],
    ["1 day 5", 86_405],
    ["@ 1 hour", 3_600],
    ["@ 2 days 3 hours", 183_600],
    ["1 h", 3_600],
    ["1hour", 3_600],
    ["1 m", 60],
    ["10 minutes 5 secs", 605],
    ["2000 ms", 2],
    ["P1D", 86_400],
    ["PT1H", 3_600],
    ["P1W", 604_800],
    ["P1.5D", 129_600],
    ["P1Y2M3DT4H5M6S", 37_015_506],
    ["P0001-02-03T04:05:06", 37_015_506],
  ] as const)("%j is %d seconds", (text, expected) => {
    expect(parseInterval(text)).toBe(expected);
  });

  it.each([
    "",
    "day",
    "0",
    "0 days",
    "-1 day",
    "1 fortnight",
    "1 day later",
    "one day",
    "1.5",
    "1day2hours",
    "1e3",
    "00:00:00",
    "@ 1 hour ago",
    "1 day -2 days",
    "1:30.5",
    "P",
    "PT",
    "P1H",
  ])(
    "%j is not an interval",
    (text) => {
      expect(parseInterval(text)).toBeNull();
    },
  );

  it.each([0, -5, 1.5, Number.NaN, Number.POSITIVE_INFINITY])("%d seconds is not an interval", (value) => {
    expect(parseInterval(value)).toBeNull();
  });
});

/** The configuration of a document and the secret values parsing recorded. */
function loaded(text: string, env: Record<string, unknown> = {}): { config: Config; secrets: string[] } {
  const result = parseConfig(text, env);
  accepted(result);
  return result as { config: Config; secrets: string[] };
}

describe("database.postgres", () => {
  const postgres = (fields: string) => problems(`${MINIMAL}database:\n  postgres: {db: parley, user: parley, ${fields}}\n`);

  it("refuses at load a relay that is not a ws:// or wss:// URL, a plain hop off the machine under TLS, and an odd namespace", () => {
    expect(postgres("ws_proxy: 127.0.0.1:1/v2")).toEqual(["database.postgres.ws_proxy: expected a ws:// or wss:// URL (the relay, e.g. wss://relay.example.com)"]);
    expect(postgres("ws_proxy: ws://relay.example.com, ssl_mode: require")).toEqual(["database.postgres.ws_proxy: ssl_mode require needs a wss:// relay"]);
    expect(postgres(`namespace: 'x" -c role=postgres'`)).toEqual(["database.postgres.namespace: expected a plain schema name"]);
  });

  it("takes a wss:// relay, and a plain ws:// one on the machine itself", () => {
    accepted(parseConfig(`${MINIMAL}database:\n  postgres: {db: parley, user: parley, ws_proxy: "wss://relay.example.com", ssl_mode: require}\n`, {}));
    accepted(parseConfig(`${MINIMAL}database:\n  postgres: {db: parley, user: parley, ws_proxy: "ws://127.0.0.1:8432", ssl_mode: require}\n`, {}));
  });
});

describe("inertSettings", () => {
  it("names nothing for a plain configuration", () => {
    expect(inertSettings(loaded(MINIMAL).config)).toEqual([]);
  });

  it("names the original system's settings that do nothing on Workers", () => {
    const text = [
      "inference_backend:",
      "  url: http://127.0.0.1:8321/v1",
      "  max_retries: 3",
      "  retry_delay: 1",
      "service: {color_log: false, auth_enabled: true}",
      "quota_handlers: {scheduler: {period: 300}, postgres: {db: quota, user: quota}}",
      "database: {sqlite: {db_path: /var/lib/parley/parley.db}}",
      "customization: {profile_path: /profiles/x.py}",
      "byok_rag:",
      "  - {rag_id: docs, vector_db_id: vs_docs, db_path: /data/docs.faiss, embedding_model: all-MiniLM-L6-v2, embedding_dimension: 384}",
      "",
    ].join("\n");
    expect(inertSettings(loaded(text).config)).toEqual([
      "inference_backend.max_retries",
      "inference_backend.retry_delay",
      "service.color_log",
      "service.auth_enabled",
      "quota_handlers.scheduler",
      "quota_handlers.postgres",
      "database.sqlite.db_path",
      "customization.profile_path",
      "knowledge stores' db_path",
      "knowledge stores' embedding_model",
      "knowledge stores' embedding_dimension",
    ]);
    expect(inertSettings(loaded(`${MINIMAL}quota_handlers: {sqlite: {db_path: /var/lib/parley/quota.db}}\n`).config)).toEqual(["quota_handlers.sqlite"]);
  });

  it("names a conversation cache's backend settings, not the type that enables the /v2 views", () => {
    const cache = (section: string) => inertSettings(loaded(`${MINIMAL}conversation_cache: ${section}\n`).config);
    expect(cache("{type: memory, memory: {}}")).toEqual([]);
    expect(cache("{type: noop}")).toEqual([]);
    expect(cache("{type: memory, memory: {max_entries: 50}}")).toEqual(["conversation_cache.memory.max_entries"]);
    expect(cache("{type: sqlite, sqlite: {db_path: /tmp/cache.db}}")).toEqual(["conversation_cache.sqlite"]);
  });

  it("names a Granite Guardian shield, validated and not run (as in the original), and not the kinds that run", () => {
    const shields = (list: string) => inertSettings(loaded(`${MINIMAL}shields: ${list}\n`).config);
    expect(shields("[{name: g, provider_id: granite_guardian, config: {url: 'http://guardian:8000/v1', risks: [{name: harm}]}}]")).toEqual(["shields of provider_id granite_guardian (validated, not run)"]);
    expect(shields("[{name: r, provider_id: redaction, config: {rules: [{pattern: '\\d+', replacement: x}]}}, {name: m}]")).toEqual([]);
  });

  it("loads the original's rag.okp.search_mode and names it as having no effect (the portal is a store the backend searches)", () => {
    expect(inertSettings(loaded(`${MINIMAL}rag:\n  okp: {rhokp_url: "http://okp:8081/solr", search_mode: keyword}\n`).config)).toEqual(["rag.okp.search_mode"]);
  });

  it("names a Postgres port and ssl_mode that the store's connection ignores (no ws_proxy), and not otherwise", () => {
    const postgres = (extra: string) => loaded(`${MINIMAL}database:\n  postgres: {host: db.example.com, db: app, user: app, port: 6543, ssl_mode: disable${extra}}\n`).config;
    expect(inertSettings(postgres(""))).toEqual(["database.postgres.port", "database.postgres.ssl_mode"]);
    expect(inertSettings(postgres(", ws_proxy: ws://127.0.0.1:8080"))).toEqual([]);
  });
});

describe("redactConfig", () => {
  const { config, secrets } = loaded(FULL, FULL_ENV);
  const redacted = redactConfig(config, secrets) as Config;
  const shown = JSON.stringify(redacted);

  it("hides every secret", () => {
    expect(redacted.inference_backend.api_key).toBe(REDACTED);
    expect(redacted.authentication.api_key_config?.api_key).toBe(REDACTED);
    expect(redacted.database.postgres?.password).toBe(REDACTED);
    expect(redacted.quota_handlers.postgres?.password).toBe(REDACTED);
    expect(redacted.byok_rag[1].password).toBe(REDACTED);
    expect(redacted.azure_entra_id?.client_secret).toBe(REDACTED);
    expect(redacted.user_data_collection.data_collector.ingress_server_auth_token).toBe(REDACTED);
    expect(redacted.service.tls_config.tls_key_password).toBe(REDACTED);
    expect(redacted.inference.providers[0].extra?.api_key).toBe(REDACTED);
    // Where a credential is (a file, or the credential itself through the environment) is hidden;
    // the words that say how it is obtained are not secrets.
    expect(redacted.mcp_servers.map((server) => server.authorization_headers)).toEqual([{ Authorization: REDACTED }, { Authorization: "client" }]);
    for (const value of [...Object.values(FULL_ENV).filter((value) => value !== "6543"), "quota-password", "rag-password", "sk-extra"]) {
      expect(shown).not.toContain(value);
    }
  });

  it("keeps everything that is not a secret, and leaves the original alone", () => {
    expect(redacted.inference_backend.url).toBe("https://backend.example.com/v1");
    expect(redacted.inference.providers[0].api_key_env).toBe("OPENAI_API_KEY");
    // It may hold the token itself (written as ${env.NAME}), so it is a secret field.
    expect(redacted.splunk.token_path).toBe(REDACTED);
    expect(redacted.authentication.jwk_config?.jwt_configuration.user_id_claim).toBe("sub");
    expect(redacted.quota_handlers.enable_token_history).toBe(true);
    expect(redacted.database.postgres?.user).toBe("parley");
    expect(redacted.service.tls_config.tls_key_path).toBe("/certs/tls.key");
    expect(redacted.mcp_servers[0].url).toBe("http://127.0.0.1:9000/mcp");
    expect(config.inference_backend.api_key).toBe("sk-backend-secret");
    expect(config.mcp_servers[0].authorization_headers.Authorization).toBe("/var/secrets/mcp-token");
  });

  it("does not spell out a short secret by blanking it inside other strings", () => {
    const text = `${MINIMAL}mcp_servers:\n  - {name: docs, url: "http://127.0.0.1:9000/mcp"}\n`.replace("inference_backend:\n", "inference_backend:\n  api_key: x\n");
    const { config, secrets } = loaded(text);
    expect(secrets).toContain("x");
    const shown = redactConfig(config, secrets) as Config;
    expect(shown.inference_backend.api_key).toBe(REDACTED);
    expect(shown.mcp_servers[0].provider_id).toBe(config.mcp_servers[0].provider_id);
    expect(shown.inference_backend.url).toBe(config.inference_backend.url);
  });

  it("hides by what a field is, not by what it is called", () => {
    const text = `${MINIMAL}service:\n  cors: {allow_origins: [https://app.example.com], allow_credentials: true}\nauthentication:\n  module: jwk\n  jwk_config:\n    url: https://k.example.com\n    jwt_configuration: {user_id_claim: token_subject}\n`;
    const { config, secrets } = loaded(text);
    const shown = redactConfig(config, secrets) as Config;
    expect(shown.service.cors.allow_credentials).toBe(true);
    expect(shown.authentication.jwk_config?.jwt_configuration.user_id_claim).toBe("token_subject");
  });

  it("hides a password written inside a URL", () => {
    const text = "inference_backend:\n  url: https://user:${env.PW}@backend.example.com/v1\n";
    const { config, secrets } = loaded(text, { PW: "hunter2" });
    const hidden = redactConfig(config, secrets) as Config;
    expect(hidden.inference_backend.url).toBe(`https://user:${REDACTED}@backend.example.com/v1`);
  });

  it("hides the values of query parameters that carry credentials, in every URL, and nothing else of it", () => {
    const text = [
      "inference_backend:",
      "  url: http://h/v1?token=querysecret77",
      "mcp_servers:",
      "  - {name: a, url: 'https://mcp.example.com/mcp?region=eu&API_KEY=k1&Signature=s2&x-amz-security-token=s3&keep=1#token=frag'}",
      "  - {name: b, url: 'https://u:pw@mcp.example.com/mcp?access_token=t4&apikey=t5'}",
      "  - {name: c, url: 'https://mcp.example.com/mcp?tokens=list&sig'}",
      "",
    ].join("\n");
    const { config, secrets } = loaded(text);
    const hidden = redactConfig(config, secrets) as Config;
    expect(hidden.inference_backend.url).toBe(`http://h/v1?token=${REDACTED}`);
    expect(hidden.mcp_servers.map((server) => server.url)).toEqual([
      `https://mcp.example.com/mcp?region=eu&API_KEY=${REDACTED}&Signature=${REDACTED}&x-amz-security-token=${REDACTED}&keep=1#token=frag`,
      `https://u:${REDACTED}@mcp.example.com/mcp?access_token=${REDACTED}&apikey=${REDACTED}`,
      "https://mcp.example.com/mcp?tokens=list&sig",
    ]);
  });
});
