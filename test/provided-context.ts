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
    /** The wire the tests' default backend is spoken to in (vitest.config.ts workerProject). */
    wireMode: "responses" | "chat";
    backendUrl: string;
    slowBackendUrl: string;
    /** A scripted backend that lists its models without provider prefixes (modelStyle "openai"). */
    openaiStyleBackendUrl: string;
    /** A scripted backend only test/worker/wire-fidelity.test.ts takes down (POST /__outage). */
    outageBackendUrl: string;
    /** A scripted backend serving only models and chat completions, refusing stream_options (Ollama-like). */
    chatOnlyBackendUrl: string;
    jwksUrl: string;
    /** The fake cluster API (test/fakes/cluster-api.ts): append a mode (`/ok`, `/down`, ...); the credential it takes. */
    clusterApi: { url: string; serviceToken: string };
    wsRelayUrl: string;
    /** The fake ingress server (test/fakes/ingress-server.ts): uploads go to `${ingressUrl}/upload/<tenant>`. */
    ingressUrl: string;
    /** The fake Splunk HEC (test/fakes/hec-collector.ts): events go to `${url}/<tenant>/services/collector/event`. */
    hec: { url: string; token: string };
    tokens: TestTokens;
    /** The fake MCP server (test/fakes/mcp-server.ts): its base URL, the token /auth/LABEL/mcp takes, a dead address. */
    mcp: { base: string; token: string; downUrl: string };
    /** `database.postgres` settings for a fresh schema of the test server, reached through the relay. */
    postgres: Record<string, unknown>;
    /**
     * The reliability suite's form and seed (test/reliability, RELIABILITY.md): "full" with
     * RELIABILITY=full, else the short form CI runs; RELIABILITY_SEED replays a run.
     */
    reliability: { form: "short" | "full"; seed: number };
  }
}
