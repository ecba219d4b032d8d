// The request's `solr` object (SPEC "solr object") and the portal's static chunk_filter_query, both
// translated to the backend's vector-store search filter (OpenAI's comparison/compound filters).
// Anything the backend format cannot express exactly (ranges, wildcards, negation, implicit
// operators) is refused: a filter dropped or loosened without a word would return documents the
// client or the operator meant to exclude.
import { errors } from "../errors.ts";

export const SOLR_MODES = ["semantic", "hybrid", "lexical"] as const;
export type SolrMode = (typeof SOLR_MODES)[number];

export interface ComparisonSearchFilter {
  type: "eq" | "in";
  key: string;
  value: string | string[];
}

export interface CompoundSearchFilter {
  type: "and" | "or";
  filters: SearchFilter[];
}

/** A filter in the backend's format; assignable to the openai package's ComparisonFilter | CompoundFilter. */
export type SearchFilter = ComparisonSearchFilter | CompoundSearchFilter;

export interface SolrQuery {
  mode: SolrMode;
  /** The request's own filter; null when it sent none. */
  filter: SearchFilter | null;
}

/** What a request without `solr` asks for. */
export const DEFAULT_SOLR: SolrQuery = { mode: "hybrid", filter: null };

const RANGE_TYPES = new Set(["gt", "gte", "lt", "lte"]);

/** A problem with the filter at `path`; the request parser turns it into a 422, the config check into a message. */
class FilterProblem extends Error {
  /** True for valid Solr that the vector store filters cannot express (ranges, wildcards, negation). */
  readonly unsupported: boolean;

  constructor(message: string, unsupported = false) {
    super(message);
    this.unsupported = unsupported;
  }
}

function problem(path: string, message: string): never {
  throw new FilterProblem(`${path}: ${message}`);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function kindOf(value: unknown): string {
  return value === null ? "null" : Array.isArray(value) ? "a list" : typeof value;
}

// ---------------------------------------------------------------------------------------------
// The request's solr object
// ---------------------------------------------------------------------------------------------

/**
 * Parses the request's `solr` value (null/undefined: the default). Throws ApiError 422 "Invalid
 * attribute value" naming the offending part.
 */
export function parseSolr(raw: unknown): SolrQuery {
  if (raw === null || raw === undefined) return DEFAULT_SOLR;
  try {
    if (!isPlainObject(raw)) problem("solr", `expected an object, got ${kindOf(raw)}`);
    return "mode" in raw || "filters" in raw ? parseCurrentForm(raw) : parseLegacyForm(raw);
  } catch (error) {
    if (error instanceof FilterProblem) throw errors.invalidValue(error.message);
    throw error;
  }
}

function parseCurrentForm(raw: Record<string, unknown>): SolrQuery {
  const unknown = Object.keys(raw).filter((key) => key !== "mode" && key !== "filters");
  if (unknown.length > 0) {
    problem("solr", `unknown field(s) ${unknown.join(", ")} (with mode or filters, only those two are accepted)`);
  }
  let mode: SolrMode = DEFAULT_SOLR.mode;
  if (raw.mode !== undefined && raw.mode !== null) {
    if (!SOLR_MODES.includes(raw.mode as SolrMode)) {
      problem("solr.mode", `expected one of ${SOLR_MODES.join(", ")}, got ${JSON.stringify(raw.mode)}`);
    }
    mode = raw.mode as SolrMode;
  }
  const filters = raw.filters;
  // An empty object is how some clients say "no filter"; it restricts nothing, so nothing is lost.
  if (filters === undefined || filters === null || (isPlainObject(filters) && Object.keys(filters).length === 0)) {
    return { mode, filter: null };
  }
  return { mode, filter: parseFilter(filters, "solr.filters") };
}

/** Pre-`mode` clients put key:value pairs (and Solr's own `fq` list) at the top level. */
function parseLegacyForm(raw: Record<string, unknown>): SolrQuery {
  const filters = Object.entries(raw).map(([key, value]) => {
    const path = `solr.${key}`;
    if (key === "fq") return parseFilterQueries(typeof value === "string" ? [value] : value, path);
    if (typeof value === "string") return comparison("eq", key, value, path);
    if (Array.isArray(value)) return comparison("in", key, value, path);
    return problem(path, `expected a string or a list of strings, got ${kindOf(value)}`);
  });
  return { mode: "hybrid", filter: allOf(filters) };
}

/** One filter in any of SPEC's shapes: wrapper, comparison, compound, or raw `fq`. */
function parseFilter(value: unknown, path: string): SearchFilter {
  if (!isPlainObject(value)) problem(path, `expected a filter object, got ${kindOf(value)}`);
  if ("fq" in value) {
    onlyKeys(value, ["fq"], path);
    return parseFilterQueries(value.fq, `${path}.fq`);
  }
  if (!("type" in value)) {
    if (!("filters" in value)) problem(path, "expected a filter with type (eq, in, and, or), a filters wrapper or fq");
    if (Array.isArray(value.filters)) problem(path, "a list of filters needs type and or or");
    onlyKeys(value, ["filters"], path);
    return parseFilter(value.filters, `${path}.filters`);
  }
  const type = value.type;
  if (typeof type === "string" && RANGE_TYPES.has(type)) {
    problem(`${path}.type`, `range operator ${type} is not supported (use eq, in, and or or)`);
  }
  if (type === "eq" || type === "in") {
    onlyKeys(value, ["type", "key", "value"], path);
    if (typeof value.key !== "string" || value.key.length === 0) problem(`${path}.key`, "expected a non-empty string");
    return comparison(type, value.key, value.value, `${path}.value`);
  }
  if (type === "and" || type === "or") {
    onlyKeys(value, ["type", "filters"], path);
    const parts = value.filters;
    if (!Array.isArray(parts) || parts.length === 0) problem(`${path}.filters`, "expected a non-empty list of filters");
    return { type, filters: parts.map((part, index) => parseFilter(part, `${path}.filters[${index}]`)) };
  }
  return problem(`${path}.type`, `unsupported filter type ${JSON.stringify(type)} (expected eq, in, and or or)`);
}

function onlyKeys(value: Record<string, unknown>, allowed: string[], path: string): void {
  const unknown = Object.keys(value).filter((key) => !allowed.includes(key));
  if (unknown.length > 0) problem(path, `unknown field(s) ${unknown.join(", ")}`);
}

function comparison(type: "eq" | "in", key: string, value: unknown, path: string): ComparisonSearchFilter {
  if (type === "eq") {
    if (typeof value !== "string") problem(path, `expected a string for eq, got ${kindOf(value)}`);
    return { type, key, value };
  }
  if (!Array.isArray(value) || value.length === 0 || !value.every((item) => typeof item === "string")) {
    problem(path, "expected a non-empty list of strings for in");
  }
  return { type, key, value: value as string[] };
}

/** Solr's `fq` list: every entry must hold, as in Solr. */
function parseFilterQueries(value: unknown, path: string): SearchFilter {
  if (!Array.isArray(value) || value.length === 0) problem(path, "expected a non-empty list of key:value strings");
  const filters = value.map((entry, index) => {
    const entryPath = `${path}[${index}]`;
    if (typeof entry !== "string") problem(entryPath, `expected a key:value string, got ${kindOf(entry)}`);
    const parsed = parseBooleanQuery(entry);
    if (!parsed.ok) problem(entryPath, parsed.problem);
    return parsed.filter;
  });
  return allOf(filters) as SearchFilter;
}

// ---------------------------------------------------------------------------------------------
// Combining
// ---------------------------------------------------------------------------------------------

/** The conjunction of the given filters (nulls skipped, nested ands flattened); null when none is left. */
export function allOf(filters: Array<SearchFilter | null>): SearchFilter | null {
  const parts = filters.flatMap((filter) => (filter === null ? [] : filter.type === "and" ? filter.filters : [filter]));
  if (parts.length === 0) return null;
  return parts.length === 1 ? parts[0]! : { type: "and", filters: parts };
}

/** The filter a portal search sends: the request's filter AND the configured static one (SPEC). */
export function searchFilter(query: SolrQuery, staticFilter: SearchFilter | null): SearchFilter | null {
  return allOf([staticFilter, query.filter]);
}

// ---------------------------------------------------------------------------------------------
// Solr boolean queries: portal.chunk_filter_query and `fq` entries
// ---------------------------------------------------------------------------------------------

export type BooleanQueryResult = { ok: true; filter: SearchFilter } | { ok: false; problem: string; unsupported: boolean };

type Token = { kind: "open" | "close" | "and" | "or"; at: number } | { kind: "term"; key: string; value: string; at: number };

/**
 * Parses the simple Solr forms `key:value`, `key:"quoted value"`, AND / OR (also && / ||) and
 * parentheses; AND binds tighter than OR. Adjacent terms without an operator are refused because
 * Solr's default operator is a server setting, so their meaning is not knowable here. Exported for
 * the configuration check of portal.chunk_filter_query.
 */
export function parseBooleanQuery(text: string): BooleanQueryResult {
  try {
    const tokens = tokenize(text);
    if (tokens.length === 0) throw new FilterProblem("empty query");
    let index = 0;
    const peek = () => tokens[index];
    const where = (token: Token | undefined) => (token ? `at character ${token.at + 1}` : "at the end");

    const parseOr = (): SearchFilter => {
      const parts = [parseAnd()];
      while (peek()?.kind === "or") {
        index += 1;
        parts.push(parseAnd());
      }
      return parts.length === 1 ? parts[0]! : { type: "or", filters: parts.flatMap((part) => (part.type === "or" ? part.filters : [part])) };
    };
    const parseAnd = (): SearchFilter => {
      const parts = [parsePrimary()];
      while (peek()?.kind === "and") {
        index += 1;
        parts.push(parsePrimary());
      }
      return allOf(parts)!;
    };
    const parsePrimary = (): SearchFilter => {
      const token = peek();
      if (token?.kind === "term") {
        index += 1;
        return { type: "eq", key: token.key, value: token.value };
      }
      if (token?.kind === "open") {
        index += 1;
        const inner = parseOr();
        if (peek()?.kind !== "close") throw new FilterProblem(`missing ) ${where(peek())}`);
        index += 1;
        return inner;
      }
      throw new FilterProblem(`expected key:value or ( ${where(token)}`);
    };

    const filter = parseOr();
    const rest = peek();
    if (rest) {
      throw new FilterProblem(
        rest.kind === "close"
          ? `unbalanced ) ${where(rest)}`
          : `missing AND or OR ${where(rest)} (an implicit operator depends on the Solr server's settings)`,
      );
    }
    return { ok: true, filter };
  } catch (error) {
    if (error instanceof FilterProblem) return { ok: false, problem: `${error.message} in ${JSON.stringify(text)}`, unsupported: error.unsupported };
    throw error;
  }
}

const OPERATORS: Record<string, "and" | "or"> = { AND: "and", "&&": "and", OR: "or", "||": "or" };
/** Characters that end an unquoted word (Solr also ends words at these). */
const WORD_END = /[\s()"]/;

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let at = 0;
  while (at < text.length) {
    const char = text[at]!;
    if (/\s/.test(char)) {
      at += 1;
    } else if (char === "(" || char === ")") {
      tokens.push({ kind: char === "(" ? "open" : "close", at });
      at += 1;
    } else {
      const start = at;
      const { word, end } = readWord(text, at);
      at = end;
      const operator = OPERATORS[word.raw];
      if (operator) {
        tokens.push({ kind: operator, at: start });
        continue;
      }
      if (OPERATORS[word.raw.toUpperCase()]) {
        // Solr reads lower-case and/or as search terms, which is never what a filter means.
        throw new FilterProblem(`write operators in upper case (AND, OR) at character ${start + 1}, found ${JSON.stringify(word.raw)}`);
      }
      if (word.raw === "NOT" || char === "-" || char === "!" || char === "+") {
        throw new FilterProblem(`negation and prefix operators are not supported at character ${start + 1}`, true);
      }
      const colon = word.colon;
      if (colon <= 0) throw new FilterProblem(`expected key:value at character ${start + 1}, found ${JSON.stringify(word.raw)}`);
      const key = word.text.slice(0, colon);
      const valueStart = start + word.raw.indexOf(":") + 1;
      const next = text[at];
      if (word.text.length === colon + 1) {
        // key: followed directly by ( or " or nothing
        if (next === "\"") {
          const quoted = readQuoted(text, at);
          at = quoted.end;
          tokens.push({ kind: "term", key, value: quoted.value, at: start });
          continue;
        }
        if (next === "(") throw new FilterProblem(`grouped values key:(...) are not supported at character ${valueStart + 1}; write key:a OR key:b`);
        throw new FilterProblem(`missing value after ${JSON.stringify(key + ":")} at character ${valueStart + 1}`);
      }
      const value = word.text.slice(colon + 1);
      if (value.startsWith("[") || value.startsWith("{")) {
        throw new FilterProblem(`range queries are not supported at character ${valueStart + 1}`, true);
      }
      if (word.wildcard) throw new FilterProblem(`wildcards are not supported at character ${valueStart + 1}; quote the value to match * or ? literally`, true);
      tokens.push({ kind: "term", key, value, at: start });
    }
  }
  return tokens;
}

/** An unquoted word from `at`: its raw text, its text with escapes resolved, where its first unescaped colon is. */
function readWord(text: string, at: number) {
  let raw = "";
  let resolved = "";
  let colon = -1;
  let wildcard = false;
  let end = at;
  while (end < text.length && !WORD_END.test(text[end]!)) {
    const char = text[end]!;
    if (char === "\\" && end + 1 < text.length) {
      raw += char + text[end + 1];
      resolved += text[end + 1];
      end += 2;
      continue;
    }
    if (char === ":" && colon < 0) colon = resolved.length;
    else if ((char === "*" || char === "?") && colon >= 0) wildcard = true;
    raw += char;
    resolved += char;
    end += 1;
  }
  return { word: { raw, text: resolved, colon, wildcard }, end };
}

function readQuoted(text: string, at: number): { value: string; end: number } {
  let value = "";
  let end = at + 1;
  while (end < text.length) {
    const char = text[end]!;
    if (char === "\\" && end + 1 < text.length) {
      value += text[end + 1];
      end += 2;
    } else if (char === "\"") {
      return { value, end: end + 1 };
    } else {
      value += char;
      end += 1;
    }
  }
  throw new FilterProblem(`unterminated quote at character ${at + 1}`);
}
