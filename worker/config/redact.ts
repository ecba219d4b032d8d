import { MIN_SECRET_LENGTH } from "../log.ts";
import type { Config } from "./schema.ts";

export const REDACTED = "**********";

// Free-form maps (provider extras, native overrides) have no schema to say which of their values are
// credentials, and the inline agent card's (the A2A card's) declares none though it has free-form
// parts (extension params, signature headers): there, and only there, string values are hidden by name.
const FREE_FORM = new Set(["inference.providers.*.extra", "inference_backend.config.native_override", "customization.agent_card_config"]);
const SECRET_LOOKING = /secret|passw(?:or)?d|api[-_]?key|credential|^authorization$|token$/i;

/**
 * A deep copy of the configuration that is safe to show. Secrets are what the schema declares with
 * secret() (their values, as parsing recorded them): a string that is one is replaced whole, and one
 * of MIN_SECRET_LENGTH characters or more also where it appears inside another string (a URL), so
 * nothing depends on what a field happens to be called. A shorter secret is not searched for inside
 * other strings: the places it would blank out ("x" in every word) would spell it out. URLs also
 * lose the credentials they carry by their form: a password, and credential query parameters.
 */
export function redactConfig(config: Config, secrets: readonly string[]): unknown {
  const all = new Set(secrets);
  // Longest first, so a secret that contains another is hidden whole.
  const inside = secrets.filter((value) => value.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
  const hide = (text: string) => {
    if (all.has(text)) return REDACTED;
    let shown = text;
    for (const value of inside) if (shown.includes(value)) shown = shown.split(value).join(REDACTED);
    return hideUrlCredentials(shown);
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

/**
 * The credentials the configuration's URLs carry by their form (a password, credential query
 * parameters' values), as written and decoded: secrets in their own right, which logs and error
 * texts must not show either (a log line may quote a URL whole).
 */
export function urlCredentials(value: unknown): string[] {
  if (typeof value === "string") {
    const url = urlOf(value);
    if (!url) return [];
    const query = url.search
      .slice(1)
      .split("&")
      .flatMap((pair) => credentialValue(pair) ?? []);
    return [url.password, ...query].flatMap((written) => [written, decoded(written)]).filter((found) => found !== "");
  }
  if (Array.isArray(value)) return value.flatMap(urlCredentials);
  if (typeof value === "object" && value !== null) return Object.values(value).flatMap(urlCredentials);
  return [];
}

/**
 * Query parameters that carry a credential: API keys and tokens some services take in the URL,
 * and the signatures of pre-signed URLs (S3, GCS, Azure SAS), which grant access on their own.
 * Compared in lower case.
 */
const CREDENTIAL_PARAMETERS = new Set([
  "token",
  "access_token",
  "refresh_token",
  "id_token",
  "auth",
  "auth_token",
  "authorization",
  "api_key",
  "api-key",
  "apikey",
  "key",
  "secret",
  "client_secret",
  "password",
  "passwd",
  "pwd",
  "sig",
  "signature",
  "x-amz-signature",
  "x-amz-credential",
  "x-amz-security-token",
  "x-goog-signature",
  "x-goog-credential",
]);

/**
 * A URL with the credentials it carries hidden: the password of `postgres://user:pw@host` and the
 * values of credential query parameters (`?token=…`). Anything else, and any text that is not a
 * URL, is shown as written.
 */
function hideUrlCredentials(text: string): string {
  const url = urlOf(text);
  if (!url) return text;
  let shown = text;
  if (url.password !== "") {
    url.password = REDACTED;
    shown = url.toString();
  }
  return url.search === "" ? shown : hideQueryCredentials(shown);
}

/** `url` (a valid URL) with the values of its credential query parameters hidden, the rest as written. */
function hideQueryCredentials(url: string): string {
  const start = url.indexOf("?") + 1;
  const fragment = url.indexOf("#", start);
  const end = fragment < 0 ? url.length : fragment;
  const query = url
    .slice(start, end)
    .split("&")
    .map((pair) => (credentialValue(pair) === null ? pair : `${pair.slice(0, pair.indexOf("="))}=${REDACTED}`));
  return `${url.slice(0, start)}${query.join("&")}${url.slice(end)}`;
}

/** A text as the URL it is, when it is one with a scheme (`scheme://…`); null otherwise. */
function urlOf(text: string): URL | null {
  return text.includes("://") && URL.canParse(text) ? new URL(text) : null;
}

/** The value of a query's `name=value` pair as written, when its name is a credential parameter; null otherwise. */
function credentialValue(pair: string): string | null {
  const at = pair.indexOf("=");
  if (at < 0) return null;
  return CREDENTIAL_PARAMETERS.has(decoded(pair.slice(0, at)).toLowerCase()) ? pair.slice(at + 1) : null;
}

/** A URL part as it reads decoded (as written when it does not decode). */
function decoded(encoded: string): string {
  try {
    return decodeURIComponent(encoded.replace(/\+/g, " "));
  } catch {
    return encoded;
  }
}
