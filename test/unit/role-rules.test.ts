// The JWK role rules matrix: every operator, with and without negate, against the list semantics of
// the original system, and the configuration errors for values those semantics can never satisfy.
import { describe, expect, it, vi } from "vitest";
import { rolesFromClaims, ruleHolds } from "../../worker/auth/role-rules.ts";
import type { RoleRule } from "../../worker/auth/types.ts";
import { RoleRuleSchema } from "../../worker/config/schema.ts";

const CLAIMS = {
  sub: "u-1",
  email: "alice@example.com",
  org_id: "dummy_corp",
  orgs: ["dummy_corp"],
  level: 3,
  verified: true,
  nothing: null,
  empty: [],
  realm_access: { roles: ["manager", "superadmin"] },
  groups: [
    { name: "developers", active: true },
    { name: "qa", active: false },
  ],
};

/** A rule as the configuration schema produces it (so the matrix only uses rules that load). */
function rule(jsonpath: string, operator: RoleRule["operator"], value: unknown, negate = false): RoleRule {
  return RoleRuleSchema.parse({ jsonpath, operator, value, negate, roles: ["granted"] });
}

// [jsonpath, operator, value, holds]: negate is checked as the exact opposite of each row.
const MATRIX: Array<[string, RoleRule["operator"], unknown, boolean]> = [
  // equals: the list of matches deep-equals the value
  ["$.org_id", "equals", ["dummy_corp"], true],
  ["$.org_id", "equals", ["other"], false],
  ["$.orgs", "equals", [["dummy_corp"]], true], // the array claim is one match
  ["$.orgs", "equals", ["dummy_corp"], false],
  ["$.orgs[*]", "equals", ["dummy_corp"], true],
  ["$.level", "equals", [3], true],
  ["$.level", "equals", ["3"], false],
  ["$.verified", "equals", [true], true],
  ["$.nothing", "equals", [null], true],
  ["$.realm_access.roles[*]", "equals", ["manager", "superadmin"], true],
  ["$.realm_access.roles[*]", "equals", ["superadmin", "manager"], false], // order matters, as for lists
  ["$.realm_access", "equals", [{ roles: ["manager", "superadmin"] }], true],
  ["$.groups[?(@.active)].name", "equals", ["developers"], true],
  ["$.missing", "equals", [], true], // a path that selects nothing yields []
  ["$.empty[*]", "equals", [], true],
  ["$.missing", "equals", [null], false],
  // a value that is not a list never equals the list of matches (the original loads such rules)
  ["$.org_id", "equals", "dummy_corp", false],
  ["$.level", "equals", 3, false],
  ["$.missing", "equals", null, false],
  // jsonpath_ng reads a path without "$" from the root, as if "$." stood in front
  ["realm_access.roles[*]", "contains", "manager", true],
  ["org_id", "equals", ["dummy_corp"], true],
  ["orgs[*]", "equals", ["dummy_corp"], true],
  // contains: an item of the list of matches deep-equals the value
  ["$.realm_access.roles[*]", "contains", "manager", true],
  ["$.realm_access.roles[*]", "contains", "admin", false], // no substring test
  ["$.realm_access.roles", "contains", "manager", false], // the array is one item: use [*]
  ["$.realm_access.roles", "contains", ["manager", "superadmin"], true],
  ["$.email", "contains", "alice@example.com", true],
  ["$.email", "contains", "@example.com", false],
  ["$..roles[*]", "contains", "superadmin", true],
  ["$.groups[*].name", "contains", "qa", true],
  ["$.groups[*]", "contains", { name: "qa", active: false }, true],
  ["$.groups[*]", "contains", { name: "qa" }, false],
  ["$.level", "contains", 3, true],
  ["$.missing", "contains", "x", false],
  // in: the list of matches deep-equals an item of the value
  ["$.org_id", "in", [["acme"], ["dummy_corp"]], true],
  ["$.org_id", "in", [["acme"]], false],
  ["$.orgs[*]", "in", [["dummy_corp"]], true],
  ["$.orgs", "in", [[["dummy_corp"]]], true],
  ["$.groups[*].name", "in", [["developers", "qa"]], true],
  ["$.groups[*].name", "in", [["qa", "developers"]], false],
  ["$.groups[*].name", "in", [["developers"]], false],
  ["$.missing", "in", [[]], true],
  ["$.missing", "in", [["x"]], false],
  ["$.org_id", "in", ["dummy_corp", "acme"], false], // items that are not lists never equal the list
  ["$.org_id", "in", ["dummy_corp", ["dummy_corp"]], true],
  // match: a string item of the list of matches contains a match of the regular expression
  ["$.email", "match", "@example\\.com$", true],
  ["$.email", "match", "^bob", false],
  ["$.realm_access.roles[*]", "match", "^super", true],
  ["$.realm_access.roles", "match", "^mana", false], // the array is not a string
  ["$.level", "match", "3", false], // nor is a number
  ["$.sub", "match", "1", true], // a search, not anchored
  ["$.groups[*].name", "match", "^q.$", true],
  ["$.missing", "match", ".*", false],
  // match takes the original's Python regular expressions
  ["$.email", "match", "(?i)^ALICE@EXAMPLE\\.COM$", true],
  ["$.email", "match", "(?P<user>ali.*)@", true],
  ["$.email", "match", "(?P<user>bob.*)@", false],
  ["$.email", "match", "^(?P<c>[a-z])l(?P=c)", false],
];

describe("role rules, the original system's list semantics", () => {
  it.each(MATRIX)("%s %s %j → %s", (jsonpath, operator, value, holds) => {
    expect(ruleHolds(rule(jsonpath, operator, value), CLAIMS)).toBe(holds);
    expect(ruleHolds(rule(jsonpath, operator, value, true), CLAIMS)).toBe(!holds);
  });

  it("unites the roles of every rule that holds, each once, in rule order", () => {
    const rules = [
      { ...rule("$.realm_access.roles[*]", "contains", "manager"), roles: ["manager", "reader"] },
      { ...rule("$.email", "match", "@example\\.com$"), roles: ["employee", "reader"] },
      { ...rule("$.org_id", "equals", ["acme"]), roles: ["acme"] },
      { ...rule("$.org_id", "equals", ["acme"], true), roles: ["not-acme"] },
    ];
    expect(rolesFromClaims(CLAIMS, rules)).toEqual(["manager", "reader", "employee", "not-acme"]);
    expect(rolesFromClaims(CLAIMS, [])).toEqual([]);
  });

  it("a rule whose JSONPath cannot be evaluated never holds, even negated, and is logged once", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const broken = { ...rule("$.groups[?(@.name ==)]", "contains", "x", true), roles: ["broken"] };
      for (let i = 0; i < 3; i++) expect(rolesFromClaims(CLAIMS, [broken])).toEqual([]);
      expect(warn).toHaveBeenCalledTimes(1);
      expect(String(warn.mock.calls[0][0])).toMatch(/ignored: invalid JSONPath/);
    } finally {
      warn.mockRestore();
    }
  });

  it("a rule of a shape the schema refuses (built by hand) never holds, even negated", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      const byHand = (operator: RoleRule["operator"], value: unknown): RoleRule => ({ jsonpath: "$.org_id", operator, value, negate: true, roles: ["r"] }) as RoleRule;
      expect(ruleHolds(byHand("in", "dummy_corp"), CLAIMS)).toBe(false);
      expect(ruleHolds(byHand("match", 5), CLAIMS)).toBe(false);
      expect(ruleHolds(byHand("match", "(unclosed"), CLAIMS)).toBe(false);
    } finally {
      warn.mockRestore();
    }
  });

  it("hints at [*] when contains compares a whole array that holds the value", () => {
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      expect(ruleHolds(rule("$.orgs", "contains", "dummy_corp"), CLAIMS)).toBe(false);
      expect(String(warn.mock.calls[0]?.[0])).toMatch(/append \[\*\]/);
    } finally {
      warn.mockRestore();
    }
  });
});

// Each row's answer is what Python's re.search gives (checked with CPython 3.11): the translation keeps
// the Python meaning where JavaScript's differs ($ before a final newline, . and \r, ] first in a
// class, {,n}, verbose mode, \A, \Z, \a, \U).
const PYTHON_SEARCH: Array<[string, string, boolean]> = [
  ["(?i)^.+@redhat\\.com$", "Alice@RedHat.com", true],
  ["(?i)^.+@redhat\\.com$", "alice@redhat.com.evil", false],
  ["^admin$", "admin\n", true],
  ["^admin$", "admin\nx", false],
  ["(?m)^b$", "a\nb\nc", true],
  ["(?m)^b$", "a\rb\rc", false],
  ["a.c", "a\rc", true],
  ["a.c", "a\nc", false],
  ["(?s)a.c", "a\nc", true],
  ["\\Aab", "xab", false],
  ["ab\\Z", "ab\n", false],
  ["[]a]", "]", true],
  ["[^]a]", "b", true],
  ["x{,2}y", "xxy", true],
  ["^x{,2}y", "xxxy", false],
  ["(?x) a b  # comment\n c", "abc", true],
  ["(?x)a\\ b", "a b", true],
  ["(?x)[ ]", " ", true],
  ["a(?#note)b", "ab", true],
  ["\\a", "\u0007", true],
  ["(?P<w>o)(?P=w)", "foo", true],
  ["(?P<w>o)(?P=w)", "fo", false],
  ["\\U0001F600", "\ud83d\ude00", true],
  ["(?a)\\w+", "\u00e9", false],
  ["caf\\u00e9", "caf\u00e9", true],
  ["(?i)ADM", "root-adm", true],
  ["^(?:adm|root)", "rootx", true],
  ["\\d{3}", "a123", true],
];

describe("match reads the original's Python regular expressions as re.search does", () => {
  it.each(PYTHON_SEARCH)("%j on %j → %s", (pattern, subject, found) => {
    const claims = { s: subject };
    expect(ruleHolds(RoleRuleSchema.parse({ jsonpath: "$.s", operator: "match", value: pattern, roles: ["r"] }), claims)).toBe(found);
  });
});

describe("role rule values the list semantics can never satisfy are configuration errors", () => {
  const problems = (operator: string, value: unknown) => {
    const result = RoleRuleSchema.safeParse({ jsonpath: "$.a", operator, value, roles: ["r"] });
    return result.success ? [] : result.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
  };

  it.each([
    ["in", "acme", /^value: must be a list of lists for operator "in"/],
    ["in", { a: [1] }, /^value: must be a list of lists/],
    ["match", ["x"], /^value: must be a regular expression/],
    ["match", "(", /^value: invalid regular expression/],
    ["match", "(?>atomic)", /^value: a Python regular expression JavaScript cannot run: atomic groups/],
    ["match", "a*+", /^value: a Python regular expression JavaScript cannot run: possessive quantifiers/],
    ["match", "(a)?(?(1)b|c)", /^value: a Python regular expression JavaScript cannot run: conditional groups/],
    ["match", "\\N{DIGIT ONE}", /^value: a Python regular expression JavaScript cannot run: named characters/],
    ["match", "a(?i)b", /^value: a Python regular expression JavaScript cannot run: .*flags .* start/],
    ["match", "(?L)a", /^value: a Python regular expression JavaScript cannot run: .*L/],
    ["match", "\\q", /^value: invalid regular expression: bad escape \\q/],
  ])("%s with %j", (operator, value, message) => {
    expect(problems(operator, value)).toEqual([expect.stringMatching(message)]);
  });

  it.each([
    ["equals", []],
    ["equals", ["acme"]],
    ["equals", "acme"],
    ["equals", 3],
    ["equals", { a: 1 }],
    ["equals", null],
    ["contains", "x"],
    ["contains", { any: ["shape"] }],
    ["contains", null],
    ["in", []],
    ["in", [["gold"], ["silver"]]],
    ["in", ["gold", "silver"]],
    ["in", [["gold"], "silver"]],
    ["match", "^x"],
    ["match", "(?i)^.+@redhat\\.com$"],
    ["match", "(?P<user>adm.*)"],
    ["match", "(?P<c>a)(?P=c)"],
    ["match", "(?is)a.b"],
    ["match", "(?i)(?m)^a$"],
  ])("accepts %s with %j", (operator, value) => {
    expect(problems(operator, value)).toEqual([]);
  });
});
