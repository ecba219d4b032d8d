import type { Config } from "./schema.ts";

export const REDACTED = "**********";

const SECRET_KEYS = new Set([
  "api_key",
  "password",
  "client_secret",
  "ingress_server_auth_token",
  "tls_key_password",
]);

// Catches secrets in free-form maps (provider extras, native overrides, agent cards) too.
const SECRET_LOOKING = /secret|passw(?:or)?d|api[-_]?key|credential|^authorization$|token$/i;
// ...but these name where a secret is, or which claim/variable holds it, not the secret itself.
const NOT_A_SECRET = /_(?:path|claim|env|url)$/i;

/**
 * A deep copy of the configuration that is safe to show: secrets become "**********".
 * Values were resolved from `${env.NAME}` before this point, so nothing here knows which came
 * from the environment; hiding by field name is what keeps those from leaking.
 */
export function redactConfig(config: Config): unknown {
  const copy = redactValue(config);
  for (const server of (copy as { mcp_servers: { authorization_headers: Record<string, unknown> }[] }).mcp_servers) {
    // Header values name where a credential comes from; the mapping itself is nobody's business.
    for (const header of Object.keys(server.authorization_headers)) server.authorization_headers[header] = REDACTED;
  }
  return copy;
}

function redactValue(value: unknown): unknown {
  if (typeof value === "string") return hideUrlPassword(value);
  if (Array.isArray(value)) return value.map(redactValue);
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, isSecret(key, item) ? REDACTED : redactValue(item)]),
    );
  }
  return value;
}

function isSecret(key: string, value: unknown): boolean {
  if (value === undefined || value === null) return false;
  if (SECRET_KEYS.has(key)) return true;
  // Objects under secret-looking names (api_key_config) are walked, not hidden whole.
  if (typeof value === "object" && !Array.isArray(value)) return false;
  return SECRET_LOOKING.test(key) && !NOT_A_SECRET.test(key);
}

/** `postgres://user:pw@host` style URLs carry their password inline. */
function hideUrlPassword(text: string): string {
  if (!text.includes("@") || !text.includes("://")) return text;
  try {
    const url = new URL(text);
    if (url.password === "") return text;
    url.password = REDACTED;
    return url.toString();
  } catch {
    return text;
  }
}
