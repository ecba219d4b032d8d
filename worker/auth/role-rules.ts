// Roles from JWT claims through the configured role_rules (SPEC "Authentication" 3).
//
// JSONPath comes from jsonpath-plus with eval "safe": filter expressions such as
// `$.groups[?(@.name == 'x')]` run in its own interpreter, never through eval/new Function, which
// workerd forbids. (Its Node build imports node:vm only for eval "native", which is never selected.)
//
// What an operator compares depends on the path:
// - a singular path (only member names and indexes, e.g. `$.email`, `$.realm_access.roles`) selects
//   one claim value, and the operator applies to that value: equals → deep-equal; contains → the
//   array has the element, or the string has the substring; in → the value is one of `value`;
//   match → the string (or a string element of the array) matches the regex.
// - any other path (wildcards, filters, `..`, slices, unions) yields a list of matches, and the
//   operator applies to the list: equals → the list, or its only match, deep-equals `value`;
//   contains → a match (or an element of a matched array) deep-equals `value` (no substring
//   test here, so `$.roles[*]` contains "admin" does not hold for "superadmin"); in → a match is
//   one of `value`; match → a string match (or string element of a matched array) matches.
// The list forms also accept the established implementation's configs, which always compare the
// list of matches (e.g. equals [["dummy_corp"]] on `$.org_id`).
// A path that selects nothing makes every operator false, so `negate` then holds.
// A rule that cannot be evaluated (bad JSONPath, bad regex, `in` without a list) never holds, even
// negated: a broken rule must not hand out roles. It is logged once per isolate.
import { JSONPath } from "jsonpath-plus";
import type { RoleRule } from "./types.ts";

type Claims = Record<string, unknown>;

class BrokenRule extends Error {}

const warned = new Set<string>();

function warnOnce(rule: RoleRule, reason: string): void {
  const key = `${rule.operator} ${rule.jsonpath} ${String(rule.value)}`;
  if (warned.has(key)) return;
  warned.add(key);
  console.warn(`role rule ignored (jsonpath ${JSON.stringify(rule.jsonpath)}, operator ${rule.operator}): ${reason}`);
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

// Segments that jsonpath-plus's path array holds for anything but a member name or an index.
const NON_SINGULAR_SEGMENT = /^$|^\.\.$|[*,:?@()^~$`]/;

function isSingular(path: string): boolean {
  try {
    const segments = JSONPath.toPathArray(path);
    return segments[0] === "$" && segments.slice(1).every((s) => !NON_SINGULAR_SEGMENT.test(s));
  } catch {
    return false; // the list semantics are the cautious ones (no substring test)
  }
}

function select(path: string, claims: Claims): unknown[] {
  try {
    const result = JSONPath({ path, json: claims, eval: "safe", wrap: true, resultType: "value", ignoreEvalErrors: true });
    return Array.isArray(result) ? result : [];
  } catch (error) {
    throw new BrokenRule(`invalid JSONPath: ${error instanceof Error ? error.message : String(error)}`);
  }
}

const regexCache = new Map<string, RegExp | null>();

function regexOf(rule: RoleRule): RegExp {
  if (typeof rule.value !== "string") throw new BrokenRule("operator match needs a string value (a regular expression)");
  let regex = regexCache.get(rule.value);
  if (regex === undefined) {
    try {
      regex = new RegExp(rule.value);
    } catch {
      regex = null;
    }
    regexCache.set(rule.value, regex);
  }
  if (regex === null) throw new BrokenRule(`invalid regular expression ${JSON.stringify(rule.value)}`);
  return regex;
}

function listValue(rule: RoleRule): unknown[] {
  if (!Array.isArray(rule.value)) throw new BrokenRule("operator in needs a list value");
  return rule.value;
}

/** Strings among the values and among the elements of array values. */
function strings(values: readonly unknown[]): string[] {
  return values.flatMap((v) => (Array.isArray(v) ? v : [v])).filter((v): v is string => typeof v === "string");
}

function holdsForValue(rule: RoleRule, found: unknown): boolean {
  switch (rule.operator) {
    case "equals":
      return deepEqual(found, rule.value) || deepEqual([found], rule.value);
    case "contains":
      if (Array.isArray(found)) return includesDeep(found, rule.value);
      if (typeof found === "string" && typeof rule.value === "string") return found.includes(rule.value);
      return deepEqual(found, rule.value);
    case "in": {
      const allowed = listValue(rule);
      return includesDeep(allowed, found) || includesDeep(allowed, [found]);
    }
    case "match": {
      const regex = regexOf(rule);
      return strings([found]).some((s) => regex.test(s));
    }
  }
}

function holdsForList(rule: RoleRule, matches: unknown[]): boolean {
  switch (rule.operator) {
    case "equals":
      return deepEqual(matches, rule.value) || (matches.length === 1 && deepEqual(matches[0], rule.value));
    case "contains":
      return includesDeep(matches, rule.value) || matches.some((m) => Array.isArray(m) && includesDeep(m, rule.value));
    case "in": {
      const allowed = listValue(rule);
      return matches.some((m) => includesDeep(allowed, m)) || includesDeep(allowed, matches);
    }
    case "match": {
      const regex = regexOf(rule);
      return strings(matches).some((s) => regex.test(s));
    }
  }
}

function ruleHolds(rule: RoleRule, claims: Claims): boolean {
  try {
    const matches = select(rule.jsonpath, claims);
    let holds = false;
    if (matches.length > 0) {
      holds = isSingular(rule.jsonpath) ? holdsForValue(rule, matches[0]) : holdsForList(rule, matches);
    } else {
      // Still validate the rule, so a broken regex or `in` value is reported even when nothing matched.
      if (rule.operator === "match") regexOf(rule);
      if (rule.operator === "in") listValue(rule);
    }
    return rule.negate ? !holds : holds;
  } catch (error) {
    if (!(error instanceof BrokenRule)) throw error;
    warnOnce(rule, error.message);
    return false;
  }
}

/** The roles of every rule that holds for these claims, each role once, in rule order. */
export function rolesFromClaims(claims: Claims, rules: readonly RoleRule[]): string[] {
  const roles = new Set<string>();
  for (const rule of rules) {
    if (ruleHolds(rule, claims)) for (const role of rule.roles) roles.add(role);
  }
  return [...roles];
}
