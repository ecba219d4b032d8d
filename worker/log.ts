// Logging that never writes a configured secret. Every value that the configuration declares secret
// (api keys, tokens, passwords, credentials read from files or the environment) is remembered here
// when a configuration loads, and removed from log lines and from error texts sent to clients
// (errors.ts). A value of 8 characters or more is removed wherever it appears; a shorter one (the
// original's test configurations use keys such as `xyzzy`) only where it stands as a token of its
// own (not inside a longer word), so that it cannot blank out parts of ordinary words. Model output
// is never passed through here.
export const MIN_SECRET_LENGTH = 8;
const REPLACEMENT = "[redacted]";

// Plain strings only (a module-level cache holds settled data; see README "Nothing is shared").
const known = new Set<string>();
let longestFirst: string[] = [];
let shortTokens: RegExp | null = null;

/** Adds secret values to those scrubbed from logs and error texts. */
export function rememberSecrets(values: Iterable<string>): void {
  let added = false;
  for (const value of values) {
    if (value.length === 0 || known.has(value)) continue;
    known.add(value);
    added = true;
  }
  if (!added) return;
  longestFirst = [...known].filter((value) => value.length >= MIN_SECRET_LENGTH).sort((a, b) => b.length - a.length);
  shortTokens = asTokens([...known].filter((value) => value.length < MIN_SECRET_LENGTH));
}

/** A pattern of `values` each standing alone (no letter, digit, `_` or `-` next to it); null for none. */
function asTokens(values: readonly string[]): RegExp | null {
  if (values.length === 0) return null;
  const alternatives = [...values].sort((a, b) => b.length - a.length).map((value) => value.replace(/[.*+?^${}()|[\]\\/-]/g, "\\$&"));
  return new RegExp(`(?<![\\w-])(?:${alternatives.join("|")})(?![\\w-])`, "g");
}

/**
 * `text` with every remembered secret replaced, and `alsoHide` too: credentials of the moment (the
 * headers an MCP call carried) that are not in the configuration. Those may be any header a request
 * forwards, not certainly secrets, so only values of MIN_SECRET_LENGTH or more of them are hidden.
 */
export function scrub(text: string, alsoHide: readonly string[] = []): string {
  const extra = alsoHide.filter((value) => value.length >= MIN_SECRET_LENGTH);
  const long = extra.length === 0 ? longestFirst : [...extra, ...longestFirst].sort((a, b) => b.length - a.length);
  let shown = text;
  for (const value of long) if (shown.includes(value)) shown = shown.split(value).join(REPLACEMENT);
  return shortTokens === null ? shown : shown.replace(shortTokens, REPLACEMENT);
}

function line(parts: unknown[]): string {
  return scrub(
    parts
      .map((part) => {
        if (typeof part === "string") return part;
        if (part instanceof Error) return part.stack ?? `${part.name}: ${part.message}`;
        try {
          return JSON.stringify(part);
        } catch {
          return String(part);
        }
      })
      .join(" "),
  );
}

export const log = {
  error: (...parts: unknown[]) => console.error(line(parts)),
  warn: (...parts: unknown[]) => console.warn(line(parts)),
  info: (...parts: unknown[]) => console.log(line(parts)),
};
