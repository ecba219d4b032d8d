// The exposition text, read back with a real Prometheus text-format parser, and the pure pieces
// behind it: bucket choice, route templates, Llama Stack's provider health.
import { describe, expect, it } from "vitest";
import { FAMILIES } from "../../worker/metrics/families.ts";
import { templateOf } from "../../worker/metrics/middleware.ts";
import { parseProvidersHealth } from "../../worker/metrics/readiness.ts";
import { bucketPart, SeriesSums } from "../../worker/metrics/series.ts";
import { renderExposition } from "../../worker/metrics/text-format.ts";
import { parseExposition } from "../worker/metrics-exposition.ts";

const ALL = Object.values(FAMILIES);

describe("the exposition", () => {
  it("writes every family with HELP and TYPE, samples where there are some, parsed back unchanged", () => {
    const sums = new SeriesSums();
    sums.count(FAMILIES.restApiCalls, { path: "/v1/query", status_code: "200" });
    sums.count(FAMILIES.restApiCalls, { path: "/v1/query", status_code: "200" });
    sums.count(FAMILIES.restApiCalls, { path: "/v1/conversations/{conversation_id}", status_code: "404" });
    sums.observe(FAMILIES.responseDuration, { path: "/v1/query" }, 0.05);
    sums.observe(FAMILIES.responseDuration, { path: "/v1/query" }, 0.7);
    sums.observe(FAMILIES.responseDuration, { path: "/v1/query" }, 500);
    sums.add(FAMILIES.degraded.name, "{}", "", 0);
    const text = renderExposition(ALL, sums.list());
    const { families, samples } = parseExposition(text);

    expect(families.map((family) => family.name)).toEqual(ALL.map((family) => family.name));
    const byName = new Map(families.map((family) => [family.name, family]));
    expect(byName.get("ls_rest_api_calls_total")).toMatchObject({ type: "COUNTER", help: FAMILIES.restApiCalls.help });
    expect(byName.get("ls_rest_api_calls_total")!.metrics).toEqual([
      // Written as floats, as the original's client writes them.
      { labels: { path: "/v1/conversations/{conversation_id}", status_code: "404" }, value: "1.0" },
      { labels: { path: "/v1/query", status_code: "200" }, value: "2.0" },
    ]);
    expect(byName.get("ls_response_duration_seconds")!.type).toBe("HISTOGRAM");
    expect(samples.filter((sample) => sample.name.startsWith("ls_response_duration_seconds"))).toEqual([
      ...Object.entries({ "0.1": 1, "0.5": 1, "1.0": 2, "2.5": 2, "5.0": 2, "10.0": 2, "20.0": 2, "30.0": 2, "60.0": 2, "120.0": 2, "+Inf": 3 }).map(([le, value]) => ({
        name: "ls_response_duration_seconds_bucket",
        labels: { path: "/v1/query", le },
        value,
      })),
      { name: "ls_response_duration_seconds_sum", labels: { path: "/v1/query" }, value: 500.75 },
      { name: "ls_response_duration_seconds_count", labels: { path: "/v1/query" }, value: 3 },
    ]);
    expect(byName.get("ls_started_in_degraded_mode")).toMatchObject({ type: "GAUGE", metrics: [{ value: "0.0" }] });
    expect(byName.get("ls_llm_calls_total")!.metrics).toEqual([]);
  });

  it("escapes label values so any backend's model name survives", () => {
    const sums = new SeriesSums();
    const model = 'odd "name" with \\ and\nnewline';
    sums.count(FAMILIES.llmCalls, { provider: "p", model, endpoint: "/v1/query" });
    const text = renderExposition(ALL, sums.list());
    const calls = parseExposition(text).families.find((family) => family.name === "ls_llm_calls_total")!;
    expect(calls.metrics).toEqual([{ labels: { provider: "p", model, endpoint: "/v1/query" }, value: "1.0" }]);
    expect(text).toContain('model="odd \\"name\\" with \\\\ and\\nnewline"');
  });

  it("adds rows of many shards together", () => {
    const a = new SeriesSums();
    const b = new SeriesSums();
    a.count(FAMILIES.validationErrors, { endpoint: "/v1/query" }, 2);
    b.count(FAMILIES.validationErrors, { endpoint: "/v1/query" }, 3);
    a.observe(FAMILIES.inferenceDuration, { provider: "p", model: "m", endpoint: "/v1/responses", result: "success" }, 1);
    b.observe(FAMILIES.inferenceDuration, { provider: "p", model: "m", endpoint: "/v1/responses", result: "success" }, 3);
    const merged = new SeriesSums();
    merged.addRows(a.take());
    merged.addRows(b.take());
    expect(a.size + b.size).toBe(0);
    const exposition = parseExposition(renderExposition(ALL, merged.list()));
    expect(exposition.get("ls_llm_validation_errors_total", { endpoint: "/v1/query" })).toBe(5);
    const labels = { provider: "p", model: "m", endpoint: "/v1/responses", result: "success" };
    expect(exposition.get("ls_llm_inference_duration_seconds_count", labels)).toBe(2);
    expect(exposition.get("ls_llm_inference_duration_seconds_sum", labels)).toBe(4);
    expect(["0.5", "1.0", "2.5", "5.0", "+Inf"].map((le) => exposition.get("ls_llm_inference_duration_seconds_bucket", { ...labels, le }))).toEqual([0, 1, 1, 2, 2]);
  });
});

describe("pieces", () => {
  it("puts an observation in the smallest bucket whose bound it does not exceed", () => {
    expect([0, 0.1, 0.1001, 1, 2.5, 119.9, 120, 120.5].map(bucketPart)).toEqual(["0.1", "0.1", "0.5", "1.0", "2.5", "120.0", "120.0", "+Inf"]);
  });

  it("writes route templates in SPEC's {param} notation", () => {
    expect(templateOf("/v1/rags/:rag_id")).toBe("/v1/rags/{rag_id}");
    expect(templateOf("/v1/vector-stores/:vector_store_id/files/:file_id")).toBe("/v1/vector-stores/{vector_store_id}/files/{file_id}");
    expect(templateOf("/v1/items/:id{[0-9]+}/:tail?")).toBe("/v1/items/{id}/{tail}");
    expect(templateOf("/liveness")).toBe("/liveness");
  });

  it("reads Llama Stack's provider health and ignores other answers", () => {
    expect(
      parseProvidersHealth({
        data: [
          { api: "inference", provider_id: "vllm", provider_type: "remote::vllm", config: {}, health: { status: "Error", message: "connection refused" } },
          { api: "inference", provider_id: "ollama", provider_type: "remote::ollama", config: {}, health: { status: "OK" } },
          { api: "safety", provider_id: "llama-guard", provider_type: "inline::llama-guard", config: {}, health: { status: "Not Implemented" } },
          { api: "vector_io", provider_id: "faiss", provider_type: "inline::faiss", config: {} },
        ],
      }),
    ).toEqual([
      { provider_id: "vllm", status: "error", message: "connection refused" },
      { provider_id: "ollama", status: "ok", message: "" },
      { provider_id: "llama-guard", status: "not_implemented", message: "" },
      { provider_id: "faiss", status: "unknown", message: "" },
    ]);
    expect(parseProvidersHealth({ object: "list", data: [{ id: "gpt-4o" }] })).toEqual([]);
    expect(parseProvidersHealth("<html>")).toEqual([]);
  });
});
