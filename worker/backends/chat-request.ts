// A Responses-API request as a Chat Completions request, for backends that serve only the latter
// (Ollama, llama.cpp's server, LM Studio, TGI, older vLLM, most hosted compatible endpoints).
// What such a backend cannot do is never sent to it: file_search tools come back to the caller to
// serve (chat-call.ts searches the vector stores itself), other built-in tools are refused with a
// 422 that names the provider, so a client learns why rather than getting a 500.
import type {
  ChatCompletionAssistantMessageParam,
  ChatCompletionContentPart,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionFunctionTool,
  ChatCompletionMessageFunctionToolCall,
  ChatCompletionMessageParam,
  ChatCompletionToolChoiceOption,
} from "openai/resources/chat/completions";
import type { FileSearchTool, ResponseCreateParamsBase, Tool } from "openai/resources/responses/responses";
import { errors, type ApiError } from "../errors.ts";

/** The Responses-API parameters a turn sends (startModelCall's `params`). */
export type ResponsesParams = Omit<ResponseCreateParamsBase, "stream">;

/** A chat request without its streaming switches (chat-call.ts adds them). */
export type ChatParams = Omit<ChatCompletionCreateParamsNonStreaming, "stream" | "stream_options">;

export interface ChatRequest {
  params: ChatParams;
  /** file_search tools the model may use (none when tool_choice rules them out), for the caller to serve. */
  fileSearch: FileSearchTool[];
  /** What a file search looks for: the text of the last user message. */
  question: string;
}

type Json = Record<string, unknown>;

const isRecord = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value);

/** Text types an attachment may be inlined from (query attachments are all of these). */
const TEXT_MEDIA = /^(text\/[\w.+-]+|application\/(json|(x-)?yaml|xml|x-ndjson|javascript|toml|x-sh|sql))$/i;

function refuse(provider: string, what: string): ApiError {
  return errors.invalidValue(`${what} cannot be sent to provider "${provider}", which speaks Chat Completions`);
}

/** Translates `params` for provider `provider` (named in refusals). Throws ApiError 422 for what chat cannot carry. */
export function toChatRequest(params: ResponsesParams, provider: string): ChatRequest {
  const tools = translateTools(params.tools ?? [], params.tool_choice, provider);
  const messages = translateInput(params.input, params.instructions ?? null, provider);
  const chat: ChatParams = { model: String(params.model ?? ""), messages };
  if (tools.functions.length > 0) {
    chat.tools = tools.functions;
    if (tools.choice !== undefined) chat.tool_choice = tools.choice;
    if (typeof params.parallel_tool_calls === "boolean") chat.parallel_tool_calls = params.parallel_tool_calls;
  }
  if (typeof params.temperature === "number") chat.temperature = params.temperature;
  if (typeof params.top_p === "number") chat.top_p = params.top_p;
  // max_tokens, not max_completion_tokens: the one every compatible server understands.
  if (typeof params.max_output_tokens === "number") chat.max_tokens = params.max_output_tokens;
  if (params.reasoning?.effort) chat.reasoning_effort = params.reasoning.effort as ChatParams["reasoning_effort"];
  const format = params.text?.format;
  if (format?.type === "json_object") chat.response_format = { type: "json_object" };
  if (format?.type === "json_schema") {
    chat.response_format = {
      type: "json_schema",
      json_schema: { name: format.name, schema: format.schema, ...(format.description ? { description: format.description } : {}), ...(format.strict != null ? { strict: format.strict } : {}) },
    };
  }
  return { params: chat, fileSearch: tools.fileSearch, question: lastUserText(params.input) };
}

// ---------------------------------------------------------------------------------------------
// Tools

interface TranslatedTools {
  functions: ChatCompletionFunctionTool[];
  choice: ChatCompletionToolChoiceOption | undefined;
  fileSearch: FileSearchTool[];
}

function translateTools(tools: Tool[], choice: ResponsesParams["tool_choice"], provider: string): TranslatedTools {
  const functions: ChatCompletionFunctionTool[] = [];
  const fileSearch: FileSearchTool[] = [];
  for (const tool of tools) {
    if (tool.type === "function") {
      functions.push({
        type: "function",
        function: {
          name: tool.name,
          ...(tool.description ? { description: tool.description } : {}),
          ...(tool.parameters ? { parameters: tool.parameters } : {}),
          ...(tool.strict === true ? { strict: true } : {}),
        },
      });
    } else if (tool.type === "file_search") {
      fileSearch.push(tool);
    } else if (tool.type === "mcp") {
      throw refuse(provider, `The MCP tool of server "${tool.server_label}"`);
    } else {
      throw refuse(provider, `The ${tool.type} tool`);
    }
  }
  return restrictByChoice(functions, fileSearch, choice, provider);
}

/** tool_choice in chat's words; allowed_tools narrows the tools themselves (more servers honour that). */
function restrictByChoice(
  functions: ChatCompletionFunctionTool[],
  fileSearch: FileSearchTool[],
  choice: ResponsesParams["tool_choice"],
  provider: string,
): TranslatedTools {
  if (choice === undefined || choice === null || choice === "auto") return { functions, choice: undefined, fileSearch };
  if (choice === "none") return { functions, choice: "none", fileSearch: [] };
  if (choice === "required") return { functions, choice: functions.length > 0 ? "required" : undefined, fileSearch };
  switch (choice.type) {
    case "function":
      return { functions, choice: { type: "function", function: { name: choice.name } }, fileSearch: [] };
    case "file_search":
      // The search is made before the model is called; the model then answers from its results.
      return { functions, choice: functions.length > 0 ? "none" : undefined, fileSearch };
    case "allowed_tools": {
      const filters = choice.tools.filter(isRecord);
      const named = new Set(filters.filter((filter) => filter.type === "function").map((filter) => String(filter.name)));
      const allowedFunctions = functions.filter((tool) => named.has(tool.function.name));
      const allowedSearch = filters.some((filter) => filter.type === "file_search") ? fileSearch : [];
      // No function left: no tools are sent at all, so there is no choice to make.
      return { functions: allowedFunctions, choice: choice.mode === "required" && allowedFunctions.length > 0 ? "required" : undefined, fileSearch: allowedSearch };
    }
    default:
      throw refuse(provider, `tool_choice of type ${choice.type}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Input

/**
 * The conversation as chat messages: instructions and every system/developer message first, as one
 * system message (many chat templates accept a system message only at the start); assistant text and
 * the function calls of the same answer as one assistant message; each function output as a tool
 * message. Items chat has no form for (earlier file searches, MCP calls, reasoning) are left out:
 * the answer that followed them carries what they found.
 */
function translateInput(input: ResponsesParams["input"], instructions: string | null, provider: string): ChatCompletionMessageParam[] {
  const system: string[] = instructions ? [instructions] : [];
  const messages: ChatCompletionMessageParam[] = [];
  let assistant: { text: string[]; calls: ChatCompletionMessageFunctionToolCall[] } | null = null;
  const flush = () => {
    if (!assistant) return;
    const message: ChatCompletionAssistantMessageParam = { role: "assistant" };
    if (assistant.text.length > 0) message.content = assistant.text.join("\n");
    if (assistant.calls.length > 0) message.tool_calls = assistant.calls;
    messages.push(message);
    assistant = null;
  };
  const items: unknown[] = typeof input === "string" ? [{ role: "user", content: input }] : (input ?? []);
  for (const item of items) {
    if (!isRecord(item)) continue;
    const type = item.type ?? (typeof item.role === "string" ? "message" : undefined);
    if (type === "message") {
      const role = item.role;
      if (role === "assistant") {
        assistant ??= { text: [], calls: [] };
        const text = assistantText(item.content);
        if (text) assistant.text.push(text);
      } else if (role === "system" || role === "developer") {
        const text = partsText(item.content, provider);
        if (text) system.push(text);
      } else if (role === "user") {
        flush();
        messages.push({ role: "user", content: userContent(item.content, provider) });
      }
    } else if (type === "function_call") {
      assistant ??= { text: [], calls: [] };
      assistant.calls.push({ id: String(item.call_id), type: "function", function: { name: String(item.name), arguments: String(item.arguments ?? "") } });
    } else if (type === "function_call_output") {
      flush();
      messages.push({ role: "tool", tool_call_id: String(item.call_id), content: outputText(item.output, provider) });
    } else if (type === "item_reference") {
      throw refuse(provider, "An item_reference input item");
    }
  }
  flush();
  const paired = joinAdjacentUserMessages(pairToolCalls(messages));
  return system.length > 0 ? [{ role: "system", content: system.join("\n\n") }, ...paired] : paired;
}

/**
 * Many chat templates refuse two user messages in a row (roles must alternate). They follow each
 * other where a question went unanswered (interrupted before any text) or a tool result became
 * user text: such neighbours are sent as one message, their texts a blank line apart.
 */
function joinAdjacentUserMessages(messages: ChatCompletionMessageParam[]): ChatCompletionMessageParam[] {
  const out: ChatCompletionMessageParam[] = [];
  for (const message of messages) {
    const previous = out.at(-1);
    if (message.role !== "user" || previous?.role !== "user") {
      out.push(message);
      continue;
    }
    const before = previous.content;
    const after = message.content;
    out[out.length - 1] = {
      role: "user",
      content:
        typeof before === "string" && typeof after === "string"
          ? `${before}\n\n${after}`
          : [...asParts(before), { type: "text", text: "\n\n" }, ...asParts(after)],
    };
  }
  return out;
}

const asParts = (content: string | ChatCompletionContentPart[]): ChatCompletionContentPart[] => (typeof content === "string" ? [{ type: "text", text: content }] : content);

/**
 * Chat servers refuse a tool call without its result, and a result without its call. A call the
 * client never answered (it asked something else instead) is dropped from its message; a result
 * whose call is not in the input is passed on as the user's text.
 */
function pairToolCalls(messages: ChatCompletionMessageParam[]): ChatCompletionMessageParam[] {
  const answered = new Set(messages.flatMap((message) => (message.role === "tool" ? [message.tool_call_id] : [])));
  const called = new Set<string>();
  const out: ChatCompletionMessageParam[] = [];
  for (const message of messages) {
    if (message.role === "assistant" && message.tool_calls) {
      const calls = message.tool_calls.filter((call) => answered.has(call.id));
      for (const call of calls) called.add(call.id);
      const { tool_calls: _dropped, ...rest } = message;
      if (calls.length === 0 && rest.content === undefined) continue;
      out.push(calls.length > 0 ? { ...rest, tool_calls: calls } : rest);
    } else if (message.role === "tool" && !called.has(message.tool_call_id)) {
      out.push({ role: "user", content: `Result of tool call ${message.tool_call_id}:\n${String(message.content)}` });
    } else {
      out.push(message);
    }
  }
  return out;
}

function assistantText(content: unknown): string {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .filter(isRecord)
    .map((part) => (part.type === "output_text" || part.type === "input_text" ? String(part.text ?? "") : part.type === "refusal" ? String(part.refusal ?? "") : ""))
    .filter(Boolean)
    .join("");
}

/** A user message's content: one string when it is all text (what every server takes), else parts. */
function userContent(content: unknown, provider: string): string | ChatCompletionContentPart[] {
  if (typeof content === "string") return content;
  const parts = contentParts(content, provider);
  if (parts.every((part) => part.type === "text")) return parts.map((part) => (part as { text: string }).text).join("\n");
  return parts;
}

function partsText(content: unknown, provider: string): string {
  if (typeof content === "string") return content;
  return contentParts(content, provider)
    .map((part) => {
      if (part.type !== "text") throw refuse(provider, "An image in a system message");
      return part.text;
    })
    .join("\n");
}

function contentParts(content: unknown, provider: string): ChatCompletionContentPart[] {
  if (!Array.isArray(content)) return [];
  const parts: ChatCompletionContentPart[] = [];
  for (const part of content) {
    if (!isRecord(part)) continue;
    if (part.type === "input_text" || part.type === "output_text") parts.push({ type: "text", text: String(part.text ?? "") });
    else if (part.type === "input_file") parts.push({ type: "text", text: inlineFile(part, provider) });
    else if (part.type === "input_image") {
      if (typeof part.image_url !== "string") throw refuse(provider, "An image given by file id");
      const detail = part.detail === "low" || part.detail === "high" || part.detail === "auto" ? part.detail : undefined;
      parts.push({ type: "image_url", image_url: { url: part.image_url, ...(detail ? { detail } : {}) } });
    } else {
      throw refuse(provider, `A ${String(part.type)} content part`);
    }
  }
  return parts;
}

/** A text attachment's decoded text, introduced by its file name; other files cannot be carried. */
function inlineFile(part: Json, provider: string): string {
  const name = typeof part.filename === "string" && part.filename ? part.filename : "attachment";
  const data = typeof part.file_data === "string" ? part.file_data : null;
  if (data === null) throw refuse(provider, `File ${name} (given by ${part.file_id ? "file id" : "url"}; only text attachments sent inline are)`);
  const text = decodeTextDataUrl(data);
  if (text === null) throw refuse(provider, `File ${name} (not a text attachment; only text attachments are inlined)`);
  return `File ${name}:\n${text}`;
}

/** The text of a `data:<text type>[;base64],...` URL, or null for other data. */
export function decodeTextDataUrl(url: string): string | null {
  const match = /^data:([^;,]+)((?:;[^;,]+)*?)(;base64)?,(.*)$/s.exec(url);
  if (!match || !TEXT_MEDIA.test(match[1]!)) return null;
  try {
    if (!match[3]) return decodeURIComponent(match[4]!);
    const binary = atob(match[4]!);
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(Uint8Array.from(binary, (ch) => ch.charCodeAt(0)));
  } catch {
    return null;
  }
}

function outputText(output: unknown, provider: string): string {
  if (typeof output === "string") return output;
  if (!Array.isArray(output)) return output === undefined || output === null ? "" : JSON.stringify(output);
  return contentParts(output, provider)
    .map((part) => {
      if (part.type !== "text") throw refuse(provider, "An image in a function call output");
      return part.text;
    })
    .join("\n");
}

/** The text of the last user message (its text parts), what an emulated file search looks for. */
function lastUserText(input: ResponsesParams["input"]): string {
  if (typeof input === "string") return input;
  const last = (input ?? ([] as unknown[])).filter(isRecord).findLast((item) => item.role === "user");
  if (!last) return "";
  if (typeof last.content === "string") return last.content;
  if (!Array.isArray(last.content)) return "";
  return last.content
    .filter(isRecord)
    .filter((part) => part.type === "input_text")
    .map((part) => String(part.text ?? ""))
    .join("\n");
}
