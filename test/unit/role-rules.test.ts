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
  // match: a string item of the list of matches contains a match of the regular expression
  ["$.email", "match", "@example\\.com$", true],
  ["$.email", "match", "^bob", false],
  ["$.realm_access.roles[*]", "match", "^super", true],
  ["$.realm_access.roles", "match", "^mana", false], // the array is not a string
  ["$.level", "match", "3", false], // nor is a number
  ["$.sub", "match", "1", true], // a search, not anchored
  ["$.groups[*].name", "match", "^q.$", true],
  ["$.missing", "match", ".*", false],
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
      expect(ruleHolds(byHand("equals", "dummy_corp"), CLAIMS)).toBe(false);
      expect(ruleHolds(byHand("in", ["dummy_corp"]), CLAIMS)).toBe(false);
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

describe("role rule values the list semantics can never satisfy are configuration errors", () => {
  const problems = (operator: string, value: unknown) => {
    const result = RoleRuleSchema.safeParse({ jsonpath: "$.a", operator, value, roles: ["r"] });
    return result.success ? [] : result.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`);
  };

  it.each([
    ["equals", "acme", /^value: must be a list for operator "equals"/],
    ["equals", 3, /^value: must be a list/],
    ["equals", { a: 1 }, /^value: must be a list/],
    ["in", "acme", /^value: must be a list of lists for operator "in"/],
    ["in", ["gold", "silver"], /^value: must be a list of lists/],
    ["in", [["gold"], "silver"], /^value: must be a list of lists/],
    ["in", { a: [1] }, /^value: must be a list of lists/],
    ["match", ["x"], /^value: must be a regular expression/],
    ["match", "(", /^value: invalid regular expression/],
  ])("%s with %j", (operator, value, message) => {
    expect(problems(operator, value)).toEqual([expect.stringMatching(message)]);
  });

  it.each([
    ["equals", []],
    ["equals", ["acme"]],
    ["contains", "x"],
    ["contains", { any: ["shape"] }],
    ["contains", null],
    ["in", []],
    ["in", [["gold"], ["silver"]]],
    ["match", "^x"],
  ])("accepts %s with %j", (operator, value) => {
    expect(problems(operator, value)).toEqual([]);
  });
});
