/**
 * The scripted backend's Chat Completions side (POST /v1/chat/completions): the same scripted
 * answers as POST /v1/responses, planned by the same code (planResponse), in OpenAI's chat wire
 * format. The rules are documented in scripted-backend.ts's header ("POST /v1/chat/completions").
 */

import type { ServerResponse } from "node:http";
import {
  ApiError,
  beforeAnswering,
  cutConnection,
  writeJsonAnswer,
  findModel,
  invalidRequest,
  isObject,
  notFound,
  now,
  pause,
  planResponse,
  randomHex,
  WRITTEN,
  type Context,
  type JsonObject,
  type Plan,
} from "./scripted-backend.ts";

const ROLES = ["system", "developer", "user", "assistant", "tool"];

/** The text of chat content: a string, or its `text` parts joined with "\n". */
function chatText(content: unknown, param: string): string {
  if (content === undefined || content === null) return "";
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) throw invalidRequest(`Invalid type for '${param}': expected a string or an array of content parts.`, param, "invalid_type");
  return content
    .filter((part): part is JsonObject => isObject(part) && part.type === "text" && typeof part.text === "string")
    .map((part) => String(part.text))
    .join("\n");
}

/**
 * The chat request as the Responses planner reads a request: system and developer messages become
 * `instructions` (joined with "\n"), the others input items, so N, Q and the usage count the same.
 * Tool-call pairing is checked as OpenAI checks it.
 */
function asResponsesRequest(messages: unknown[]): { instructions: string | undefined; input: JsonObject[] } {
  const system: string[] = [];
  const input: JsonObject[] = [];
  let pending: string[] = [];
  const open = new Set<string>();
  messages.forEach((message, index) => {
    const at = `messages[${index}]`;
    if (!isObject(message)) throw invalidRequest(`Invalid type for '${at}': expected an object.`, at, "invalid_type");
    const role = message.role;
    if (typeof role !== "string" || !ROLES.includes(role)) {
      throw invalidRequest(`Invalid value for '${at}.role': expected one of ${ROLES.join(", ")}.`, `${at}.role`, "invalid_value");
    }
    if (role !== "tool" && pending.length > 0) {
      throw invalidRequest(
        `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${pending.join(", ")}`,
        `${at}.role`,
        null,
      );
    }
    if (role === "system" || role === "developer") {
      system.push(chatText(message.content, `${at}.content`));
    } else if (role === "user") {
      input.push({ type: "message", role: "user", content: [{ type: "input_text", text: chatText(message.content, `${at}.content`) }] });
    } else if (role === "assistant") {
      const calls = message.tool_calls ?? [];
      if (!Array.isArray(calls)) throw invalidRequest(`Invalid type for '${at}.tool_calls'.`, `${at}.tool_calls`, "invalid_type");
      const text = chatText(message.content, `${at}.content`);
      if (text) input.push({ type: "message", role: "assistant", content: [{ type: "output_text", text }] });
      calls.forEach((call, callIndex) => {
        const fn = isObject(call) && isObject(call.function) ? call.function : null;
        if (!isObject(call) || typeof call.id !== "string" || !fn || typeof fn.name !== "string") {
          throw invalidRequest(`Invalid value for '${at}.tool_calls[${callIndex}]': expected {id, type: "function", function: {name, arguments}}.`, `${at}.tool_calls`, "invalid_value");
        }
        input.push({ type: "function_call", call_id: call.id, name: fn.name, arguments: typeof fn.arguments === "string" ? fn.arguments : "" });
        open.add(call.id);
      });
      pending = calls.map((call) => String((call as JsonObject).id));
    } else {
      const id = message.tool_call_id;
      if (typeof id !== "string" || !open.has(id)) {
        throw invalidRequest("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", `${at}.role`, null);
      }
      pending = pending.filter((callId) => callId !== id);
      input.push({ type: "function_call_output", call_id: id, output: chatText(message.content, `${at}.content`) });
    }
  });
  if (pending.length > 0) {
    throw invalidRequest(
      `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${pending.join(", ")}`,
      "messages",
      null,
    );
  }
  return { instructions: system.length > 0 ? system.join("\n") : undefined, input };
}

interface ToolCall {
  id: string;
  type: "function";
  function: { name: string; arguments: string };
}

/** The plan's function calls as chat tool calls; other tool items have no chat form. */
function toolCalls(plan: Plan): ToolCall[] {
  return plan.toolItems
    .filter((item) => item.type === "function_call")
    .map((item) => ({ id: String(item.call_id), type: "function" as const, function: { name: String(item.name), arguments: String(item.arguments) } }));
}

function chatUsage(plan: Plan, outputTokens: number): JsonObject {
  return {
    prompt_tokens: plan.inputWords,
    completion_tokens: outputTokens,
    total_tokens: plan.inputWords + outputTokens,
    prompt_tokens_details: { cached_tokens: 0 },
    completion_tokens_details: { reasoning_tokens: 0 },
  };
}

async function answerChat(ctx: Context, body: JsonObject, plan: Plan): Promise<JsonObject> {
  if (plan.failMidstream) throw new ApiError(500, { message: "scripted failure", type: "server_error" });
  const count = plan.deltas.length;
  await pause(count === 0 ? 0 : plan.firstDelayMs + count * plan.tokenDelayMs + plan.stallMs, ctx.signal);
  const calls = toolCalls(plan);
  const message: JsonObject = { role: "assistant", content: plan.deltas.join(""), refusal: null, annotations: [] };
  if (calls.length > 0) message.tool_calls = calls;
  return {
    id: `chatcmpl-${randomHex(29)}`,
    object: "chat.completion",
    created: now(),
    model: body.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: calls.length > 0 ? "tool_calls" : "stop" }],
    ...(ctx.options.omitUsage ? {} : { usage: chatUsage(plan, count) }),
    service_tier: "default",
    system_fingerprint: null,
  };
}

async function streamChat(ctx: Context, res: ServerResponse, body: JsonObject, plan: Plan): Promise<void> {
  res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive" });
  const includeUsage = isObject(body.stream_options) && body.stream_options.include_usage === true && !ctx.options.omitUsage;
  const base = { id: `chatcmpl-${randomHex(29)}`, object: "chat.completion.chunk", created: now(), model: body.model, service_tier: "default", system_fingerprint: null };
  const write = (payload: unknown) => {
    if (!res.destroyed && !res.writableEnded) res.write(`data: ${typeof payload === "string" ? payload : JSON.stringify(payload)}\n\n`);
  };
  const send = (delta: JsonObject, finish: string | null = null) =>
    write({ ...base, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }], ...(includeUsage ? { usage: null } : {}) });

  if (plan.headersStallMs > 0) {
    res.flushHeaders();
    await pause(plan.headersStallMs, ctx.signal);
  }
  send({ role: "assistant", content: "", refusal: null });
  const calls = toolCalls(plan);
  calls.forEach((call, index) => {
    // OpenAI sends the call's id and name first, then its arguments in pieces.
    send({ tool_calls: [{ index, id: call.id, type: "function", function: { name: call.function.name, arguments: "" } }] });
    const half = Math.ceil(call.function.arguments.length / 2);
    for (const piece of [call.function.arguments.slice(0, half), call.function.arguments.slice(half)]) {
      if (piece) send({ tool_calls: [{ index, function: { arguments: piece } }] });
    }
  });

  const deltas = plan.failMidstream ? plan.deltas.slice(0, 2) : plan.deltas;
  for (const [index, delta] of deltas.entries()) {
    if (index === 2 && plan.drop) {
      await cutConnection(res);
      return;
    }
    if (index === 2 && plan.endEarly) {
      write("[DONE]");
      res.end();
      return;
    }
    await pause(index === 0 ? plan.firstDelayMs : index === 2 ? plan.stallMs + plan.tokenDelayMs : plan.tokenDelayMs, ctx.signal);
    if (index === 2 && plan.garbled) write(`{"id":"${base.id}","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":`);
    if (index === 2 && plan.misshapen) send({ content: 42 as unknown as string });
    send({ content: delta });
  }
  if (plan.failMidstream) {
    // What OpenAI-compatible servers send when generation fails after the stream began; no [DONE].
    write({ error: { message: "scripted failure", type: "server_error", param: null, code: "server_error" } });
    res.end();
    return;
  }
  send({}, calls.length > 0 ? "tool_calls" : "stop");
  if (includeUsage) write({ ...base, choices: [], usage: chatUsage(plan, deltas.length) });
  write("[DONE]");
  res.end();
}

/** POST /v1/chat/completions */
export async function createChatCompletion(ctx: Context): Promise<unknown> {
  const body = ctx.body;
  if (typeof body.model !== "string" || body.model.length === 0) {
    throw invalidRequest("Missing required parameter: 'model'.", "model", "missing_required_parameter");
  }
  const model = findModel(body.model, ctx.options.modelStyle);
  if (!model) throw notFound(`Model ${body.model} not found`, "model", "model_not_found");
  if (model.type !== "llm") throw invalidRequest(`Model ${body.model} is not a chat model`, "model", "model_not_supported");
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    throw invalidRequest("Missing required parameter: 'messages'.", "messages", "missing_required_parameter");
  }
  if (body.stream_options !== undefined && body.stream_options !== null) {
    if (ctx.options.rejectStreamOptions) throw invalidRequest("Unrecognized request argument supplied: stream_options", "stream_options", "unknown_parameter");
    if (body.stream !== true) throw invalidRequest("The 'stream_options' parameter is only allowed when 'stream' is enabled.", "stream_options", "invalid_value");
  }
  const { instructions, input } = asResponsesRequest(body.messages);
  const bearer = (ctx.req.headers.authorization ?? "").replace(/^Bearer\s+/i, "");
  // Planned as the Responses request it stands for; `tools` holds no file_search in the chat wire.
  const plan = planResponse(body, input, instructions, ctx.state, ctx.options, bearer);
  await beforeAnswering(ctx, plan);
  if (body.stream === true && !plan.ignoreStream) {
    await streamChat(ctx, ctx.res, body, plan);
    return WRITTEN;
  }
  return writeJsonAnswer(ctx, plan, () => answerChat(ctx, body, plan));
}
