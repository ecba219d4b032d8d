// The OpenAPI 3.1 document of GET /openapi.json, built from operations.ts: request schemas are the
// routes' own zod schemas as they read bodies (zod's input side), response schemas those of
// wire-schemas.ts as routes write them (output side), all rendered by zod's own JSON Schema
// generator (draft 2020-12, OpenAPI 3.1's dialect). Built once per isolate and kept as plain text.
import * as z from "zod";
import { SERVICE_VERSION } from "../version.ts";
import { operations, REQUEST_SCHEMAS, RESPONSE_SCHEMAS, type Content, type ErrorStatus, type Operation } from "./operations.ts";

type Json = Record<string, unknown>;

// 3.1.0, as the original (FastAPI) writes it; the document uses nothing of 3.1.1's clarifications.
const OPENAPI_VERSION = "3.1.0";
const SCHEMA_REF = (name: string) => `#/components/schemas/${name}`;

/** The shared error answers, one per status, each with SPEC's envelope. */
const ERROR_RESPONSES: Record<ErrorStatus | 500, { name: string; description: string }> = {
  400: { name: "BadRequest", description: "Malformed identifier in the path (or a malformed identity header)" },
  401: { name: "Unauthorized", description: "Missing or invalid credentials" },
  403: { name: "Forbidden", description: "The caller's roles do not grant the action, or the resource is another user's" },
  404: { name: "NotFound", description: "The resource (conversation, model, prompt, store, ...) does not exist" },
  409: { name: "Conflict", description: "Conflicts with the current state" },
  413: { name: "ContentTooLarge", description: "The request or the prompt is too large" },
  422: { name: "UnprocessableContent", description: "The request does not match its schema: the cause names the field" },
  429: { name: "TooManyRequests", description: "A token quota is exhausted" },
  500: { name: "InternalServerError", description: "Configuration not loaded, or an unexpected failure" },
  501: { name: "NotImplemented", description: "No configured provider serves this API" },
  503: { name: "ServiceUnavailable", description: "The inference backend (or the cluster API) cannot be reached" },
};

const TAGS: Array<{ name: string; description: string }> = [
  { name: "Service", description: "Pages, versions, models, probes, configuration, identity" },
  { name: "Query", description: "Ask and stream answers (the query endpoints)" },
  { name: "Responses", description: "The OpenAI Responses wire format" },
  { name: "Infer", description: "The command line assistant's endpoint" },
  { name: "Conversations", description: "The caller's conversations" },
  { name: "Quotas", description: "Token quota counters (extension)" },
  { name: "Prompts", description: "Stored, versioned prompts" },
  { name: "Knowledge", description: "RAG sources, vector stores and files on the backend" },
  { name: "MCP", description: "MCP tools and servers" },
  { name: "Providers", description: "Providers and shields" },
  { name: "Feedback", description: "Feedback on answers" },
  { name: "A2A", description: "Agent-to-agent protocol" },
  { name: "Metrics", description: "Prometheus metrics" },
];

let cached: { document: Json; text: string } | null = null;

/** The document (plain data, built on first use). */
export function openApiDocument(): Json {
  cached ??= build();
  return cached.document;
}

/** The document as JSON text, as /openapi.json sends it. */
export function openApiText(): string {
  cached ??= build();
  return cached.text;
}

function build(): { document: Json; text: string } {
  const paths: Record<string, Json> = {};
  const seenIds = new Set<string>();
  for (const operation of operations()) {
    const id = operationId(operation);
    if (seenIds.has(id)) throw new Error(`OpenAPI: operation ${id} listed twice`);
    seenIds.add(id);
    (paths[operation.path] ??= {})[operation.method] = pathItemOperation(operation, id);
  }
  const document: Json = {
    openapi: OPENAPI_VERSION,
    info: {
      title: "Parley",
      version: SERVICE_VERSION,
      summary: "A conversational inference gateway",
      description:
        "Every error answers `{\"detail\": {\"response\", \"cause\"}}` (ErrorResponse). Which credential a request needs depends on the configured authentication module; which actions a caller may perform, on `authorization.access_rules`.",
    },
    // Relative: the gateway that served this document (/docs "Try it out" calls it there).
    servers: [{ url: "/", description: "This gateway" }],
    tags: TAGS,
    security: [{ bearer: [] }, { rhIdentity: [] }, {}],
    paths,
    components: {
      schemas: componentSchemas(),
      responses: Object.fromEntries(
        Object.values(ERROR_RESPONSES).map(({ name, description }) => [
          name,
          { description, content: { "application/json": { schema: { $ref: SCHEMA_REF("ErrorResponse") } } } },
        ]),
      ),
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description:
            "`Authorization: Bearer <token>`, checked by the configured module (jwk-token, k8s, api-key-token, noop-with-token, trusted-proxy; none with noop). k8s and trusted-proxy answer 503 when the cluster API cannot be reached.",
        },
        rhIdentity: {
          type: "apiKey",
          in: "header",
          name: "x-rh-identity",
          description: "The rh-identity module: a base64 identity document; a malformed one is a 400.",
        },
      },
    },
  };
  return { document, text: JSON.stringify(document) };
}

function operationId(operation: Operation): string {
  const segments = operation.path
    .split("/")
    .filter(Boolean)
    .map((segment) => segment.replace(/[^A-Za-z0-9]+/g, "_").replace(/^_+|_+$/g, ""));
  const trailing = operation.path.length > 1 && operation.path.endsWith("/") ? ["slash"] : [];
  return [operation.method, ...(segments.length > 0 ? segments : ["root"]), ...trailing].join("_");
}

function pathItemOperation(operation: Operation, id: string): Json {
  const parameters = [...pathParameters(operation), ...queryParameters(operation.query)];
  const responses: Json = {
    [String(operation.success.status ?? 200)]: { description: operation.success.description, content: contentOf(operation.success.content) },
  };
  if (operation.alsoAnswers) {
    responses[String(operation.alsoAnswers.status)] = { description: operation.alsoAnswers.description, content: contentOf(operation.success.content) };
  }
  for (const status of errorStatuses(operation)) {
    if (responses[String(status)]) continue;
    responses[String(status)] = { $ref: `#/components/responses/${ERROR_RESPONSES[status].name}` };
  }
  return {
    operationId: id,
    tags: [operation.tag],
    summary: operation.summary,
    description: [operation.description, accessNote(operation)].filter(Boolean).join("\n\n"),
    ...(operation.access === "public" ? { security: [] } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(operation.body ? { requestBody: requestBody(operation.body) } : {}),
    responses,
  };
}

function accessNote(operation: Operation): string {
  if (operation.access === "public") return "No authentication.";
  const skip = operation.skippable ? ` Authentication is skipped when \`authentication.skip_for_${operation.skippable}\` is true.` : "";
  if (operation.access === null) return `Any authenticated caller.${skip}`;
  return `Requires the action \`${operation.access}\` (authorization.access_rules).${skip}`;
}

function errorStatuses(operation: Operation): Array<ErrorStatus | 500> {
  const statuses = new Set<ErrorStatus | 500>(operation.errors ?? []);
  // Any authenticated endpoint: 401 from the module, 403 from an access rule or the module
  // (rh-identity's entitlements), 503 when the module's cluster API cannot be reached (k8s, trusted-proxy).
  if (operation.access !== "public") for (const status of [401, 403, 503] as const) statuses.add(status);
  statuses.add(500);
  return [...statuses].sort((a, b) => a - b);
}

function pathParameters(operation: Operation): Json[] {
  return [...operation.path.matchAll(/\{([^}]+)\}/g)].map(([, name]) => ({
    name,
    in: "path",
    required: true,
    ...(operation.params?.[name!] ? { description: operation.params[name!] } : {}),
    schema: { type: "string" },
  }));
}

function queryParameters(query: z.ZodObject | undefined): Json[] {
  if (!query) return [];
  return Object.entries(query.shape).map(([name, field]) => {
    const schema = tidy(z.toJSONSchema(field as z.ZodType, { target: "draft-2020-12", io: "input", unrepresentable: "any" })) as Json;
    const { description, $schema: _schema, ...rest } = schema;
    return {
      name,
      in: "query",
      required: !(field as z.ZodType).safeParse(undefined).success,
      ...(typeof description === "string" ? { description } : {}),
      schema: rest,
    };
  });
}

function requestBody(body: NonNullable<Operation["body"]>): Json {
  return { required: true, content: { [body.media ?? "application/json"]: { schema: { $ref: SCHEMA_REF(body.schema) } } } };
}

function contentOf(content: Content | Content[]): Json {
  const media: Json = {};
  for (const one of Array.isArray(content) ? content : [content]) {
    switch (one.kind) {
      case "json":
        media["application/json"] = { schema: { $ref: SCHEMA_REF(one.schema) } };
        break;
      case "document":
        media["application/json"] = { schema: { type: "object", description: "An OpenAPI 3.1 document" } };
        break;
      case "html":
        media["text/html"] = { schema: { type: "string" } };
        break;
      case "text":
        media["text/plain"] = { schema: { type: "string", description: one.description } };
        break;
      case "sse":
        media["text/event-stream"] = {
          schema: { type: "string", description: one.description },
          // OpenAPI 3.1 cannot type the events of a stream; this names the schema each data line has.
          ...(one.events ? { "x-event-schema": { $ref: SCHEMA_REF(one.events) } } : {}),
        };
        break;
      case "static":
        media["text/javascript"] = { schema: { type: "string" } };
        media["text/css"] = { schema: { type: "string" } };
        break;
    }
  }
  return media;
}

/** Every named schema, request ones from zod's input side and response ones from its output side. */
function componentSchemas(): Record<string, Json> {
  const render = (schemas: Record<string, z.ZodType>, io: "input" | "output") => {
    const registry = z.registry<{ id: string }>();
    for (const [name, schema] of Object.entries(schemas)) registry.add(schema, { id: name });
    const rendered = z.toJSONSchema(registry, { target: "draft-2020-12", io, uri: SCHEMA_REF, unrepresentable: "any" });
    return rendered.schemas as Record<string, Json>;
  };
  const requests = render(REQUEST_SCHEMAS, "input");
  const responses = render(RESPONSE_SCHEMAS, "output");
  const clash = Object.keys(requests).find((name) => name in responses);
  if (clash) throw new Error(`OpenAPI: schema name ${clash} is both a request and a response`);
  const all: Record<string, Json> = {};
  for (const [name, schema] of Object.entries({ ...requests, ...responses })) {
    const { $schema: _schema, $id: _id, ...rest } = schema;
    all[name] = tidy(rest) as Json;
  }
  return all;
}

/**
 * Drops the `{"not": {}}` branches zod writes for a value that may only be missing (see `either` in
 * turn/responses-request.ts): in a schema they match nothing, and they only confuse readers. Also
 * the safe-integer bounds of every z.int().
 */
function tidy(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(tidy);
  if (!value || typeof value !== "object") return value;
  const object: Json = {};
  for (const [key, child] of Object.entries(value)) object[key] = tidy(child);
  // z.int() bounds every integer by the safe range; as a JSON Schema that is noise to every reader.
  if (object.minimum === Number.MIN_SAFE_INTEGER) delete object.minimum;
  if (object.maximum === Number.MAX_SAFE_INTEGER) delete object.maximum;
  if (Array.isArray(object.anyOf)) {
    const branches = (object.anyOf as unknown[]).filter((branch) => !isNever(branch));
    delete object.anyOf;
    if (branches.length === 0) return { ...object, not: {} };
    if (branches.length === 1) return { ...(branches[0] as Json), ...object };
    object.anyOf = branches;
  }
  return object;
}

function isNever(schema: unknown): boolean {
  if (!schema || typeof schema !== "object") return false;
  const keys = Object.keys(schema);
  const not = (schema as Json).not;
  return keys.length === 1 && keys[0] === "not" && !!not && typeof not === "object" && Object.keys(not).length === 0;
}
