// Logging that never writes a configured secret. Every value that the configuration declares secret
// (api keys, tokens, passwords, credentials read from files or the environment) is remembered here
// when a configuration loads, and removed from log lines and from error texts sent to clients
// (errors.ts). Only values of 8 characters or more are scrubbed: shorter ones would blank out
// ordinary words. Model output is never passed through here.
export const MIN_SECRET_LENGTH = 8;
const REPLACEMENT = "[redacted]";

// Plain strings only (a module-level cache holds settled data; see README "Nothing is shared").
const known = new Set<string>();
let longestFirst: string[] = [];

/** Adds secret values to those scrubbed from logs and error texts. */
export function rememberSecrets(values: Iterable<string>): void {
  let added = false;
  for (const value of values) {
    if (value.length < MIN_SECRET_LENGTH || known.has(value)) continue;
    known.add(value);
    added = true;
  }
  if (added) longestFirst = [...known].sort((a, b) => b.length - a.length);
}

/**
 * `text` with every remembered secret replaced, and `alsoHide` too: credentials of the moment (the
 * headers an MCP call carried) that are not in the configuration.
 */
export function scrub(text: string, alsoHide: readonly string[] = []): string {
  const hidden = alsoHide.length === 0 ? longestFirst : [...alsoHide.filter((value) => value.length >= MIN_SECRET_LENGTH), ...longestFirst].sort((a, b) => b.length - a.length);
  let shown = text;
  for (const value of hidden) if (shown.includes(value)) shown = shown.split(value).join(REPLACEMENT);
  return shown;
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
