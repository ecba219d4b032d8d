// Request-body validation: every failure is a 422 in SPEC's envelope, never a 500.
import type { Context } from "hono";
import type { z } from "zod";
import { errors, type ApiError } from "./errors.ts";

/** Reads and validates the JSON body of a request against `schema`. */
export async function readJson<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  let body: unknown;
  try {
    body = JSON.parse(await c.req.text());
  } catch {
    throw errors.invalidFormat("request body could not be parsed");
  }
  return parseWith(schema, body);
}

/** Validates an already-parsed value (query parameters, path parameters) against `schema`. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const result = schema.safeParse(value, { reportInput: true });
  if (!result.success) throw validationError(result.error);
  return result.data;
}

/** Maps zod issues onto REFERENCE's three 422 responses, naming the fields involved. */
export function validationError(error: z.ZodError): ApiError {
  const missing = error.issues.filter((issue) => issue.code === "invalid_type" && issue.input === undefined);
  if (missing.length === error.issues.length) {
    return errors.missingAttributes(missing.map((issue) => issue.path.join(".")).join(", "));
  }
  if (error.issues.length === 1 && error.issues[0]!.code === "invalid_type" && error.issues[0]!.path.length === 0) {
    return errors.invalidFormat("request body must be a JSON object");
  }
  const cause = error.issues
    .map((issue) => {
      const path = issue.path.join(".");
      if (issue.code === "unrecognized_keys") return `unknown field(s): ${issue.keys.map((k) => (path ? `${path}.${k}` : k)).join(", ")}`;
      return path ? `${path}: ${issue.message}` : issue.message;
    })
    .join("; ");
  return errors.invalidValue(cause);
}
