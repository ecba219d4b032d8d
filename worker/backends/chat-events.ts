// A Chat Completions answer as the Responses events every endpoint already consumes: the events a
// Responses backend sends for the same answer (created, in_progress, each output item added, its
// deltas and done, then completed or incomplete with the whole Response), so collect.ts and the
// presenters need no second path. Usage comes from the server when it reports it; otherwise it is
// estimated (UTF-8 bytes / 4, as the turn estimates) and the Response says so in its metadata
// (`usage_estimated: "true"`, see usageWasEstimated).
import type { ChatCompletion, ChatCompletionChunk } from "openai/resources/chat/completions";
import type { CompletionUsage } from "openai/resources/completions";
import type {
  Response,
  ResponseFunctionToolCall,
  ResponseOutputItem,
  ResponseOutputMessage,
  ResponseOutputText,
  ResponseStreamEvent,
  ResponseUsage,
} from "openai/resources/responses/responses";
import type { ResponsesParams } from "./chat-request.ts";

/** The metadata key (and value) that marks a Response whose usage Parley estimated. */
export const USAGE_ESTIMATED_KEY = "usage_estimated";

/** Whether the usage of `response` was estimated because the backend reported none. */
export function usageWasEstimated(response: Partial<Pick<Response, "metadata">> | null | undefined): boolean {
  return response?.metadata?.[USAGE_ESTIMATED_KEY] === "true";
}

/** Tokens from UTF-8 bytes, the turn's estimate (worker/turn/run.ts estimateTokens). */
export function estimateTokens(text: string): number {
  return Math.ceil(new TextEncoder().encode(text).length / 4);
}

type Unsequenced<E = ResponseStreamEvent> = E extends unknown ? Omit<E, "sequence_number"> : never;

function hex(length: number): string {
  const bytes = crypto.getRandomValues(new Uint8Array(Math.ceil(length / 2)));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("").slice(0, length);
}

const outputText = (text: string): ResponseOutputText => ({ type: "output_text", text, annotations: [], logprobs: [] });

type Status = "completed" | "incomplete";

/** What a finish reason makes of the response: OpenAI's incomplete reasons for a cut answer. */
function outcome(finish: string | null): { status: Status; incomplete: Response["incomplete_details"] } {
  if (finish === "length") return { status: "incomplete", incomplete: { reason: "max_output_tokens" } };
  if (finish === "content_filter") return { status: "incomplete", incomplete: { reason: "content_filter" } };
  return { status: "completed", incomplete: null };
}

function responsesUsage(usage: CompletionUsage): ResponseUsage {
  return {
    input_tokens: usage.prompt_tokens,
    input_tokens_details: { cached_tokens: usage.prompt_tokens_details?.cached_tokens ?? 0, cache_write_tokens: 0 },
    output_tokens: usage.completion_tokens,
    output_tokens_details: { reasoning_tokens: usage.completion_tokens_details?.reasoning_tokens ?? 0 },
    total_tokens: usage.total_tokens ?? usage.prompt_tokens + usage.completion_tokens,
  };
}

interface OpenMessage {
  kind: "message";
  item: ResponseOutputMessage;
  index: number;
  text: string;
}

interface OpenCall {
  kind: "call";
  item: ResponseFunctionToolCall & { id: string };
  index: number;
  closed: boolean;
}

/**
 * Translates one chat answer (a stream of chunks, or one completion) into Responses events. One
 * instance per model call; not shared between requests.
 */
export class ChatEventTranslator {
  private readonly params: ResponsesParams;
  private readonly inputTokens: number;
  private readonly id = `resp_${hex(48)}`;
  private readonly createdAt = Math.floor(Date.now() / 1000);
  private readonly output: ResponseOutputItem[] = [];
  private readonly calls = new Map<string, OpenCall>();
  private open: OpenMessage | OpenCall | null = null;
  private lastCallKey: string | null = null;
  private sequence = 0;
  private usage: CompletionUsage | null = null;
  private finish: string | null = null;
  private generated = "";

  /** `inputTokens`: the estimate used when the backend reports no usage. */
  constructor(params: ResponsesParams, inputTokens: number) {
    this.params = params;
    this.inputTokens = inputTokens;
  }

  /** Whether the backend said why it stopped (a stream without a finish reason was cut). */
  get finished(): boolean {
    return this.finish !== null;
  }

  /** created and in_progress, then the items that precede the model's own (an emulated file search). */
  start(leading: ResponseOutputItem[] = []): ResponseStreamEvent[] {
    const events = [this.next({ type: "response.created", response: this.response("in_progress", null) }), this.next({ type: "response.in_progress", response: this.response("in_progress", null) })];
    for (const item of leading) {
      const index = this.output.length;
      if (item.type === "file_search_call") {
        const ref = { item_id: item.id, output_index: index };
        events.push(
          this.next({ type: "response.output_item.added", output_index: index, item: { ...item, status: "in_progress", queries: [], results: null } }),
          this.next({ type: "response.file_search_call.in_progress", ...ref }),
          this.next({ type: "response.file_search_call.searching", ...ref }),
          this.next({ type: "response.file_search_call.completed", ...ref }),
        );
      } else {
        events.push(this.next({ type: "response.output_item.added", output_index: index, item }));
      }
      events.push(this.next({ type: "response.output_item.done", output_index: index, item }));
      this.output.push(item);
    }
    return events;
  }

  /** The events one streamed chunk makes. */
  chunk(chunk: ChatCompletionChunk): ResponseStreamEvent[] {
    const events: ResponseStreamEvent[] = [];
    if (chunk.usage) this.usage = chunk.usage;
    const choice = chunk.choices?.[0];
    if (!choice) return events;
    const delta = choice.delta ?? {};
    const text = (delta.content ?? "") + (delta.refusal ?? "");
    if (text) events.push(...this.text(text));
    for (const call of delta.tool_calls ?? []) events.push(...this.toolCall(call));
    if (choice.finish_reason) this.finish = choice.finish_reason;
    return events;
  }

  /**
   * The closing events: open items done, then response.completed (or response.incomplete for a cut
   * answer). Nothing when the backend never said it finished: like a Responses stream that broke
   * off, the turn then records an incomplete answer.
   */
  end(): ResponseStreamEvent[] {
    if (!this.finished) return [];
    const { status, incomplete } = outcome(this.finish);
    const events = this.close(status);
    if (!this.output.some((item) => item.type === "message" || item.type === "function_call")) {
      events.push(...this.text(""), ...this.close(status));
    }
    const response = this.response(status, incomplete);
    events.push(this.next(status === "completed" ? { type: "response.completed", response } : { type: "response.incomplete", response }));
    return events;
  }

  /** A whole (JSON) completion as the Response a Responses backend would have answered. */
  completion(completion: ChatCompletion, leading: ResponseOutputItem[] = []): Response {
    this.output.push(...leading);
    const choice = completion.choices?.[0];
    this.usage = completion.usage ?? null;
    this.finish = choice?.finish_reason ?? "stop";
    const { status, incomplete } = outcome(this.finish);
    const message = choice?.message;
    for (const call of message?.tool_calls ?? []) {
      if (call.type !== "function") continue;
      this.generated += call.function.arguments;
      this.output.push({ type: "function_call", id: `fc_${hex(48)}`, call_id: call.id || `call_${hex(24)}`, name: call.function.name, arguments: call.function.arguments, status: "completed" });
    }
    const text = (message?.content ?? "") + (message?.refusal ?? "");
    if (text || !this.output.some((item) => item.type === "function_call")) {
      this.generated += text;
      this.output.push({ type: "message", id: `msg_${hex(48)}`, status, role: "assistant", content: [outputText(text)] });
    }
    return this.response(status, incomplete);
  }

  private next(event: Unsequenced): ResponseStreamEvent {
    return { ...event, sequence_number: this.sequence++ } as ResponseStreamEvent;
  }

  private text(delta: string): ResponseStreamEvent[] {
    const events: ResponseStreamEvent[] = [];
    if (this.open?.kind !== "message") {
      events.push(...this.close("completed"));
      const item: ResponseOutputMessage = { type: "message", id: `msg_${hex(48)}`, status: "in_progress", role: "assistant", content: [] };
      const open: OpenMessage = { kind: "message", item, index: this.output.length, text: "" };
      this.output.push(item);
      this.open = open;
      events.push(
        this.next({ type: "response.output_item.added", output_index: open.index, item: { ...item, content: [] } }),
        this.next({ type: "response.content_part.added", item_id: item.id, output_index: open.index, content_index: 0, part: outputText("") }),
      );
    }
    const open = this.open as OpenMessage;
    if (delta) {
      open.text += delta;
      this.generated += delta;
      events.push(this.next({ type: "response.output_text.delta", item_id: open.item.id, output_index: open.index, content_index: 0, delta, logprobs: [] }));
    }
    return events;
  }

  private toolCall(call: NonNullable<ChatCompletionChunk.Choice.Delta["tool_calls"]>[number]): ResponseStreamEvent[] {
    const events: ResponseStreamEvent[] = [];
    // Some servers leave out `index`; then a new id starts a call and anything else continues the last.
    const key = typeof call.index === "number" ? `#${call.index}` : call.id ? `id:${call.id}` : (this.lastCallKey ?? "#0");
    let state = this.calls.get(key);
    if (!state) {
      events.push(...this.close("completed"));
      const item = { type: "function_call" as const, id: `fc_${hex(48)}`, call_id: call.id || `call_${hex(24)}`, name: call.function?.name ?? "", arguments: "", status: "in_progress" as const };
      state = { kind: "call", item, index: this.output.length, closed: false };
      this.calls.set(key, state);
      this.output.push(item);
      this.open = state;
      events.push(this.next({ type: "response.output_item.added", output_index: state.index, item: { ...item } }));
    } else if (!state.item.name && call.function?.name) {
      state.item.name = call.function.name;
    }
    this.lastCallKey = key;
    const fragment = call.function?.arguments ?? "";
    if (fragment) {
      state.item.arguments += fragment;
      this.generated += fragment;
      // A fragment for a call already closed (servers interleaving parallel calls) only completes
      // the final response: its item was already reported done.
      if (!state.closed) events.push(this.next({ type: "response.function_call_arguments.delta", item_id: state.item.id, output_index: state.index, delta: fragment }));
    }
    return events;
  }

  /** Ends the open item with the done events a Responses backend sends. */
  private close(status: Status): ResponseStreamEvent[] {
    const open = this.open;
    this.open = null;
    if (!open) return [];
    if (open.kind === "message") {
      const done: ResponseOutputMessage = { ...open.item, status, content: [outputText(open.text)] };
      this.output[open.index] = done;
      const ref = { item_id: open.item.id, output_index: open.index, content_index: 0 };
      return [
        this.next({ type: "response.output_text.done", ...ref, text: open.text, logprobs: [] }),
        this.next({ type: "response.content_part.done", ...ref, part: outputText(open.text) }),
        this.next({ type: "response.output_item.done", output_index: open.index, item: done }),
      ];
    }
    open.closed = true;
    open.item.status = "completed";
    return [
      this.next({ type: "response.function_call_arguments.done", item_id: open.item.id, output_index: open.index, arguments: open.item.arguments }),
      this.next({ type: "response.output_item.done", output_index: open.index, item: { ...open.item } }),
    ];
  }

  /** The Response object with the request's fields echoed, as a Responses backend answers it. */
  private response(status: Response["status"], incomplete: Response["incomplete_details"]): Response {
    const params = this.params;
    const settled = status !== "in_progress";
    const estimated = settled && this.usage === null;
    const usage: ResponseUsage | undefined = !settled
      ? undefined
      : this.usage
        ? responsesUsage(this.usage)
        : {
            input_tokens: this.inputTokens,
            input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 },
            output_tokens: estimateTokens(this.generated),
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: this.inputTokens + estimateTokens(this.generated),
          };
    const output = settled ? this.output.map((item) => ({ ...item })) : [];
    const response: Response = {
      id: this.id,
      object: "response",
      created_at: this.createdAt,
      status,
      background: false,
      completed_at: status === "completed" ? Math.floor(Date.now() / 1000) : null,
      conversation: null,
      access_programs: null,
      error: null,
      incomplete_details: incomplete,
      instructions: params.instructions ?? null,
      max_output_tokens: params.max_output_tokens ?? null,
      max_tool_calls: params.max_tool_calls ?? null,
      model: params.model ?? "",
      output,
      output_text: output.flatMap((item) => (item.type === "message" ? item.content.map((part) => (part.type === "output_text" ? part.text : "")) : [])).join(""),
      parallel_tool_calls: params.parallel_tool_calls ?? true,
      previous_response_id: null,
      prompt: null,
      prompt_cache_key: null,
      reasoning: { effort: null, summary: null },
      safety_identifier: null,
      service_tier: "default",
      temperature: params.temperature ?? 1,
      text: params.text ?? { format: { type: "text" } },
      tool_choice: params.tool_choice ?? "auto",
      tools: params.tools ?? [],
      top_logprobs: 0,
      top_p: params.top_p ?? 1,
      truncation: "disabled",
      ...(usage ? { usage } : {}),
      metadata: { ...(params.metadata ?? {}), ...(estimated ? { [USAGE_ESTIMATED_KEY]: "true" } : {}) },
    };
    return response;
  }
}
