// SPEC "Agent card (A2A)": the card configured inline (customization.agent_card_config) or in a file
// (customization.agent_card_path), checked against the A2A 0.3.0 card shape when the configuration
// loads (config/agent-card.ts), completed here with what the gateway itself decides: its url,
// protocol version default and streaming capability.
import type { AgentCard, SecurityScheme } from "@a2a-js/sdk";
import type { AgentCardConfig } from "../config/agent-card.ts";
import { isLoopback, type Config } from "../config/schema.ts";
import { ApiError } from "../errors.ts";
import type { Runtime } from "../runtime.ts";
import { SERVICE_VERSION } from "../version.ts";

/** Where the JSON-RPC endpoint is served, relative to the service's base address. */
export const A2A_PATH = "/a2a";

export function cardNotConfigured(): ApiError {
  return new ApiError(
    404,
    "Agent card not configured",
    "Set customization.agent_card_config (inline) or customization.agent_card_path (a file) to publish an agent card.",
  );
}

/** The agent card, or the 404 that explains why there is none: neither setting is given. */
export function agentCard(rt: Pick<Runtime, "config" | "agentCard">, requestUrl: string): AgentCard {
  if (rt.agentCard === null) throw cardNotConfigured();
  return completeCard(rt.config, rt.agentCard, requestUrl);
}

/** The gateway's part of the card: where it is served, what it supports, defaults for the rest. */
export function completeCard(config: Config, card: AgentCardConfig, requestUrl: string): AgentCard {
  const url = agentUrl(config, requestUrl, card.url);
  const { securitySchemes, ...rest } = card;
  return {
    ...rest,
    name: card.name ?? config.name,
    description: card.description ?? "",
    version: card.version ?? SERVICE_VERSION,
    url,
    // A2A's own default transport is JSON-RPC, the only one served here; the list names the main
    // interface too (A2A: it SHOULD), also when the configured one leaves it out.
    additionalInterfaces: withMainInterface(card.additionalInterfaces ?? [], url),
    capabilities: {
      ...card.capabilities,
      // message/stream and tasks/resubscribe are always served; push notifications never are.
      streaming: true,
      pushNotifications: false,
    },
    ...(securitySchemes ? { securitySchemes: securitySchemes as Record<string, SecurityScheme> } : {}),
  };
}

function withMainInterface(interfaces: NonNullable<AgentCard["additionalInterfaces"]>, url: string): NonNullable<AgentCard["additionalInterfaces"]> {
  const listed = interfaces.some((entry) => entry.transport === "JSONRPC" && entry.url === url);
  return listed ? interfaces : [{ transport: "JSONRPC", url }, ...interfaces];
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
