import { describe, expect, it } from "vitest";
import { ApiError } from "../../worker/errors.ts";
import { allOf, DEFAULT_SOLR, parseBooleanQuery, parseSolr, searchFilter, type SearchFilter } from "../../worker/rag/solr.ts";

/** The 422 a value gives; fails the test when it parses. */
function rejection(raw: unknown): ApiError {
  try {
    parseSolr(raw);
  } catch (error) {
    if (error instanceof ApiError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(raw)} to be rejected`);
}

function expectRejected(raw: unknown, ...causeParts: string[]) {
  const error = rejection(raw);
  expect(error.status).toBe(422);
  expect(error.response).toBe("Invalid attribute value");
  for (const part of causeParts) expect(error.cause).toContain(part);
}

const eq = (key: string, value: string): SearchFilter => ({ type: "eq", key, value });

describe("parseSolr: mode", () => {
  it("defaults to hybrid without solr", () => {
    expect(parseSolr(undefined)).toEqual({ mode: "hybrid", filter: null });
    expect(parseSolr(null)).toBe(DEFAULT_SOLR);
  });

  it("accepts each mode and refuses others", () => {
    for (const mode of ["semantic", "hybrid", "lexical"]) expect(parseSolr({ mode })).toEqual({ mode, filter: null });
    expect(parseSolr({ mode: null, filters: null })).toEqual({ mode: "hybrid", filter: null });
    expectRejected({ mode: "vector" }, "solr.mode", "semantic, hybrid, lexical");
    expectRejected({ mode: 1 }, "solr.mode");
  });

  it("refuses a solr value that is not an object, and unknown fields beside mode/filters", () => {
    expectRejected("product:x", "solr", "expected an object");
    expectRejected([1], "solr", "a list");
    expectRejected({ mode: "hybrid", fq: ["a:b"] }, "unknown field(s) fq");
  });
});

describe("parseSolr: filter shapes", () => {
  it("comparison eq and in", () => {
    expect(parseSolr({ filters: { type: "eq", key: "product", value: "openshift" } }).filter).toEqual(eq("product", "openshift"));
    expect(parseSolr({ mode: "lexical", filters: { type: "in", key: "version", value: ["4.17", "4.18"] } })).toEqual({
      mode: "lexical",
      filter: { type: "in", key: "version", value: ["4.17", "4.18"] },
    });
  });

  it("wrapper around one filter", () => {
    expect(parseSolr({ filters: { filters: { type: "eq", key: "a", value: "1" } } }).filter).toEqual(eq("a", "1"));
  });

  it("compound and/or with nesting", () => {
    const filters = {
      type: "and",
      filters: [
        { type: "eq", key: "product", value: "openshift" },
        { type: "or", filters: [{ type: "eq", key: "version", value: "4.18" }, { filters: { type: "in", key: "lang", value: ["en"] } }] },
      ],
    };
    expect(parseSolr({ filters }).filter).toEqual({
      type: "and",
      filters: [
        eq("product", "openshift"),
        { type: "or", filters: [eq("version", "4.18"), { type: "in", key: "lang", value: ["en"] }] },
      ],
    });
  });

  it("raw fq list, entries ANDed, each a boolean query", () => {
    expect(parseSolr({ filters: { fq: ["product:openshift", "version:4.18 OR version:4.17"] } }).filter).toEqual({
      type: "and",
      filters: [eq("product", "openshift"), { type: "or", filters: [eq("version", "4.18"), eq("version", "4.17")] }],
    });
    expect(parseSolr({ filters: { fq: ['title:"Installing OpenShift"'] } }).filter).toEqual(eq("title", "Installing OpenShift"));
  });

  it("an empty filters object restricts nothing", () => {
    expect(parseSolr({ mode: "semantic", filters: {} })).toEqual({ mode: "semantic", filter: null });
  });
});

describe("parseSolr: legacy top-level pairs", () => {
  it("are eq filters (in for lists) with mode hybrid", () => {
    expect(parseSolr({ product: "openshift" })).toEqual({ mode: "hybrid", filter: eq("product", "openshift") });
    expect(parseSolr({ product: "openshift", version: ["4.17", "4.18"] })).toEqual({
      mode: "hybrid",
      filter: { type: "and", filters: [eq("product", "openshift"), { type: "in", key: "version", value: ["4.17", "4.18"] }] },
    });
  });

  it("read Solr's own fq list at the top level", () => {
    expect(parseSolr({ fq: ["product:openshift", "version:4.18"] }).filter).toEqual({
      type: "and",
      filters: [eq("product", "openshift"), eq("version", "4.18")],
    });
    expect(parseSolr({ fq: "product:openshift" }).filter).toEqual(eq("product", "openshift"));
  });

  it("an empty legacy object is no filter", () => {
    expect(parseSolr({})).toEqual({ mode: "hybrid", filter: null });
  });

  it("refuse values that are neither strings nor lists of strings", () => {
    expectRejected({ version: 4.18 }, "solr.version", "expected a string or a list of strings");
    expectRejected({ version: [4] }, "solr.version");
    expectRejected({ version: [] }, "solr.version");
    expectRejected({ product: { type: "eq" } }, "solr.product");
  });
});

describe("parseSolr: 422 for every malformed filter", () => {
  it("range operators are unsupported, never dropped", () => {
    for (const type of ["gt", "gte", "lt", "lte"]) {
      expectRejected({ filters: { type, key: "year", value: "2024" } }, "solr.filters.type", `range operator ${type}`);
    }
    expectRejected(
      { filters: { type: "and", filters: [{ type: "eq", key: "a", value: "b" }, { type: "gte", key: "year", value: "2024" }] } },
      "solr.filters.filters[1].type",
      "range operator gte",
    );
    expectRejected({ filters: { fq: ["year:[2020 TO 2024]"] } }, "solr.filters.fq[0]", "range queries are not supported");
  });

  it("other operators and shapes", () => {
    expectRejected({ filters: { type: "ne", key: "a", value: "b" } }, "unsupported filter type \"ne\"");
    expectRejected({ filters: { type: "eq", key: "a" } }, "solr.filters.value", "expected a string for eq");
    expectRejected({ filters: { type: "eq", key: "a", value: 3 } }, "solr.filters.value");
    expectRejected({ filters: { type: "eq", key: "", value: "b" } }, "solr.filters.key");
    expectRejected({ filters: { type: "eq", value: "b" } }, "solr.filters.key");
    expectRejected({ filters: { type: "eq", key: "a", value: "b", extra: 1 } }, "unknown field(s) extra");
    expectRejected({ filters: { type: "in", key: "a", value: "b" } }, "non-empty list of strings");
    expectRejected({ filters: { type: "in", key: "a", value: [] } }, "non-empty list of strings");
    expectRejected({ filters: { type: "in", key: "a", value: ["b", 1] } }, "non-empty list of strings");
    expectRejected({ filters: { type: "and", filters: [] } }, "solr.filters.filters", "non-empty list");
    expectRejected({ filters: { type: "or", filters: { type: "eq", key: "a", value: "b" } } }, "solr.filters.filters");
    expectRejected({ filters: { type: "and", filters: ["a:b"] } }, "solr.filters.filters[0]", "expected a filter object");
    expectRejected({ filters: { filters: [{ type: "eq", key: "a", value: "b" }] } }, "needs type and or or");
    expectRejected({ filters: { filters: { type: "eq", key: "a", value: "b" }, other: 1 } }, "unknown field(s) other");
    expectRejected({ filters: { key: "a", value: "b" } }, "expected a filter with type");
    expectRejected({ filters: "a:b" }, "solr.filters", "expected a filter object");
    expectRejected({ filters: { fq: [] } }, "solr.filters.fq");
    expectRejected({ filters: { fq: ["a:b"], type: "eq" } }, "unknown field(s) type");
    expectRejected({ filters: { fq: [3] } }, "solr.filters.fq[0]");
  });

  it("fq entries Solr would read differently from a plain eq", () => {
    expectRejected({ filters: { fq: ["product:*openshift*"] } }, "wildcards are not supported");
    expectRejected({ filters: { fq: ["product:openshift version:4.18"] } }, "missing AND or OR");
    expectRejected({ filters: { fq: ["-product:openshift"] } }, "negation");
    expectRejected({ filters: { fq: ["NOT product:openshift"] } }, "negation");
    expectRejected({ filters: { fq: ["openshift"] } }, "expected key:value");
    expectRejected({ filters: { fq: ["product:(a OR b)"] } }, "grouped values");
  });
});

describe("parseBooleanQuery (portal chunk_filter_query)", () => {
  it("parses key:value, AND, OR and parentheses with AND binding tighter", () => {
    expect(parseBooleanQuery("product:openshift")).toEqual({ ok: true, filter: eq("product", "openshift") });
    expect(parseBooleanQuery("a:1 AND b:2 OR c:3")).toEqual({
      ok: true,
      filter: { type: "or", filters: [{ type: "and", filters: [eq("a", "1"), eq("b", "2")] }, eq("c", "3")] },
    });
    expect(parseBooleanQuery("a:1 AND (b:2 || c:3) && d:4")).toEqual({
      ok: true,
      filter: { type: "and", filters: [eq("a", "1"), { type: "or", filters: [eq("b", "2"), eq("c", "3")] }, eq("d", "4")] },
    });
    expect(parseBooleanQuery("((a:1))")).toEqual({ ok: true, filter: eq("a", "1") });
  });

  it("reads quoted values and escapes", () => {
    expect(parseBooleanQuery('title:"a \\"b\\" (c)" AND path:x\\:y')).toEqual({
      ok: true,
      filter: { type: "and", filters: [eq("title", 'a "b" (c)'), eq("path", "x:y")] },
    });
    expect(parseBooleanQuery('kind:"*"')).toEqual({ ok: true, filter: eq("kind", "*") });
    expect(parseBooleanQuery("url:https://x.example/a")).toEqual({ ok: true, filter: eq("url", "https://x.example/a") });
  });

  it("reports what it cannot parse, with the query", () => {
    const problems: Array<[string, string]> = [
      ["", "empty query"],
      ["a:1 AND", "expected key:value or ( at the end"],
      ["(a:1", "missing )"],
      ["a:1)", "unbalanced )"],
      ["a:1 b:2", "missing AND or OR at character 5"],
      ["a:", "missing value"],
      ['a:"open', "unterminated quote"],
      ["a:1 and b:2", "write operators in upper case"],
      ["a:[1 TO 2]", "range queries"],
      ["a:x*", "wildcards"],
    ];
    for (const [query, message] of problems) {
      const result = parseBooleanQuery(query);
      expect(result.ok, query).toBe(false);
      if (!result.ok) {
        expect(result.problem).toContain(message);
        expect(result.problem).toContain(JSON.stringify(query));
      }
    }
  });
});

describe("combining with the static filter", () => {
  const staticFilter = eq("product", "openshift");

  it("ANDs the request's filter with the static one, flattening ands", () => {
    const request = parseSolr({ filters: { type: "and", filters: [{ type: "eq", key: "a", value: "1" }, { type: "eq", key: "b", value: "2" }] } });
    expect(searchFilter(request, staticFilter)).toEqual({ type: "and", filters: [staticFilter, eq("a", "1"), eq("b", "2")] });
    const or = parseSolr({ filters: { type: "or", filters: [{ type: "eq", key: "a", value: "1" }, { type: "eq", key: "b", value: "2" }] } });
    expect(searchFilter(or, staticFilter)).toEqual({ type: "and", filters: [staticFilter, or.filter] });
  });

  it("uses either alone, or none", () => {
    expect(searchFilter(DEFAULT_SOLR, staticFilter)).toEqual(staticFilter);
    expect(searchFilter(parseSolr({ product: "rhel" }), null)).toEqual(eq("product", "rhel"));
    expect(searchFilter(DEFAULT_SOLR, null)).toBeNull();
    expect(allOf([null, null])).toBeNull();
  });
});
