// Which configuration values are secrets: exactly those the schema declares with secret(). Parsing
// a document records the values those fields receive (after `${env.NAME}` references resolve), so
// /v1/config hides them by what they are, and error texts and logs can be scrubbed of them.
import * as z from "zod";

let recording: Set<string> | null = null;

/** A credential field. The value it receives is recorded while collectSecrets runs. */
export const secret = () =>
  z
    .string()
    .min(1, "must not be empty")
    .transform((value) => {
      recording?.add(value);
      return value;
    });

/** Runs a (synchronous) parse and returns what it produced with the secret values it met. */
export function collectSecrets<T>(parse: () => T): { value: T; secrets: string[] } {
  const found = new Set<string>();
  recording = found;
  try {
    return { value: parse(), secrets: [...found] };
  } finally {
    recording = null;
  }
}
