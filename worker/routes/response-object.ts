// The OpenAI Responses object as /v1/responses shows it, in JSON answers and inside every stream event
// that carries one. Clients parse it with the official SDKs' types, so every field of the pinned
// `openai` package's `Response` is present with a value of its type, whatever the backend sent (a
// vLLM or Ollama backend leaves many out): the type below makes leaving one out a compile error, and
// RESPONSE_KEYS lets tests check the same at run time.
import type { Response as OpenAIResponse, ResponseError, ResponseUsage, Tool } from "openai/resources/responses/responses";
import { REDACTED } from "../config/redact.ts";
import type { Item, WireError } from "../domain/conversation.ts";

/** Response fields with no null form and nothing Parley could truthfully put in them: left out, as OpenAI does. */
type NotShown = "image" | "input_transformations" | "prompt_cache_diagnostics" | "prompt_cache_options" | "tool_usage" | "user";

type Shown = Exclude<keyof OpenAIResponse, NotShown | "conversation">;

/** Every shown field required; `conversation` is a string (SPEC), plus the fields OpenAI's wire schema adds. */
export type ResponseObject = { [K in Shown]-?: Exclude<OpenAIResponse[K], undefined> } & {
  conversation: string;
  presence_penalty: number;
  frequency_penalty: number;
  store: boolean;
};

export const RESPONSE_KEYS = [
  "id",
  "object",
  "created_at",
  "completed_at",
  "status",
  "error",
  "incomplete_details",
  "access_programs",
  "background",
  "conversation",
  "instructions",
  "max_output_tokens",
  "max_tool_calls",
  "metadata",
  "model",
  "moderation",
  "output",
  "output_text",
  "parallel_tool_calls",
  "previous_response_id",
  "prompt",
  "prompt_cache_key",
  "prompt_cache_retention",
  "reasoning",
  "safety_identifier",
  "service_tier",
  "store",
  "temperature",
  "presence_penalty",
  "frequency_penalty",
  "text",
  "tool_choice",
  "tools",
  "top_logprobs",
  "top_p",
  "truncation",
  "usage",
] as const satisfies readonly (keyof ResponseObject)[];

// Fails to compile when the openai package's Response gains a field RESPONSE_KEYS does not list.
type Unlisted = Exclude<keyof ResponseObject, (typeof RESPONSE_KEYS)[number]>;
const EVERY_KEY_LISTED: [Unlisted] extends [never] ? true : Unlisted = true;
void EVERY_KEY_LISTED;

/** What the gateway decides about a response, whatever the backend said. */
export interface ShownFields {
  model: string;
  instructions: string;
  tools: ResponseObject["tools"];
  tool_choice: ResponseObject["tool_choice"];
  previous_response_id: string | null;
  prompt: ResponseObject["prompt"];
  store: boolean;
  metadata: Record<string, string>;
  safety_identifier: string | null;
  conversation: string;
}

/** The backend's response (partial for in-progress events) completed into a Responses object. */
export function responseObject(backend: Partial<OpenAIResponse>, shown: ShownFields, outputText: string): ResponseObject {
  return {
    id: backend.id ?? "",
    object: "response",
    created_at: backend.created_at ?? Math.floor(Date.now() / 1000),
    completed_at: backend.completed_at ?? null,
    status: backend.status ?? "in_progress",
    error: backend.error ?? null,
    incomplete_details: backend.incomplete_details ?? null,
    access_programs: backend.access_programs ?? null,
    background: backend.background ?? false,
    max_output_tokens: null,
    max_tool_calls: backend.max_tool_calls ?? null,
    moderation: backend.moderation ?? null,
    output: backend.output ?? [],
    output_text: outputText,
    parallel_tool_calls: backend.parallel_tool_calls ?? true,
    prompt_cache_key: backend.prompt_cache_key ?? null,
    prompt_cache_retention: backend.prompt_cache_retention ?? null,
    reasoning: null,
    service_tier: backend.service_tier ?? "default",
    temperature: backend.temperature ?? null,
    presence_penalty: 0,
    frequency_penalty: 0,
    text: backend.text ?? { format: { type: "text" } },
    top_logprobs: backend.top_logprobs ?? null,
    top_p: backend.top_p ?? null,
    truncation: backend.truncation ?? "disabled",
    usage: usage(backend.usage),
    ...shown,
  };
}

/** Usage with every detail field, which OpenAI-compatible servers often leave out. */
function usage(given: ResponseUsage | undefined): ResponseUsage {
  const input = given?.input_tokens ?? 0;
  const output = given?.output_tokens ?? 0;
  return {
    input_tokens: input,
    output_tokens: output,
    total_tokens: given?.total_tokens ?? input + output,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0, ...given?.input_tokens_details },
    output_tokens_details: { reasoning_tokens: 0, ...given?.output_tokens_details },
  };
}

/**
 * A tool as the Responses object defines it: function tools always carry `parameters` and `strict`;
 * an `mcp` tool's credentials (its `authorization`, its headers' values) are shown redacted, never
 * repeated into a response that is kept, logged and shown.
 */
export function shownTool(tool: Record<string, unknown> & { type: string }): Tool {
  if (tool.type === "mcp") {
    const headers = tool.headers && typeof tool.headers === "object" ? Object.fromEntries(Object.keys(tool.headers).map((name) => [name, REDACTED])) : tool.headers;
    return { ...tool, ...(tool.authorization == null ? {} : { authorization: REDACTED }), ...(headers === undefined ? {} : { headers }) } as unknown as Tool;
  }
  if (tool.type !== "function") return tool as unknown as Tool;
  return { ...tool, parameters: tool.parameters ?? null, strict: tool.strict ?? null } as unknown as Tool;
}

/** The error of a failed response, its code from the openai package's enum. */
export function responseError(failure: WireError): ResponseError {
  const code: ResponseError["code"] = failure.status === 429 ? "rate_limit_exceeded" : failure.status < 500 ? "invalid_prompt" : "server_error";
  return { code, message: `${failure.response}: ${failure.cause}` };
}

/**
 * The output items a stream has shown, as its events built them (text and argument deltas applied),
 * by output index: what a response that fails mid-stream still holds. OpenAI's failed responses
 * carry the partial output, each unfinished item closed as `incomplete`.
 */
export function streamedOutput() {
  const items = new Map<number, { item: Item; done: boolean }>();
  const at = (index: unknown) => (typeof index === "number" ? items.get(index) : undefined);
  return {
    /** Takes an event as the client is shown it (output indexes as shown). */
    see(event: Item): void {
      const entry = at(event.output_index);
      switch (event.type) {
        case "response.output_item.added":
          items.set(event.output_index as number, { item: structuredClone(event.item as Item), done: false });
          break;
        case "response.output_item.done":
          items.set(event.output_index as number, { item: event.item as Item, done: true });
          break;
        case "response.content_part.added":
          if (entry && Array.isArray(entry.item.content)) entry.item.content[event.content_index as number] = { ...(event.part as Item) };
          break;
        case "response.output_text.delta": {
          const part = entry && Array.isArray(entry.item.content) ? (entry.item.content[event.content_index as number] as Item | undefined) : undefined;
          if (part) part.text = `${typeof part.text === "string" ? part.text : ""}${String(event.delta)}`;
          break;
        }
        case "response.function_call_arguments.delta":
          if (entry) entry.item.arguments = `${typeof entry.item.arguments === "string" ? entry.item.arguments : ""}${String(event.delta)}`;
          break;
      }
    },
    /** Closes the items not done as `incomplete`; returns them with their indexes, for their `output_item.done` events. */
    closeUnfinished(): Array<{ index: number; item: Item }> {
      const closed: Array<{ index: number; item: Item }> = [];
      for (const [index, entry] of items) {
        if (entry.done) continue;
        entry.item = { ...entry.item, status: "incomplete" };
        entry.done = true;
        closed.push({ index, item: entry.item });
      }
      return closed;
    },
    /** The items shown so far, in output order. */
    output(): Item[] {
      return [...items.entries()].sort(([a], [b]) => a - b).map(([, entry]) => entry.item);
    },
  };
}
