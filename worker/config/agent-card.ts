// SPEC "Agent card (A2A)": the card an operator configures, inline (customization.agent_card_config)
// or in a file (customization.agent_card_path), in the A2A 0.3.0 card's shape. Both are checked
// against it when the configuration loads, so a card that is not valid fails the load naming its key
// rather than the card endpoint failing later; a2a/card.ts completes the card when it is served.
import * as z from "zod";

/** SPEC "Versioning" 2: the A2A protocol version when the card does not name one. */
export const DEFAULT_PROTOCOL_VERSION = "0.3.0";

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

export type AgentCardConfig = z.output<typeof AgentCardConfigSchema>;
