// What Parley reads of a backend's answers (and of its model lists and moderations), checked where
// they arrive. The SDK parses JSON but checks no shape, so an OpenAI-compatible server that answers
// 200 with something else (no output, a null message content, tokens as strings, a moderation
// without a verdict) would otherwise reach the turn's readers: a TypeError deep in a turn, nonsense
// in its records and quotas, or input let through unchecked. Such an answer is SPEC's "anything
// else" backend error instead (500, with a cause that names what was wrong). Only what Parley reads
// is checked, loosely: every other field, and item types Parley does not know (reasoning, say),
// pass through untouched.
import type { ChatCompletion, ChatCompletionChunk } from "openai/resources/chat/completions";
import type { Response, ResponseStreamEvent } from "openai/resources/responses/responses";
import * as z from "zod";

/** A backend answer that is not what its wire API promises. */
export class MalformedAnswer extends Error {
  override readonly name = "MalformedAnswer";
}

/**
 * What reading an answer threw, with JSON that did not parse (the SDK's SSE reader and fetch's
 * json() throw SyntaxError) told apart as a malformed answer.
 */
export function unreadable(error: unknown): unknown {
  return error instanceof SyntaxError ? new MalformedAnswer("the inference backend's answer is not JSON") : error;
}

/**
 * A stream's events, each checked by `check` as it arrives. A stream without a single event (a
 * body that was no event stream at all) is refused; one stopped by its caller ends as the caller
 * says (worker/turn/backend-call.ts ignores what a stopped call throws).
 */
export async function* checkedStream<T>(events: AsyncIterable<unknown>, check: (event: unknown) => T): AsyncIterable<T> {
  let any = false;
  try {
    for await (const event of events) {
      any = true;
      yield check(event);
    }
  } catch (error) {
    throw unreadable(error);
  }
  if (!any) throw new MalformedAnswer("the inference backend's stream ended without any event");
}

const tokens = z.number().int().min(0);
const text = z.string().nullish();

const ResponsesUsageSchema = z.looseObject({ input_tokens: tokens, output_tokens: tokens }).nullish();

const ContentPartSchema = z
  .looseObject({ type: z.string(), text: z.string().optional(), refusal: z.string().optional() })
  .refine((part) => part.type !== "output_text" || part.text !== undefined, { message: "an output_text part needs its text", path: ["text"] })
  .refine((part) => part.type !== "refusal" || part.refusal !== undefined, { message: "a refusal part needs its refusal", path: ["refusal"] });

const OutputItemSchema = z
  .looseObject({
    type: z.string(),
    content: z.array(ContentPartSchema).optional(),
    name: z.string().optional(),
    arguments: z.string().optional(),
    call_id: z.string().optional(),
  })
  .refine((item) => item.type !== "message" || item.content !== undefined, { message: "a message needs its content", path: ["content"] })
  .refine((item) => item.type !== "function_call" || (item.name !== undefined && item.arguments !== undefined && item.call_id !== undefined), {
    message: "a function_call needs its name, arguments and call_id",
  });

const ResponseSchema = z.looseObject({
  status: z.string().optional(),
  output: z.array(OutputItemSchema),
  usage: ResponsesUsageSchema,
  error: z.looseObject({ message: text }).nullish(),
});

/** Every Responses stream event names its type. */
const EventSchema = z.looseObject({ type: z.string() });

/** The Responses events whose fields the turn reads, by type; other types need only their type. */
const EVENT_SCHEMAS: Record<string, z.ZodType> = {
  "response.output_text.delta": z.looseObject({ delta: z.string() }),
  "response.completed": z.looseObject({ response: ResponseSchema }),
  "response.incomplete": z.looseObject({ response: ResponseSchema }),
  "response.failed": z.looseObject({ response: ResponseSchema }),
  error: z.looseObject({ message: text }),
};

const ChatUsageSchema = z.looseObject({ prompt_tokens: tokens, completion_tokens: tokens, total_tokens: tokens.optional() }).nullish();

const ChatToolCallSchema = z.looseObject({
  index: z.number().int().min(0).optional(),
  id: text,
  type: z.string().optional(),
  function: z.looseObject({ name: text, arguments: text }).optional(),
});

const ChatMessageSchema = z.looseObject({ content: text, refusal: text, tool_calls: z.array(ChatToolCallSchema).nullish() });

const ChatCompletionSchema = z.looseObject({
  choices: z.array(
    z
      .looseObject({ message: ChatMessageSchema, finish_reason: text })
      .refine((choice) => (choice.message.tool_calls ?? []).every((call) => call.type !== "function" || (typeof call.function?.name === "string" && typeof call.function.arguments === "string")), {
        message: "a function tool call needs its name and arguments",
      }),
  ),
  usage: ChatUsageSchema,
});

const ChatChunkSchema = z.looseObject({
  choices: z.array(z.looseObject({ delta: ChatMessageSchema.nullish(), finish_reason: text })).nullish(),
  usage: ChatUsageSchema,
});

const ModelListSchema = z.looseObject({
  data: z.array(
    z.looseObject({
      id: z.string(),
      owned_by: z.string().nullish(),
      custom_metadata: z.record(z.string(), z.unknown()).nullish(),
      metadata: z.record(z.string(), z.unknown()).nullish(),
    }),
  ),
});

/** A moderation of one input: at least one result, each saying whether it flagged. */
const ModerationSchema = z.looseObject({ results: z.array(z.looseObject({ flagged: z.boolean() })).min(1) });

function checked<T>(schema: z.ZodType, value: unknown, what: string): T {
  const result = schema.safeParse(value);
  if (result.success) return value as T;
  const issue = result.error.issues[0]!;
  const at = issue.path.length > 0 ? ` at ${issue.path.join(".")}` : "";
  throw new MalformedAnswer(`the inference backend's ${what} could not be read${at}: ${issue.message}`);
}

/** A Responses answer (JSON), as the SDK's type once its shape is known. */
export function checkedResponse(value: unknown): Response {
  return checked<Response>(ResponseSchema, value, "answer");
}

/** One Responses stream event. */
export function checkedEvent(value: unknown): ResponseStreamEvent {
  const event = checked<ResponseStreamEvent>(EventSchema, value, "stream event");
  const schema = EVENT_SCHEMAS[event.type];
  return schema ? checked<ResponseStreamEvent>(schema, value, `${event.type} event`) : event;
}

/** A Chat Completions answer (JSON). */
export function checkedCompletion(value: unknown): ChatCompletion {
  return checked<ChatCompletion>(ChatCompletionSchema, value, "answer");
}

/** One Chat Completions stream chunk. */
export function checkedChunk(value: unknown): ChatCompletionChunk {
  return checked<ChatCompletionChunk>(ChatChunkSchema, value, "stream chunk");
}

/** A model listing (GET /models): its entries, each with its id. */
export function checkedModelList(value: unknown): Array<Record<string, unknown>> {
  return checked<{ data: Array<Record<string, unknown>> }>(ModelListSchema, value, "model list").data;
}

/** Whether a moderation (of one input) flagged it; an answer without a verdict is refused, never read as "not flagged". */
export function moderationFlagged(value: unknown): boolean {
  return checked<{ results: Array<{ flagged: boolean }> }>(ModerationSchema, value, "moderation").results.some((result) => result.flagged);
}
