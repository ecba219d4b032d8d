// GET /openapi.json, GET /docs and the pages' static files: the document is valid OpenAPI 3.1,
// lists every route the app serves with its method (and nothing it does not serve), and says what
// the routes really answer: real answers are checked against the response schemas it is built from.
// The pages are guarded like / (action info) and served from config/public/ through CONFIG_FILES.
import Ajv2020 from "ajv/dist/2020.js";
import ajvFormats from "ajv-formats";
import { Validator } from "@seriousme/openapi-schema-validator";
import openApi31Schema from "@seriousme/openapi-schema-validator/schemas/v3.1/schema.json";
import { describe, expect, it } from "vitest";
import type * as z from "zod";
import { app } from "../../worker/app.ts";
import * as wire from "../../worker/openapi/wire-schemas.ts";
import { call, callJson, eventually, readSse, testConfig } from "./helpers.ts";

type Json = Record<string, unknown>;

/**
 * The package's validator (the OpenAPI 3.1 JSON schema, then every $ref resolved). It reads that
 * schema from disk, and workerd has no file system: the same schema is handed in as a module and
 * compiled as the package does (Ajv 2020-12, its formats, media-range accepted).
 */
class BundledSchemaValidator extends Validator {
  getAjvValidator(version: string) {
    if (version !== "3.1") throw new Error(`only OpenAPI 3.1 is bundled here, not ${version}`);
    const ajv = new Ajv2020({ strict: false });
    const addFormats = ((ajvFormats as unknown as { default?: typeof ajvFormats }).default ?? ajvFormats) as (ajv: Ajv2020) => void;
    addFormats(ajv);
    ajv.addFormat("media-range", true);
    return ajv.compile(openApi31Schema);
  }
}

async function fetchDocument(config?: string): Promise<Json> {
  const response = await call("/openapi.json", { config });
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toContain("application/json");
  return response.json();
}

/** `/v1/conversations/:id` → `/v1/conversations/{id}`; a `{regex}` suffix goes. */
const openApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)(\{[^}]*\})?/g, "{$1}");

/** Every method and path the app routes to a handler (middleware registered with use() is ALL). */
function servedRoutes(): string[] {
  const served = new Set<string>();
  for (const route of app.routes) {
    if (route.method === "ALL") continue;
    served.add(`${route.method.toLowerCase()} ${openApiPath(route.path)}`);
  }
  return [...served].sort();
}

function documentedRoutes(document: Json): string[] {
  const paths = document.paths as Record<string, Record<string, unknown>>;
  return Object.entries(paths)
    .flatMap(([path, item]) => Object.keys(item).map((method) => `${method} ${path}`))
    .sort();
}

/**
 * The answer has the documented shape, and nothing undocumented: parsing drops unknown keys of
 * closed objects, so the parsed value equals the answer only when every key is in the schema.
 */
function expectShape(schema: z.ZodType, value: unknown, what: string): void {
  const parsed = schema.safeParse(value);
  expect(parsed.success ? null : parsed.error.issues, `${what}: ${JSON.stringify(value).slice(0, 400)}`).toBeNull();
  expect(parsed.data, `${what} has undocumented fields`).toEqual(value);
}

describe("GET /openapi.json", () => {
  it("is a valid OpenAPI 3.1 document with every $ref resolvable", async () => {
    const document = await fetchDocument();
    expect(document.openapi).toMatch(/^3\.1\./);
    const result = await new BundledSchemaValidator().validate(document);
    expect(result.errors ?? null).toBeNull();
    expect(result.valid).toBe(true);
  });

  it("lists exactly the routes the app serves, each with its method", async () => {
    const document = await fetchDocument();
    const served = servedRoutes();
    // Sanity: the enumeration sees the routes of every sub-app, these pages included.
    expect(served).toEqual(expect.arrayContaining(["get /", "get /openapi.json", "get /docs", "post /v1/query", "delete /v1/conversations/{conversation_id}", "post /a2a"]));
    expect(documentedRoutes(document)).toEqual(served);
  });

  it("gives every operation an id, a success answer, the shared error envelope and the parameters of its path", async () => {
    const document = await fetchDocument();
    const components = document.components as { schemas: Record<string, Json>; responses: Record<string, Json> };
    expect(components.schemas.ErrorResponse).toMatchObject({ properties: { detail: { properties: { response: { type: "string" }, cause: { type: "string" } } } } });
    const ids = new Set<string>();
    for (const [path, item] of Object.entries(document.paths as Record<string, Record<string, Json>>)) {
      for (const [method, operation] of Object.entries(item)) {
        const where = `${method} ${path}`;
        expect(ids.has(String(operation.operationId)), where).toBe(false);
        ids.add(String(operation.operationId));
        const responses = operation.responses as Record<string, Json>;
        expect(Object.keys(responses).some((status) => status.startsWith("2")), where).toBe(true);
        expect(responses["500"], where).toEqual({ $ref: "#/components/responses/InternalServerError" });
        for (const [status, response] of Object.entries(responses)) {
          if (Number(status) < 400 || path.startsWith("/readiness") || path === "/v1/readiness") continue;
          const body = components.responses[String(response.$ref).split("/").pop()!];
          expect(body, `${where} ${status}`).toMatchObject({ content: { "application/json": { schema: { $ref: "#/components/schemas/ErrorResponse" } } } });
        }
        const names = [...path.matchAll(/\{([^}]+)\}/g)].map(([, name]) => name);
        const parameters = ((operation.parameters ?? []) as Json[]).filter((p) => p.in === "path").map((p) => p.name);
        expect(parameters, where).toEqual(names);
      }
    }
  });

  it("uses the routes' own request schemas, read as clients send them", async () => {
    const { components, paths } = (await fetchDocument()) as { components: { schemas: Record<string, Json> }; paths: Record<string, Record<string, Json>> };
    const query = components.schemas.QueryRequest!;
    expect(query.required).toEqual(["query"]);
    expect(query.additionalProperties).toBe(false);
    expect(Object.keys(query.properties as Json)).toEqual(expect.arrayContaining(["conversation_id", "attachments", "media_type", "solr"]));
    expect(paths["/v1/query"]!.post!.requestBody).toEqual({ required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/QueryRequest" } } } });
    // Fields with defaults are optional for the client (the input side), and the items are shared components.
    const responses = components.schemas.ResponsesRequest!;
    expect(responses.required).toEqual(["input"]);
    expect(JSON.stringify(responses)).toContain('"$ref":"#/components/schemas/InputItem"');
    expect(paths["/v1/models"]!.get!.parameters).toEqual([{ name: "model_type", in: "query", required: false, schema: { type: "string" } }]);
    expect(paths["/v1/files"]!.post!.requestBody).toMatchObject({ content: { "multipart/form-data": { schema: { $ref: "#/components/schemas/FileUpload" } } } });
  });

  it("marks the public routes and the actions of the guarded ones", async () => {
    const { paths } = (await fetchDocument()) as { paths: Record<string, Record<string, Json>> };
    expect(paths["/.well-known/agent-card.json"]!.get!.security).toEqual([]);
    expect(paths["/static/{path}"]!.get!.security).toEqual([]);
    expect(paths["/v1/query"]!.post!.security).toBeUndefined();
    expect(paths["/v1/query"]!.post!.description).toContain("`query`");
    expect(Object.keys(paths["/v1/query"]!.post!.responses as Json)).toEqual(["200", "401", "403", "404", "413", "422", "429", "500", "503"]);
    // Any authenticated route: the module's 401, 403 (an access rule, rh-identity's entitlements) and 503 (its cluster API).
    expect(Object.keys(paths["/authorized"]!.post!.responses as Json)).toEqual(["200", "401", "403", "500", "503"]);
    expect(Object.keys(paths["/v1/shields"]!.get!.responses as Json)).toEqual(["200", "401", "403", "500", "503"]);
  });

  it("names where the gateway is served (relative: the address it was fetched from)", async () => {
    const document = await fetchDocument();
    expect(document.servers).toEqual([{ url: "/", description: "This gateway" }]);
  });
});

describe("the document's response schemas are what the routes answer", () => {
  const limiter = { type: "user_limiter", name: "daily", initial_quota: 100_000, quota_increase: 0, period: "1 day" };
  const config = testConfig({
    byok_rag: [{ rag_id: "docs", vector_db_id: "vs_docs", db_path: "/x" }],
    rag: { inline: ["docs"], tool: [] },
    quota_handlers: { limiters: [limiter] },
    customization: { agent_card_path: "agent-card.yaml" },
  });
  const user = `openapi-${crypto.randomUUID().slice(0, 8)}`;
  const get = async (path: string) => {
    const { status, body } = await callJson(path, { config, user });
    expect(status, path).toBe(200);
    return body;
  };

  it("service endpoints", async () => {
    expectShape(wire.InfoResponseSchema, await get("/v1/info"), "info");
    // Without ?user_id=: /v1/models takes no other query parameter.
    expectShape(wire.ModelsResponseSchema, (await callJson("/v1/models", { config })).body, "models");
    expectShape(wire.ReadinessSchema, await get("/readiness"), "readiness");
    expectShape(wire.LivenessResponseSchema, await get("/liveness"), "liveness");
    expectShape(wire.ConfigurationResponseSchema, await get("/v1/config"), "config");
    expectShape(wire.AuthorizedResponseSchema, (await callJson("/authorized", { method: "POST", config, user })).body, "authorized");
    expectShape(wire.ShieldsResponseSchema, await get("/v1/shields"), "shields");
    const providers = await get("/v1/providers");
    expectShape(wire.ProvidersListSchema, providers, "providers");
    expectShape(wire.ProviderResponseSchema, await get("/v1/providers/inference_backend"), "provider");
    expectShape(wire.ToolsResponseSchema, await get("/v1/tools"), "tools");
    expectShape(wire.McpClientOptionsSchema, await get("/v1/mcp-auth/client-options"), "client options");
    expectShape(wire.McpServersListSchema, await get("/v1/mcp-servers"), "mcp servers");
    expectShape(wire.FeedbackStatusSchema, await get("/v1/feedback/status"), "feedback status");
    expectShape(wire.AgentCardSchema, await get("/.well-known/agent-card.json"), "agent card");
    expectShape(wire.A2AHealthSchema, await get("/a2a/health"), "a2a health");
    expectShape(wire.ErrorResponseSchema, (await callJson("/v1/nothing", { config })).body, "error");
  });

  it("turns, conversations and quotas", async () => {
    const asked = await callJson<Json>("/v1/query", { config, user, json: { query: "quota reset schedule" } });
    expect(asked.status).toBe(200);
    expectShape(wire.QueryResponseSchema, asked.body, "query");
    expect((asked.body.rag_chunks as unknown[]).length).toBeGreaterThan(0);
    const id = String(asked.body.conversation_id);

    const stream = await call("/v1/streaming_query", { config, user, json: { query: "and again", conversation_id: id } });
    const events = await readSse(stream);
    expect(events.map((event) => (event.data as Json).event)).toEqual(expect.arrayContaining(["start", "token", "turn_complete", "end"]));
    for (const event of events) expectShape(wire.QueryStreamEventSchema, event.data, "stream event");

    const responded = await callJson<Json>("/v1/responses", { config, user, json: { input: "hello", conversation: id } });
    expect(responded.status).toBe(200);
    expectShape(wire.ResponseObjectSchema, responded.body, "responses");

    const list = await eventually(async () => {
      const body = await get("/v1/conversations");
      expect(JSON.stringify(body)).toContain(id);
      return body;
    });
    expectShape(wire.ConversationsListSchema, list, "v1 list");
    expectShape(wire.ConversationsCacheListSchema, await get("/v2/conversations"), "v2 list");
    expectShape(wire.ConversationDetailSchema, await get(`/v1/conversations/${id}`), "v1 detail");
    expectShape(wire.ConversationDetailV3Schema, await get(`/v3/conversations/${id}`), "v3 detail");
    expectShape(wire.QuotasResponseSchema, await get("/v1/quotas"), "quotas");
    expectShape(wire.SubjectQuotasResponseSchema, await get(`/v1/quotas/daily/${user}`), "subject quotas");
    const updated = await callJson(`/v1/conversations/${id}`, { config, user, method: "PUT", json: { topic_summary: "openapi" } });
    expectShape(wire.ConversationUpdateResponseSchema, updated.body, "update");
    const deleted = await callJson(`/v1/conversations/${id}`, { config, user, method: "DELETE" });
    expectShape(wire.ConversationDeleteResponseSchema, deleted.body, "delete");

    const inferred = await callJson("/v1/infer", { config, user, json: { question: "hello" } });
    expectShape(wire.InferResponseSchema, inferred.body, "infer");
  });

  it("prompts and knowledge", async () => {
    const created = await callJson<Json>("/v1/prompts", { config, json: { prompt: "Hello {{ name }}", variables: ["name"] } });
    expectShape(wire.PromptResourceSchema, created.body, "prompt");
    expectShape(wire.PromptsListSchema, await get("/v1/prompts"), "prompts");
    expectShape(wire.PromptDeleteResponseSchema, (await callJson(`/v1/prompts/${String(created.body.prompt_id)}`, { config, method: "DELETE" })).body, "prompt delete");

    expectShape(wire.RagListSchema, await get("/v1/rags"), "rags");
    expectShape(wire.RagInfoSchema, await get("/v1/rags/docs"), "rag");
    expectShape(wire.VectorStoresListSchema, await get("/v1/vector-stores"), "stores");
    expectShape(wire.VectorStoreFilesListSchema, await get("/v1/vector-stores/docs/files"), "store files");
    const store = await callJson<Json>("/v1/vector-stores", { config, json: { name: "openapi-shapes" } });
    expectShape(wire.VectorStoreSchema, store.body, "store");
    const upload = new FormData();
    upload.set("file", new File(["some text"], "note.txt", { type: "text/plain" }));
    const file = await callJson<Json>("/v1/files", { config, method: "POST", body: upload });
    expectShape(wire.FileSchema, file.body, "file");
    const added = await callJson(`/v1/vector-stores/${String(store.body.id)}/files`, { config, json: { file_id: file.body.id } });
    expectShape(wire.VectorStoreFileSchema, added.body, "store file");
    const removed = await callJson(`/v1/vector-stores/${String(store.body.id)}/files/${String(file.body.id)}`, { config, method: "DELETE" });
    expectShape(wire.VectorStoreFileDeleteResponseSchema, removed.body, "store file delete");
    expectShape(wire.VectorStoreDeleteResponseSchema, (await callJson(`/v1/vector-stores/${String(store.body.id)}`, { config, method: "DELETE" })).body, "store delete");
  });
});

describe("GET /docs and the pages' files", () => {
  it("serves Swagger UI on the document, its files from config/public/", async () => {
    const page = await call("/docs");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
    const html = await page.text();
    for (const file of ["static/swagger-ui/swagger-ui-bundle.js", "static/swagger-ui/swagger-ui.css", "static/docs.js"]) {
      expect(html).toContain(`"${file}"`);
      const asset = await call(`/${file}`);
      expect(asset.status, `${file} (run node config/copy-swagger-ui.ts)`).toBe(200);
      expect(asset.headers.get("content-type")).toMatch(file.endsWith(".css") ? /text\/css/ : /javascript/);
    }
    const initializer = await (await call("/static/docs.js")).text();
    expect(initializer).toContain("openapi.json");
    expect(initializer).toContain("validatorUrl: null");
  });

  it("revalidates files by ETag", async () => {
    const first = await call("/static/playground.js");
    const etag = first.headers.get("etag");
    expect(etag).toBeTruthy();
    await first.arrayBuffer();
    const again = await call("/static/playground.js", { headers: { "If-None-Match": etag! } });
    expect(again.status).toBe(304);
  });

  it("serves only the pages' scripts, stylesheets and images, nothing else of config/", async () => {
    for (const path of ["/static/parley.yaml", "/static/../parley.yaml", "/static/..%2Fparley.yaml", "/static/%2e%2e/agent-card.yaml", "/static/index.html", "/static/docs.html", "/static/nothing.js"]) {
      const { status, body } = await callJson(path);
      expect(status, path).toBe(404);
      expect(body, path).toMatchObject({ detail: { response: "Not found" } });
    }
  });
});

describe("the playground at /", () => {
  it("is the static page with the configured name, version and environment filled in, escaped", async () => {
    const page = await call("/", { config: testConfig({ name: "Docs <b>&</b> co", deployment_environment: "staging" }) });
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    const html = await page.text();
    expect(html).toContain("<h1>Docs &lt;b&gt;&amp;&lt;/b&gt; co</h1>");
    expect(html).toContain("<span>staging</span>");
    expect(html).not.toContain("data-fill");
    for (const link of ['href="docs"', 'href="openapi.json"', 'href="v1/info"', 'src="static/playground.js"']) expect(html).toContain(link);
  });
});

describe("authorization of the pages", () => {
  const config = testConfig({
    authentication: { module: "api-key-token", api_key_config: { api_key: "openapi-test-key" } },
    authorization: { access_rules: [{ role: "*", actions: ["query"] }] },
  });
  const allowed = testConfig({
    authentication: { module: "api-key-token", api_key_config: { api_key: "openapi-test-key" } },
    authorization: { access_rules: [{ role: "*", actions: ["info"] }] },
  });

  it("answers /, /openapi.json and /docs 401 without credentials and 403 without the info action, as /", async () => {
    for (const path of ["/", "/openapi.json", "/docs"]) {
      expect((await callJson(path, { config })).status, path).toBe(401);
      const forbidden = await callJson(path, { config, token: "openapi-test-key" });
      expect(forbidden, path).toEqual({
        status: 403,
        body: { detail: { response: "User does not have permission to access this endpoint", cause: expect.stringContaining("is not authorized") } },
      });
      expect((await call(path, { config: allowed, token: "openapi-test-key" })).status, path).toBe(200);
    }
  });

  it("serves the pages' files without credentials: they carry no data", async () => {
    expect((await call("/static/playground.js", { config })).status).toBe(200);
  });
});
