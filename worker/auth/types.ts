// What the authentication modules produce, and the configuration shapes they read (derived from the
// configuration schema, the single source of those shapes).
export type {
  AccessRule,
  AuthModule as AuthenticationModule,
  AuthenticationConfig,
  JwkConfig,
  RhIdentityConfig,
  RoleRule,
  TrustedProxyConfig,
} from "../config/schema.ts";

/** The identity types an identity header (module rh-identity) may carry. */
export type RhIdentityType = "User" | "System" | "ServiceAccount";

/**
 * What an identity header says about its caller beyond user id and name, kept for
 * `rlsapi_v1.quota_subject` and telemetry (org_id / system_id there).
 */
export interface RhIdentityData {
  type: RhIdentityType;
  /** identity.org_id; "" when the header has none (User and ServiceAccount identities may omit it). */
  orgId: string;
  /**
   * The identity's own id: user.user_id, service_account.client_id, or system.cn for a System
   * (the original system's "system_id" quota subject and telemetry field).
   */
  systemId: string;
  /** identity.account_number; "" when absent. */
  accountNumber: string;
}

export interface AuthContext {
  userId: string;
  username: string;
  roles: string[];
  /** True when the identity is a fixed placeholder, so user-id format checks must not apply. */
  skipUserIdCheck: boolean;
  /** The caller's own credential when a module may forward it downstream; null otherwise. */
  token: string | null;
  /** Present only with module rh-identity. */
  rhIdentity?: RhIdentityData;
}

/** Resolves the caller of a request; rejects with an ApiError (401 for bad credentials). */
export type Authenticator = (request: Request) => Promise<AuthContext>;
