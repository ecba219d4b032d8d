import { parse as parseYaml, YAMLParseError, type Tags } from "yaml";
import type { z } from "zod";
import { type Config, ConfigSchema } from "./schema.ts";
import { collectSecrets } from "./secrets.ts";

/** A problem with the document: the dotted path of the key and what is wrong with it. */
export interface ConfigProblem {
  path: string;
  message: string;
}

export type ParseConfigResult = (
  | { ok: true; config: Config }
  | {
      ok: false;
      problems: ConfigProblem[];
      /**
       * The top-level sections that are valid on their own, as validation would give them, so that
       * checks beyond the schema (the files they name) can report with the schema's problems.
       */
      sections: Partial<Config>;
    }
) & {
  /** Values of the fields the schema declares secret (of the fields that validated, on failure). */
  secrets: string[];
  /** Dotted paths of the values written as one whole `${env.NAME}` reference. */
  fromEnvironment: Set<string>;
};

type Path = readonly PropertyKey[];

/** A problem found before validation, kept with its path so validation does not repeat it. */
type Problem = { path: Path; message: string };

/**
 * Reads a configuration document (YAML, or JSON), resolves `${env.NAME}` references against
 * `env` and validates it. Its problems come back all at once, each with its dotted path, with the
 * sections that are valid all the same: loading (worker/configuration.ts) reads the files those
 * name and reports what is wrong with them alongside, so an operator fixes a document in one pass.
 */
export function parseConfig(text: string, env: Record<string, unknown>): ParseConfigResult {
  const unreadable = (message: string): ParseConfigResult => ({
    ok: false,
    problems: [{ path: "document", message }],
    sections: {},
    secrets: [],
    fromEnvironment: new Set(),
  });
  const document = readDocument(text);
  if (!document.ok) return unreadable(document.message);
  if (document.value === null || document.value === undefined) return unreadable("the configuration is empty");

  // Named as SPEC names them first, so a reference's problems carry the paths validation reports.
  const references: References = { problems: [], whole: new Set(), empty: [] };
  const resolved = resolveReferences(withSpecNames(document.value), env, [], references);
  const {
    value: { result, sections },
    secrets,
  } = collectSecrets(() => {
    const result = ConfigSchema.safeParse(resolved);
    // Valid as a whole (its only problems unresolved references): every section is, and the files
    // they name are checked all the same.
    return { result, sections: result.success ? result.data : validSections(resolved) };
  });

  const schemaProblems = (result.success ? [] : result.error.issues.flatMap(describeIssue))
    // An unresolved reference also fails validation where it sits; saying so twice is noise.
    .filter((problem) => !references.problems.some((envProblem) => covers(envProblem.path, problem.path)))
    // A value that a set but empty variable left empty fails for being empty, whatever the field's
    // own words for it are (an MCP header's "expected one of kubernetes|client|oauth").
    .map((problem) => {
      const empty = references.empty.find((reference) => covers(reference.path, problem.path));
      return empty ? { path: empty.path, message: `environment variable ${empty.name} is set but empty` } : problem;
    });
  const problems = uniqueProblems([...references.problems, ...schemaProblems].map(({ path, message }) => ({ path: dotted(path), message })));

  if (problems.length > 0 || !result.success) return { ok: false, problems, sections, secrets, fromEnvironment: references.whole };
  return { ok: true, config: result.data, secrets, fromEnvironment: references.whole };
}

/** The top-level sections of `document` that validate on their own. */
function validSections(document: unknown): Partial<Config> {
  if (!isRecord(document)) return {};
  const valid = Object.entries(ConfigSchema.shape).flatMap(([key, schema]) => {
    const section = schema.safeParse(document[key]);
    return section.success ? [[key, section.data] as const] : [];
  });
  return Object.fromEntries(valid) as Partial<Config>;
}

/** `problems` without repeats (several checks of one empty value say the same). */
function uniqueProblems(problems: ConfigProblem[]): ConfigProblem[] {
  const seen = new Set<string>();
  return problems.filter(({ path, message }) => {
    const key = `${path}\n${message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * Sections the original system names otherwise (UPSTREAM "Vocabulary"; `ogx` is what its newer
 * configurations call the backend's section), read under SPEC's names.
 */
const FORMER_NAMES: Record<string, string> = { llama_stack: "inference_backend", ogx: "inference_backend", okp: "portal" };

/**
 * Keys the original system names otherwise inside a section: the portal's address (UPSTREAM
 * "Vocabulary"), and the agent card's security schemes as its newer configurations spell them.
 */
const FORMER_KEYS: Array<{ section: readonly string[]; former: string; name: string }> = [
  { section: ["portal"], former: "rhokp_url", name: "portal_url" },
  { section: ["rag", "okp"], former: "rhokp_url", name: "portal_url" },
  { section: ["customization", "agent_card_config"], former: "security_schemes", name: "securitySchemes" },
];

/**
 * The document with a former name taken as SPEC's, unless both are given (then the schema refuses
 * the former), and without its null settings (see withoutNulls).
 */
function withSpecNames(document: unknown): unknown {
  const sections = withoutNulls(document);
  if (!isRecord(sections)) return sections;
  renamed(sections, FORMER_NAMES);
  for (const { section, former, name } of FORMER_KEYS) {
    let target: unknown = sections;
    for (const key of section) target = isRecord(target) ? target[key] : undefined;
    if (isRecord(target)) renamed(target, { [former]: name });
  }
  return sections;
}

/**
 * `value` with every null setting left out, at any depth: a section or key left empty (`customization:`
 * with its keys commented out), or written as null (as a pydantic model dumps its unset fields),
 * means what leaving it out means, as the original's pydantic reads None for its Optional fields.
 * A setting that may not be left out is then refused as missing.
 */
function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutNulls);
  if (!isRecord(value)) return value;
  return Object.fromEntries(Object.entries(value).flatMap(([key, setting]) => (setting === null ? [] : [[key, withoutNulls(setting)]])));
}

/** SPEC's name of the setting `key` names under `section` when it is one of the original's former names. */
function currentName(section: PropertyKey[], key: string): string | undefined {
  if (section.length === 0) return FORMER_NAMES[key];
  return FORMER_KEYS.find((former) => former.former === key && former.section.length === section.length && former.section.every((part, index) => part === section[index]))?.name;
}

/** Renames the keys of `record` in place, where the new name is not taken. */
function renamed(record: Record<string, unknown>, names: Record<string, string>): void {
  for (const [former, name] of Object.entries(names)) {
    if (former in record && !(name in record)) {
      record[name] = record[former];
      delete record[former];
    }
  }
}

/**
 * A configuration document (or a file it names) as a value: JSON, or YAML read as the original system
 * reads it. A document that cannot be read is reported by where it breaks: V8's words for broken
 * JSON quote the text around the mistake, which may be a secret, so a line and column replace them;
 * the yaml package's first line says what and where (quoting a few characters at most: a tag, an
 * escape sequence, a block scalar header).
 */
export function readDocument(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  const source = text.replace(/^\uFEFF/, "");
  const json = source.trimStart().startsWith("{");
  if (json) {
    try {
      return { ok: true, value: JSON.parse(source) };
    } catch {
      // Read as YAML, as the original's PyYAML reads every document (`"api_key": sk-x` is YAML).
    }
  }
  try {
    return { ok: true, value: parseYaml(source, { version: "1.1", customTags: asPyYaml }) };
  } catch (error) {
    // Both V8's and the yaml package's words about broken JSON quote it (V8 shows the text around
    // the mistake, `..."api_key": sk-topsecr"...`): such a document is told by where alone.
    const at = error instanceof YAMLParseError ? error.linePos?.[0] : undefined;
    if (json) return { ok: false, message: `not valid JSON${at ? ` at line ${at.line}, column ${at.col}` : ""}` };
    const message = error instanceof Error ? error.message : String(error);
    // The yaml package appends a multi-line excerpt of the source; the first line says it all.
    return { ok: false, message: message.split("\n")[0].replace(/:$/, "") };
  }
}

// The original system reads its YAML with PyYAML, which speaks YAML 1.1: configurations written for
// it say `feedback_enabled: yes` (or no, on, off). PyYAML reads y and n as strings, where the yaml
// package's 1.1 schema follows the spec and reads them as booleans too (a provider's `n: 2` would
// become `false: 2`), so its boolean tags take PyYAML's words.
const PYYAML_TRUE = /^(?:yes|Yes|YES|true|True|TRUE|on|On|ON)$/;
const PYYAML_FALSE = /^(?:no|No|NO|false|False|FALSE|off|Off|OFF)$/;
const asPyYaml = (tags: Tags): Tags =>
  tags.map((tag) =>
    typeof tag === "object" && tag.collection === undefined && tag.tag === "tag:yaml.org,2002:bool" ? { ...tag, test: tag.identify?.(true) ? PYYAML_TRUE : PYYAML_FALSE } : tag,
  );

// `${env.NAME}`, `${env.NAME:=fallback}` and `${env.NAME:+if_set}`, read as the original system reads
// them (Llama Stack's replace_env_vars): the fallback stands for a variable unset or empty, the
// `:+` text only for one set and not empty.
const REFERENCE = /\$\{env\.([A-Za-z_][A-Za-z0-9_]*)(?::([=+])([^}]*))?\}/g;

const WHOLE_REFERENCE = /^\$\{env\.([A-Za-z_][A-Za-z0-9_]*)(?::([=+])[^}]*)?\}$/;

/** What resolving a document's references found. */
interface References {
  /** Variables that are not set (or not text), where they are named. */
  problems: Problem[];
  /** Dotted paths of the values written as one whole reference. */
  whole: Set<string>;
  /** Values written as one whole reference to a variable that is set to the empty string. */
  empty: Array<{ path: Path; name: string }>;
}

/**
 * Parts of a document Parley never reads and the original hands to its backend as written, its
 * `${env.NAME}` references too (the backend resolves them): they are not resolved here, so a
 * variable only the backend has does not fail the load.
 */
const BACKEND_OWN: readonly Path[] = [["inference_backend", "config", "native_override"]];

function resolveReferences(value: unknown, env: Record<string, unknown>, path: Path, found: References): unknown {
  if (BACKEND_OWN.some((own) => own.length === path.length && covers(own, path))) return value;
  if (typeof value === "string") {
    const resolved = resolveString(value, env, path, found.problems);
    const whole = WHOLE_REFERENCE.exec(value.trim());
    if (whole) {
      found.whole.add(dotted(path));
      // An empty fallback (or `:+` of an unset variable) leaves the setting out, as the original's
      // None does; a variable named plainly and set empty is told as such where a value is needed.
      if (resolved === "" && whole[2] !== undefined) return undefined;
      if (resolved === "") found.empty.push({ path, name: whole[1]! });
    }
    return resolved;
  }
  if (Array.isArray(value)) return value.map((item, index) => resolveReferences(item, env, [...path, index], found));
  if (isRecord(value)) {
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, resolveReferences(item, env, [...path, key], found)]));
  }
  return value;
}

function resolveString(text: string, env: Record<string, unknown>, path: Path, problems: Problem[]): string {
  return text.replace(REFERENCE, (reference, name: string, operator: "=" | "+" | undefined, given: string | undefined) => {
    const value = env[name];
    if (value === undefined || typeof value === "string") {
      const set = value !== undefined && value !== "";
      if (operator === "=") return set ? value : given!;
      if (operator === "+") return set ? given! : "";
      if (value !== undefined) return value;
    }
    problems.push({
      path,
      message:
        value === undefined
          ? `environment variable ${name} is not set`
          : `environment variable ${name} is not a string`,
    });
    return reference;
  });
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** What is wrong with a value a schema refused: a line per problem, led by its dotted path inside the value. */
export function describeError(error: z.ZodError): string[] {
  return error.issues.flatMap(describeIssue).map(({ path, message }) => (path.length === 0 ? message : `${dotted(path)}: ${message}`));
}

function describeIssue(issue: z.core.$ZodIssue): Problem[] {
  switch (issue.code) {
    case "unrecognized_keys":
      return issue.keys.map((key) => {
        // A former name left beside SPEC's (withSpecNames takes it only alone): both name one setting.
        const name = currentName([...issue.path], key);
        return { path: [...issue.path, key], message: name ? `names the same setting as ${name}: keep one of the two` : "unknown key" };
      });
    case "invalid_union": {
      // Report the alternative the document came closest to, rather than "Invalid input".
      const closest = issue.errors.reduce<z.core.$ZodIssue[] | undefined>(
        (best, branch) => (best === undefined || branch.length < best.length ? branch : best),
        undefined,
      );
      if (closest === undefined || closest.length === 0) break;
      return closest.flatMap((inner) => describeIssue({ ...inner, path: [...issue.path, ...inner.path] }));
    }
    case "invalid_type":
      if (/received undefined$/.test(issue.message)) return [{ path: issue.path, message: "required" }];
      break;
  }
  return [{ path: issue.path, message: issue.message }];
}

function covers(outer: Path, inner: Path): boolean {
  return outer.length <= inner.length && outer.every((key, index) => key === inner[index]);
}

function dotted(path: Path): string {
  return path.length === 0 ? "document" : path.map(String).join(".");
}
