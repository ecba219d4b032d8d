// Malformed input over every endpoint and method (RELIABILITY.md "Malformed input"): requests made
// by fast-check from a valid request of each route the Worker registers, then broken one way each
// (wrong types, missing and extra fields, huge and deeply nested bodies, invalid UTF-8, wrong
// content types, bodies that are not JSON, oversized and junk headers, bad path parameters, bad
// query strings, methods a path does not take). No answer may be a 5xx (in a status, a stream's
// error event or a failed A2A task), every 4xx is SPEC's envelope, and invalid UTF-8 is refused as
// an unparseable body everywhere (RELIABILITY.md "Invalid UTF-8"). Cases are sampled from the seed,
// so case N of a run is case N of every run with that seed: RELIABILITY_SEED=<seed> replays one.
// Requests go through the Worker's own fetch (no HTTP server in between): what the runtime answers
// before the Worker runs is measured over HTTP in test/reliability/system/http-edges.test.ts.
import fc from "fast-check";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { app } from "../../../worker/app.ts";
import { call, callJson, testConfig } from "../../worker/helpers.ts";
import { envelopeProblem, figure, inBatches, scaled, SEED } from "./suite.ts";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonObject = { [key: string]: Json };

const USER = "fuzz-user";
const CASES = scaled(1000, 10_000);
const mcp = inject("mcp");

const config = testConfig({
  user_data_collection: { feedback_enabled: true, feedback_storage: "/tmp/data/feedback", transcripts_enabled: false },
  quota_handlers: { limiters: [{ type: "user_limiter", name: "fuzz", initial_quota: 1_000_000_000, quota_increase: 0, period: "1 day" }] },
  byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/data/docs" }],
  rag: { inline: [], tool: ["docs"] },
  mcp_servers: [{ name: "fuzz-mcp", url: `${mcp.base}/s/fuzz-static/mcp` }],
  rlsapi_v1: { allow_verbose_infer: true, quota_subject: "user_id" },
});

/** Ids the valid requests name, made in beforeAll (a conversation, a prompt, a store of our own). */
const ids = { conversation: "", prompt: "", store: "", file: "file-parley-config", server: `fuzz-server-${crypto.randomUUID().slice(0, 8)}` };

const PARAMS: Record<string, () => string> = {
  conversation_id: () => ids.conversation,
  provider_id: () => "inference_backend",
  prompt_id: () => ids.prompt,
  name: () => ids.server,
  rag_id: () => "docs",
  vector_store_id: () => ids.store,
  file_id: () => ids.file,
  limiter: () => "fuzz",
  subject: () => USER,
};

/** A valid body for every route that reads one, by "METHOD path" as the router knows it. */
function validBody(method: string, path: string): JsonObject | "multipart" | null {
  const query: JsonObject = {
    query: "fuzz question",
    attachments: [{ attachment_type: "log", content_type: "text/plain", content: "a log line" }],
    no_tools: false,
    generate_topic_summary: false,
    shield_ids: [],
    vector_store_ids: ["docs"],
    solr: { mode: "hybrid", filters: { filters: { type: "eq", key: "product", value: "parley" } } },
    media_type: "application/json",
  };
  const bodies: Record<string, JsonObject | "multipart"> = {
    "POST /v1/query": query,
    "POST /v2/query": query,
    "POST /query": query,
    "POST /v1/streaming_query": query,
    "POST /v2/streaming_query": query,
    "POST /streaming_query": query,
    "POST /v1/streaming_query/interrupt": { request_id: "6f1a2b3c-4d5e-4f60-8a7b-8c9d0e1f2a3b" },
    "POST /v1/responses": {
      input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "fuzz input" }] }],
      instructions: "Be brief.",
      temperature: 0.5,
      metadata: { purpose: "fuzz" },
      tools: [{ type: "function", name: "lookup", parameters: { type: "object", properties: { q: { type: "string" } } } }],
      tool_choice: "auto",
      include: ["file_search_call.results"],
      max_tool_calls: 2,
      store: true,
      stream: false,
      generate_topic_summary: false,
    },
    "POST /v1/infer": {
      question: "fuzz question",
      context: {
        stdin: "stdin text",
        attachments: { contents: "attached", mimetype: "text/plain" },
        terminal: { output: "terminal output" },
        systeminfo: { os: "RHEL", version: "9.4", arch: "x86_64", id: "0123456789abcdef" },
      },
      skip_rag: true,
      include_metadata: true,
    },
    "POST /a2a": {
      jsonrpc: "2.0",
      id: "fuzz-1",
      method: "message/send",
      params: { message: { kind: "message", messageId: "m-1", role: "user", parts: [{ kind: "text", text: "fuzz" }] } },
    },
    "POST /v1/feedback": { conversation_id: "", user_question: "q", llm_response: "a", sentiment: 1, user_feedback: "fine", categories: ["incorrect"] },
    "POST /feedback": { conversation_id: "", user_question: "q", llm_response: "a", sentiment: -1 },
    "PUT /v1/feedback/status": { status: true },
    "POST /v1/prompts": { prompt: "Hello {{name}}", variables: ["name"] },
    "POST /v1/prompts/": { prompt: "Hi {{who}}", variables: ["who"] },
    "PUT /v1/prompts/:prompt_id": { prompt: "Hello again {{name}}", version: 1, set_as_default: false, variables: ["name"] },
    "PUT /v1/conversations/:conversation_id": { topic_summary: "fuzzed topic" },
    "PUT /v2/conversations/:conversation_id": { topic_summary: "fuzzed topic" },
    "POST /v1/mcp-servers": { name: "fuzz-registered", url: "https://mcp.example.com/mcp", provider_id: "model-context-protocol", authorization_headers: { Authorization: "client" }, headers: ["x-trace-id"], timeout: 5 },
    "POST /v1/vector-stores": { name: "fuzz store", metadata: { purpose: "fuzz" } },
    "PUT /v1/vector-stores/:vector_store_id": { name: "fuzz store renamed", metadata: { purpose: "fuzz" } },
    "POST /v1/vector-stores/:vector_store_id/files": { file_id: "file-quota-reset", attributes: { product: "parley" } },
    "POST /v1/files": "multipart",
  };
  const body = bodies[`${method} ${path}`];
  if (body === undefined) return null;
  if (body === "multipart") return body;
  const copy = structuredClone(body);
  if (typeof copy.conversation_id === "string") copy.conversation_id = ids.conversation;
  return copy;
}

/** Every route the Worker registers (middleware excluded), and the methods each path takes. */
const ROUTES = [...new Map(app.routes.filter((route) => route.method !== "ALL").map((route) => [`${route.method} ${route.path}`, { method: route.method, path: route.path }])).values()];
const METHODS_OF = new Map<string, Set<string>>();
for (const route of ROUTES) METHODS_OF.set(route.path, (METHODS_OF.get(route.path) ?? new Set()).add(route.method));
/** Routes that read a body, besides the JSON ones; and routes that take a body but never read it. */
const BODILESS = new Set(["POST /authorized"]);

// ---------------------------------------------------------------------------------------------
// The generator

const INVALID_UTF8: number[][] = [[0xff], [0xfe], [0xc0, 0xaf], [0xc3, 0x28], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82], [0x80], [0xf8, 0x88, 0x80, 0x80, 0x80], [0xe0, 0x80, 0xaf]];

const jsonValue = (): fc.Arbitrary<Json> => fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<Json>;
const headerText = (min: number, max: number) => fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)), minLength: min, maxLength: max });
const bigLength = fc.integer({ min: 2 * 1024 * 1024 + 1, max: 4 * 1024 * 1024 });

const mutation = fc.oneof(
  fc.record({ kind: fc.constant("wrong-type" as const), at: fc.nat(), value: jsonValue() }),
  fc.record({ kind: fc.constant("missing" as const), at: fc.array(fc.nat(), { minLength: 1, maxLength: 4 }) }),
  fc.record({ kind: fc.constant("extra" as const), at: fc.nat(), key: fc.string({ minLength: 1, maxLength: 24 }), value: jsonValue() }),
  fc.record({ kind: fc.constant("huge" as const), shape: fc.constantFrom("string", "array", "keys"), bytes: bigLength, at: fc.nat() }),
  // Many entries within the turn size limit (2 MiB), each of the wrong type: validators that report every one.
  fc.record({ kind: fc.constant("wide" as const), shape: fc.constantFrom("array", "keys"), count: fc.integer({ min: 1_000, max: 400_000 }), at: fc.nat() }),
  fc.record({ kind: fc.constant("deep" as const), shape: fc.constantFrom("array", "object", "filter"), depth: fc.integer({ min: 64, max: 20_000 }), at: fc.nat() }),
  fc.record({ kind: fc.constant("utf8-body" as const), bytes: fc.constantFrom(...INVALID_UTF8), at: fc.nat() }),
  fc.record({ kind: fc.constant("utf8-url" as const), bytes: fc.constantFrom(...INVALID_UTF8), inPath: fc.boolean() }),
  fc.record({
    kind: fc.constant("content-type" as const),
    contentType: fc.constantFrom("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=fuzz", "application/xml", "application/json; charset=latin1", "", "*/*", "application/json, text/html"),
    body: fc.constantFrom("valid", "form", "xml"),
  }),
  fc.record({
    kind: fc.constant("not-json" as const),
    text: fc.oneof(fc.string(), fc.string({ unit: "grapheme" }), fc.constantFrom("", "null", "[]", "1", '"text"', "{", '{"query":', "{}{}", "\u0000", "NaN", '{"a":1,}')),
  }),
  fc.record({
    kind: fc.constant("header" as const),
    name: fc.constantFrom("X-Fuzz", "Authorization", "MCP-HEADERS", "X-SVC-Merge-Server-Tools", "Accept", "Content-Type", "X-Forwarded-User", "x-rh-identity", "Cookie"),
    value: fc.oneof(headerText(0, 64), headerText(8 * 1024, 64 * 1024), fc.constantFrom('{"fuzz-mcp":{"X":1}}', "[]", "{", "Bearer", "Bearer ", "Basic Zm9vOmJhcg==", "true")),
    many: fc.integer({ min: 0, max: 300 }),
  }),
  fc.record({
    kind: fc.constant("path-param" as const),
    value: fc.oneof(
      fc.string({ maxLength: 80 }),
      fc.string({ unit: "grapheme", maxLength: 40 }),
      fc.constantFrom("..", "%2e%2e", "a%2Fb", "%00", "%", "%ZZ", "conv_" + "a".repeat(48), "A".repeat(48), "0".repeat(47), "pmpt_" + "0".repeat(48), " ", "%20", "\u202e"),
      headerText(4096, 16_384),
    ),
  }),
  fc.record({
    kind: fc.constant("query" as const),
    pairs: fc.array(fc.tuple(fc.string({ maxLength: 20 }), fc.string({ maxLength: 40 })), { maxLength: 6 }),
    raw: fc.constantFrom("", "&&&", "=", "model_type", "model_type=", "version=0", "version=-1", "version=1e3", "version=99999999999999999999", "%", "%ZZ=1", "user_id=", "a=1&a=2&a=3", "x=" + "y".repeat(32 * 1024)),
  }),
  fc.record({ kind: fc.constantFrom("method" as const), method: fc.constantFrom("GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD") }),
);

const caseArbitrary = fc.record({ route: fc.nat(ROUTES.length - 1), mutation });
type Case = typeof caseArbitrary extends fc.Arbitrary<infer C> ? C : never;

// ---------------------------------------------------------------------------------------------
// Building a request from a case

/** Paths to every value inside `value` (the root excluded), containers included. */
function paths(value: Json, prefix: Array<string | number> = []): Array<Array<string | number>> {
  if (Array.isArray(value)) return value.flatMap((item, index) => [[...prefix, index], ...paths(item, [...prefix, index])]);
  if (value && typeof value === "object") return Object.entries(value).flatMap(([key, item]) => [[...prefix, key], ...paths(item, [...prefix, key])]);
  return [];
}

function parentOf(root: Json, path: Array<string | number>): { parent: Json[] | JsonObject; key: string | number } {
  let node = root as Json[] | JsonObject;
  for (const step of path.slice(0, -1)) node = (node as Record<string | number, Json>)[step] as Json[] | JsonObject;
  return { parent: node, key: path.at(-1)! };
}

function setAt(root: JsonObject, path: Array<string | number>, value: Json): void {
  const { parent, key } = parentOf(root, path);
  (parent as Record<string | number, Json>)[key] = value;
}

function removeAt(root: JsonObject, path: Array<string | number>): void {
  const { parent, key } = parentOf(root, path);
  if (Array.isArray(parent)) parent.splice(Number(key), 1);
  else delete parent[key as string];
}

/** Containers inside `body` (the root included) that an extra field or a nested value can go into. */
function containers(body: JsonObject): Array<Array<string | number>> {
  return [[], ...paths(body).filter((path) => {
    const { parent, key } = parentOf(body, path);
    const value = (parent as Record<string | number, Json>)[key];
    return value !== null && typeof value === "object" && !Array.isArray(value);
  })];
}

function nested(shape: "array" | "object" | "filter", depth: number): string {
  if (shape === "array") return "[".repeat(depth) + "]".repeat(depth);
  if (shape === "object") return '{"a":'.repeat(depth) + "1" + "}".repeat(depth);
  return '{"type":"and","filters":['.repeat(depth) + '{"type":"eq","key":"k","value":"v"}' + "]}".repeat(depth);
}

/** The body text with the value at `path` replaced by raw JSON text (for values too large or deep to build as objects). */
function withRaw(body: JsonObject, path: Array<string | number>, raw: string): string {
  const marker = `@@raw-${crypto.randomUUID()}@@`;
  const copy = structuredClone(body);
  setAt(copy, path, marker);
  return JSON.stringify(copy).replace(JSON.stringify(marker), raw);
}

function encodeBytes(text: string, bad: number[]): Uint8Array {
  // The bad bytes go in the middle of a string value, where a decoder that replaces them keeps the JSON valid.
  const [before, after] = text.split("@@bad@@");
  const head = new TextEncoder().encode(before);
  const tail = new TextEncoder().encode(after);
  const out = new Uint8Array(head.length + bad.length + tail.length);
  out.set(head, 0);
  out.set(bad, head.length);
  out.set(tail, head.length + bad.length);
  return out;
}

const percent = (bytes: number[]) => bytes.map((byte) => `%${byte.toString(16).toUpperCase().padStart(2, "0")}`).join("");

interface Built {
  method: string;
  path: string;
  headers: Headers;
  body?: BodyInit;
  /**
   * The rule the answer is held to beyond "no 5xx, every 4xx in the envelope": invalid UTF-8 in the
   * body or in the URL is 422 Invalid request format (a body on /a2a: JSON-RPC's -32700).
   */
  expect: "any" | "unparseable" | "unparseable-url";
  describe: string;
}

function multipart(filename: string, content: string): FormData {
  const form = new FormData();
  form.append("file", new File([content], filename, { type: "text/plain" }));
  return form;
}

function build(testCase: Case): Built {
  const route = ROUTES[testCase.route]!;
  const m = testCase.mutation as Record<string, unknown> & { kind: string };
  const valid = validBody(route.method, route.path);
  let method = route.method;
  let path = route.path.replace(/:(\w+)/g, (_all, name: string) => encodeURIComponent(PARAMS[name]?.() ?? "x"));
  const headers = new Headers();
  let body: BodyInit | undefined;
  let expect: Built["expect"] = "any";
  const json = valid !== null && valid !== "multipart" && !BODILESS.has(`${route.method} ${route.path}`) ? valid : null;
  if (valid === "multipart") body = multipart("notes.txt", "uploaded by the fuzzer");
  else if (json) {
    body = JSON.stringify(json);
    headers.set("Content-Type", "application/json");
  }
  const query = new URLSearchParams({ user_id: USER });
  const accept = route.path === "/a2a" ? "text/event-stream, application/json" : undefined;
  if (accept) headers.set("Accept", accept);

  switch (m.kind) {
    case "wrong-type":
    case "missing":
    case "extra":
    case "huge":
    case "wide":
    case "deep":
    case "utf8-body": {
      if (!json) {
        // Routes without a JSON body get the same damage in their query string instead.
        query.set("fuzz", JSON.stringify(m).slice(0, 2048));
        break;
      }
      const copy = structuredClone(json);
      const all = paths(copy);
      if (m.kind === "wrong-type") {
        const at = all[(m.at as number) % all.length]!;
        setAt(copy, at, m.value as Json);
        body = JSON.stringify(copy);
      } else if (m.kind === "missing") {
        for (const index of m.at as number[]) {
          const left = paths(copy);
          if (left.length === 0) break;
          removeAt(copy, left[index % left.length]!);
        }
        body = JSON.stringify(copy);
      } else if (m.kind === "extra") {
        const inside = containers(copy);
        const at = inside[(m.at as number) % inside.length]!;
        const target = at.length === 0 ? copy : (parentOf(copy, at).parent as Record<string | number, Json>)[at.at(-1)!] as JsonObject;
        target[m.key as string] = m.value as Json;
        body = JSON.stringify(copy);
      } else if (m.kind === "huge") {
        const bytes = m.bytes as number;
        const raw = m.shape === "string" ? JSON.stringify("x".repeat(bytes)) : m.shape === "array" ? `[${"1,".repeat(Math.floor(bytes / 2) - 1)}1]` : `{${Array.from({ length: Math.floor(bytes / 12) }, (_, i) => `"k${i}":1`).join(",")}}`;
        const at = all.length > 0 ? all[(m.at as number) % all.length]! : ["fuzz"];
        body = withRaw(copy, at, raw);
      } else if (m.kind === "wide") {
        const count = m.count as number;
        const raw = m.shape === "array" ? `[${"0,".repeat(count - 1)}0]` : `{${Array.from({ length: count }, (_, i) => `"${i}":0`).join(",")}}`;
        const at = all.length > 0 ? all[(m.at as number) % all.length]! : ["fuzz"];
        body = withRaw(copy, at, raw);
      } else if (m.kind === "deep") {
        const at = all.length > 0 ? all[(m.at as number) % all.length]! : ["fuzz"];
        body = withRaw(copy, at, nested(m.shape as "array" | "object" | "filter", m.depth as number));
      } else {
        const strings = all.filter((at) => typeof (parentOf(copy, at).parent as Record<string | number, Json>)[at.at(-1)!] === "string");
        const at = strings.length > 0 ? strings[(m.at as number) % strings.length]! : ["fuzz"];
        setAt(copy, at, "before @@bad@@ after");
        body = encodeBytes(JSON.stringify(copy), m.bytes as number[]);
        expect = "unparseable";
      }
      break;
    }
    case "utf8-url": {
      if (m.inPath && /:\w+/.test(route.path)) path = route.path.replace(/:(\w+)/, `abc${percent(m.bytes as number[])}def`).replace(/:(\w+)/g, (_all, name: string) => encodeURIComponent(PARAMS[name]?.() ?? "x"));
      else query.set("fuzz", "@@bad@@");
      expect = "unparseable-url";
      return finish(percent(m.bytes as number[]));
    }
    case "content-type":
      if (m.body === "form") body = "query=fuzz&conversation_id=1";
      else if (m.body === "xml") body = "<query>fuzz</query>";
      else body ??= "{}";
      if (m.contentType === "") headers.delete("Content-Type");
      else headers.set("Content-Type", m.contentType as string);
      break;
    case "not-json":
      body = m.text as string;
      headers.set("Content-Type", "application/json");
      break;
    case "header":
      for (let i = 0; i < (m.many as number); i++) headers.set(`X-Fuzz-${i}`, `value ${i}`);
      headers.set(m.name as string, m.value as string);
      break;
    case "path-param":
      if (/:\w+/.test(route.path)) {
        const value = m.value as string;
        // Values that look percent-encoded are sent as they are; everything else encoded.
        const encoded = /%/.test(value) ? value : encodeURIComponent(value);
        const names = [...route.path.matchAll(/:(\w+)/g)];
        const which = names[value.length % names.length]![1];
        path = route.path.replace(/:(\w+)/g, (_all, name: string) => (name === which ? encoded : encodeURIComponent(PARAMS[name]?.() ?? "x")));
      } else {
        path = `${route.path.replace(/\/$/, "")}/${encodeURIComponent(m.value as string)}`;
      }
      break;
    case "query":
      for (const [key, value] of m.pairs as Array<[string, string]>) query.append(key, value);
      return finish(m.raw as string);
    case "method": {
      const taken = METHODS_OF.get(route.path)!;
      method = m.method as string;
      if (taken.has(method) && method !== "HEAD") method = taken.has("PATCH") ? "TRACE" : "PATCH";
      if (method === "GET" || method === "HEAD") body = undefined;
      break;
    }
  }
  return finish("");

  function finish(rawQuery: string): Built {
    let search = query.toString();
    if (search.includes("%40%40bad%40%40")) search = search.replace("%40%40bad%40%40", percent(m.bytes as number[]));
    if (rawQuery && m.kind === "query") search += `&${rawQuery}`;
    if (method === "GET" || method === "HEAD") body = undefined;
    return {
      method,
      path: `${path}?${search}`,
      headers,
      body,
      expect,
      describe: `${method} ${path.slice(0, 160)} [${m.kind}${m.shape ? `:${m.shape}` : ""}]`,
    };
  }
}

/**
 * Cases every run makes, whatever the seed: invalid UTF-8 in the body of every route that reads a
 * JSON body and in the URL of every route (the rule holds everywhere, not only where the sample
 * fell), a multipart file name that is not UTF-8, and the shapes that once broke the gateway.
 */
function fixedCases(): Built[] {
  const built: Built[] = [];
  const bad = [0xc3, 0x28];
  const json = (method: string, path: string, text: string | Uint8Array, describe: string, expect: Built["expect"] = "any"): Built => ({
    method,
    path: `${path}?user_id=${USER}`,
    headers: new Headers({ "Content-Type": "application/json", ...(path === "/a2a" ? { Accept: "text/event-stream, application/json" } : {}) }),
    body: text,
    expect,
    describe: `${method} ${path} [fixed: ${describe}]`,
  });
  for (const route of ROUTES) {
    const path = route.path.replace(/:(\w+)/g, (_all, name: string) => encodeURIComponent(PARAMS[name]?.() ?? "x"));
    const valid = validBody(route.method, route.path);
    if (valid && valid !== "multipart" && !BODILESS.has(`${route.method} ${route.path}`)) {
      const copy = structuredClone(valid);
      const strings = paths(copy).filter((at) => typeof (parentOf(copy, at).parent as Record<string | number, Json>)[at.at(-1)!] === "string");
      setAt(copy, strings[0] ?? ["fuzz"], "before @@bad@@ after");
      built.push(json(route.method, path, encodeBytes(JSON.stringify(copy), bad), "invalid UTF-8 body", "unparseable"));
    }
    built.push({ method: route.method, path: `${path}?user_id=${USER}&q=${percent(bad)}`, headers: new Headers(), expect: "unparseable-url", describe: `${route.method} ${route.path} [fixed: invalid UTF-8 query]` });
  }
  // A multipart part whose file name is not UTF-8.
  const boundary = "fuzzboundary";
  const head = new TextEncoder().encode(`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="bad`);
  const tail = new TextEncoder().encode(`.txt"\r\nContent-Type: text/plain\r\n\r\ncontent\r\n--${boundary}--\r\n`);
  const multipartBody = new Uint8Array([...head, 0xff, 0xfe, ...tail]);
  built.push({ method: "POST", path: `/v1/files?user_id=${USER}`, headers: new Headers({ "Content-Type": `multipart/form-data; boundary=${boundary}` }), body: multipartBody, expect: "unparseable", describe: "POST /v1/files [fixed: multipart file name not UTF-8]" });
  // Shapes that overflowed the stack of a validator, a filter parser or the Durable Object call.
  const deepSchema = '{"type":"object","properties":{"a":'.repeat(5_000) + "{}" + "}}".repeat(5_000);
  built.push(json("POST", "/v1/responses", `{"input":"deep tools","tools":[{"type":"function","name":"f","parameters":${deepSchema}}]}`, "tool parameters 5000 deep"));
  built.push(json("POST", "/v1/responses", `{"input":"deep metadata","metadata":${nested("object", 5_000)}}`, "metadata 5000 deep"));
  built.push(json("POST", "/v1/query", `{"query":"deep filter","solr":{"mode":"hybrid","filters":${nested("filter", 5_000)}}}`, "solr filter 5000 deep"));
  built.push(json("POST", "/v1/streaming_query", `{"query":"deep filter","solr":{"filters":${nested("filter", 2_000)}}}`, "solr filter 2000 deep"));
  built.push(json("POST", "/v1/query", `{"query":"wide","vector_store_ids":[${"0,".repeat(299_999)}0]}`, "300000 wrong entries"));
  built.push(json("POST", "/v1/feedback", `{"conversation_id":"x","user_question":"q","llm_response":"a","categories":[${"0,".repeat(199_999)}0]}`, "200000 wrong categories"));
  built.push(json("POST", "/v1/mcp-servers", `{"name":"wide","url":"https://mcp.example.com/",${Array.from({ length: 150_000 }, (_, i) => `"k${i}":0`).join(",")}}`, "150000 unknown fields"));
  built.push(json("POST", "/a2a", `{"jsonrpc":"2.0","id":"w","method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[${"0,".repeat(199_999)}0]}}}`, "200000 wrong parts"));
  built.push(json("POST", "/a2a", `{"jsonrpc":"2.0","id":"d","method":"message/send","params":{"message":{"kind":"message","messageId":"m","role":"user","parts":[{"kind":"text","text":"deep"}],"metadata":${nested("object", 5_000)}}}}`, "A2A metadata 5000 deep"));
  return built;
}

// ---------------------------------------------------------------------------------------------
// Judging the answer

/** A 5xx in disguise inside a 200 stream or JSON-RPC answer, or null. */
function hiddenFailure(contentType: string, text: string): string | null {
  if (contentType.startsWith("text/event-stream")) {
    for (const block of text.split("\n\n")) {
      const data = block.split("\n").find((line) => line.startsWith("data: "))?.slice(6);
      if (!data || data === "[DONE]") continue;
      let event: Record<string, unknown>;
      try {
        event = JSON.parse(data) as Record<string, unknown>;
      } catch {
        return `an SSE event that is not JSON: ${data.slice(0, 120)}`;
      }
      const inner = event.data as Record<string, unknown> | undefined;
      if (event.event === "error" && Number(inner?.status_code) >= 500) return `a stream error event ${JSON.stringify(inner).slice(0, 200)}`;
      if (event.type === "response.failed") return `response.failed ${JSON.stringify(event).slice(0, 200)}`;
      const status = ((event.result as Record<string, unknown> | undefined)?.status as Record<string, unknown> | undefined)?.state;
      if (status === "failed") return `an A2A task that failed ${data.slice(0, 200)}`;
    }
  }
  if (contentType.startsWith("text/plain") && text.includes("\n\n[error: ")) return `a plain-text stream that ended in an error: ${text.slice(-200)}`;
  if (contentType.startsWith("application/json")) {
    try {
      const body = JSON.parse(text) as { result?: { status?: { state?: string } }; error?: { code?: number } };
      if (body?.result?.status?.state === "failed") return `an A2A task that failed ${text.slice(0, 200)}`;
      if (typeof body?.error?.code === "number" && (body.error.code === -32603 || body.error.code <= -32000 && body.error.code > -32099 && body.error.code !== -32001 && body.error.code !== -32002)) {
        return `a JSON-RPC server error ${text.slice(0, 200)}`;
      }
    } catch {
      return `a 200 whose JSON body is not JSON: ${text.slice(0, 120)}`;
    }
  }
  return null;
}

function judge(built: Built, status: number, contentType: string, text: string): string | null {
  if (status >= 500) return `answered ${status}: ${text.slice(0, 300)}`;
  const a2a = built.path.startsWith("/a2a?") && built.method === "POST";
  if (built.expect !== "any") {
    if (a2a && built.expect === "unparseable") {
      const error = (JSON.parse(text || "{}") as { error?: { code?: number } }).error;
      if (status !== 200 || error?.code !== -32700) return `invalid UTF-8 on /a2a answered ${status} ${text.slice(0, 200)} (expected JSON-RPC -32700)`;
      return null;
    }
    // Feedback switched off (a generated PUT /v1/feedback/status may do it) is said before the body is read.
    const feedbackOff = status === 403 && built.method === "POST" && /^\/(v1\/)?feedback\?/.test(built.path) && text.includes('"Storing feedback is disabled"');
    if (!feedbackOff && (status !== 422 || !text.includes('"Invalid request format"'))) return `invalid UTF-8 answered ${status} ${text.slice(0, 200)} (expected 422 Invalid request format)`;
  }
  if (status >= 400) return built.method === "HEAD" ? null : envelopeProblem(status, contentType, text);
  return built.method === "HEAD" ? null : hiddenFailure(contentType, text);
}

// ---------------------------------------------------------------------------------------------

beforeAll(async () => {
  const conversation = await callJson<{ conversation_id: string }>("/v1/query", { json: { query: "a conversation for the fuzzer" }, user: USER, config });
  ids.conversation = conversation.body.conversation_id;
  ids.prompt = (await callJson<{ prompt_id: string }>("/v1/prompts", { json: { prompt: "Hello {{name}}", variables: ["name"] }, user: USER, config })).body.prompt_id;
  ids.store = (await callJson<{ id: string }>("/v1/vector-stores", { json: { name: "fuzz store" }, user: USER, config })).body.id;
  await callJson("/v1/vector-stores/" + ids.store + "/files", { json: { file_id: ids.file }, user: USER, config });
  await callJson("/v1/mcp-servers", { json: { name: ids.server, url: "https://mcp.example.com/fuzz" }, user: USER, config });
  expect([ids.conversation, ids.prompt, ids.store].every(Boolean)).toBe(true);
}, 60_000);

describe("malformed requests", () => {
  it("every route the Worker registers that takes a JSON body has a valid one here", () => {
    const missing = ROUTES.filter((route) => ["POST", "PUT", "PATCH"].includes(route.method) && validBody(route.method, route.path) === null && !BODILESS.has(`${route.method} ${route.path}`));
    expect(missing).toEqual([]);
  });

  it(`answer ${CASES} generated requests and the fixed ones without a 5xx, every 4xx in SPEC's envelope, invalid UTF-8 refused`, { timeout: 900_000 }, async () => {
    const cases = fc.sample(caseArbitrary, { seed: SEED, numRuns: CASES });
    const fixed = fixedCases();
    const failures: string[] = [];
    const kinds = new Map<string, number>();
    const statuses = new Map<number, number>();
    const all: Array<Case | Built> = [...cases, ...fixed];
    const judgeAll = (items: Array<Case | Built>, offset: number) => inBatches(items, 6, async (item, at) => {
      const index = offset + at;
      const built = "route" in item ? build(item) : item;
      const kind = "route" in item ? item.mutation.kind : "fixed";
      kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
      let problem: string | null;
      try {
        const response = await call(built.path, { method: built.method, headers: built.headers, body: built.body, config });
        const text = await response.text();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        problem = judge(built, response.status, response.headers.get("Content-Type") ?? "", text);
      } catch (error) {
        problem = `threw ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`;
      }
      if (problem) failures.push(`${index < cases.length ? `case ${index} (seed ${SEED})` : "fixed case"}: ${built.describe}: ${problem}`);
    });
    await judgeAll(cases, 0);
    // The generated cases may have switched feedback off (PUT /v1/feedback/status): the fixed ones find it on.
    await call("/v1/feedback/status", { method: "PUT", json: { status: true }, user: USER, config });
    await judgeAll(fixed, cases.length);
    const routesHit = new Set(cases.map((testCase) => testCase.route)).size;
    figure("malformed requests (Worker)", all.length, failures.length, `${routesHit}/${ROUTES.length} routes; by kind ${JSON.stringify(Object.fromEntries(kinds))}; statuses ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`);
    expect(failures).toEqual([]);
  });
});
