// Roles from JWT claims through the configured role_rules (SPEC "Authentication" 3), with the
// original system's semantics exactly, so its configurations grant the same roles here:
//
// A rule's JSONPath yields the LIST of values it selects (`$.org_id` on {"org_id": "acme"} yields
// ["acme"]; `$.roles` on {"roles": ["a", "b"]} yields [["a", "b"]]; `$.roles[*]` yields ["a", "b"];
// a path that selects nothing yields []). The operator compares that list:
// - equals:   the list deep-equals `value` (so `value` is a list: [acme]);
// - contains: an item of the list deep-equals `value` (`$.roles[*]` contains a);
// - in:       the list deep-equals an item of `value` (so `value` is a list of lists: [[a], [b]]);
// - match:    a string item of the list matches the regular expression `value` (search, unanchored),
//             a Python one, read through worker/auth/python-regex.ts.
// `negate` inverts the result. The roles of every rule that holds are united.
// A `value` of another shape than these (equals with a scalar, in with a list whose items are not
// all lists) loads, as in the original, and the parts of another shape never match
// (roleRuleWarnings tells the operator). Shapes the original cannot compare at all (its `in` with a
// scalar raises) are refused by the configuration schema.
//
// A path without "$" (jsonpath_ng reads `realm_access.roles` from the root) is read as if "$." stood
// in front; one that opens with a bracket as if "$" did.
//
// JSONPath comes from jsonpath-plus with eval "safe": filter expressions such as
// `$.groups[?(@.name == 'x')]` run in its own interpreter, never through eval/new Function, which
// workerd forbids. (Its Node build imports node:vm only for eval "native", which is never selected.)
// A rule whose JSONPath cannot be evaluated never holds, even negated (a broken rule must not hand
// out roles); it is logged once per isolate.
import { JSONPath } from "jsonpath-plus";
import { pythonRegex } from "./python-regex.ts";
import type { RoleRule } from "./types.ts";
import { log } from "../log.ts";

type Claims = Record<string, unknown>;

class BrokenRule extends Error {}

const warned = new Set<string>();

function warnOnce(rule: RoleRule, reason: string): void {
  const key = `${rule.operator} ${rule.jsonpath} ${JSON.stringify(rule.value)} ${reason}`;
  if (warned.has(key)) return;
  warned.add(key);
  log.warn(`role rule (jsonpath ${JSON.stringify(rule.jsonpath)}, operator ${rule.operator}): ${reason}`);
}

function deepEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a) && Array.isArray(b)) {
    return a.length === b.length && a.every((item, i) => deepEqual(item, b[i]));
  }
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = Object.keys(left);
  return keys.length === Object.keys(right).length && keys.every((k) => Object.hasOwn(right, k) && deepEqual(left[k], right[k]));
}

const includesDeep = (list: readonly unknown[], item: unknown) => list.some((x) => deepEqual(x, item));

/** The path as jsonpath_ng reads it, rooted at "$". */
export function rootedPath(path: string): string {
  if (path.startsWith("$")) return path;
  return path.startsWith("[") ? `$${path}` : `$.${path}`;
}

/** The values the rule's path selects, always as a list. */
function select(path: string, claims: Claims): unknown[] {
  try {
    const result = JSONPath({ path: rootedPath(path), json: claims, eval: "safe", wrap: true, resultType: "value", ignoreEvalErrors: true });
    return Array.isArray(result) ? result : [];
  } catch (error) {
    throw new BrokenRule(`invalid JSONPath: ${error instanceof Error ? error.message : String(error)}`);
  }
}

// Compiled once per pattern. The schema refuses patterns that do not compile; a rule built some
// other way may still bring one.
const regexCache = new Map<string, ReturnType<typeof pythonRegex>>();

function regexOf(pattern: string): RegExp {
  let compiled = regexCache.get(pattern);
  if (compiled === undefined) {
    compiled = pythonRegex(pattern);
    regexCache.set(pattern, compiled);
  }
  if (!compiled.ok) throw new BrokenRule(`${compiled.problem}: ${JSON.stringify(pattern)}`);
  return compiled.regex;
}

// Shapes the original cannot compare (it raises); the schema refuses them, so a rule that reaches
// here with one was built some other way and is treated as broken.
function compare(rule: RoleRule, matches: unknown[]): boolean {
  const { operator, value } = rule;
  switch (operator) {
    case "equals":
      // A value that is not a list never equals the list of matches.
      return deepEqual(matches, value);
    case "contains":
      return includesDeep(matches, value);
    case "in":
      if (!Array.isArray(value)) throw new BrokenRule("operator in needs a list of lists");
      // Items that are not lists never equal the list of matches.
      return includesDeep(value, matches);
    case "match": {
      if (typeof value !== "string") throw new BrokenRule("operator match needs a regular expression");
      const regex = regexOf(value);
      return matches.some((match) => typeof match === "string" && regex.test(match));
    }
  }
}

/** Whether the rule holds for these claims (negate applied); false for a broken rule. */
export function ruleHolds(rule: RoleRule, claims: Claims): boolean {
  let matches: unknown[];
  let holds: boolean;
  try {
    matches = select(rule.jsonpath, claims);
    holds = compare(rule, matches);
  } catch (error) {
    if (!(error instanceof BrokenRule)) throw error;
    warnOnce(rule, `ignored: ${error.message}`);
    return false;
  }
  // The commonest mistake: a path to an array claim compares the array as one item.
  if (!holds && rule.operator === "contains" && matches.some((match) => Array.isArray(match) && includesDeep(match, rule.value))) {
    warnOnce(rule, `the path selects an array, which is compared as one item; append [*] to compare its elements`);
  }
  return rule.negate ? !holds : holds;
}

/** The roles of every rule that holds for these claims, each role once, in rule order. */
export function rolesFromClaims(claims: Claims, rules: readonly RoleRule[]): string[] {
  const roles = new Set<string>();
  for (const rule of rules) {
    if (ruleHolds(rule, claims)) for (const role of rule.roles) roles.add(role);
  }
  return [...roles];
}

const RULES_PATH = "authentication.jwk_config.jwt_configuration.role_rules";

/**
 * A line for each rule whose value has parts of a shape that can never match: the original loads
 * them and they never match there either, but they are most likely a list left unwritten.
 */
export function roleRuleWarnings(rules: readonly RoleRule[]): string[] {
  return rules.flatMap((rule, index) => {
    const where = `${RULES_PATH}.${index}.value`;
    const negated = rule.negate ? " (the rule is negated: where it does not hold, it grants its roles)" : "";
    const shown = (value: unknown) => JSON.stringify(value);
    if (rule.operator === "equals" && !Array.isArray(rule.value)) {
      return [
        `${where}: operator "equals" compares the list of values the path selects with ${shown(rule.value)}, which is not a list, so the rule never holds, as in the original; write [${shown(rule.value)}] to compare with ${shown(rule.value)}${negated}`,
      ];
    }
    if (rule.operator === "in" && Array.isArray(rule.value)) {
      return rule.value
        .filter((item) => !Array.isArray(item))
        .map(
          (item) =>
            `${where}: operator "in" looks for the list of values the path selects among the items of the value, and ${shown(item)}, not a list, never equals it, as in the original; write [[${shown(item)}]] to compare with ${shown(item)}${negated}`,
        );
    }
    return [];
  });
}
