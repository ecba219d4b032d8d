/**
 * Scripted inference backend: a deterministic OpenAI-compatible HTTP server (Responses API and Chat
 * Completions, base path /v1) that stands in for OpenAI / Llama Stack / vLLM / Ollama in the
 * gateway's tests and `npm start`.
 * The wire format follows OpenAI's so a real backend can replace it; the answers are scripted so
 * tests can predict them. Gateway tests are written against the rules below: change them with care.
 *
 * MODELS (GET /v1/models, GET /v1/models/{id}), Llama-Stack style `custom_metadata`:
 *   scripted/parley-small (llm), scripted/parley-large (llm), scripted/parley-embed (embedding, 384).
 *   `created` is fixed (1767225600). A request may name a model by id or by its bare
 *   provider_resource_id ("parley-small"); the response echoes `model` as sent.
 *   Option modelStyle "openai" (CLI --model-style openai) lists them as OpenAI, vLLM and Ollama do:
 *   {id: "parley-small", object: "model", created, owned_by: "scripted"}, no custom_metadata, and
 *   accepts only those bare ids (a prefixed "scripted/parley-small" is 404 model_not_found).
 *
 * POST /v1/responses
 *   Errors (OpenAI shape {error:{message,type,param,code}}, param/code null when not applicable):
 *     body not a JSON object / model missing / input missing or not string|array -> 400;
 *     unknown model -> 404 code model_not_found, message "Model <m> not found";
 *     embedding model -> 400 code model_not_supported.
 *   Q = text of the LAST user message (string content, or its `input_text` parts joined with "\n").
 *   N (user turns) = number of `message` items (or typeless {role, content}) with role "user";
 *   1 for a string input.
 *   Answer text:
 *     instructions contain "summarise a conversation" (compaction) -> "Summary: " + the first 12
 *                           words of Q (markers removed); nothing when Q has #empty-summary; with
 *                           #hold-summary=KEY in Q, answered only once POST /__release {key: KEY}
 *                           has been made (before or after; at most 60 s).
 *     instructions contain "topic summary" (any case) -> "Topic: " + first five words of Q with
 *       markers removed. Such requests ignore every marker (no errors, no tools, no delays), so a
 *       question's markers act on the main call only.
 *     Q contains #echo-request -> JSON.stringify(request body as received).
 *     Q contains #reply=WORD -> WORD alone (a classifier's one-word verdict).
 *     otherwise -> "[user_turns=N] You said: Q" (Q verbatim, markers included).
 *   Markers in Q (a marker ends at a character other than a letter, digit, "_" or "-"):
 *     #context-too-long  -> 400 invalid_request_error, param "input", code context_length_exceeded,
 *                           message starting "This model's maximum context length is 4096 tokens".
 *     #rate-limit        -> 429 rate_limit_error, code rate_limit_exceeded, "Rate limit reached".
 *                           (No retry-after header: the openai SDK retries 429/5xx twice by default.)
 *     #bad-key           -> 400 invalid_request_error, code invalid_api_key, message
 *                           "Incorrect API key provided: <the bearer token the request carried>".
 *     #drop              -> the connection is cut: non-stream after the status line and half the
 *                           body; stream after the first 2 deltas (no terminal event).
 *     #end-early         -> stream: the first 2 deltas, then the stream ends cleanly without its
 *                           terminal event (chat: without finish_reason, with [DONE]); non-stream:
 *                           as usual.
 *     #stall / #stall=MS -> stream: after the first 2 deltas nothing more is sent for MS (default
 *                           150000), then the rest follows; non-stream: the answer waits MS.
 *     #fail-midstream    -> stream: created, in_progress, message item added, content part added,
 *                           the first 2 deltas, then an `error` event {code:"server_error",
 *                           message:"scripted failure", param:null} and `response.failed` (status
 *                           "failed", error {code:"server_error", message:"scripted failure"},
 *                           the partial message as status "incomplete"); the stream then ends.
 *                           Non-stream -> 500 {error:{message:"scripted failure",type:"server_error"}}.
 *     #slow / #slow=MS   -> MS (default 200) extra between deltas; a non-stream answer waits
 *                           deltas x MS before answering.
 *     #status=CODE       -> HTTP CODE (400 to 599) before anything else, OpenAI's error shape:
 *                           {error:{message:"scripted status CODE", type: "server_error" for 5xx,
 *                           "rate_limit_error" for 429, else "invalid_request_error", param:null,
 *                           code:null}}; stream or not.
 *     #late / #late=MS   -> nothing at all (not even the status line) for MS (default 150000), then
 *                           the answer as usual: a backend slower than any time-out.
 *     #stall-headers / #stall-headers=MS -> the status line and headers (200) are sent at once, then
 *                           nothing for MS (default 150000), then the body: stream, every event;
 *                           non-stream, the JSON (chunked, no content-length).
 *     #garbled           -> malformed answers: stream, after the first 2 deltas one event whose
 *                           data is not JSON (`data: {"type":"response.output_text.delta","delta":`),
 *                           then the rest as usual; non-stream, 200 application/json whose body is
 *                           not JSON (a response object cut in half, content-length matching it).
 *     #misshapen         -> answers that are JSON but not of the wire's shape: stream, after the
 *                           first 2 deltas a response.output_text.delta whose delta is the number
 *                           42, then the rest as usual; non-stream, the answer with output: null.
 *     #ignore-stream     -> a streamed call is answered as a JSON one (application/json), as by a
 *                           server that ignores stream: true.
 *     #call-tool:NAME    -> a `function_call` item {id:"fc_…", call_id:"call_…", name:NAME,
 *                           arguments: JSON.stringify({query: Q}), status:"completed"} before the
 *                           message, unless a `function_call_output` item follows the last user
 *                           message (the tool result is being handed back: no loop).
 *     #call-tool:NAME:{JSON} -> the same with those arguments (JSON without spaces). Several
 *                           #call-tool markers call several tools, in their order.
 *     #keep-calling      -> the #call-tool markers apply to every request, tool results or not (a
 *                           model that never stops calling tools).
 *     After function_call_output items following the last user message, the answer ends with
 *     " [tool outputs: <output> | <output> ...]".
 *     #mcp-call:LABEL:NAME -> an `mcp_call` item {id:"mcp_…", server_label:LABEL, name:NAME,
 *                           arguments: JSON.stringify({query: Q}), output:"scripted tool output",
 *                           error:null, status:"completed"} before the message.
 *     #file-search       -> when the request has a `file_search` tool: search its vector_store_ids
 *                           (its max_num_results, filters, ranking_options.score_threshold) with Q
 *                           minus markers and emit {type:"file_search_call", id:"fs_…",
 *                           status:"completed", queries:[that query], results:[{file_id, filename,
 *                           score, text, attributes, vector_store_id}]} before the message (results
 *                           always included). Unknown store id -> 404. No tool -> no item.
 *     Items come in the order function_call, mcp_call, file_search_call, message.
 *     Error checks run in the order: request validation, #context-too-long, #rate-limit, stores.
 *   Deltas: the answer split after each run of whitespace ("a b c" -> "a ", "b ", "c");
 *     deltas joined == answer exactly.
 *   usage: input_tokens = whitespace-separated words in instructions + every message's text parts
 *     (input_text/output_text or string content) + function_call_output outputs; output_tokens =
 *     number of deltas; total_tokens = sum; input_tokens_details.cached_tokens 0,
 *     output_tokens_details.reasoning_tokens 0.
 *   Response: OpenAI's object (id "resp_" + 48 hex, status, created_at, completed_at, error,
 *     incomplete_details, instructions, model, output, parallel_tool_calls, previous_response_id,
 *     temperature, tool_choice, tools, top_p, text, truncation, usage, metadata, store, ...), with
 *     request fields echoed and OpenAI's defaults otherwise. No `output_text` on the wire (the SDK
 *     derives it). `conversation` and `previous_response_id` are echoed, never resolved: the input
 *     sent is the whole context the scripted model sees.
 *   Message item {type:"message", id:"msg_" + 48 hex, status:"completed", role:"assistant",
 *     content:[{type:"output_text", text, annotations:[], logprobs:[]}]}.
 *   Streaming (stream: true): text/event-stream, "event: <type>\ndata: <json>\n\n", sequence_number
 *     from 0: response.created, response.in_progress (both status in_progress, output [], usage
 *     null); per tool item: output_item.added, its OpenAI progress events
 *     (function_call_arguments.delta/done; mcp_call.in_progress, mcp_call_arguments.delta/done,
 *     mcp_call.completed; file_search_call.in_progress/searching/completed), output_item.done; then
 *     output_item.added (message), content_part.added, output_text.delta x n (item_id,
 *     output_index, content_index 0, delta, logprobs []), output_text.done, content_part.done,
 *     output_item.done, response.completed (the full response). No [DONE]. firstTokenDelayMs
 *     before the first delta, tokenDelayMs (+ #slow) between deltas; a client disconnect stops it.
 *
 * POST /v1/chat/completions (test/fakes/scripted-chat.ts): the same answers from the same planner,
 *   in OpenAI's chat wire format.
 *   Errors: as for /v1/responses (model missing, unknown or embedding; #context-too-long,
 *     #rate-limit, #bad-key), plus: messages missing or empty -> 400; a message that is not an
 *     object with role system|developer|user|assistant|tool -> 400; OpenAI's pairing rules: an
 *     assistant message with tool_calls must be followed by a tool message for each tool_call_id,
 *     and a tool message must answer a preceding tool call -> 400; stream_options without
 *     stream: true -> 400; with option rejectStreamOptions any stream_options -> 400
 *     "Unrecognized request argument supplied: stream_options".
 *   The request is read as the Responses request it stands for: system and developer messages
 *     (joined with "\n") are the instructions (topic summary, input words), user messages (a string,
 *     or their `text` parts joined with "\n") input_text, assistant text output_text, assistant
 *     tool_calls function calls, tool messages function_call_output. So Q, N, the answer text and
 *     the usage are those /v1/responses gives for the same conversation. #echo-request echoes the
 *     chat body as received.
 *   #call-tool:NAME -> message.tool_calls [{id: "call_…", type: "function", function: {name: NAME,
 *     arguments: JSON.stringify({query: Q})}}] beside the answer text, finish_reason "tool_calls"
 *     (none when a tool message follows the last user message). #mcp-call and #file-search have no
 *     chat form and add nothing.
 *   JSON: {id: "chatcmpl-…", object: "chat.completion", created, model (as sent), choices: [{index:
 *     0, message: {role: "assistant", content: answer, refusal: null, annotations: [], tool_calls?},
 *     logprobs: null, finish_reason: "stop" | "tool_calls"}], usage: {prompt_tokens (= the Responses
 *     input_tokens), completion_tokens (= number of deltas), total_tokens, prompt_tokens_details:
 *     {cached_tokens: 0}, completion_tokens_details: {reasoning_tokens: 0}}, service_tier: "default",
 *     system_fingerprint: null}.
 *   Stream (stream: true): "data: <chunk>\n\n" (no event names); each chunk {id, object:
 *     "chat.completion.chunk", created, model, service_tier, system_fingerprint, choices: [{index: 0,
 *     delta, logprobs: null, finish_reason: null}]}, plus usage: null when include_usage. First
 *     delta {role: "assistant", content: "", refusal: null}; per tool call {tool_calls: [{index, id,
 *     type: "function", function: {name, arguments: ""}}]} and then its arguments in two pieces;
 *     then {content: delta} per delta (delays, #slow, #stall, #drop, #late, #stall-headers, #status
 *     as for /v1/responses; #garbled: before the third delta a `data:` line that is not JSON;
 *     #misshapen: before the third delta a chunk whose delta content is the number 42); then {}
 *     with finish_reason; with stream_options.include_usage a last chunk {choices: [], usage}; then
 *     "data: [DONE]". #fail-midstream: after 2 deltas a chunk {error: {message: "scripted failure",
 *     type: "server_error", param: null, code: "server_error"}} and the stream ends (no [DONE]).
 *     Non-stream #fail-midstream -> 500 as for /v1/responses; non-stream #drop, #garbled and
 *     #stall-headers as for /v1/responses; non-stream #misshapen: the answer with choices: null;
 *     #ignore-stream as for /v1/responses.
 *   Option omitUsage (CLI --omit-usage): no usage in JSON answers and no usage chunk.
 *
 * CHAT-ONLY (option chatOnly, CLI --chat-only): only GET /v1/models[/{id}], POST
 *   /v1/chat/completions and the test controls are served; everything else under /v1 (responses,
 *   moderations, files, vector stores) is 404 "Invalid URL", as on Ollama or llama.cpp's server.
 *
 * POST /v1/moderations {input: string | string[] | [{type:"text", text}], model?}: one result per
 *   input; flagged iff the text contains #unsafe (categories.violence true, score 0.99, every other
 *   category false / 0); no result for an input that contains #no-verdict. Any model name is
 *   accepted (default "omni-moderation-latest").
 *
 * Files and vector stores (in memory, OpenAI shapes; unknown ids -> 404 invalid_request_error):
 *   POST /v1/files (multipart: file, purpose), GET /v1/files, GET|DELETE /v1/files/{id},
 *   GET /v1/files/{id}/content; POST|GET /v1/vector_stores, GET|POST|DELETE /v1/vector_stores/{id},
 *   POST /v1/vector_stores/{id}/search, POST|GET /v1/vector_stores/{id}/files,
 *   GET|POST(attributes)|DELETE /v1/vector_stores/{id}/files/{file_id},
 *   GET /v1/vector_stores/{id}/files/{file_id}/content.
 *   Lists: {object:"list", data, first_id, last_id, has_more}, `limit` (default 20), `order`
 *   (default desc = newest first), `after`/`before` cursors.
 *   A file attached to a store is split into chunks of 40 words (the store keeps its own copy, so
 *   deleting the file later does not change search). Search score = fraction of the distinct query
 *   words (lowercased, split on non-letters/digits, markers removed) present in the chunk; chunks
 *   scoring 0 or below ranking_options.score_threshold are dropped; order: score desc, file_id asc,
 *   chunk order. max_num_results 1..50 (default 10). Filters: {type: eq|ne|gt|gte|lt|lte|in|nin,
 *   key, value} and {type: and|or, filters}; strict equality, ranges compare two numbers or two
 *   strings; a missing attribute matches only ne and nin. Search page: {object:
 *   "vector_store.search_results.page", search_query (the query as sent), data:[{file_id,
 *   filename, score, attributes, content:[{type:"text", text}]}], has_more:false, next_page:null}.
 *
 * Seed (option seed, default true; also restored by POST /__reset), created_at 1767225600:
 *   vs_docs "docs":      file-parley-config (parley-gateway-configuration.md, 2 chunks),
 *                        file-quota-reset (quota-reset.md, 2 chunks);
 *                        attributes doc_url, title, document_id, product "parley", version.
 *   portal-rag "portal": file-openshift-install (openshift-install.md, 2 chunks);
 *                        attributes parent_id, reference_url, doc_url, title.
 *   See SEED_FILES for the exact texts and attributes.
 *
 * Test control (not under /v1, not recorded): GET /__requests (recorded requests as JSON),
 *   DELETE /__requests (clear, 204), POST /__reset (clear requests, restore the seed, 204, and end
 *   an outage), POST /__outage {down: boolean} (204; while down, every /v1 request's connection is
 *   cut before any answer, as a server that went away; give such a test its own backend instance),
 *   POST /__release {key} (204; lets the summaries held by #hold-summary=KEY be answered).
 * Anything else -> 404 "Invalid URL (METHOD path)". Bad JSON -> 400. Handler failures -> 500.
 */

import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { listenOn } from "./listen.ts";
import { setTimeout as sleep } from "node:timers/promises";
import { createChatCompletion } from "./scripted-chat.ts";

export interface ScriptedBackendOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  firstTokenDelayMs?: number;
  tokenDelayMs?: number;
  /** Pre-create the vs_docs and portal-rag stores (default true). */
  seed?: boolean;
  /** How models are listed and named (see MODELS above); default "llama-stack". */
  modelStyle?: ModelStyle;
  /** Serve only models and chat completions, as Ollama or llama.cpp do (see CHAT-ONLY above). */
  chatOnly?: boolean;
  /** Refuse `stream_options` with 400, as some compatible servers do. */
  rejectStreamOptions?: boolean;
  /** Never report usage in chat completions (JSON or stream), as some servers do not. */
  omitUsage?: boolean;
  /**
   * How many of the latest requests `requests` (and GET /__requests) keeps; default all. A backend
   * that runs for hours (`npm start`, the benchmark) would otherwise keep every body it was sent.
   */
  recordLimit?: number;
}

export interface RecordedRequest {
  method: string;
  /** Path without the query string, e.g. "/v1/responses". */
  path: string;
  /** Query string including "?", or "". */
  query: string;
  /** Parsed JSON body, or null (no body, multipart, or not JSON). */
  body: unknown;
  headers: Record<string, string>;
}

export interface ScriptedBackend {
  /** Base URL including /v1, e.g. http://127.0.0.1:PORT/v1 */
  url: string;
  port: number;
  requests: RecordedRequest[];
  close(): Promise<void>;
}

export type JsonObject = Record<string, unknown>;
type Attributes = Record<string, string | number | boolean>;

const FIXED_CREATED = 1767225600; // 2026-01-01T00:00:00Z
const CHUNK_WORDS = 40;
const DEFAULT_SLOW_MS = 200;
const DEFAULT_STALL_MS = 150_000;

// ---------------------------------------------------------------------------------------------
// Models

interface ScriptedModel {
  id: string;
  resourceId: string;
  type: "llm" | "embedding";
  embeddingDimension?: number;
}

const MODELS: ScriptedModel[] = [
  { id: "scripted/parley-small", resourceId: "parley-small", type: "llm" },
  { id: "scripted/parley-large", resourceId: "parley-large", type: "llm" },
  { id: "scripted/parley-embed", resourceId: "parley-embed", type: "embedding", embeddingDimension: 384 },
];

type ModelStyle = "llama-stack" | "openai";

export function findModel(name: string, style: ModelStyle): ScriptedModel | undefined {
  return MODELS.find((model) => (style === "llama-stack" && model.id === name) || model.resourceId === name);
}

function modelView(model: ScriptedModel, style: ModelStyle): JsonObject {
  if (style === "openai") return { id: model.resourceId, object: "model", created: FIXED_CREATED, owned_by: "scripted" };
  const metadata: JsonObject = {
    model_type: model.type,
    provider_id: "scripted",
    provider_resource_id: model.resourceId,
  };
  if (model.embeddingDimension !== undefined) metadata.embedding_dimension = model.embeddingDimension;
  return { id: model.id, object: "model", created: FIXED_CREATED, owned_by: "scripted", custom_metadata: metadata };
}

// ---------------------------------------------------------------------------------------------
// Errors: every failure is thrown as ApiError and written by writeError, so the shape stays OpenAI's.

interface OpenAiErrorBody {
  message: string;
  type: string;
  param?: string | null;
  code?: string | null;
}

export class ApiError extends Error {
  readonly status: number;
  readonly body: OpenAiErrorBody;
  constructor(status: number, body: OpenAiErrorBody) {
    super(body.message);
    this.status = status;
    this.body = body;
  }
}

export function invalidRequest(message: string, param: string | null = null, code: string | null = null): ApiError {
  return new ApiError(400, { message, type: "invalid_request_error", param, code });
}

export function notFound(message: string, param: string | null = null, code: string | null = null): ApiError {
  return new ApiError(404, { message, type: "invalid_request_error", param, code });
}

export function writeJson(res: ServerResponse, status: number, body: unknown): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function writeError(res: ServerResponse, error: ApiError): void {
  const { message, type, param = null, code = null } = error.body;
  writeJson(res, error.status, { error: { message, type, param, code } });
}

// ---------------------------------------------------------------------------------------------
// Small helpers

export function randomHex(length: number): string {
  return randomBytes(Math.ceil(length / 2)).toString("hex").slice(0, length);
}

export function now(): number {
  return Math.floor(Date.now() / 1000);
}

export function isObject(value: unknown): value is JsonObject {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function words(text: string): string[] {
  return text.split(/\s+/).filter((word) => word.length > 0);
}

/** Search words: lowercase runs of letters/digits, so punctuation never decides a match. */
function searchWords(text: string): string[] {
  return text.toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
}

function isAttributeValue(value: unknown): value is string | number | boolean {
  return typeof value === "string" || typeof value === "number" || typeof value === "boolean";
}

function readAttributes(value: unknown, param: string): Attributes {
  if (value === undefined || value === null) return {};
  if (!isObject(value)) throw invalidRequest(`Invalid type for '${param}': expected an object.`, param, "invalid_type");
  const attributes: Attributes = {};
  for (const [key, item] of Object.entries(value)) {
    if (!isAttributeValue(item)) {
      throw invalidRequest(`Invalid value for '${param}.${key}': expected a string, number or boolean.`, param, "invalid_value");
    }
    attributes[key] = item;
  }
  return attributes;
}

// ---------------------------------------------------------------------------------------------
// Markers

const MARKER_PATTERN =
  /#(?:echo-request|slow(?:=\d+)?|stall(?:=\d+)?|fail-midstream|context-too-long|rate-limit|bad-key|drop|end-early|call-tool:[\w.-]+(?::\{\S*?\})?|keep-calling|mcp-call:[\w.-]+:[\w.-]+|file-search|unsafe|no-verdict|empty-summary|hold-summary=[\w-]+|status=\d{3}|late(?:=\d+)?|stall-headers(?:=\d+)?|garbled|misshapen|ignore-stream|reply=[\w-]+)(?![\w-])/g;

interface Markers {
  echoRequest: boolean;
  reply: string | null;
  slowMs: number;
  stallMs: number;
  badKey: boolean;
  drop: boolean;
  endEarly: boolean;
  failMidstream: boolean;
  contextTooLong: boolean;
  rateLimit: boolean;
  callTools: Array<{ name: string; args: string | null }>;
  keepCalling: boolean;
  mcpCall: { label: string; name: string } | null;
  fileSearch: boolean;
  status: number | null;
  lateMs: number;
  headersStallMs: number;
  garbled: boolean;
  misshapen: boolean;
  ignoreStream: boolean;
}

function has(text: string, marker: string): boolean {
  return new RegExp(`#${marker}(?![\\w-])`).test(text);
}

function readMarkers(text: string): Markers {
  const slow = /#slow(?:=(\d+))?(?![\w-])/.exec(text);
  const stall = /#stall(?:=(\d+))?(?![\w-])/.exec(text);
  const mcpCall = /#mcp-call:([\w.-]+):([\w.-]+)(?![\w-])/.exec(text);
  const status = /#status=(\d{3})(?![\w-])/.exec(text);
  const late = /#late(?:=(\d+))?(?![\w-])/.exec(text);
  const headersStall = /#stall-headers(?:=(\d+))?(?![\w-])/.exec(text);
  return {
    echoRequest: has(text, "echo-request"),
    reply: /#reply=([\w-]+)(?![\w-])/.exec(text)?.[1] ?? null,
    slowMs: slow ? (slow[1] === undefined ? DEFAULT_SLOW_MS : Number(slow[1])) : 0,
    stallMs: stall ? (stall[1] === undefined ? DEFAULT_STALL_MS : Number(stall[1])) : 0,
    badKey: has(text, "bad-key"),
    drop: has(text, "drop"),
    endEarly: has(text, "end-early"),
    failMidstream: has(text, "fail-midstream"),
    contextTooLong: has(text, "context-too-long"),
    rateLimit: has(text, "rate-limit"),
    callTools: Array.from(text.matchAll(/#call-tool:([\w.-]+)(?::(\{\S*?\}))?(?![\w-])/g), (match) => ({ name: match[1]!, args: match[2] ?? null })),
    keepCalling: has(text, "keep-calling"),
    mcpCall: mcpCall ? { label: mcpCall[1], name: mcpCall[2] } : null,
    fileSearch: has(text, "file-search"),
    status: status ? Number(status[1]) : null,
    lateMs: late ? (late[1] === undefined ? DEFAULT_STALL_MS : Number(late[1])) : 0,
    headersStallMs: headersStall ? (headersStall[1] === undefined ? DEFAULT_STALL_MS : Number(headersStall[1])) : 0,
    garbled: has(text, "garbled"),
    misshapen: has(text, "misshapen"),
    ignoreStream: has(text, "ignore-stream"),
  };
}

function stripMarkers(text: string): string {
  return words(text.replace(MARKER_PATTERN, " ")).join(" ");
}

// ---------------------------------------------------------------------------------------------
// Files and vector stores

interface FileRecord {
  id: string;
  object: "file";
  bytes: number;
  created_at: number;
  filename: string;
  purpose: string;
  status: "processed";
  expires_at: number | null;
  status_details: string | null;
}

interface StoredFile {
  record: FileRecord;
  text: string;
}

interface VectorStoreFileRecord {
  id: string;
  object: "vector_store.file";
  usage_bytes: number;
  created_at: number;
  vector_store_id: string;
  status: "completed";
  last_error: null;
  attributes: Attributes;
  chunking_strategy: JsonObject;
}

interface StoredVectorStoreFile {
  record: VectorStoreFileRecord;
  filename: string;
  chunks: string[];
}

interface StoredVectorStore {
  id: string;
  name: string;
  createdAt: number;
  lastActiveAt: number;
  metadata: JsonObject;
  expiresAfter: JsonObject | null;
  files: Map<string, StoredVectorStoreFile>;
}

export interface State {
  files: Map<string, StoredFile>;
  stores: Map<string, StoredVectorStore>;
  down: boolean;
  /** Summaries held back by #hold-summary=KEY, and the keys already released (POST /__release). */
  holds: Map<string, PromiseWithResolvers<void>>;
}

/** What #hold-summary=KEY waits for: the release of KEY, whenever it comes (and at most HOLD_MAX_MS). */
function held(state: State, key: string): PromiseWithResolvers<void> {
  let hold = state.holds.get(key);
  if (!hold) {
    hold = Promise.withResolvers<void>();
    state.holds.set(key, hold);
  }
  return hold;
}
const HOLD_MAX_MS = 60_000;

function chunkText(text: string): string[] {
  const all = words(text);
  const chunks: string[] = [];
  for (let start = 0; start < all.length; start += CHUNK_WORDS) {
    chunks.push(all.slice(start, start + CHUNK_WORDS).join(" "));
  }
  return chunks;
}

function vectorStoreView(store: StoredVectorStore): JsonObject & { id: string } {
  let usageBytes = 0;
  for (const file of store.files.values()) usageBytes += file.record.usage_bytes;
  const count = store.files.size;
  const view: JsonObject & { id: string } = {
    id: store.id,
    object: "vector_store",
    created_at: store.createdAt,
    name: store.name,
    usage_bytes: usageBytes,
    file_counts: { in_progress: 0, completed: count, failed: 0, cancelled: 0, total: count },
    status: "completed",
    expires_at: null,
    last_active_at: store.lastActiveAt,
    metadata: store.metadata,
  };
  if (store.expiresAfter) view.expires_after = store.expiresAfter;
  return view;
}

function addFile(state: State, filename: string, text: string, purpose: string, id: string, createdAt: number): FileRecord {
  const record: FileRecord = {
    id,
    object: "file",
    bytes: Buffer.byteLength(text),
    created_at: createdAt,
    filename,
    purpose,
    status: "processed",
    expires_at: null,
    status_details: null,
  };
  state.files.set(id, { record, text });
  return record;
}

function attachFile(store: StoredVectorStore, file: StoredFile, attributes: Attributes, createdAt: number): VectorStoreFileRecord {
  const record: VectorStoreFileRecord = {
    id: file.record.id,
    object: "vector_store.file",
    usage_bytes: file.record.bytes,
    created_at: createdAt,
    vector_store_id: store.id,
    status: "completed",
    last_error: null,
    attributes,
    chunking_strategy: { type: "static", static: { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 } },
  };
  store.files.set(record.id, { record, filename: file.record.filename, chunks: chunkText(file.text) });
  return record;
}

function getStore(state: State, id: string): StoredVectorStore {
  const store = state.stores.get(id);
  if (!store) throw notFound(`No vector store found with id '${id}'.`, "vector_store_id");
  return store;
}

function getFile(state: State, id: string): StoredFile {
  const file = state.files.get(id);
  if (!file) throw notFound(`No such File object: ${id}`, "file_id");
  return file;
}

function getStoreFile(store: StoredVectorStore, fileId: string): StoredVectorStoreFile {
  const file = store.files.get(fileId);
  if (!file) throw notFound(`No file found with id '${fileId}' in vector store '${store.id}'.`, "file_id");
  return file;
}

// Seed data: fixed ids and texts so gateway tests can rely on them (see the header comment).
interface SeedFile {
  storeId: string;
  id: string;
  filename: string;
  text: string;
  attributes: Attributes;
}

const SEED_STORES = [
  { id: "vs_docs", name: "docs" },
  { id: "portal-rag", name: "portal" },
];

export const SEED_FILES: readonly SeedFile[] = [
  {
    storeId: "vs_docs",
    id: "file-parley-config",
    filename: "parley-gateway-configuration.md",
    text:
      "Parley gateway configuration guide. The Parley gateway reads its configuration from a YAML file. " +
      "The inference backend section sets the backend url, the api key and the request timeout. " +
      "The service section sets the host, the port and the base url of the gateway. " +
      "Authentication is configured in its own section, where the module can be noop, a JWK token or an identity header. " +
      "Restart the gateway after changing the configuration so that every worker reads the new values.",
    attributes: {
      doc_url: "https://docs.example.com/parley/configuration",
      title: "Parley gateway configuration",
      document_id: "parley-configuration",
      product: "parley",
      version: "1.0",
    },
  },
  {
    storeId: "vs_docs",
    id: "file-quota-reset",
    filename: "quota-reset.md",
    text:
      "Quota reset schedule. Every user limiter starts with an initial quota of tokens for each period. " +
      "When the period ends the quota reset job refills the user quota to its limit, while a cluster limiter " +
      "with a quota increase adds tokens instead. A request is refused with status 429 when no tokens remain " +
      "before the next quota reset.",
    attributes: {
      doc_url: "https://docs.example.com/parley/quotas",
      title: "Quota reset schedule",
      document_id: "parley-quota-reset",
      product: "parley",
      version: "1.1",
    },
  },
  {
    storeId: "portal-rag",
    id: "file-openshift-install",
    filename: "openshift-install.md",
    text:
      "Installing OpenShift on bare metal. Download the openshift-install binary, write an install-config.yaml " +
      "with the cluster name, base domain and pull secret, then run openshift-install create cluster. " +
      "The installer provisions the bootstrap machine, the control plane and the compute nodes, and prints " +
      "the console URL and the kubeadmin password when the OpenShift install completes.",
    attributes: {
      parent_id: "openshift/4.18/installing/bare-metal",
      reference_url: "https://portal.example.com/openshift/4.18/installing/bare-metal",
      doc_url: "https://portal.example.com/openshift/4.18/installing/bare-metal",
      title: "Installing OpenShift on bare metal",
    },
  },
];

function resetState(state: State, seed: boolean): void {
  state.down = false;
  state.holds.clear();
  state.files.clear();
  state.stores.clear();
  if (!seed) return;
  for (const { id, name } of SEED_STORES) {
    state.stores.set(id, {
      id,
      name,
      createdAt: FIXED_CREATED,
      lastActiveAt: FIXED_CREATED,
      metadata: {},
      expiresAfter: null,
      files: new Map(),
    });
  }
  for (const seedFile of SEED_FILES) {
    addFile(state, seedFile.filename, seedFile.text, "assistants", seedFile.id, FIXED_CREATED);
    attachFile(getStore(state, seedFile.storeId), getFile(state, seedFile.id), { ...seedFile.attributes }, FIXED_CREATED);
  }
}

// ---------------------------------------------------------------------------------------------
// Search and filters

type AttributeFilter = (attributes: Attributes) => boolean;

const COMPARISONS = ["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin"];

/** Validates an OpenAI filter up front (so bad filters fail even when nothing would be compared). */
function compileFilter(filter: unknown): AttributeFilter {
  if (!isObject(filter) || typeof filter.type !== "string") {
    throw invalidRequest("Invalid filter: expected an object with a 'type'.", "filters", "invalid_value");
  }
  const { type } = filter;
  if (type === "and" || type === "or") {
    if (!Array.isArray(filter.filters)) {
      throw invalidRequest(`Invalid '${type}' filter: 'filters' must be an array.`, "filters", "invalid_value");
    }
    const parts = filter.filters.map(compileFilter);
    return type === "and" ? (attrs) => parts.every((part) => part(attrs)) : (attrs) => parts.some((part) => part(attrs));
  }
  if (!COMPARISONS.includes(type)) throw invalidRequest(`Invalid filter type '${type}'.`, "filters", "invalid_value");
  const { key, value } = filter;
  if (typeof key !== "string") throw invalidRequest("Invalid filter: 'key' must be a string.", "filters", "invalid_value");
  if (type === "in" || type === "nin") {
    if (!Array.isArray(value) || !value.every(isAttributeValue)) {
      throw invalidRequest(`Invalid '${type}' filter: 'value' must be an array.`, "filters", "invalid_value");
    }
    const inList = (attrs: Attributes) => key in attrs && value.includes(attrs[key]);
    return type === "in" ? inList : (attrs) => !inList(attrs);
  }
  if (!isAttributeValue(value)) throw invalidRequest("Invalid filter: 'value' must be a scalar.", "filters", "invalid_value");
  if (type === "eq") return (attrs) => key in attrs && attrs[key] === value;
  if (type === "ne") return (attrs) => !(key in attrs && attrs[key] === value);
  return (attrs) => {
    const actual = attrs[key];
    const comparable =
      (typeof actual === "number" && typeof value === "number") || (typeof actual === "string" && typeof value === "string");
    if (!comparable) return false;
    if (type === "gt") return actual > value;
    if (type === "gte") return actual >= value;
    if (type === "lt") return actual < value;
    return actual <= value;
  };
}

interface SearchOptions {
  maxResults: number;
  filter: AttributeFilter | null;
  scoreThreshold: number;
}

interface SearchHit {
  vectorStoreId: string;
  fileId: string;
  filename: string;
  score: number;
  attributes: Attributes;
  text: string;
}

function readSearchOptions(source: JsonObject, param: string): SearchOptions {
  const max = source.max_num_results ?? 10;
  if (typeof max !== "number" || !Number.isInteger(max) || max < 1 || max > 50) {
    throw invalidRequest(`Invalid '${param}max_num_results': expected an integer from 1 to 50.`, `${param}max_num_results`, "invalid_value");
  }
  const ranking = isObject(source.ranking_options) ? source.ranking_options : {};
  const threshold = typeof ranking.score_threshold === "number" ? ranking.score_threshold : 0;
  const filters = source.filters;
  return { maxResults: max, filter: filters === undefined || filters === null ? null : compileFilter(filters), scoreThreshold: threshold };
}

function search(stores: StoredVectorStore[], query: string, options: SearchOptions): SearchHit[] {
  const queryWords = [...new Set(searchWords(stripMarkers(query)))];
  if (queryWords.length === 0) return [];
  const hits: SearchHit[] = [];
  for (const store of stores) {
    for (const file of store.files.values()) {
      if (options.filter && !options.filter(file.record.attributes)) continue;
      for (const chunk of file.chunks) {
        const chunkWords = new Set(searchWords(chunk));
        const score = queryWords.filter((word) => chunkWords.has(word)).length / queryWords.length;
        if (score <= 0 || score < options.scoreThreshold) continue;
        hits.push({
          vectorStoreId: store.id,
          fileId: file.record.id,
          filename: file.filename,
          score,
          attributes: file.record.attributes,
          text: chunk,
        });
      }
    }
  }
  // Array.prototype.sort is stable, so equal (score, file_id) keep chunk order.
  hits.sort((a, b) => b.score - a.score || (a.fileId < b.fileId ? -1 : a.fileId > b.fileId ? 1 : 0));
  return hits.slice(0, options.maxResults);
}

// ---------------------------------------------------------------------------------------------
// Lists

function listPage<T extends { id: string }>(items: T[], query: URLSearchParams): JsonObject {
  const order = query.get("order") ?? "desc";
  const limit = Math.min(Math.max(Number(query.get("limit") ?? 20) || 20, 1), 100);
  let ordered = order === "asc" ? [...items] : [...items].reverse();
  const after = query.get("after");
  const before = query.get("before");
  if (after) ordered = ordered.slice(ordered.findIndex((item) => item.id === after) + 1);
  if (before) {
    const index = ordered.findIndex((item) => item.id === before);
    if (index >= 0) ordered = ordered.slice(0, index);
  }
  const data = before ? ordered.slice(-limit) : ordered.slice(0, limit);
  return {
    object: "list",
    data,
    first_id: data.length > 0 ? data[0].id : null,
    last_id: data.length > 0 ? data[data.length - 1].id : null,
    has_more: ordered.length > data.length,
  };
}

// ---------------------------------------------------------------------------------------------
// Responses: reading the input

interface Turn {
  question: string;
  userTurns: number;
  inputWords: number;
  toolOutputAfterQuestion: boolean;
  /** Outputs of the function_call_output items after the last user message. */
  toolOutputs: string[];
}

function contentText(content: unknown, partTypes: readonly string[]): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter((part): part is JsonObject => isObject(part) && partTypes.includes(String(part.type)) && typeof part.text === "string")
    .map((part) => String(part.text))
    .join("\n");
}

function isMessage(item: JsonObject): boolean {
  return (item.type === "message" || item.type === undefined) && typeof item.role === "string";
}

function readTurn(input: string | unknown[], instructions: unknown): Turn {
  let inputWords = typeof instructions === "string" ? words(instructions).length : 0;
  if (typeof input === "string") {
    return { question: input, userTurns: 1, inputWords: inputWords + words(input).length, toolOutputAfterQuestion: false, toolOutputs: [] };
  }
  let question = "";
  let userTurns = 0;
  let toolOutputAfterQuestion = false;
  let toolOutputs: string[] = [];
  for (const item of input) {
    if (!isObject(item)) continue;
    if (isMessage(item)) {
      inputWords += words(contentText(item.content, ["input_text", "output_text"])).length;
      if (item.role === "user") {
        userTurns += 1;
        question = contentText(item.content, ["input_text"]);
        toolOutputAfterQuestion = false;
        toolOutputs = [];
      }
    } else if (item.type === "function_call_output") {
      if (typeof item.output === "string") inputWords += words(item.output).length;
      toolOutputAfterQuestion = true;
      toolOutputs.push(typeof item.output === "string" ? item.output : JSON.stringify(item.output));
    }
  }
  return { question, userTurns, inputWords, toolOutputAfterQuestion, toolOutputs };
}

// ---------------------------------------------------------------------------------------------
// Responses: planning the answer

interface Usage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

export interface Plan {
  /** Completed tool items, emitted before the message. */
  toolItems: JsonObject[];
  messageId: string;
  deltas: string[];
  failMidstream: boolean;
  firstDelayMs: number;
  tokenDelayMs: number;
  /** Pause after the first 2 deltas (stream) or before answering (non-stream). */
  stallMs: number;
  /** Cut the connection part-way. */
  drop: boolean;
  /** Stream: end cleanly after the first 2 deltas, without the terminal event. */
  endEarly: boolean;
  /** Nothing at all is sent for this long (#late). */
  lateMs: number;
  /** Headers are sent at once, then nothing for this long (#stall-headers). */
  headersStallMs: number;
  /** Nothing is sent until this key is released (#hold-summary=KEY, compaction's summariser only). */
  holdKey: string | null;
  /** One malformed event (stream) or a body that is not JSON (non-stream). */
  garbled: boolean;
  /** JSON of the wrong shape: one event or chunk (stream), or the whole answer (non-stream). */
  misshapen: boolean;
  /** A streamed call answered as a JSON one (#ignore-stream). */
  ignoreStream: boolean;
  inputWords: number;
}

function splitDeltas(answer: string): string[] {
  const deltas = answer.match(/\S+\s*/g) ?? [];
  const leading = /^\s*/.exec(answer)?.[0] ?? "";
  if (deltas.length === 0) return answer.length > 0 ? [answer] : [];
  deltas[0] = leading + deltas[0];
  return deltas;
}

function usageFor(inputWords: number, outputTokens: number): Usage {
  return {
    input_tokens: inputWords,
    input_tokens_details: { cached_tokens: 0 },
    output_tokens: outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: inputWords + outputTokens,
  };
}

function fileSearchItem(state: State, tools: unknown, query: string): JsonObject | null {
  const tool = Array.isArray(tools) ? tools.find((candidate) => isObject(candidate) && candidate.type === "file_search") : undefined;
  if (!isObject(tool)) return null;
  const ids = Array.isArray(tool.vector_store_ids) ? tool.vector_store_ids.map(String) : [];
  const stores = ids.map((id) => getStore(state, id));
  const hits = search(stores, query, readSearchOptions(tool, "tools.file_search."));
  return {
    type: "file_search_call",
    id: `fs_${randomHex(48)}`,
    status: "completed",
    queries: [query],
    results: hits.map((hit) => ({
      file_id: hit.fileId,
      filename: hit.filename,
      score: hit.score,
      text: hit.text,
      attributes: hit.attributes,
      vector_store_id: hit.vectorStoreId,
    })),
  };
}

/**
 * The scripted answer to a request: `body` as received (echoed by #echo-request, its tools searched
 * by #file-search), its input items and instructions (a chat request's system messages).
 */
export function planResponse(
  body: JsonObject,
  input: string | unknown[],
  instructions: unknown,
  state: State,
  options: Required<ScriptedBackendOptions>,
  bearer: string,
): Plan {
  const turn = readTurn(input, instructions);
  const plan: Plan = {
    toolItems: [],
    messageId: `msg_${randomHex(48)}`,
    deltas: [],
    failMidstream: false,
    firstDelayMs: options.firstTokenDelayMs,
    tokenDelayMs: options.tokenDelayMs,
    stallMs: 0,
    drop: false,
    endEarly: false,
    lateMs: 0,
    headersStallMs: 0,
    holdKey: null,
    garbled: false,
    misshapen: false,
    ignoreStream: false,
    inputWords: turn.inputWords,
  };
  const cleanQuestion = stripMarkers(turn.question);

  if (typeof instructions === "string" && /summarise a conversation/i.test(instructions)) {
    // Compaction's summariser: a short summary, or none when the conversation asks for that.
    plan.deltas = has(turn.question, "empty-summary") ? [] : splitDeltas(`Summary: ${words(cleanQuestion).slice(0, 12).join(" ")}`);
    plan.holdKey = /#hold-summary=([\w-]+)/.exec(turn.question)?.[1] ?? null;
    return plan;
  }
  if (typeof instructions === "string" && /topic summary/i.test(instructions)) {
    plan.deltas = splitDeltas(`Topic: ${words(cleanQuestion).slice(0, 5).join(" ")}`);
    return plan;
  }

  const markers = readMarkers(turn.question);
  if (markers.contextTooLong) {
    throw invalidRequest(
      `This model's maximum context length is 4096 tokens. However, your messages resulted in ${4096 + turn.inputWords} tokens. Please reduce the length of the messages.`,
      "input",
      "context_length_exceeded",
    );
  }
  if (markers.rateLimit) {
    throw new ApiError(429, { message: "Rate limit reached", type: "rate_limit_error", param: null, code: "rate_limit_exceeded" });
  }
  if (markers.badKey) throw invalidRequest(`Incorrect API key provided: ${bearer}`, null, "invalid_api_key");
  if (markers.status !== null && markers.status >= 400 && markers.status <= 599) {
    const type = markers.status >= 500 ? "server_error" : markers.status === 429 ? "rate_limit_error" : "invalid_request_error";
    throw new ApiError(markers.status, { message: `scripted status ${markers.status}`, type, param: null, code: null });
  }
  const toolArguments = JSON.stringify({ query: turn.question });
  if (!turn.toolOutputAfterQuestion || markers.keepCalling) {
    for (const tool of markers.callTools) {
      plan.toolItems.push({
        type: "function_call",
        id: `fc_${randomHex(48)}`,
        call_id: `call_${randomHex(24)}`,
        name: tool.name,
        arguments: tool.args ?? toolArguments,
        status: "completed",
      });
    }
  }
  if (markers.mcpCall !== null) {
    plan.toolItems.push({
      type: "mcp_call",
      id: `mcp_${randomHex(48)}`,
      server_label: markers.mcpCall.label,
      name: markers.mcpCall.name,
      arguments: toolArguments,
      output: "scripted tool output",
      error: null,
      approval_request_id: null,
      status: "completed",
    });
  }
  if (markers.fileSearch) {
    const item = fileSearchItem(state, body.tools, cleanQuestion);
    if (item) plan.toolItems.push(item);
  }

  const toolOutputs = turn.toolOutputs.length > 0 ? ` [tool outputs: ${turn.toolOutputs.join(" | ")}]` : "";
  const answer = markers.reply ?? (markers.echoRequest ? JSON.stringify(body) : `[user_turns=${turn.userTurns}] You said: ${turn.question}${toolOutputs}`);
  plan.deltas = splitDeltas(answer);
  plan.failMidstream = markers.failMidstream;
  plan.tokenDelayMs += markers.slowMs;
  plan.stallMs = markers.stallMs;
  plan.drop = markers.drop;
  plan.endEarly = markers.endEarly;
  plan.lateMs = markers.lateMs;
  plan.headersStallMs = markers.headersStallMs;
  plan.garbled = markers.garbled;
  plan.misshapen = markers.misshapen;
  plan.ignoreStream = markers.ignoreStream;
  return plan;
}

// ---------------------------------------------------------------------------------------------
// Responses: the response object

interface ResponseState {
  id: string;
  createdAt: number;
  status: "in_progress" | "completed" | "failed";
  output: JsonObject[];
  usage: Usage | null;
  error: { code: string; message: string } | null;
}

function responseView(body: JsonObject, state: ResponseState): JsonObject {
  const conversation = body.conversation;
  return {
    id: state.id,
    object: "response",
    created_at: state.createdAt,
    status: state.status,
    background: body.background ?? false,
    completed_at: state.status === "completed" ? now() : null,
    conversation: typeof conversation === "string" ? { id: conversation } : isObject(conversation) ? conversation : null,
    error: state.error,
    incomplete_details: null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    max_tool_calls: body.max_tool_calls ?? null,
    model: body.model,
    output: state.output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    prompt: body.prompt ?? null,
    prompt_cache_key: body.prompt_cache_key ?? null,
    reasoning: body.reasoning ?? { effort: null, summary: null },
    safety_identifier: body.safety_identifier ?? null,
    service_tier: "default",
    store: body.store ?? true,
    temperature: body.temperature ?? 1,
    text: body.text ?? { format: { type: "text" } },
    tool_choice: body.tool_choice ?? "auto",
    tools: body.tools ?? [],
    top_logprobs: body.top_logprobs ?? 0,
    top_p: body.top_p ?? 1,
    truncation: body.truncation ?? "disabled",
    usage: state.usage,
    user: body.user ?? null,
    metadata: body.metadata ?? {},
  };
}

function outputText(text: string): JsonObject {
  return { type: "output_text", text, annotations: [], logprobs: [] };
}

function messageItem(id: string, status: string, content: JsonObject[]): JsonObject {
  return { type: "message", id, status, role: "assistant", content };
}

// ---------------------------------------------------------------------------------------------
// Streaming: the one SSE writer

interface EventStream {
  send(type: string, fields: JsonObject): void;
  /** Writes text as it is (a malformed event). */
  raw(text: string): void;
  end(): void;
}

function openEventStream(res: ServerResponse): EventStream {
  res.writeHead(200, {
    "content-type": "text/event-stream; charset=utf-8",
    "cache-control": "no-cache",
    connection: "keep-alive",
  });
  let sequence = 0;
  return {
    send(type, fields) {
      if (res.destroyed || res.writableEnded) return;
      const event = { type, ...fields, sequence_number: sequence++ };
      res.write(`event: ${type}\ndata: ${JSON.stringify(event)}\n\n`);
    },
    raw(text) {
      if (!res.destroyed && !res.writableEnded) res.write(text);
    },
    end() {
      if (!res.writableEnded) res.end();
    },
  };
}

/**
 * Cuts the connection part-way through an answer. What was written is given time to reach the
 * client first: a reset that arrives with unread data makes the kernel drop that data, and the
 * client would see a refused request instead of one that broke off.
 */
export async function cutConnection(res: ServerResponse): Promise<void> {
  await sleep(100);
  res.socket?.destroy();
}

export async function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (ms > 0) await sleep(ms, undefined, { signal });
}

/** What an answer waits for before anything of it is sent: #late, and a held summary's release. */
export async function beforeAnswering(ctx: Context, plan: Plan): Promise<void> {
  await pause(plan.lateMs, ctx.signal);
  if (plan.holdKey === null) return;
  // (AbortSignal.timeout's timer does not keep the process alive once the hold is released.)
  const given = AbortSignal.any([ctx.signal, AbortSignal.timeout(HOLD_MAX_MS)]);
  await Promise.race([held(ctx.state, plan.holdKey).promise, new Promise((resolve) => given.addEventListener("abort", resolve, { once: true }))]);
}

/** The in-progress form of a tool item and the progress events OpenAI sends between added and done. */
function toolItemProgress(item: JsonObject): { added: JsonObject; events: Array<[string, JsonObject]> } {
  const ref = { item_id: item.id };
  if (item.type === "function_call") {
    return {
      added: { ...item, arguments: "", status: "in_progress" },
      events: [
        ["response.function_call_arguments.delta", { ...ref, delta: item.arguments }],
        ["response.function_call_arguments.done", { ...ref, arguments: item.arguments }],
      ],
    };
  }
  if (item.type === "mcp_call") {
    return {
      added: { ...item, arguments: "", output: null, status: "in_progress" },
      events: [
        ["response.mcp_call.in_progress", ref],
        ["response.mcp_call_arguments.delta", { ...ref, delta: item.arguments }],
        ["response.mcp_call_arguments.done", { ...ref, arguments: item.arguments }],
        ["response.mcp_call.completed", ref],
      ],
    };
  }
  return {
    added: { ...item, status: "in_progress", queries: [], results: null },
    events: [
      ["response.file_search_call.in_progress", ref],
      ["response.file_search_call.searching", ref],
      ["response.file_search_call.completed", ref],
    ],
  };
}

async function streamResponse(res: ServerResponse, signal: AbortSignal, body: JsonObject, plan: Plan): Promise<void> {
  const stream = openEventStream(res);
  if (plan.headersStallMs > 0) {
    res.flushHeaders();
    await pause(plan.headersStallMs, signal);
  }
  const base: ResponseState = { id: `resp_${randomHex(48)}`, createdAt: now(), status: "in_progress", output: [], usage: null, error: null };
  stream.send("response.created", { response: responseView(body, base) });
  stream.send("response.in_progress", { response: responseView(body, base) });

  const output: JsonObject[] = [];
  for (const item of plan.toolItems) {
    const outputIndex = output.length;
    const progress = toolItemProgress(item);
    stream.send("response.output_item.added", { output_index: outputIndex, item: progress.added });
    for (const [type, fields] of progress.events) stream.send(type, { ...fields, output_index: outputIndex });
    stream.send("response.output_item.done", { output_index: outputIndex, item });
    output.push(item);
  }

  const outputIndex = output.length;
  const ref = { item_id: plan.messageId, output_index: outputIndex, content_index: 0 };
  stream.send("response.output_item.added", { output_index: outputIndex, item: messageItem(plan.messageId, "in_progress", []) });
  stream.send("response.content_part.added", { ...ref, part: outputText("") });

  const deltas = plan.failMidstream ? plan.deltas.slice(0, 2) : plan.deltas;
  let text = "";
  for (const [index, delta] of deltas.entries()) {
    if (index === 2 && plan.drop) {
      await cutConnection(res);
      return;
    }
    if (index === 2 && plan.endEarly) {
      stream.end();
      return;
    }
    await pause(index === 0 ? plan.firstDelayMs : index === 2 ? plan.stallMs + plan.tokenDelayMs : plan.tokenDelayMs, signal);
    if (index === 2 && plan.garbled) stream.raw(`event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":\n\n`);
    if (index === 2 && plan.misshapen) stream.send("response.output_text.delta", { ...ref, delta: 42, logprobs: [] });
    stream.send("response.output_text.delta", { ...ref, delta, logprobs: [] });
    text += delta;
  }

  if (plan.failMidstream) {
    const error = { code: "server_error", message: "scripted failure" };
    stream.send("error", { ...error, param: null });
    const partial = messageItem(plan.messageId, "incomplete", [outputText(text)]);
    const failed: ResponseState = { ...base, status: "failed", output: [...output, partial], usage: usageFor(plan.inputWords, deltas.length), error };
    stream.send("response.failed", { response: responseView(body, failed) });
    stream.end();
    return;
  }

  const message = messageItem(plan.messageId, "completed", [outputText(text)]);
  stream.send("response.output_text.done", { ...ref, text, logprobs: [] });
  stream.send("response.content_part.done", { ...ref, part: outputText(text) });
  stream.send("response.output_item.done", { output_index: outputIndex, item: message });
  output.push(message);
  const completed: ResponseState = { ...base, status: "completed", output, usage: usageFor(plan.inputWords, deltas.length) };
  stream.send("response.completed", { response: responseView(body, completed) });
  stream.end();
}

async function answerResponse(signal: AbortSignal, body: JsonObject, plan: Plan): Promise<JsonObject> {
  if (plan.failMidstream) throw new ApiError(500, { message: "scripted failure", type: "server_error" });
  const count = plan.deltas.length;
  await pause(count === 0 ? 0 : plan.firstDelayMs + count * plan.tokenDelayMs + plan.stallMs, signal);
  const message = messageItem(plan.messageId, "completed", [outputText(plan.deltas.join(""))]);
  return responseView(body, {
    id: `resp_${randomHex(48)}`,
    createdAt: now(),
    status: "completed",
    output: [...plan.toolItems, message],
    usage: usageFor(plan.inputWords, count),
    error: null,
  });
}

// ---------------------------------------------------------------------------------------------
// Moderations

const MODERATION_CATEGORIES = [
  "harassment",
  "harassment/threatening",
  "hate",
  "hate/threatening",
  "illicit",
  "illicit/violent",
  "self-harm",
  "self-harm/instructions",
  "self-harm/intent",
  "sexual",
  "sexual/minors",
  "violence",
  "violence/graphic",
];

function moderationResult(text: string): JsonObject {
  const flagged = has(text, "unsafe");
  const categories: Record<string, boolean> = {};
  const scores: Record<string, number> = {};
  const appliedTypes: Record<string, string[]> = {};
  for (const category of MODERATION_CATEGORIES) {
    const hit = flagged && category === "violence";
    categories[category] = hit;
    scores[category] = hit ? 0.99 : 0;
    appliedTypes[category] = ["text"];
  }
  return { flagged, categories, category_scores: scores, category_applied_input_types: appliedTypes };
}

function moderationInputs(input: unknown): string[] {
  if (typeof input === "string") return [input];
  if (Array.isArray(input)) {
    return input.map((entry) => (typeof entry === "string" ? entry : isObject(entry) && typeof entry.text === "string" ? entry.text : ""));
  }
  throw invalidRequest("Missing required parameter: 'input'.", "input", "missing_required_parameter");
}

// ---------------------------------------------------------------------------------------------
// Routing

export interface Context {
  req: IncomingMessage;
  res: ServerResponse;
  url: URL;
  params: string[];
  raw: Buffer;
  /** Parsed JSON body; {} when the request had none. */
  body: JsonObject;
  signal: AbortSignal;
  state: State;
  options: Required<ScriptedBackendOptions>;
  requests: RecordedRequest[];
}

/** A handler returns the JSON to send with 200, or WRITTEN when it wrote the response itself. */
export const WRITTEN = Symbol("written");
type Handler = (ctx: Context) => unknown;

interface Route {
  method: string;
  pattern: RegExp;
  handler: Handler;
  /** Multipart routes read the raw body instead of JSON. */
  raw?: boolean;
}

function requireJsonObject(value: unknown): JsonObject {
  if (!isObject(value)) throw invalidRequest("The request body must be a JSON object.");
  return value;
}

async function createResponse(ctx: Context): Promise<unknown> {
  const body = ctx.body;
  if (typeof body.model !== "string" || body.model.length === 0) {
    throw invalidRequest("Missing required parameter: 'model'.", "model", "missing_required_parameter");
  }
  const model = findModel(body.model, ctx.options.modelStyle);
  if (!model) throw notFound(`Model ${body.model} not found`, "model", "model_not_found");
  if (model.type !== "llm") {
    throw invalidRequest(`Model ${body.model} is not a language model`, "model", "model_not_supported");
  }
  const input = body.input;
  if (input === undefined || input === null) {
    throw invalidRequest("Missing required parameter: 'input'.", "input", "missing_required_parameter");
  }
  if (typeof input !== "string" && !Array.isArray(input)) {
    throw invalidRequest("Invalid type for 'input': expected a string or an array of input items.", "input", "invalid_type");
  }
  const bearer = (ctx.req.headers.authorization ?? "").replace(/^Bearer\s+/i, "");
  const plan = planResponse(body, input, body.instructions, ctx.state, ctx.options, bearer);
  await beforeAnswering(ctx, plan);
  if (body.stream === true && !plan.ignoreStream) {
    await streamResponse(ctx.res, ctx.signal, body, plan);
    return WRITTEN;
  }
  return writeJsonAnswer(ctx, plan, () => answerResponse(ctx.signal, body, plan));
}

/**
 * A non-stream answer with the plan's misbehaviours: headers first and the body after a stall
 * (#stall-headers), a body that is not JSON (#garbled), JSON of the wrong shape (#misshapen), or
 * one cut in half (#drop).
 */
export async function writeJsonAnswer(ctx: Context, plan: Plan, answer: () => Promise<JsonObject>): Promise<unknown> {
  if (plan.headersStallMs > 0) {
    ctx.res.writeHead(200, { "content-type": "application/json" });
    ctx.res.flushHeaders();
    await pause(plan.headersStallMs, ctx.signal);
    ctx.res.end(JSON.stringify(await answer()));
    return WRITTEN;
  }
  const body = await answer();
  if (plan.misshapen) return { ...body, ...("output" in body ? { output: null } : { choices: null }) };
  if (!plan.drop && !plan.garbled) return body;
  const text = JSON.stringify(body);
  const half = text.slice(0, Math.floor(text.length / 2));
  if (plan.garbled) {
    ctx.res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(half) });
    ctx.res.end(half);
    return WRITTEN;
  }
  ctx.res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  ctx.res.write(half);
  await cutConnection(ctx.res);
  return WRITTEN;
}

async function uploadFile(ctx: Context): Promise<unknown> {
  const contentType = ctx.req.headers["content-type"] ?? "";
  if (!contentType.startsWith("multipart/form-data")) {
    throw invalidRequest("Expected a multipart/form-data body with 'file' and 'purpose'.", "file");
  }
  let form: FormData;
  try {
    form = await new Request("http://scripted.invalid/v1/files", {
      method: "POST",
      headers: { "content-type": contentType },
      body: new Uint8Array(ctx.raw),
    }).formData();
  } catch {
    throw invalidRequest("Could not parse the multipart/form-data body.", "file");
  }
  const file = form.get("file");
  if (file === null || typeof file === "string") {
    throw invalidRequest("Missing required parameter: 'file'.", "file", "missing_required_parameter");
  }
  const purpose = form.get("purpose");
  if (typeof purpose !== "string" || purpose.length === 0) {
    throw invalidRequest("Missing required parameter: 'purpose'.", "purpose", "missing_required_parameter");
  }
  return addFile(ctx.state, file.name || "upload", await file.text(), purpose, `file-${randomHex(24)}`, now());
}

function createVectorStore(ctx: Context): unknown {
  const { body, state } = ctx;
  if (body.name !== undefined && typeof body.name !== "string") throw invalidRequest("Invalid type for 'name'.", "name", "invalid_type");
  const fileIds = body.file_ids ?? [];
  if (!Array.isArray(fileIds)) throw invalidRequest("Invalid type for 'file_ids'.", "file_ids", "invalid_type");
  const files = fileIds.map((id) => getFile(state, String(id)));
  const createdAt = now();
  const store: StoredVectorStore = {
    id: `vs_${randomHex(24)}`,
    name: typeof body.name === "string" ? body.name : "",
    createdAt,
    lastActiveAt: createdAt,
    metadata: isObject(body.metadata) ? body.metadata : {},
    expiresAfter: isObject(body.expires_after) ? body.expires_after : null,
    files: new Map(),
  };
  for (const file of files) attachFile(store, file, {}, createdAt);
  state.stores.set(store.id, store);
  return vectorStoreView(store);
}

function updateVectorStore(ctx: Context): unknown {
  const store = getStore(ctx.state, ctx.params[0]);
  const { body } = ctx;
  if (typeof body.name === "string") store.name = body.name;
  if (isObject(body.metadata)) store.metadata = body.metadata;
  if (isObject(body.expires_after)) store.expiresAfter = body.expires_after;
  store.lastActiveAt = now();
  return vectorStoreView(store);
}

function searchVectorStore(ctx: Context): unknown {
  const store = getStore(ctx.state, ctx.params[0]);
  const query = ctx.body.query;
  const text = typeof query === "string" ? query : Array.isArray(query) && query.every((part) => typeof part === "string") ? query.join(" ") : null;
  if (text === null) throw invalidRequest("Missing required parameter: 'query'.", "query", "missing_required_parameter");
  const hits = search([store], text, readSearchOptions(ctx.body, ""));
  store.lastActiveAt = now();
  return {
    object: "vector_store.search_results.page",
    search_query: query,
    data: hits.map((hit) => ({
      file_id: hit.fileId,
      filename: hit.filename,
      score: hit.score,
      attributes: hit.attributes,
      content: [{ type: "text", text: hit.text }],
    })),
    has_more: false,
    next_page: null,
  };
}

function attachVectorStoreFile(ctx: Context): unknown {
  const store = getStore(ctx.state, ctx.params[0]);
  const fileId = ctx.body.file_id;
  if (typeof fileId !== "string") throw invalidRequest("Missing required parameter: 'file_id'.", "file_id", "missing_required_parameter");
  const record = attachFile(store, getFile(ctx.state, fileId), readAttributes(ctx.body.attributes, "attributes"), now());
  if (isObject(ctx.body.chunking_strategy)) record.chunking_strategy = ctx.body.chunking_strategy;
  return record;
}

function listVectorStoreFiles(ctx: Context): unknown {
  const store = getStore(ctx.state, ctx.params[0]);
  const status = ctx.url.searchParams.get("filter");
  const records = [...store.files.values()].map((file) => file.record).filter((record) => status === null || record.status === status);
  return listPage(records, ctx.url.searchParams);
}

function writeNoContent(ctx: Context): typeof WRITTEN {
  ctx.res.writeHead(204);
  ctx.res.end();
  return WRITTEN;
}

const STORE = "/v1/vector_stores/([^/]+)";

const ROUTES: Route[] = [
  {
    method: "GET",
    pattern: /^\/v1\/models$/,
    handler: (ctx) => ({ object: "list", data: MODELS.map((model) => modelView(model, ctx.options.modelStyle)) }),
  },
  {
    method: "GET",
    pattern: /^\/v1\/models\/(.+)$/,
    handler: (ctx) => {
      const model = findModel(ctx.params[0], ctx.options.modelStyle);
      if (!model) throw notFound(`Model ${ctx.params[0]} not found`, "model", "model_not_found");
      return modelView(model, ctx.options.modelStyle);
    },
  },
  { method: "POST", pattern: /^\/v1\/responses$/, handler: createResponse },
  { method: "POST", pattern: /^\/v1\/chat\/completions$/, handler: createChatCompletion },
  {
    method: "POST",
    pattern: /^\/v1\/moderations$/,
    handler: (ctx) => ({
      id: `modr-${randomHex(32)}`,
      model: typeof ctx.body.model === "string" ? ctx.body.model : "omni-moderation-latest",
      // #no-verdict: a moderation service that answers without results.
      results: moderationInputs(ctx.body.input).flatMap((text) => (has(text, "no-verdict") ? [] : [moderationResult(text)])),
    }),
  },
  { method: "POST", pattern: /^\/v1\/files$/, handler: uploadFile, raw: true },
  {
    method: "GET",
    pattern: /^\/v1\/files$/,
    handler: (ctx) => {
      const purpose = ctx.url.searchParams.get("purpose");
      const records = [...ctx.state.files.values()].map((file) => file.record).filter((record) => purpose === null || record.purpose === purpose);
      return listPage(records, ctx.url.searchParams);
    },
  },
  { method: "GET", pattern: /^\/v1\/files\/([^/]+)$/, handler: (ctx) => getFile(ctx.state, ctx.params[0]).record },
  {
    method: "DELETE",
    pattern: /^\/v1\/files\/([^/]+)$/,
    handler: (ctx) => {
      const { record } = getFile(ctx.state, ctx.params[0]);
      ctx.state.files.delete(record.id);
      return { id: record.id, object: "file", deleted: true };
    },
  },
  {
    method: "GET",
    pattern: /^\/v1\/files\/([^/]+)\/content$/,
    handler: (ctx) => {
      const { text } = getFile(ctx.state, ctx.params[0]);
      ctx.res.writeHead(200, { "content-type": "application/octet-stream", "content-length": Buffer.byteLength(text) });
      ctx.res.end(text);
      return WRITTEN;
    },
  },
  { method: "POST", pattern: /^\/v1\/vector_stores$/, handler: createVectorStore },
  {
    method: "GET",
    pattern: /^\/v1\/vector_stores$/,
    handler: (ctx) => listPage([...ctx.state.stores.values()].map(vectorStoreView), ctx.url.searchParams),
  },
  { method: "GET", pattern: new RegExp(`^${STORE}$`), handler: (ctx) => vectorStoreView(getStore(ctx.state, ctx.params[0])) },
  { method: "POST", pattern: new RegExp(`^${STORE}$`), handler: updateVectorStore },
  {
    method: "DELETE",
    pattern: new RegExp(`^${STORE}$`),
    handler: (ctx) => {
      const store = getStore(ctx.state, ctx.params[0]);
      ctx.state.stores.delete(store.id);
      return { id: store.id, object: "vector_store.deleted", deleted: true };
    },
  },
  { method: "POST", pattern: new RegExp(`^${STORE}/search$`), handler: searchVectorStore },
  { method: "POST", pattern: new RegExp(`^${STORE}/files$`), handler: attachVectorStoreFile },
  { method: "GET", pattern: new RegExp(`^${STORE}/files$`), handler: listVectorStoreFiles },
  {
    method: "GET",
    pattern: new RegExp(`^${STORE}/files/([^/]+)$`),
    handler: (ctx) => getStoreFile(getStore(ctx.state, ctx.params[0]), ctx.params[1]).record,
  },
  {
    method: "POST",
    pattern: new RegExp(`^${STORE}/files/([^/]+)$`),
    handler: (ctx) => {
      const file = getStoreFile(getStore(ctx.state, ctx.params[0]), ctx.params[1]);
      file.record.attributes = readAttributes(ctx.body.attributes, "attributes");
      return file.record;
    },
  },
  {
    method: "DELETE",
    pattern: new RegExp(`^${STORE}/files/([^/]+)$`),
    handler: (ctx) => {
      const store = getStore(ctx.state, ctx.params[0]);
      const file = getStoreFile(store, ctx.params[1]);
      store.files.delete(file.record.id);
      return { id: file.record.id, object: "vector_store.file.deleted", deleted: true };
    },
  },
  {
    method: "GET",
    pattern: new RegExp(`^${STORE}/files/([^/]+)/content$`),
    handler: (ctx) => {
      const file = getStoreFile(getStore(ctx.state, ctx.params[0]), ctx.params[1]);
      return {
        object: "vector_store.file_content.page",
        data: file.chunks.map((text) => ({ type: "text", text })),
        has_more: false,
        next_page: null,
      };
    },
  },
  { method: "GET", pattern: /^\/__requests$/, handler: (ctx) => ctx.requests },
  {
    method: "POST",
    pattern: /^\/__outage$/,
    handler: (ctx) => {
      ctx.state.down = ctx.body.down === true;
      return writeNoContent(ctx);
    },
  },
  {
    method: "POST",
    pattern: /^\/__release$/,
    handler: (ctx) => {
      held(ctx.state, String(ctx.body.key)).resolve();
      return writeNoContent(ctx);
    },
  },
  {
    method: "DELETE",
    pattern: /^\/__requests$/,
    handler: (ctx) => {
      ctx.requests.length = 0;
      return writeNoContent(ctx);
    },
  },
  {
    method: "POST",
    pattern: /^\/__reset$/,
    handler: (ctx) => {
      ctx.requests.length = 0;
      resetState(ctx.state, ctx.options.seed);
      return writeNoContent(ctx);
    },
  },
];

/** What a chatOnly backend serves: models, chat completions and the test controls. */
const CHAT_ONLY_PATHS = /^\/(?:v1\/models(?:\/.+)?|v1\/chat\/completions|__\w+)$/;

function matchRoute(method: string, path: string): { route: Route; params: string[] } | null {
  for (const route of ROUTES) {
    if (route.method !== method) continue;
    const match = route.pattern.exec(path);
    if (match) return { route, params: match.slice(1).map((part) => decodeURIComponent(part)) };
  }
  return null;
}

async function readRaw(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(String(chunk)));
  return Buffer.concat(chunks);
}

function flattenHeaders(req: IncomingMessage): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) {
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(", ") : value;
  }
  return headers;
}

function parseJson(raw: Buffer): { ok: true; value: unknown } | { ok: false } {
  if (raw.length === 0) return { ok: true, value: null };
  try {
    return { ok: true, value: JSON.parse(raw.toString("utf8")) };
  } catch {
    return { ok: false };
  }
}

async function handle(
  req: IncomingMessage,
  res: ServerResponse,
  state: State,
  options: Required<ScriptedBackendOptions>,
  requests: RecordedRequest[],
): Promise<void> {
  // Aborts pending delays when the client goes away, so an abandoned stream stops writing.
  const abort = new AbortController();
  res.on("close", () => {
    if (!res.writableFinished) abort.abort();
  });
  try {
    const url = new URL(req.url ?? "/", "http://scripted.invalid");
    const method = req.method ?? "GET";
    const raw = await readRaw(req);
    const isMultipart = (req.headers["content-type"] ?? "").startsWith("multipart/form-data");
    const parsed = isMultipart ? { ok: true as const, value: null } : parseJson(raw);
    if (!url.pathname.startsWith("/__")) {
      requests.push({ method, path: url.pathname, query: url.search, body: parsed.ok ? parsed.value : null, headers: flattenHeaders(req) });
      // Trimmed in batches, so that keeping the latest costs no copy per request.
      if (requests.length >= 2 * options.recordLimit) requests.splice(0, requests.length - options.recordLimit);
    }

    if (state.down && !url.pathname.startsWith("/__")) {
      res.destroy();
      return;
    }
    const matched = options.chatOnly && !CHAT_ONLY_PATHS.test(url.pathname) ? null : matchRoute(method, url.pathname);
    if (!matched) throw notFound(`Invalid URL (${method} ${url.pathname})`);
    if (!parsed.ok) {
      throw invalidRequest(
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON.)",
      );
    }
    const body = matched.route.raw || parsed.value === null ? {} : requireJsonObject(parsed.value);
    const ctx: Context = { req, res, url, params: matched.params, raw, body, signal: abort.signal, state, options, requests };
    const result = await matched.route.handler(ctx);
    if (result !== WRITTEN) writeJson(res, 200, result);
  } catch (error) {
    if (abort.signal.aborted) return; // client gone: nothing to answer
    if (error instanceof ApiError) {
      writeError(res, error);
    } else if (!res.headersSent) {
      const message = error instanceof Error ? error.message : String(error);
      writeError(res, new ApiError(500, { message: `scripted backend error: ${message}`, type: "server_error" }));
    } else {
      res.end();
    }
  }
}

export async function startScriptedBackend(options: ScriptedBackendOptions = {}): Promise<ScriptedBackend> {
  const resolved: Required<ScriptedBackendOptions> = {
    port: options.port ?? 0,
    host: options.host ?? "127.0.0.1",
    firstTokenDelayMs: options.firstTokenDelayMs ?? 0,
    tokenDelayMs: options.tokenDelayMs ?? 0,
    seed: options.seed ?? true,
    modelStyle: options.modelStyle ?? "llama-stack",
    chatOnly: options.chatOnly ?? false,
    rejectStreamOptions: options.rejectStreamOptions ?? false,
    omitUsage: options.omitUsage ?? false,
    recordLimit: options.recordLimit ?? Infinity,
  };
  const state: State = { files: new Map(), stores: new Map(), down: false, holds: new Map() };
  resetState(state, resolved.seed);
  const requests: RecordedRequest[] = [];

  const server = createServer((req, res) => {
    void handle(req, res, state, resolved, requests);
  });
  const port = await listenOn(server, resolved.port, resolved.host);
  // A wildcard bind is reachable on loopback; IPv6 literals need brackets in a URL.
  const host = resolved.host === "0.0.0.0" || resolved.host === "::" ? "127.0.0.1" : resolved.host.includes(":") ? `[${resolved.host}]` : resolved.host;

  return {
    url: `http://${host}:${port}/v1`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        // Open streams and idle keep-alive sockets would otherwise hold close() open.
        server.closeAllConnections();
      }),
  };
}
