// Asking a question on every endpoint that calls the model, in one shape (RELIABILITY.md "Backend
// faults", "Concurrency"): what came back (an answer, or SPEC's error as a status or as a stream's
// terminal event), how long it took, and in which conversation. Also what the scripted backend saw.
import { inject } from "vitest";
import { call, readSse } from "../../worker/helpers.ts";
import { since } from "./suite.ts";

type Json = Record<string, unknown>;

/** SPEC's error, wherever it came from: the envelope of a status, or a stream's or task's terminal event. */
export interface TurnError {
  /** The HTTP status, the stream error event's status_code, or 0 where the form carries none. */
  status: number;
  response: string;
  cause: string;
  /** Where it came from: "status", "event" (query stream), "response.failed", "task". */
  form: string;
}

export interface Outcome {
  answer: string | null;
  error: TurnError | null;
  /** The conversation (normalized id), or the A2A contextId. */
  conversation: string | null;
  ms: number;
  /** Problems with the form of the answer itself (a stream without its terminal event, ...). */
  malformed: string[];
}

export interface TurnEndpoint {
  name: string;
  /** Whether the endpoint keeps a conversation (all but /v1/infer). */
  conversational: boolean;
  ask(question: string, options: { conversation: string | null; config: string; user: string }): Promise<Outcome>;
}

function envelopeError(status: number, body: unknown): TurnError {
  const detail = (body as { detail?: { response?: unknown; cause?: unknown } } | null)?.detail;
  return { status, response: String(detail?.response ?? ""), cause: String(detail?.cause ?? ""), form: "status" };
}

/** "<response>: <cause>" as the responses and A2A forms carry SPEC's error. */
function splitMessage(message: string, form: string, status = 0): TurnError {
  const at = message.indexOf(": ");
  return at < 0 ? { status, response: message, cause: "", form } : { status, response: message.slice(0, at), cause: message.slice(at + 2), form };
}

async function failedStatus(response: Response, started: number): Promise<Outcome> {
  const text = await response.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    return { answer: null, error: { status: response.status, response: "", cause: text.slice(0, 200), form: "status" }, conversation: null, ms: since(started), malformed: [`${response.status} body is not JSON`] };
  }
  return { answer: null, error: envelopeError(response.status, body), conversation: null, ms: since(started), malformed: [] };
}

const query: TurnEndpoint = {
  name: "/v1/query",
  conversational: true,
  async ask(question, { conversation, config, user }) {
    const started = Date.now();
    const response = await call("/v1/query", { json: { query: question, ...(conversation ? { conversation_id: conversation } : {}) }, config, user });
    if (response.status !== 200) return failedStatus(response, started);
    const body = (await response.json()) as Json;
    return { answer: String(body.response), error: null, conversation: String(body.conversation_id), ms: since(started), malformed: [] };
  },
};

const streamingQuery: TurnEndpoint = {
  name: "/v1/streaming_query",
  conversational: true,
  async ask(question, { conversation, config, user }) {
    const started = Date.now();
    const response = await call("/v1/streaming_query", { json: { query: question, ...(conversation ? { conversation_id: conversation } : {}) }, config, user });
    if (response.status !== 200) return failedStatus(response, started);
    const events = (await readSse(response)).map((event) => event.data as { event: string; data: Json });
    const malformed: string[] = [];
    const start = events[0];
    if (start?.event !== "start") malformed.push("the stream does not begin with start");
    const last = events.at(-1);
    const outcome: Outcome = { answer: null, error: null, conversation: start?.data?.conversation_id ? String(start.data.conversation_id) : conversation, ms: since(started), malformed };
    if (last?.event === "error") {
      outcome.error = { status: Number(last.data.status_code), response: String(last.data.response), cause: String(last.data.cause), form: "event" };
    } else if (last?.event === "end") {
      outcome.answer = String(events.find((event) => event.event === "turn_complete")?.data.token ?? "");
    } else {
      malformed.push(`the stream ends with ${JSON.stringify(last).slice(0, 120)}, neither end nor error`);
    }
    return outcome;
  },
};

const responsesJson: TurnEndpoint = {
  name: "/v1/responses",
  conversational: true,
  async ask(question, { conversation, config, user }) {
    const started = Date.now();
    const response = await call("/v1/responses", { json: { input: question, ...(conversation ? { conversation } : {}) }, config, user });
    if (response.status !== 200) return failedStatus(response, started);
    const body = (await response.json()) as Json;
    const id = String(body.conversation ?? "").replace(/^conv_/, "");
    if (body.status === "failed") return { answer: null, error: splitMessage(String((body.error as Json)?.message ?? ""), "response.failed"), conversation: id, ms: since(started), malformed: [] };
    return { answer: String(body.output_text), error: null, conversation: id, ms: since(started), malformed: [] };
  },
};

const responsesStream: TurnEndpoint = {
  name: "/v1/responses (stream)",
  conversational: true,
  async ask(question, { conversation, config, user }) {
    const started = Date.now();
    const response = await call("/v1/responses", { json: { input: question, stream: true, ...(conversation ? { conversation } : {}) }, config, user });
    if (response.status !== 200) return failedStatus(response, started);
    const events = (await readSse(response)).map((event) => event.data);
    const malformed: string[] = [];
    if (events.at(-1) !== "[DONE]") malformed.push("the stream does not end with [DONE]");
    const terminal = events.at(-2) as { type?: string; response?: Json } | undefined;
    const id = String(terminal?.response?.conversation ?? "").replace(/^conv_/, "") || conversation;
    const outcome: Outcome = { answer: null, error: null, conversation: id, ms: since(started), malformed };
    if (terminal?.type === "response.completed") {
      const text = events
        .filter((event): event is { type: string; delta: string } => typeof event === "object" && (event as Json).type === "response.output_text.delta")
        .map((event) => event.delta)
        .join("");
      outcome.answer = text;
    } else if (terminal?.type === "response.failed" || terminal?.type === "response.incomplete") {
      outcome.error = splitMessage(String((terminal.response?.error as Json | undefined)?.message ?? terminal.type), terminal.type);
    } else {
      malformed.push(`the event before [DONE] is ${JSON.stringify(terminal).slice(0, 120)}`);
    }
    return outcome;
  },
};

const infer: TurnEndpoint = {
  name: "/v1/infer",
  conversational: false,
  async ask(question, { config, user }) {
    const started = Date.now();
    const response = await call("/v1/infer", { json: { question }, config, user });
    if (response.status !== 200) return failedStatus(response, started);
    const body = (await response.json()) as { data: { text: string } };
    return { answer: body.data.text, error: null, conversation: null, ms: since(started), malformed: [] };
  },
};

function a2aMessage(question: string, contextId: string | null) {
  return { kind: "message", messageId: crypto.randomUUID(), role: "user", parts: [{ kind: "text", text: question }], ...(contextId ? { contextId } : {}) };
}

type TaskLike = { kind?: string; contextId?: string; status?: { state?: string; message?: { parts?: Array<{ text?: string }> } }; artifacts?: Array<{ parts: Array<{ text?: string }> }>; metadata?: Json };

const a2aSend: TurnEndpoint = {
  name: "/a2a message/send",
  conversational: true,
  async ask(question, { conversation, config, user }) {
    const started = Date.now();
    const body = { jsonrpc: "2.0", id: crypto.randomUUID(), method: "message/send", params: { message: a2aMessage(question, conversation) } };
    const response = await call("/a2a", { json: body, config, user });
    if (response.status !== 200) return failedStatus(response, started);
    const answer = (await response.json()) as { result?: TaskLike; error?: { message: string; data?: { status_code?: number; response?: string; cause?: string } } };
    if (answer.error) {
      const data = answer.error.data;
      return { answer: null, error: data?.response ? { status: Number(data.status_code ?? 0), response: data.response, cause: String(data.cause ?? ""), form: "json-rpc" } : splitMessage(answer.error.message, "json-rpc"), conversation, ms: since(started), malformed: [] };
    }
    const task = answer.result!;
    if (task.status?.state === "completed") return { answer: task.artifacts?.[0]?.parts[0]?.text ?? "", error: null, conversation: task.contextId ?? conversation, ms: since(started), malformed: [] };
    return { answer: null, error: splitMessage(task.status?.message?.parts?.[0]?.text ?? `task ${task.status?.state}`, "task"), conversation: task.contextId ?? conversation, ms: since(started), malformed: [] };
  },
};

const a2aStream: TurnEndpoint = {
  name: "/a2a message/stream",
  conversational: true,
  async ask(question, { conversation, config, user }) {
    const started = Date.now();
    const body = { jsonrpc: "2.0", id: crypto.randomUUID(), method: "message/stream", params: { message: a2aMessage(question, conversation) } };
    const response = await call("/a2a", { json: body, config, user, headers: { Accept: "text/event-stream" } });
    if (response.status !== 200) return failedStatus(response, started);
    const events = (await readSse(response)).map((event) => event.data as { result?: TaskLike & { final?: boolean; artifact?: { parts: Array<{ text?: string }> } }; error?: { message: string } });
    const malformed: string[] = [];
    const last = events.at(-1);
    const context = events.find((event) => event.result?.contextId)?.result?.contextId ?? conversation;
    if (last?.error) return { answer: null, error: splitMessage(last.error.message, "json-rpc"), conversation: context, ms: since(started), malformed };
    if (!last?.result?.final) malformed.push(`the stream ends with ${JSON.stringify(last).slice(0, 160)}, not a final status`);
    if (last?.result?.status?.state === "completed") {
      const artifact = events.map((event) => event.result?.artifact).filter(Boolean).at(-1);
      return { answer: artifact?.parts[0]?.text ?? "", error: null, conversation: context, ms: since(started), malformed };
    }
    return { answer: null, error: splitMessage(last?.result?.status?.message?.parts?.[0]?.text ?? `task ${last?.result?.status?.state}`, "task"), conversation: context, ms: since(started), malformed };
  },
};

/** Every endpoint that calls the model, JSON and stream. */
export const TURN_ENDPOINTS: TurnEndpoint[] = [query, streamingQuery, responsesJson, responsesStream, infer, a2aSend, a2aStream];

/** The conversation an A2A contextId maps to, read from its Durable Object's view: the query endpoints' id. */
export async function conversationOf(endpoint: TurnEndpoint, outcome: Outcome, options: { config: string; user: string }): Promise<string | null> {
  if (!endpoint.name.startsWith("/a2a")) return outcome.conversation;
  // The list of the user's conversations names it (callers give each context a user of its own).
  const list = await call("/v1/conversations", { config: options.config, user: options.user });
  const body = (await list.json()) as { conversations: Array<{ conversation_id: string }> };
  return body.conversations.length === 1 ? body.conversations[0]!.conversation_id : null;
}

/** The user messages of a backend request, oldest first, in either wire. */
export function userTexts(body: Json): string[] {
  const items = (Array.isArray(body.input) ? body.input : Array.isArray(body.messages) ? body.messages : typeof body.input === "string" ? [{ role: "user", content: body.input }] : []) as Json[];
  return items
    .filter((item) => item.role === "user")
    .map((item) => {
      const content = item.content;
      if (typeof content === "string") return content;
      return (content as Json[]).filter((part) => typeof part.text === "string").map((part) => String(part.text)).join("\n");
    });
}

/** The model calls the scripted backend received whose last user message is `question`. */
export async function modelCallsWith(question: string): Promise<Json[]> {
  const base = inject("backendUrl").replace(/\/v1$/, "");
  const requests = (await (await fetch(`${base}/__requests`)).json()) as Array<{ path: string; body: Json | null }>;
  return requests
    .filter((request) => (request.path === "/v1/responses" || request.path === "/v1/chat/completions") && request.body)
    .map((request) => request.body!)
    .filter((body) => {
      const texts = userTexts(body);
      return texts.length > 0 && texts.at(-1) === question && !/topic summary|summarise a conversation/i.test(instructionsOf(body));
    });
}

/** The system prompt of a backend request in either wire. */
function instructionsOf(body: Json): string {
  if (typeof body.instructions === "string") return body.instructions;
  const first = Array.isArray(body.messages) ? (body.messages[0] as Json | undefined) : undefined;
  return first?.role === "system" && typeof first.content === "string" ? first.content : "";
}
