import { MIN_SECRET_LENGTH } from "../log.ts";
import type { Config } from "./schema.ts";

export const REDACTED = "**********";

// Free-form maps (provider extras, native overrides, the inline agent card) have no schema to say
// which of their values are credentials, so there, and only there, string values are hidden by name.
const FREE_FORM = new Set(["inference.providers.*.extra", "inference_backend.config.native_override", "customization.agent_card_config"]);
const SECRET_LOOKING = /secret|passw(?:or)?d|api[-_]?key|credential|^authorization$|token$/i;

/**
 * A deep copy of the configuration that is safe to show. Secrets are what the schema declares with
 * secret() (their values, as parsing recorded them): a string that is one is replaced whole, and one
 * of MIN_SECRET_LENGTH characters or more also where it appears inside another string (a URL), so
 * nothing depends on what a field happens to be called. A shorter secret is not searched for inside
 * other strings: the places it would blank out ("x" in every word) would spell it out.
 */
export function redactConfig(config: Config, secrets: readonly string[]): unknown {
  const all = new Set(secrets);
  // Longest first, so a secret that contains another is hidden whole.
  const inside = secrets.filter((value) => value.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
  const hide = (text: string) => {
    if (all.has(text)) return REDACTED;
    let shown = text;
    for (const value of inside) if (shown.includes(value)) shown = shown.split(value).join(REDACTED);
    return hideUrlPassword(shown);
  };
  return redactValue(config, [], hide);
}

function redactValue(value: unknown, path: string[], hide: (text: string) => string): unknown {
  if (typeof value === "string") return hide(value);
  if (Array.isArray(value)) return value.map((item) => redactValue(item, [...path, "*"], hide));
  if (typeof value === "object" && value !== null) {
    const freeForm = path.some((_, end) => FREE_FORM.has(path.slice(0, end + 1).join(".")));
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [
        key,
        freeForm && typeof item === "string" && SECRET_LOOKING.test(key) ? REDACTED : redactValue(item, [...path, key], hide),
      ]),
    );
  }
  return value;
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
