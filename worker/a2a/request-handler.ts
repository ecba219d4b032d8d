// The A2A methods on the gateway: the SDK's A2ARequestHandler interface, implemented over the turn
// engine and the context DOs. The SDK's JsonRpcTransportHandler does the JSON-RPC part in front of
// it. (The SDK's DefaultRequestHandler is not used: it keeps running tasks on in-memory event buses,
// so a resubscribe or cancel arriving at another isolate would never find them; here every task
// lives in the DO of its context.)
import type {
  AgentCard,
  DeleteTaskPushNotificationConfigParams,
  GetTaskPushNotificationConfigParams,
  ListTaskPushNotificationConfigParams,
  Message,
  MessageSendParams,
  Task,
  TaskIdParams,
  TaskPushNotificationConfig,
  TaskQueryParams,
} from "@a2a-js/sdk";
import { A2AError, type A2ARequestHandler } from "@a2a-js/sdk/server";
import type { AuthContext } from "../auth/types.ts";
import { ApiError, errors } from "../errors.ts";
import type { Runtime } from "../runtime.ts";
import type { Store } from "../storage/store.ts";
import { newConversationId } from "../turn/conversation-id.ts";
import type { TurnPlan } from "../domain/conversation.ts";
import { chooseModel } from "../turn/models.ts";
import { planTurn, type PlanContext } from "../turn/plan.ts";
import { startTurn, type StartedTurn } from "../turn/turn-client.ts";
import { ndjson } from "../domain/ndjson.ts";
import { resolveSystemPrompt } from "../turn/system-prompt.ts";
import { serverTools } from "../turn/tools.ts";
import { userMessage } from "../turn/attachments.ts";
import { contextStub, type A2AContextApi } from "../../durable-objects/a2a-context-do.ts";
import { AgentCardConfigSchema } from "../config/agent-card.ts";
import { agentCard, completeCard } from "./card.ts";
import { toA2AError } from "./errors.ts";
import { parseSendParams, parseTaskId, parseTaskQuery, type SendRequest } from "./params.ts";
import { contextOfTask, newTaskId } from "./task-id.ts";
import { brokenTurnUpdate, failedUpdate, statusUpdate, trimHistory, type A2AEvent, type TaskIds } from "../domain/a2a-task.ts";
import { log } from "../log.ts";

export interface A2ADeps {
  env: Env;
  rt: Runtime;
  auth: AuthContext;
  store: Store;
  /** How this request's turns are planned (permissions included). */
  plan: PlanContext;
  /** Keeps a task's turn running after the client has gone. */
  waitUntil(promise: Promise<unknown>): void;
  /** The URL this request reached (the agent card's local address comes from it). */
  requestUrl: string;
}

/** A task a message opened, with the turn answering it (already settled when there is none). */
interface StartedTask {
  stub: A2AContextApi;
  task: Task;
  done: Promise<void>;
}

export class GatewayRequestHandler implements A2ARequestHandler {
  constructor(private readonly deps: A2ADeps) {}

  /** The configured card; without one the gateway's defaults, which say what the endpoint serves. */
  async getAgentCard(): Promise<AgentCard> {
    return completeCard(this.deps.rt.config, this.deps.rt.agentCard ?? AgentCardConfigSchema.parse({}), this.deps.requestUrl);
  }

  async getAuthenticatedExtendedAgentCard(): Promise<AgentCard> {
    let card: AgentCard;
    try {
      card = agentCard(this.deps.rt, this.deps.requestUrl);
    } catch {
      throw A2AError.authenticatedExtendedCardNotConfigured();
    }
    // The caller passed the endpoint's authentication already; there is no separate extended card.
    if (!card.supportsAuthenticatedExtendedCard) throw A2AError.unsupportedOperation("Agent does not support authenticated extended card.");
    return card;
  }

  async sendMessage(params: MessageSendParams): Promise<Task> {
    return rpc(async () => {
      const request = parseSendParams(params);
      const started = await this.start(request);
      if (!request.blocking) return trimHistory(started.task, request.historyLength);
      await started.done;
      const task = await started.stub.getTask(started.task.id);
      if (!task) throw A2AError.taskNotFound(started.task.id);
      return trimHistory(task, request.historyLength);
    });
  }

  async *sendMessageStream(params: MessageSendParams): AsyncGenerator<A2AEvent, void, undefined> {
    const started = await rpc(() => this.start(parseSendParams(params)));
    yield* this.follow(started.stub, started.task.id);
  }

  async getTask(params: TaskQueryParams): Promise<Task> {
    return rpc(async () => {
      const { id, historyLength } = parseTaskQuery(params);
      const task = await this.locate(id).getTask(id);
      if (!task) throw A2AError.taskNotFound(id);
      return trimHistory(task, historyLength);
    });
  }

  async cancelTask(params: TaskIdParams): Promise<Task> {
    return rpc(async () => {
      const { id } = parseTaskId(params);
      const result = await this.locate(id).cancelTask(id);
      if (result.ok) return result.task;
      throw result.reason === "not_found" ? A2AError.taskNotFound(id) : A2AError.taskNotCancelable(id);
    });
  }

  /** The task's events so far, then its live ones until the final event. */
  async *resubscribe(params: TaskIdParams): AsyncGenerator<A2AEvent, void, undefined> {
    const { id } = await rpc(async () => parseTaskId(params));
    yield* this.follow(this.locate(id), id);
  }

  async setTaskPushNotificationConfig(_params: TaskPushNotificationConfig): Promise<TaskPushNotificationConfig> {
    throw A2AError.pushNotificationNotSupported();
  }

  async getTaskPushNotificationConfig(_params: TaskIdParams | GetTaskPushNotificationConfigParams): Promise<TaskPushNotificationConfig> {
    throw A2AError.pushNotificationNotSupported();
  }

  async listTaskPushNotificationConfigs(_params: ListTaskPushNotificationConfigParams): Promise<TaskPushNotificationConfig[]> {
    throw A2AError.pushNotificationNotSupported();
  }

  async deleteTaskPushNotificationConfig(_params: DeleteTaskPushNotificationConfigParams): Promise<void> {
    throw A2AError.pushNotificationNotSupported();
  }

  /** The DO holding a task: the one of the task's context, for this user. */
  private locate(taskId: string): A2AContextApi {
    const contextId = contextOfTask(taskId);
    if (contextId === null) throw A2AError.taskNotFound(taskId);
    return contextStub(this.deps.env.A2A_CONTEXT, this.deps.auth.userId, contextId);
  }

  private async *follow(stub: A2AContextApi, taskId: string): AsyncGenerator<A2AEvent, void, undefined> {
    const stream = await stub.subscribe(taskId);
    if (!stream) throw A2AError.taskNotFound(taskId);
    for await (const event of stream.pipeThrough(ndjson<A2AEvent>())) yield event;
  }

  /**
   * Opens the task a message asks for (SPEC: submitted, then working once the backend call starts)
   * and starts its turn. Everything a client could have got wrong is checked before the task
   * exists, so it is a JSON-RPC error and not a failed task.
   */
  private async start(request: SendRequest): Promise<StartedTask> {
    const { env, auth } = this.deps;
    const ids = taskIds(request);
    const stub = contextStub(env.A2A_CONTEXT, auth.userId, ids.contextId);
    const conversation = await stub.bindConversation(newConversationId(), auth.userId);
    const turn = request.text ? await this.planTurn(request, conversation.id) : null;

    const message = {
      ...request.message,
      kind: "message",
      parts: request.message.parts.map(({ type: _type, ...part }) => part),
      contextId: ids.contextId,
      taskId: ids.taskId,
    } as Message;
    const opened = await stub.startTask({ ...ids, message, resume: request.message.taskId !== undefined, requestId: turn?.requestId ?? null });
    if (!opened.ok) {
      if (opened.reason === "not_found") throw A2AError.taskNotFound(ids.taskId);
      throw A2AError.invalidRequest(
        opened.reason === "running"
          ? `Task ${ids.taskId} is still running: wait for its final event before sending another message`
          : `Task ${ids.taskId} is in a terminal state and cannot be modified`,
      );
    }

    if (!turn) {
      const prompt = "The message has no text to answer: please send your question as a text part.";
      await stub.appendEvents(ids.taskId, [statusUpdate(ids, "input-required", { message: prompt, final: true })]);
      return { stub, task: opened.task, done: Promise.resolve() };
    }
    const done = runTask(env, stub, ids, turn, this.deps.rt);
    this.deps.waitUntil(done);
    return { stub, task: opened.task, done };
  }

  /** The turn of a message, planned as every endpoint's is: the server's prompt and tools. */
  private async planTurn(request: SendRequest, conversationId: string): Promise<TurnPlan> {
    const { rt } = this.deps;
    const model = { model: request.model, provider: request.provider };
    const tools = await serverTools(this.deps.plan, request.vectorStoreIds);
    const plan = planTurn(this.deps.plan, {
      endpoint: "/a2a",
      // The context's conversation: this user's, made by its first turn.
      conversationId,
      create: true,
      input: [userMessage(request.text, [])],
      userText: request.text,
      model,
      // A2A messages carry no system prompt: the server's applies.
      systemPrompt: resolveSystemPrompt(rt, undefined, "system_prompt"),
      params: tools.params,
      mcpServers: tools.mcpServers,
      retrieval: { vectorStoreIds: request.vectorStoreIds ?? null },
      generateTopicSummary: true,
      streaming: true,
      transcript: false,
    });
    // A model the message names is checked before the task opens, so a wrong one is invalid params
    // rather than a failed task (the turn chooses again, with the conversation's history in view).
    if (model.model) await chooseModel(rt, model, null);
    return plan;
  }
}

/** The task a message belongs to: the one it names (resuming it) or a new one in its context. */
function taskIds(request: SendRequest): TaskIds {
  const { taskId, contextId } = request.message;
  if (taskId === undefined) {
    const context = contextId ?? crypto.randomUUID();
    return { taskId: newTaskId(context), contextId: context };
  }
  const owner = contextOfTask(taskId);
  if (owner === null) throw A2AError.taskNotFound(taskId);
  if (contextId !== undefined && contextId !== owner) {
    throw A2AError.invalidParams(`Invalid params: message.contextId does not match the context of task ${taskId}`);
  }
  return { taskId, contextId: owner };
}

/**
 * Runs a task's turn and logs its events in the context DO, which passes them to every stream of
 * the task. Runs to the end even when the client that sent the message has gone (the task can be
 * resubscribed); stops the turn when the DO says the task has ended (canceled, timed out).
 */
export async function runTask(env: Env, stub: A2AContextApi, ids: TaskIds, plan: TurnPlan, rt: Runtime): Promise<void> {
  let turn: StartedTurn;
  try {
    turn = await startTurn(env, plan);
  } catch (error) {
    const failure = error instanceof ApiError ? error : errors.internal();
    if (failure !== error) log.error("A2A task could not start its turn", error);
    // SPEC: working once the backend call starts, also when it fails at once.
    const working = statusUpdate(ids, "working", { metadata: { model: await intendedModel(rt, plan), conversation_id: plan.conversationId } });
    await stub.appendEvents(ids.taskId, [working, failedUpdate(ids, `${failure.response}: ${failure.cause}`, { status_code: failure.status })]);
    return;
  }
  const { requestId, model, conversationId } = turn.head;
  try {
    // The turn's events go to the task's context object as they come, in one call.
    await stub.followTurn(ids.taskId, { requestId, model: model.identifier, conversationId }, turn.lines);
  } catch (error) {
    // The object was reset mid-answer (a deploy): the task fails now rather than at its time-out.
    log.error("A2A task lost its turn", error);
    await stub.appendEvents(ids.taskId, [brokenTurnUpdate(ids)]).catch(() => undefined);
  }
}

/**
 * The model a turn that failed before it began was for: the one its message named or the default
 * (as the turn chose, without the conversation's last one); null when the models cannot be listed.
 */
async function intendedModel(rt: Runtime, plan: TurnPlan): Promise<string | null> {
  try {
    return (await chooseModel(rt, plan.model, null)).model.identifier;
  } catch {
    return null;
  }
}

/** Runs a method body so that whatever it throws reaches the transport as a JSON-RPC error. */
async function rpc<T>(body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    throw toA2AError(error);
  }
}
