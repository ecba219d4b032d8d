// The shapes a conversation and its turns have, shared by the turn (worker/turn), the endpoints and
// the conversation's Durable Object. A leaf: it imports no module of the gateway, so every layer may
// use it. Everything here is plain JSON data, since it crosses the Durable Object RPC boundary.
import type { Response as BackendResponse, ResponseCreateParamsStreaming, ResponseStreamEvent } from "openai/resources/responses/responses";
import type { ApprovalAnswer, TurnMcp } from "./mcp.ts";

/** A backend input or output item (a message, a tool call, ...): plain JSON data. */
export type Item = Record<string, unknown>;

export type TurnStatus = "completed" | "incomplete" | "interrupted" | "blocked" | "failed";

/** Tokens a model call used, as its backend reported them. */
export interface TokenUsage {
  input: number;
  output: number;
}

export interface TurnSummary {
  /** The user's question text (as the conversation views show it). */
  user: string;
  /** The answer text. */
  assistant: string;
  tool_calls: Item[];
  tool_results: Item[];
}

export interface StoredTurn {
  turnNumber: number;
  requestId: string;
  status: TurnStatus;
  provider: string;
  model: string;
  /** Parley's id of the turn's response (completed turns only): what previous_response_id names. */
  responseId: string | null;
  startedAt: string;
  completedAt: string;
  /** Backend input items this turn added (the user's message, attachments, tool outputs). */
  input: Item[];
  /** Backend output items of this turn, replayed as input to later turns. */
  output: Item[];
  summary: TurnSummary;
}

/**
 * Items as every Responses-compatible backend takes them as input: messages, function calls and
 * their outputs. The gateway runs MCP tools itself, so a backend need not know MCP: an `mcp_call`
 * becomes the function call it was and its output; tool lists and approval items, which only the
 * gateway acts on, are left out.
 */
export function backendInput(items: Item[]): Item[] {
  const input: Item[] = [];
  for (const item of items) {
    switch (item.type) {
      case "mcp_call":
        input.push(...mcpCallAsFunctionCall(item));
        break;
      case "mcp_list_tools":
      case "mcp_approval_request":
      case "mcp_approval_response":
        break;
      default:
        input.push(item);
    }
  }
  return input;
}

/** An MCP call as the function call and output a model understands. */
function mcpCallAsFunctionCall(item: Item): Item[] {
  const callId = String(item.id);
  const output = item.error != null && item.error !== "" ? `Error: ${String(item.error)}` : String(item.output ?? "");
  return [
    { type: "function_call", call_id: callId, name: String(item.name), arguments: String(item.arguments ?? "{}") },
    { type: "function_call_output", call_id: callId, output },
  ];
}

/** A call a person denied, as its answer is recorded with the turn that answered it (`denied_call`). */
export interface DeniedCall {
  call_id: string;
  name: string;
  arguments: string;
}

function isDeniedCall(value: unknown): value is DeniedCall {
  const call = value as Partial<DeniedCall> | null;
  return typeof call === "object" && call !== null && typeof call.call_id === "string" && typeof call.name === "string" && typeof call.arguments === "string";
}

/** What the model is told of a call a person denied: the call and its denial, in this turn's input and later turns' history alike. */
export function deniedCall(call: DeniedCall, reason: string | null): Item[] {
  return [
    { type: "function_call", call_id: call.call_id, name: call.name, arguments: call.arguments },
    { type: "function_call_output", call_id: call.call_id, output: `The user denied this tool call.${reason ? ` Reason: ${reason}` : ""}` },
  ];
}

/**
 * The items one recorded turn adds to the input of every later turn: the approved calls it ran
 * (they belong to the turn that asked for them, so they come before its own input), its input, the
 * tool calls of its answer (function calls a client's function_call_output of the next turn refers
 * to, and the MCP calls the gateway ran with their results) and the answer as a plain assistant message.
 */
export function turnHistory(turn: StoredTurn): Item[] {
  if (turn.status === "failed") return [];
  const approved = (item: Item) => item.type === "mcp_call" && item.approval_request_id != null;
  const denied = turn.input.flatMap((item) => (item.type === "mcp_approval_response" && isDeniedCall(item.denied_call) ? deniedCall(item.denied_call, typeof item.reason === "string" ? item.reason : null) : []));
  const items: Item[] = [...turn.output.filter(approved).flatMap(mcpCallAsFunctionCall), ...denied, ...backendInput(turn.input)];
  for (const item of turn.output) {
    if (item.type === "function_call") items.push(item);
    else if (item.type === "mcp_call" && !approved(item)) items.push(...mcpCallAsFunctionCall(item));
  }
  if (turn.summary.assistant) items.push({ type: "message", role: "assistant", content: turn.summary.assistant });
  return items;
}

/** The UTF-8 size of a text: the unit of the gateway's token estimate (a token is about 4 bytes). */
export function utf8Bytes(text: string): number {
  let bytes = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code < 0x80) bytes += 1;
    else if (code < 0x800) bytes += 2;
    else if (code >= 0xd800 && code < 0xdc00) {
      bytes += 4;
      i++;
    } else bytes += 3;
  }
  return bytes;
}

// ---------------------------------------------------------------------------------------------
// Models and retrieval results, as turns report them
// ---------------------------------------------------------------------------------------------

export interface ModelInfo {
  identifier: string;
  metadata: Record<string, unknown>;
  api_model_type: string;
  provider_id: string;
  type: "model";
  provider_resource_id: string;
  model_type: string;
}

export type AttributeValue = string | number | boolean;

export interface ChunkAttributes {
  [key: string]: AttributeValue;
  /** "" when the store's attributes name no URL. */
  doc_url: string;
  document_id: string;
}

export interface RagChunk {
  content: string;
  /** The client's id of the store the chunk came from. */
  source: string;
  score: number;
  attributes: ChunkAttributes;
}

export interface ReferencedDocument {
  doc_url: string | null;
  doc_title: string | null;
  source: string;
  document_id: string;
}

// ---------------------------------------------------------------------------------------------
// A turn as the conversation's Durable Object runs it
// ---------------------------------------------------------------------------------------------

/** Backend request fields an endpoint may set besides model, input and instructions. */
export type BackendParams = Omit<Partial<ResponseCreateParamsStreaming>, "model" | "input" | "instructions" | "stream" | "conversation">;

/** An error as it crosses the Durable Object boundary (ApiError's fields). */
export interface WireError {
  status: number;
  response: string;
  cause: string;
  headers?: Record<string, string>;
}

/** Which endpoint a turn answers (for transcripts, telemetry and metrics). */
export type TurnEndpoint = "/v1/query" | "/v1/streaming_query" | "/v1/responses" | "/a2a" | "/v1/infer";

/**
 * A wire form the conversation's Durable Object sends a stream in itself (worker/turn/presenting.ts):
 * streaming_query's server-sent events, or its text/plain answer.
 */
export type StreamPresentation = "query-sse" | "query-text";

/**
 * Everything the Worker decided about a turn (DESIGN "One turn", step 2), sent to the conversation's
 * Durable Object in the one call that runs it. Plain data.
 */
export interface TurnPlan {
  /** The configuration document the Worker runs with (PARLEY_CONFIG), null for the bundled one. */
  configText: string | null;
  endpoint: TurnEndpoint;
  auth: {
    userId: string;
    username: string;
    /** The caller's bearer, when the auth module passes it on (MCP `kubernetes` credentials). */
    token: string | null;
    /** The caller may continue conversations of other users (read_other_conversations). */
    mayUseOthers: boolean;
  };
  /** Normalized conversation id. */
  conversationId: string;
  /** A new conversation may be created by this turn; an existing one must be the caller's. */
  create: boolean;
  /** Continue from this response: the conversation's latest, or a fork of it from there. */
  previousResponseId: string | null;
  requestId: string;
  /** This turn's new input items. */
  input: Item[];
  /** The user's question as text, for views, summaries, shields and retrieval. */
  userText: string;
  /** The model the client named, if any; otherwise the conversation's last one or the defaults. */
  model: { model?: string; provider?: string };
  instructions: string;
  params: BackendParams;
  generateTopicSummary: boolean;
  /** Shield names for this turn; null: every configured shield. */
  shields: string[] | null;
  /** Inline retrieval for this turn: the question, the request's solr (validated), its stores. */
  retrieval: { question: string; solr: unknown; vectorStoreIds: string[] | null } | null;
  /** With merged tools, only server-deployed activity counts in summaries and storage (SPEC rule 5). */
  countOnly: { serverMcpLabels: string[] } | null;
  /** The MCP tools the gateway offers and runs in this turn; null for none. */
  mcp: TurnMcp | null;
  /** The input's answers to earlier approval requests (`mcp_approval_response` items). */
  approvals: ApprovalAnswer[];
  /** Whether the client reads the backend's events as they arrive (a stream). */
  streaming: boolean;
  /**
   * A stream's wire form, when the conversation's Durable Object presents it (its bytes then pass
   * through the Worker as they are); null: the stream is the turn's events as NDJSON.
   */
  presentation: StreamPresentation | null;
  /** Whether the turn writes a transcript (when they are enabled): not for A2A, nor responses with store false. */
  transcript: boolean;
  /** Query attachments as sent, for the transcript. */
  attachments: Array<{ attachment_type: string; content_type: string; content: string }>;
  /** Turns copied from another conversation when this turn forks it (set by that conversation). */
  seed?: StoredTurn[];
}

/** What the conversation's Durable Object says about a turn once it has started. */
export interface TurnHead {
  conversationId: string;
  requestId: string;
  /** Parley's id of this turn's response (resp_ + conversation id + random). */
  responseId: string;
  /** The model that answers, and whether the client named it. */
  model: ModelInfo;
  modelRequested: boolean;
  /** What inline retrieval found before the model call (nothing for a blocked turn). */
  inlineChunks: RagChunk[];
}

export interface TurnResult {
  status: TurnStatus;
  /** The backend's final response object, when it sent one. */
  response: BackendResponse | null;
  text: string;
  inputTokens: number;
  outputTokens: number;
  summary: TurnSummary;
  /** What went wrong, for failed turns. */
  error: WireError | null;
  /** Tokens left per quota limiter after this turn (what was admitted minus this turn's use). */
  availableQuotas: Record<string, number>;
  /** Inline chunks, then those of the model's file_search calls. */
  ragChunks: RagChunk[];
  /** Documents of both, deduplicated. */
  referencedDocuments: ReferencedDocument[];
}

/** The result of a turn that failed without an answer: `user` its question, charged `tokens`. */
export function failedResult(user: string, error: WireError, tokens = 0, availableQuotas: TurnResult["availableQuotas"] = {}): TurnResult {
  return {
    status: "failed",
    response: null,
    text: "",
    inputTokens: tokens,
    outputTokens: 0,
    summary: { user, assistant: "", tool_calls: [], tool_results: [] },
    error,
    availableQuotas,
    ragChunks: [],
    referencedDocuments: [],
  };
}

export type TurnEvent =
  | { type: "backend"; event: ResponseStreamEvent }
  /** The conversation was compacted before this turn (its older turns summarised). */
  | { type: "compaction"; conversationId: string }
  | { type: "finished"; result: TurnResult };

/**
 * Which backend events an endpoint shows its client, null for all of them. /v1/responses relays
 * every event; the other streams show text deltas, the start of each text part (streaming_query's
 * empty token, as the original sends) and tool calls (streaming_query's token, tool_call and
 * tool_result events, A2A's status messages) and take everything else from the result, so the
 * conversation's Durable Object sends them nothing else: not the answer's message item either,
 * whose text the deltas already carried (and which, sent first, would hold the first delta back
 * behind it).
 */
export function shownEvents(endpoint: TurnEndpoint): ((event: ResponseStreamEvent) => boolean) | null {
  return endpoint === "/v1/responses" ? null : textAndTools;
}
const textAndTools = (event: ResponseStreamEvent): boolean =>
  event.type === "response.output_text.delta" ||
  event.type === "response.content_part.added" ||
  ((event.type === "response.output_item.added" || event.type === "response.output_item.done") && event.item.type !== "message");

/**
 * The answer of the one call that runs a turn: an error that stopped it before it started (404,
 * 403, 413, 429, 503...), or its head with either the finished result (JSON answers) or its events
 * as NDJSON bytes (streams), the last of which is `finished`.
 */
export type TurnStart =
  | { ok: false; error: WireError }
  | { ok: true; head: TurnHead; result: TurnResult }
  | { ok: true; head: TurnHead; events: ReadableStream<Uint8Array> };
