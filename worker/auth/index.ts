// Picks the authentication module named by `authentication.module`.
import { apiKeyTokenAuthenticator } from "./api-key-token.ts";
import { jwkTokenAuthenticator } from "./jwk-token.ts";
import { k8sAuthenticator, type ClusterModuleOptions } from "./k8s.ts";
import { noopAuthenticator } from "./noop.ts";
import { noopWithTokenAuthenticator } from "./noop-with-token.ts";
import { rhIdentityAuthenticator } from "./rh-identity.ts";
import { trustedProxyAuthenticator } from "./trusted-proxy.ts";
import type { Authenticator, AuthenticationConfig } from "./types.ts";

export type * from "./types.ts";
export { isAllowed, mayActOnOthers, OTHERS_ACTION_FOR, type ConversationOperation } from "./rbac.ts";

/**
 * The authenticator for these settings. Throws ApiError 500 when the chosen module's own settings
 * (jwk_config, api_key_config, the cluster API address and credential) are missing, which config
 * validation has already refused.
 */
export function createAuthenticator(settings: AuthenticationConfig, options: ClusterModuleOptions = {}): Authenticator {
  switch (settings.module) {
    case "noop":
      return noopAuthenticator(settings);
    case "noop-with-token":
      return noopWithTokenAuthenticator(settings);
    case "jwk-token":
      return jwkTokenAuthenticator(settings);
    case "api-key-token":
      return apiKeyTokenAuthenticator(settings);
    case "k8s":
      return k8sAuthenticator(settings, options);
    case "rh-identity":
      return rhIdentityAuthenticator(settings);
    case "trusted-proxy":
      return trustedProxyAuthenticator(settings, options);
  }
}
