// Shapes shared by the authentication modules and the authorization check. The settings interfaces
// are structural on purpose: the zod-parsed `authentication` section (defaults filled) is passed in
// as it is, so this folder does not depend on the config schema.

export type AuthenticationModule =
  | "noop"
  | "noop-with-token"
  | "jwk-token"
  | "api-key-token"
  | "k8s"
  | "rh-identity"
  | "trusted-proxy";

export type RoleRuleOperator = "equals" | "contains" | "in" | "match";

export interface RoleRule {
  jsonpath: string;
  operator: RoleRuleOperator;
  negate: boolean;
  value: unknown;
  roles: string[];
}

export interface JwtConfiguration {
  user_id_claim: string;
  username_claim: string;
  role_rules: RoleRule[];
}

export interface JwkConfig {
  url: string;
  jwt_configuration: JwtConfiguration;
}

export interface ApiKeyConfig {
  api_key: string;
}

export interface RhIdentityConfig {
  required_entitlements: string[];
  max_header_size: number;
}

export interface ServiceAccountRef {
  namespace: string;
  name: string;
}

export interface TrustedProxyConfig {
  user_header: string;
  /** null, omitted or empty: every account with a valid token (SPEC "Authentication" 2). */
  allowed_service_accounts?: ServiceAccountRef[] | null;
}

export interface AuthenticationSettings {
  module: AuthenticationModule;
  skip_tls_verification: boolean;
  skip_for_health_probes: boolean;
  skip_for_metrics: boolean;
  k8s_cluster_api?: string;
  k8s_ca_cert_path?: string;
  jwk_config?: JwkConfig;
  api_key_config?: ApiKeyConfig;
  rh_identity_config?: RhIdentityConfig;
  trusted_proxy_config?: TrustedProxyConfig;
}

export interface AccessRule {
  role: string;
  actions: string[];
}

export interface AuthContext {
  userId: string;
  username: string;
  roles: string[];
  /** True when the identity is a fixed placeholder, so user-id format checks must not apply. */
  skipUserIdCheck: boolean;
  /** The caller's own credential when a module may forward it downstream; null otherwise. */
  token: string | null;
}

/** Resolves the caller of a request; rejects with an ApiError (401 for bad credentials). */
export type Authenticator = (request: Request) => Promise<AuthContext>;
