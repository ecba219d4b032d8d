// What test/global-setup.ts provides to the Worker tests (vitest provide/inject).
export interface TestTokens {
  good: string;
  admin: string;
  expired: string;
  forged: string;
  unknownKey: string;
  missingClaim: string;
}

declare module "vitest" {
  export interface ProvidedContext {
    backendUrl: string;
    slowBackendUrl: string;
    jwksUrl: string;
    wsRelayUrl: string;
    tokens: TestTokens;
    /** `database.postgres` settings for a fresh schema of the test server, reached through the relay. */
    postgres: Record<string, unknown>;
  }
}
