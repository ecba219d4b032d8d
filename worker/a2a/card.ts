// SPEC "Agent card (A2A)": the card configured inline (customization.agent_card_config) or in a file
// (customization.agent_card_path), checked against the A2A 0.3.0 card shape and completed with what
// the gateway itself decides: its url, protocol version default and streaming capability.
import type { AgentCard, SecurityScheme } from "@a2a-js/sdk";
import * as z from "zod";
import { isLoopback, type Config } from "../config/schema.ts";
import { ApiError } from "../errors.ts";
import type { Runtime } from "../runtime.ts";
import { SERVICE_VERSION } from "../version.ts";

/** SPEC "Versioning" 2: the A2A protocol version when the card does not name one. */
export const DEFAULT_PROTOCOL_VERSION = "0.3.0";

/** Where the JSON-RPC endpoint is served, relative to the service's base address. */
export const A2A_PATH = "/a2a";

const text = () => z.string().min(1);
const modes = () => z.array(text());
const scopesBySchemeName = z.array(z.record(text(), z.array(z.string())));

const OAuthFlowSchema = z.strictObject({
  authorizationUrl: z.url().optional(),
  tokenUrl: z.url().optional(),
  refreshUrl: z.url().optional(),
  scopes: z.record(z.string(), z.string()),
});

const SecuritySchemeSchema = z.discriminatedUnion("type", [
  z.strictObject({ type: z.literal("apiKey"), name: text(), in: z.enum(["cookie", "header", "query"]), description: z.string().optional() }),
  z.strictObject({ type: z.literal("http"), scheme: text(), bearerFormat: z.string().optional(), description: z.string().optional() }),
  z.strictObject({
    type: z.literal("oauth2"),
    flows: z.partialRecord(z.enum(["authorizationCode", "clientCredentials", "implicit", "password"]), OAuthFlowSchema),
    oauth2MetadataUrl: z.url().optional(),
    description: z.string().optional(),
  }),
  z.strictObject({ type: z.literal("openIdConnect"), openIdConnectUrl: z.url(), description: z.string().optional() }),
  z.strictObject({ type: z.literal("mutualTLS"), description: z.string().optional() }),
]);

/** The configured card: every SPEC field, camelCase as the card itself spells them. */
export const AgentCardConfigSchema = z.strictObject({
  name: text().optional(),
  description: z.string().optional(),
  version: text().optional(),
  url: z.url().optional(),
  documentationUrl: z.url().optional(),
  iconUrl: z.url().optional(),
  protocolVersion: text().default(DEFAULT_PROTOCOL_VERSION),
  preferredTransport: text().default("JSONRPC"),
  provider: z.strictObject({ organization: text(), url: z.url() }).optional(),
  skills: z
    .array(
      z.strictObject({
        id: text(),
        name: text(),
        description: z.string(),
        tags: z.array(z.string()).default([]),
        inputModes: modes().optional(),
        outputModes: modes().optional(),
        examples: z.array(z.string()).optional(),
        security: scopesBySchemeName.optional(),
      }),
    )
    .default([]),
  capabilities: z
    .strictObject({
      streaming: z.boolean().optional(),
      pushNotifications: z.boolean().optional(),
      stateTransitionHistory: z.boolean().optional(),
      extensions: z
        .array(
          z.strictObject({
            uri: text(),
            description: z.string().optional(),
            required: z.boolean().optional(),
            params: z.record(z.string(), z.unknown()).optional(),
          }),
        )
        .optional(),
    })
    .prefault({}),
  defaultInputModes: modes().default(["text/plain"]),
  defaultOutputModes: modes().default(["text/plain"]),
  security: scopesBySchemeName.optional(),
  securitySchemes: z.record(text(), SecuritySchemeSchema).optional(),
  additionalInterfaces: z.array(z.strictObject({ transport: text(), url: z.url() })).optional(),
  signatures: z
    .array(z.strictObject({ protected: text(), signature: text(), header: z.record(z.string(), z.unknown()).optional() }))
    .optional(),
  supportsAuthenticatedExtendedCard: z.boolean().optional(),
});

export function cardNotConfigured(): ApiError {
  return new ApiError(
    404,
    "Agent card not configured",
    "Set customization.agent_card_config (inline) or customization.agent_card_path (a file) to publish an agent card.",
  );
}

/**
 * The agent card, or the ApiError that explains why there is none: 404 when neither setting is
 * given, 500 when the configured card does not have the A2A card's shape.
 */
export function agentCard(rt: Runtime, requestUrl: string): AgentCard {
  const inline = rt.config.customization.agent_card_config;
  const source = inline !== undefined ? "customization.agent_card_config" : "customization.agent_card_path";
  const raw = inline ?? rt.agentCardFile;
  if (raw === null || raw === undefined) throw cardNotConfigured();
  const parsed = AgentCardConfigSchema.safeParse(raw);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join(".") || "(card)"}: ${issue.message}`);
    throw new ApiError(500, "Agent card is not valid", `${source}: ${problems.join("; ")}`);
  }
  return completeCard(rt.config, parsed.data, requestUrl);
}

/** The gateway's part of the card: where it is served, what it supports, defaults for the rest. */
export function completeCard(config: Config, card: z.output<typeof AgentCardConfigSchema>, requestUrl: string): AgentCard {
  const url = agentUrl(config, requestUrl, card.url);
  const { securitySchemes, ...rest } = card;
  return {
    ...rest,
    name: card.name ?? config.name,
    description: card.description ?? "",
    version: card.version ?? SERVICE_VERSION,
    url,
    // A2A's own default transport is JSON-RPC, the only one served here.
    additionalInterfaces: card.additionalInterfaces ?? [{ transport: "JSONRPC", url }],
    capabilities: {
      ...card.capabilities,
      // message/stream and tasks/resubscribe are always served; push notifications never are.
      streaming: true,
      pushNotifications: false,
    },
    ...(securitySchemes ? { securitySchemes: securitySchemes as Record<string, SecurityScheme> } : {}),
  };
}

/**
 * SPEC: the agent url derives from service.base_url. Without one, the card's own url is used, and
 * without that a local address: the one the request reached when it is local (so `npm start`,
 * `npm run dev -- --port N` and PARLEY_PORT all advertise the port they really serve on), else the
 * loopback address on service.port (default 8080). A deployment sets service.base_url.
 */
export function agentUrl(config: Config, requestUrl: string, cardUrl?: string): string {
  const base = config.service.base_url;
  if (base) return `${base.replace(/\/+$/, "")}${A2A_PATH}`;
  if (cardUrl) return cardUrl;
  const request = new URL(requestUrl);
  if (isLoopback(request.hostname)) return `${request.origin}${A2A_PATH}`;
  return `http://127.0.0.1:${config.service.port}${A2A_PATH}`;
}
