// The gateway runs MCP tools itself (README "MCP tools"), so they work with any backend, including
// one that cannot reach the MCP server or does not speak MCP:
//
//   1. the tools of the turn's servers are listed (mcp_list_tools items) and offered to the model as
//      function tools;
//   2. the model's calls of them are run here (mcp_call items), each bounded by its server's
//      time-out, and their results handed back as function call outputs;
//   3. the model is called again, until it answers without calling one of them, at most
//      max_infer_iters model calls and max_tool_calls tool calls per turn.
//
// A call that needs a person's approval (require_approval) is not run: it becomes an
// mcp_approval_request item. On /v1/responses the turn ends there, as OpenAI's Responses API does;
// elsewhere the model is told and goes on. A later turn that approves it runs it (resumed calls).
//
// The turn stays one response to its client: the backend's events are passed on with the gateway's
// own tool items in between, output indexes renumbered to run on across model calls, and one final
// event whose response holds every output item and the usage of all model calls.
import type { Response as BackendResponse, ResponseStreamEvent, ResponseUsage } from "openai/resources/responses/responses";
import { deniedCall, type DeniedCall, type Item } from "../domain/conversation.ts";
import type { ApprovalDecision, ApprovalRequest, McpServer, TurnMcp } from "../domain/mcp.ts";
import { errors, type ApiError } from "../errors.ts";
import { approvalRequired, callTool, listTools, type CallToolOutcome, type McpTool } from "../mcp/client.ts";
import { randomHex } from "./conversation-id.ts";

/** An MCP tool as the model is offered it: a function tool of this name. */
export interface OfferedTool {
  functionName: string;
  server: McpServer;
  tool: McpTool;
}

/** The MCP tools of one turn. */
export interface Toolbox {
  /** One mcp_list_tools item per server, in the servers' order (a server that failed carries its error). */
  lists: Item[];
  /** By function name. */
  offered: Map<string, OfferedTool>;
  /** The function tools the backend is offered. */
  functions: Item[];
  /** The names of the client's own functions, whose calls wait for the client. */
  clientFunctions: ReadonlySet<string>;
}

/**
 * Whether a function call of the model's is the gateway's to answer: a call of an MCP tool, or of a
 * name that is no tool at all (the model made it up, or its server's listing failed), which no
 * client could answer either. Only the client's own functions are left to the client.
 */
function answeredHere(toolbox: Toolbox, item: Item): boolean {
  return item.type === "function_call" && !toolbox.clientFunctions.has(String(item.name));
}

/** Function names a backend accepts (OpenAI's rule). */
const FUNCTION_NAME_LIMIT = 64;
const functionName = (name: string) => name.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, FUNCTION_NAME_LIMIT);

/**
 * Lists the servers' tools (in parallel, each within its own time-out) and names them for the model:
 * a tool keeps its own name unless another server's tool or one of the client's functions (`taken`)
 * has it, in which case it is `<server>__<tool>`.
 */
export async function openToolbox(servers: McpServer[], taken: ReadonlySet<string>, signal: AbortSignal): Promise<Toolbox> {
  const listed = await Promise.all(servers.map((server) => listTools(server, signal)));
  const seen = new Map<string, number>();
  for (const result of listed) if (result.ok) for (const tool of result.tools) seen.set(functionName(tool.name), (seen.get(functionName(tool.name)) ?? 0) + 1);

  const toolbox: Toolbox = { lists: [], offered: new Map(), functions: [], clientFunctions: taken };
  servers.forEach((server, index) => {
    const result = listed[index]!;
    toolbox.lists.push({
      type: "mcp_list_tools",
      id: `mcpl_${randomHex(24)}`,
      server_label: server.name,
      tools: result.ok ? result.tools.map((tool) => ({ name: tool.name, description: tool.description ?? null, input_schema: tool.inputSchema, annotations: null })) : [],
      error: result.ok ? null : result.error,
    });
    if (!result.ok) return;
    for (const tool of result.tools) {
      let name = functionName(tool.name);
      if ((seen.get(name) ?? 0) > 1 || taken.has(name)) name = functionName(`${server.name}__${tool.name}`);
      for (let n = 2; toolbox.offered.has(name) || taken.has(name); n++) name = `${functionName(`${server.name}__${tool.name}`).slice(0, FUNCTION_NAME_LIMIT - 4)}_${n}`;
      toolbox.offered.set(name, { functionName: name, server, tool });
      toolbox.functions.push({ type: "function", name, description: tool.description ?? "", parameters: tool.inputSchema, strict: false });
    }
  });
  return toolbox;
}

/**
 * The first approved call this turn would have to run whose server the turn does not have (the
 * request left out its `mcp` tool, or the credentials it needs); null when every one can run. Such
 * a turn is refused before anything runs, so that the approval is not used up by a call never made.
 */
export function unrunnableApproval(resumed: ApprovalDecision[], servers: McpServer[]): ApprovalDecision | null {
  return resumed.find((decision) => decision.approve && !decision.outcome && !servers.some((server) => server.name === decision.request.serverLabel)) ?? null;
}

/**
 * What the loop asks of the backend: one model call, with `resumed` (the approved and denied calls
 * this turn answers, which belong to the turn that asked for them) between the history and the
 * turn's input, and `extra` (this turn's own calls and their results) after it.
 */
export type ModelCall = (items: { resumed: Item[]; extra: Item[] }, options: { offerTools: boolean; toolChoice: unknown }) => Promise<AsyncIterable<ResponseStreamEvent>>;

export interface ToolLoop {
  toolbox: Toolbox;
  mcp: TurnMcp;
  /** The request's tool_choice, which names MCP tools the client's way. */
  toolChoice: unknown;
  /** Approvals this turn answers: approved calls run (or their stored result is used) before the model is called. */
  resumed: ApprovalDecision[];
  /** An approved call is about to run: claimed first, so that it never runs twice. */
  claimApproved(approvalId: string): void;
  /** An approved call has run: its item is kept with its approval at once. */
  ranApproved(approvalId: string, item: Item): void;
  /** A call waits for approval (recorded with the turn when it is committed). */
  gated(request: ApprovalRequest): void;
  signal: AbortSignal;
}

type Event = ResponseStreamEvent & Record<string, unknown>;
const event = (fields: Record<string, unknown>): ResponseStreamEvent => ({ sequence_number: 0, ...fields }) as unknown as ResponseStreamEvent;
const TERMINAL = new Set(["response.completed", "response.incomplete", "response.failed"]);

/**
 * Starts a turn's answer with its MCP tools (see the file's header). Resolves once the first model
 * call has been accepted; its events then follow as one response's.
 */
export async function answerWithTools(call: ModelCall, loop: ToolLoop): Promise<AsyncIterable<ResponseStreamEvent>> {
  const { toolbox, mcp, signal } = loop;
  const output: Item[] = [];
  const prelude: ResponseStreamEvent[] = [];
  const resumed: Item[] = [];
  const input: Item[] = [];
  for (const list of toolbox.lists) {
    prelude.push(...listEvents(list, output.length));
    output.push(list);
  }
  // A tool_choice the toolbox cannot honour is refused before any approved call runs.
  const firstChoice = backendToolChoice(loop.toolChoice, toolbox, true);

  let calls = 0;
  for (const decision of loop.resumed) {
    const request = decision.request;
    const functionCall = { type: "function_call", call_id: request.callId, name: request.functionName, arguments: request.arguments };
    if (!decision.approve) {
      resumed.push(...deniedCall(deniedCallOf(request), decision.reason));
      continue;
    }
    let item = decision.outcome;
    if (!item) {
      const server = loop.mcp.servers.find((candidate) => candidate.name === request.serverLabel);
      loop.claimApproved(request.id);
      const outcome: CallToolOutcome = server
        ? await callTool(server, request.toolName, request.arguments, signal)
        : { ok: false, error: `MCP server '${request.serverLabel}' is not available to this request` };
      item = mcpCallItem(request.serverLabel, request.toolName, request.arguments, outcome, request.id);
      loop.ranApproved(request.id, item);
    }
    calls += 1;
    prelude.push(...callEvents(item, output.length), ...finishedCallEvents(item, output.length));
    output.push(item);
    resumed.push(functionCall, callOutput(request.callId, outputText(item)));
  }

  const first = await call({ resumed, extra: input }, { offerTools: true, toolChoice: firstChoice });
  return run(first);

  async function* run(stream: AsyncIterable<ResponseStreamEvent>): AsyncIterable<ResponseStreamEvent> {
    let preludePending = true;
    let usage: ResponseUsage | null = null;
    for (let iteration = 1; ; iteration++) {
      const base = output.length;
      const hidden = new Set<string>();
      const hiddenIndexes: number[] = [];
      let terminal: Event | null = null;
      for await (const backendEvent of stream) {
        const data = backendEvent as Event;
        if (data.type === "response.created" || data.type === "response.in_progress") {
          // The response is announced once, by the first model call.
          if (iteration === 1) yield backendEvent;
          continue;
        }
        if (TERMINAL.has(data.type)) {
          terminal = data;
          continue;
        }
        if (preludePending) {
          preludePending = false;
          yield* prelude;
        }
        // The model's calls of MCP tools are the gateway's to run: they become mcp_call items below.
        const item = data.item as Item | undefined;
        if (item && answeredHere(toolbox, item)) {
          hidden.add(itemKey(item));
          if (data.type === "response.output_item.added" && typeof data.output_index === "number") hiddenIndexes.push(data.output_index);
          continue;
        }
        if (typeof data.item_id === "string" && hidden.has(data.item_id)) continue;
        if (typeof data.output_index === "number") {
          const index = data.output_index;
          yield { ...data, output_index: base + index - hiddenIndexes.filter((at) => at < index).length } as ResponseStreamEvent;
        } else {
          yield backendEvent;
        }
      }
      // Ended without a final event: interrupted, or broken off (the reader reports which).
      if (!terminal) return;
      if (preludePending) {
        preludePending = false;
        yield* prelude;
      }
      const response = terminal.response as BackendResponse;
      usage = addUsage(usage, response.usage ?? null);
      const items = response.output as unknown as Item[];
      const ours = items.filter((item) => answeredHere(toolbox, item));
      const visible = items.filter((item) => !ours.includes(item));
      output.push(...visible);
      if (terminal.type !== "response.completed" || ours.length === 0 || signal.aborted) {
        yield { ...terminal, response: { ...response, output: [...output], usage } } as unknown as ResponseStreamEvent;
        return;
      }

      // The model's words so far, then each call and what came of it, for the next model call.
      const said = visible.filter((item) => item.type === "message").map(messageText).join("");
      if (said) input.push({ type: "message", role: "assistant", content: said });
      // A call of no tool is answered so, for the model to do without it (nothing is shown of it).
      const mcpCalls = ours.filter((functionCall) => toolbox.offered.has(String(functionCall.name)));
      for (const functionCall of ours.filter((candidate) => !mcpCalls.includes(candidate))) {
        const { callId, args } = callOf(functionCall);
        input.push({ type: "function_call", call_id: callId, name: String(functionCall.name), arguments: args }, callOutput(callId, `There is no tool named '${String(functionCall.name)}': use one of the tools offered.`));
      }
      const lastCall = iteration >= mcp.maxInferIters;
      let gated = false;
      const planned = mcpCalls.map((functionCall) => {
        const offered = toolbox.offered.get(String(functionCall.name))!;
        const { callId, args } = callOf(functionCall);
        if (lastCall) return { functionCall, offered, args, callId, skip: `not run: the turn reached its limit of ${mcp.maxInferIters} model calls (max_infer_iters)` };
        if (approvalRequired(offered.server, offered.tool.name)) return { functionCall, offered, args, callId, gate: true };
        if (calls >= mcp.maxToolCalls) return { functionCall, offered, args, callId, skip: `not run: the turn reached its limit of ${mcp.maxToolCalls} tool calls (max_tool_calls)` };
        calls += 1;
        return { functionCall, offered, args, callId, running: callTool(offered.server, offered.tool.name, args, signal) };
      });
      for (const step of planned) {
        const index = output.length;
        const functionCall = { type: "function_call", call_id: step.callId, name: step.offered.functionName, arguments: step.args };
        if (step.gate) {
          gated = true;
          const request: ApprovalRequest = {
            id: `mcpr_${randomHex(24)}`,
            serverLabel: step.offered.server.name,
            toolName: step.offered.tool.name,
            functionName: step.offered.functionName,
            callId: step.callId,
            arguments: step.args,
          };
          loop.gated(request);
          const item: Item = { type: "mcp_approval_request", id: request.id, server_label: request.serverLabel, name: request.toolName, arguments: request.arguments };
          yield event({ type: "response.output_item.added", output_index: index, item });
          yield event({ type: "response.output_item.done", output_index: index, item });
          output.push(item);
          input.push(functionCall, callOutput(step.callId, `This tool call was not run: it waits for a person's approval (approval request ${request.id}).`));
          continue;
        }
        const pending = mcpCallItem(step.offered.server.name, step.offered.tool.name, step.args, null, null);
        yield* callEvents(pending, index);
        const outcome: CallToolOutcome = step.running ? await step.running : { ok: false, error: step.skip! };
        const item = { ...mcpCallItem(step.offered.server.name, step.offered.tool.name, step.args, outcome, null), id: pending.id };
        yield* finishedCallEvents(item, index);
        output.push(item);
        input.push(functionCall, callOutput(step.callId, outputText(item)));
      }

      // A client's own function call waits for the client; a gated call on /v1/responses for its approval.
      const waitsForClient = visible.some((item) => item.type === "function_call");
      if (lastCall || waitsForClient || (gated && mcp.gate === "end") || signal.aborted) {
        yield { ...terminal, response: { ...response, output: [...output], usage } } as unknown as ResponseStreamEvent;
        return;
      }
      stream = await call({ resumed, extra: input }, { offerTools: calls < mcp.maxToolCalls, toolChoice: backendToolChoice(loop.toolChoice, toolbox, false) });
    }
  }
}

/** A model's function call's id and arguments (as JSON text, whatever form the backend sent them in). */
function callOf(functionCall: Item): { callId: string; args: string } {
  const args = typeof functionCall.arguments === "string" ? functionCall.arguments : JSON.stringify(functionCall.arguments ?? {});
  return { callId: String(functionCall.call_id ?? functionCall.id), args };
}

function deniedCallOf(request: ApprovalRequest): DeniedCall {
  return { call_id: request.callId, name: request.functionName, arguments: request.arguments };
}

/**
 * The turn's input as it is recorded: each answer that denied a call carries the call it denied
 * (`denied_call`), so that later turns' history holds the call and its denial, as it holds an
 * approved call and its result (turnHistory).
 */
export function withDeniedCalls(input: Item[], decisions: ApprovalDecision[]): Item[] {
  const denied = new Map(decisions.filter((decision) => !decision.approve).map((decision) => [decision.request.id, deniedCallOf(decision.request)]));
  if (denied.size === 0) return input;
  return input.map((item) => {
    const call = item.type === "mcp_approval_response" ? denied.get(String(item.approval_request_id)) : undefined;
    return call ? { ...item, denied_call: call } : item;
  });
}

function itemKey(item: Item): string {
  return String(item.id ?? item.call_id);
}

function callOutput(callId: string, output: string): Item {
  return { type: "function_call_output", call_id: callId, output };
}

function messageText(item: Item): string {
  const content = item.content;
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return (content as Item[]).map((part) => (part.type === "output_text" ? String(part.text) : "")).join("");
}

/** An mcp_call output item (OpenAI's shape; `error` is a sentence, as the original system's). */
function mcpCallItem(serverLabel: string, name: string, args: string, outcome: CallToolOutcome | null, approvalRequestId: string | null): Item {
  return {
    type: "mcp_call",
    id: `mcp_${randomHex(24)}`,
    server_label: serverLabel,
    name,
    arguments: args,
    output: outcome?.ok ? outcome.output : null,
    error: outcome && !outcome.ok ? outcome.error : null,
    status: outcome === null ? "in_progress" : outcome.ok ? "completed" : "failed",
    approval_request_id: approvalRequestId,
  };
}

/** What the model is told a call gave. */
function outputText(item: Item): string {
  return item.error != null ? `Error: ${String(item.error)}` : String(item.output ?? "");
}

function listEvents(item: Item, index: number): ResponseStreamEvent[] {
  const ref = { item_id: item.id, output_index: index };
  return [
    event({ type: "response.output_item.added", output_index: index, item: { ...item, tools: [] } }),
    event({ type: "response.mcp_list_tools.in_progress", ...ref }),
    event({ type: item.error ? "response.mcp_list_tools.failed" : "response.mcp_list_tools.completed", ...ref }),
    event({ type: "response.output_item.done", output_index: index, item }),
  ];
}

/** A call announced, with its arguments (before it runs). */
function callEvents(item: Item, index: number): ResponseStreamEvent[] {
  const ref = { item_id: item.id, output_index: index };
  return [
    event({ type: "response.output_item.added", output_index: index, item: { ...item, status: "in_progress", output: null, error: null } }),
    event({ type: "response.mcp_call.in_progress", ...ref }),
    event({ type: "response.mcp_call_arguments.delta", ...ref, delta: item.arguments }),
    event({ type: "response.mcp_call_arguments.done", ...ref, arguments: item.arguments }),
  ];
}

/** A call's end. */
function finishedCallEvents(item: Item, index: number): ResponseStreamEvent[] {
  const ref = { item_id: item.id, output_index: index };
  return [
    event({ type: item.status === "completed" ? "response.mcp_call.completed" : "response.mcp_call.failed", ...ref }),
    event({ type: "response.output_item.done", output_index: index, item }),
  ];
}

/** The usage of all model calls of a turn: every count added up, however deep. */
function addUsage(sum: ResponseUsage | null, usage: ResponseUsage | null): ResponseUsage | null {
  if (!usage) return sum;
  if (!sum) return usage;
  return addCounts(sum as unknown as Record<string, unknown>, usage as unknown as Record<string, unknown>) as unknown as ResponseUsage;
}

function addCounts(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const total: Record<string, unknown> = { ...a };
  for (const [key, value] of Object.entries(b)) {
    const mine = total[key];
    if (typeof value === "number") total[key] = (typeof mine === "number" ? mine : 0) + value;
    else if (value && typeof value === "object" && !Array.isArray(value)) total[key] = addCounts(mine && typeof mine === "object" ? (mine as Record<string, unknown>) : {}, value as Record<string, unknown>);
  }
  return total;
}

/**
 * The request's tool_choice as the backend understands it, MCP tools being functions there. A
 * choice that forces a call holds for the first model call only: after it, the model must be free
 * to answer.
 */
export function backendToolChoice(choice: unknown, toolbox: Toolbox, first: boolean): unknown {
  if (choice === undefined || choice === null || choice === "auto" || choice === "none") return choice ?? undefined;
  if (!first) return "auto";
  if (typeof choice !== "object") return choice;
  const object = choice as Record<string, unknown>;
  const named = (label: unknown, name: unknown) =>
    [...toolbox.offered.values()].filter((offered) => offered.server.name === label && (name == null || offered.tool.name === name)).map((offered) => offered.functionName);
  if (object.type === "mcp") {
    // SPEC: `name` optional; without it, a call of any of that server's tools (and only of those).
    const names = named(object.server_label, object.name);
    if (names.length === 0) throw unofferedChoice(toolbox, String(object.server_label), object.name == null ? null : String(object.name));
    return object.name == null ? { type: "allowed_tools", mode: "required", tools: names.map((name) => ({ type: "function", name })) } : { type: "function", name: names[0] };
  }
  if (object.type === "allowed_tools" && Array.isArray(object.tools)) {
    const tools = (object.tools as Item[]).flatMap((filter) => (filter.type === "mcp" ? named(filter.server_label, filter.name).map((name) => ({ type: "function", name })) : [filter]));
    return { ...object, tools };
  }
  return choice;
}

/**
 * A tool_choice naming an MCP tool (or any tool of a server) the turn does not offer: the client's
 * 422. (A server the request does not have at all was refused before the turn: checkMcpToolChoice.)
 * A server whose tools could not be listed is said to be so, without its error, which may be an
 * operator's server's (README "MCP tools").
 */
function unofferedChoice(toolbox: Toolbox, serverLabel: string, name: string | null): ApiError {
  const failed = toolbox.lists.some((item) => item.server_label === serverLabel && item.error);
  const why = failed ? " (its tools could not be listed)" : "";
  return errors.invalidValue(`tool_choice: MCP server '${serverLabel}' offers no ${name === null ? "tools" : `tool '${name}'`}${why}`);
}
