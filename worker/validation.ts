// Request-body validation: every failure is a 422 in SPEC's envelope, never a 500.
import type { Context, MiddlewareHandler } from "hono";
import type { z } from "zod";
import { ApiError, errors } from "./errors.ts";

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

/** The deepest nesting a JSON body may have (README "Limits"): deeper is refused before anything walks it. */
export const MAX_JSON_DEPTH = 64;
const TOO_DEEP = `request body is nested deeper than ${MAX_JSON_DEPTH} levels`;

/**
 * The request body as text. A body that cannot be read (a broken chunked encoding) or is not UTF-8
 * is refused with 422 Invalid request format: invalid bytes are never replaced by U+FFFD and passed on.
 */
export async function readText(c: Context): Promise<string> {
  let bytes: ArrayBuffer;
  try {
    bytes = await c.req.arrayBuffer();
  } catch {
    throw errors.invalidFormat("the request body could not be read");
  }
  try {
    return utf8.decode(bytes);
  } catch {
    throw errors.invalidFormat("the request body is not valid UTF-8");
  }
}

/**
 * How much more of a refused body is still read (and dropped) before the refusal is sent: a body
 * left unread while the answer goes out closes the connection under a client still sending it,
 * which may then lose the answer (under wrangler dev a 10 MiB chunked question got no answer at all
 * about half the time). Past this, the rest is left unread.
 */
const REFUSED_BODY_READ_BYTES = 64 * 1024 * 1024;

/**
 * Refuses a request body over `maxBytes` with SPEC's 413 before the route reads it: by its
 * Content-Length, or, for a body without one (chunked), by counting it as it is read here, the
 * rest of a refused one read out (REFUSED_BODY_READ_BYTES). A body that breaks off while being
 * counted is the client's 422, not a 500. (Hono's bodyLimit counts alike but leaves a refused body
 * unread, with its reader out of reach.) `tooLarge` is the refusal; by default it names the limit.
 */
export function requestBodyLimit(maxBytes: number, tooLarge = () => errors.promptTooLong(`The request exceeds the maximum size of ${maxBytes} bytes.`)): MiddlewareHandler {
  return async function requestBodyLimit(c, next) {
    const request = c.req.raw;
    if (!request.body) return next();
    const declared = request.headers.get("content-length");
    if (declared !== null && !request.headers.has("transfer-encoding")) {
      if (Number(declared) > maxBytes) throw tooLarge();
      return next();
    }
    const reader = request.body.getReader();
    const chunks: Uint8Array[] = [];
    let size = 0;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        size += value.byteLength;
        if (size > maxBytes) {
          await readOut(reader);
          throw tooLarge();
        }
        chunks.push(value);
      }
    } catch (error) {
      if (error instanceof ApiError) throw error;
      throw errors.invalidFormat("the request body could not be read");
    }
    const body = new Uint8Array(size);
    let offset = 0;
    for (const chunk of chunks) {
      body.set(chunk, offset);
      offset += chunk.byteLength;
    }
    c.req.raw = new Request(request, { body });
    return next();
  };
}

/** Reads what is left of a body that will not be used, REFUSED_BODY_READ_BYTES more at most, then lets it go; never throws. */
export async function readOut(reader: ReadableStreamDefaultReader<Uint8Array>): Promise<void> {
  let read = 0;
  try {
    while (read <= REFUSED_BODY_READ_BYTES) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
    }
  } catch {
    // A body that breaks off has nothing more to read.
  }
  await reader.cancel().catch(() => undefined);
}

/** Parses a JSON text no deeper than MAX_JSON_DEPTH; a 422 Invalid request format otherwise. */
function parseJsonText(text: string): unknown {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw errors.invalidFormat("request body could not be parsed");
  }
  const deep = tooDeep(body);
  if (deep) throw errors.invalidFormat(deep);
  return body;
}

/**
 * Reads and validates the JSON body of a request against `schema`. As in the original (FastAPI), a
 * body is read as JSON when it comes without a content type or with a JSON one (application/json,
 * application/…+json); any other is refused, so that a cross-site form or text/plain post, which
 * browsers send without a CORS preflight, never reaches an endpoint.
 */
export async function readJson<S extends z.ZodType>(c: Context, schema: S): Promise<z.output<S>> {
  const type = c.req.header("content-type");
  if (type !== undefined && !JSON_TYPE.test(type)) {
    throw errors.invalidFormat(`the request body must be JSON (Content-Type: application/json), not ${type.split(";")[0]!.trim() || "an empty type"}`);
  }
  return parseWith(schema, parseJsonText(await readText(c)));
}

const JSON_TYPE = /^\s*application\/([\w.+-]*\+)?json\s*(;|$)/i;

/** Why a parsed JSON value may not be taken, when it nests deeper than MAX_JSON_DEPTH. */
export function tooDeep(value: unknown): string | null {
  return depthOf(value) > MAX_JSON_DEPTH ? TOO_DEEP : null;
}

/** How deeply `value` nests arrays and objects, walked without recursion. */
function depthOf(value: unknown): number {
  let deepest = 0;
  const pending: [unknown, number][] = [[value, 0]];
  while (pending.length > 0) {
    const [current, depth] = pending.pop()!;
    if (current === null || typeof current !== "object") continue;
    if (depth + 1 > deepest) deepest = depth + 1;
    if (deepest > MAX_JSON_DEPTH) return deepest;
    for (const child of Object.values(current)) if (child !== null && typeof child === "object") pending.push([child, depth + 1]);
  }
  return deepest;
}

/** Validates an already-parsed value (query parameters, path parameters) against `schema`. */
export function parseWith<S extends z.ZodType>(schema: S, value: unknown): z.output<S> {
  const result = validate(schema, value);
  if (!result.success) throw validationError(result.error);
  return result.data;
}

/**
 * `schema.safeParse`, except that a value too large to validate (hundreds of thousands of wrong
 * entries overflow the stack while zod gathers its issues) is a 422 Invalid request format.
 */
export function validate<S extends z.ZodType>(schema: S, value: unknown): z.ZodSafeParseResult<z.output<S>> {
  try {
    return schema.safeParse(value, { reportInput: true });
  } catch (error) {
    if (error instanceof RangeError) throw errors.invalidFormat("request body is too large to validate");
    throw error;
  }
}

const isMissing = (issue: z.core.$ZodIssue) => issue.code === "invalid_type" && issue.input === undefined;

/**
 * The fields whose absence alone made `issue`: its own path, or, for a union, those of the branch
 * that failed only for missing fields inside the value (the branch its shape selected: the others
 * fail on the value itself). Null when something was there and wrong.
 */
function missingFields(issue: z.core.$ZodIssue): string[] | null {
  if (isMissing(issue)) return [issue.path.join(".")];
  if (issue.code !== "invalid_union") return null;
  const branch = issue.errors.find((issues) => issues.length > 0 && issues.every((inner) => inner.path.length > 0 && isMissing(inner)));
  return branch ? branch.map((inner) => [...issue.path, ...inner.path].join(".")) : null;
}

/** Maps zod issues onto REFERENCE's three 422 responses, naming the fields involved. */
export function validationError(error: z.ZodError): ApiError {
  const missing = error.issues.map(missingFields);
  if (missing.every((fields) => fields !== null)) return errors.missingAttributes(missing.flat().join(", "));
  if (error.issues.length === 1 && error.issues[0]!.code === "invalid_type" && error.issues[0]!.path.length === 0) {
    return errors.invalidFormat("request body must be a JSON object");
  }
  // One cause per field: its checks all run, and an empty string that is "too small" need not also be
  // "empty or whitespace-only". Issues of the body itself (unknown fields, cross-field rules) all stay.
  const seen = new Set<string>();
  const firstPerField = error.issues.filter((issue) => {
    if (issue.path.length === 0) return true;
    const key = JSON.stringify(issue.path);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  const cause = firstPerField
    .map((issue) => {
      const path = issue.path.join(".");
      if (issue.code === "unrecognized_keys") return `unknown field(s): ${issue.keys.map((k) => (path ? `${path}.${k}` : k)).join(", ")} (Extra inputs are not permitted)`;
      // A schema's own message stays; zod's defaults give way to the original's words where they map.
      const message = (ZOD_DEFAULT.test(issue.message) ? originalWording(issue) : null) ?? issue.message;
      return path ? `${path}: ${message}` : message;
    })
    .join("; ");
  return errors.invalidValue(cause);
}

/** A value a client sent, as a cause may quote it: JSON, at most 100 characters. */
function shownValue(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 100 ? `${text.slice(0, 100)}…` : text;
}

const ZOD_DEFAULT = /^(Too small|Too big|Invalid input|Invalid option): /;
const plural = (count: number | bigint, noun: string) => `${count} ${noun}${Number(count) === 1 ? "" : "s"}`;
const VALID_TYPE: Record<string, string> = { string: "string", number: "number", int: "integer", boolean: "boolean", array: "list", object: "dictionary" };

/**
 * The original's words (pydantic's) for the common checks, which clients and test suites written
 * for it look for in the cause ("String should have at least 1 character"); null for the others.
 */
function originalWording(issue: z.core.$ZodIssue): string | null {
  switch (issue.code) {
    case "too_small":
      if (issue.origin === "string") return `String should have at least ${plural(issue.minimum, "character")}`;
      if (issue.origin === "array") return `List should have at least ${plural(issue.minimum, "item")}`;
      if (issue.origin === "number" || issue.origin === "int") return `Input should be greater than ${issue.inclusive ? "or equal to " : ""}${issue.minimum}`;
      return null;
    case "too_big":
      if (issue.origin === "string") return `String should have at most ${plural(issue.maximum, "character")}`;
      if (issue.origin === "array") return `List should have at most ${plural(issue.maximum, "item")}`;
      if (issue.origin === "number" || issue.origin === "int") return `Input should be less than ${issue.inclusive ? "or equal to " : ""}${issue.maximum}`;
      return null;
    case "invalid_type":
      return VALID_TYPE[issue.expected] ? `Input should be a valid ${VALID_TYPE[issue.expected]}` : null;
    case "invalid_value":
      // The value given is named, as the original's causes do ("Invalid attatchment type unknown_type").
      return `Input should be ${issue.values.map((value) => JSON.stringify(value)).join(", ")}, not ${shownValue(issue.input)}`;
    default:
      return null;
  }
}
