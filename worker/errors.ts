// The error catalogue: every HTTP error the gateway returns is an ApiError rendered by renderError,
// in SPEC's envelope {"detail": {"response", "cause"}}. Nothing else formats errors.
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { scrub } from "./log.ts";

export class ApiError extends Error {
  readonly status: ContentfulStatusCode;
  readonly response: string;
  override readonly cause: string;
  readonly headers: Record<string, string>;

  /** Texts may quote what another service said; configured secrets are scrubbed from them here. */
  constructor(status: ContentfulStatusCode, response: string, cause: string, headers: Record<string, string> = {}) {
    super(`${status} ${scrub(response)}: ${scrub(cause)}`);
    this.name = "ApiError";
    this.status = status;
    this.response = scrub(response);
    this.cause = scrub(cause);
    this.headers = headers;
  }

  get body(): ErrorBody {
    return { detail: { response: this.response, cause: this.cause } };
  }
}

export interface ErrorBody {
  detail: { response: string; cause: string };
}

export function renderError(error: ApiError): Response {
  return Response.json(error.body, { status: error.status, headers: error.headers });
}

// Named constructors for the errors SPEC and REFERENCE list, so every route says the same words.
export const errors = {
  configNotLoaded: (cause = "configuration has not been initialized") =>
    new ApiError(500, "Configuration is not loaded", cause),
  internal: (cause = "An unexpected error occurred") => new ApiError(500, "Internal server error", cause),
  /** A turn whose client disconnected before it began: answered to no one, and never sent to the model. */
  clientGone: () => errors.internal("the client disconnected before the turn began"),
  /** UPSTREAM's words for a record store that failed; `store` names which one the configuration chose. */
  databaseFailed: (store: string) => new ApiError(500, "Database query failed", `Failed to query the database (${store})`),

  /** SPEC "Errors": the /v2 conversation views are the original's cache-backed ones, and no conversation_cache type is configured. */
  cacheNotConfigured: () => new ApiError(500, "Conversation cache not configured", "Conversation cache is not configured or unavailable."),

  /** The noop modules' `?user_id=` given empty. */
  emptyUserId: () => new ApiError(400, "user_id cannot be empty", "The user_id query parameter is empty: give a user id, or leave the parameter out for the default user."),
  invalidFormat: (cause: string) => new ApiError(422, "Invalid request format", cause),
  missingAttributes: (cause: string) => new ApiError(422, "Missing required attributes", cause),
  invalidValue: (cause: string) => new ApiError(422, "Invalid attribute value", cause),
  /** A per-request system prompt while customization.disable_query_system_prompt is set. */
  instructionsRejected: (field: string) =>
    new ApiError(422, "instructions rejected", `This service does not accept a per-request system prompt; remove the \`${field}\` field from the request.`),

  unauthorized: (cause: string) =>
    new ApiError(401, "Missing or invalid credentials provided by client", cause, {
      "WWW-Authenticate": 'Bearer realm="parley"',
    }),
  endpointForbidden: (userId: string) =>
    new ApiError(403, "User does not have permission to access this endpoint", `User ${userId} is not authorized to access this endpoint.`),
  actionForbidden: (cause: string) => new ApiError(403, "User does not have permission to perform this action", cause),
  modelOverrideForbidden: () =>
    new ApiError(
      403,
      "This instance does not permit overriding model/provider in the query request (missing permission: model_override). Please remove the model and provider fields from your request.",
      "User lacks model_override permission required to override model/provider.",
    ),

  /** SPEC "Retrieval behaviour": the portal source is read-only. */
  readOnlyStore: (id: string) =>
    new ApiError(403, "Vector Store is read-only", `Vector Store with ID ${id} is the knowledge portal source, which cannot be changed`),

  invalidConversationId: (id: string) =>
    new ApiError(400, "Invalid conversation ID format", `conversation id ${id} has invalid format`),
  invalidPromptId: (id: string) => new ApiError(400, "Invalid prompt ID format", `prompt id ${id} has invalid format`),
  promptVersionConflict: (id: string, given: number, latest: number | null) =>
    new ApiError(
      400,
      "Prompt version conflict",
      latest === null
        ? `version ${given} is not the latest version of prompt ${id}`
        : `version ${given} is not the latest version of prompt ${id}; the latest version is ${latest}`,
    ),
  notFound: (resource: string, id: string) =>
    new ApiError(404, `${resource} not found`, `${resource} with ID ${shownId(id)} does not exist`),
  /** A stored prompt, or the given version of one: the prompt endpoints and a responses request's `prompt` say the same. */
  promptNotFound: (id: string, version?: number) => errors.notFound("Prompt", version === undefined ? id : `${id} (version ${version})`),
  modelNotFound: (model: string) => new ApiError(404, "Model not found", `Model with ID ${model} is not configured`),
  /** No model was asked for and no language model is there to choose (SPEC: 404 model not found). */
  noLanguageModel: () => errors.modelNotFound("(no language model is available)"),
  /** The same on /v1/infer, in UPSTREAM's words there. */
  noLanguageModelToInfer: () => new ApiError(503, "Unable to connect to inference service", "No LLM model found in available models"),
  routeNotFound: (path: string) => new ApiError(404, "Not found", `No endpoint at ${path}`),
  methodNotAllowed: (method: string, path: string, allowed: string[]) =>
    new ApiError(405, "Method not allowed", `${method} is not allowed on ${path}; it serves ${allowed.join(", ")}`, { Allow: allowed.join(", ") }),

  conflict: (response: string, cause: string) => new ApiError(409, response, cause),
  /** An unknown, expired, other user's or other conversation's approval request. */
  approvalNotFound: (id: string) =>
    new ApiError(404, "Approval request not found", `Approval request with ID ${id} does not exist in this conversation, or it has expired`),
  approvalDecided: (id: string) => new ApiError(409, "Approval request already decided", `Approval request with ID ${id} has already been answered`),
  /** An approval sent to a fork, or answering a turn that is no longer the conversation's latest. */
  approvalNotLatest: (id: string) =>
    new ApiError(409, "Approval request is not for the latest turn", `Approval request with ID ${id} can only be answered by continuing the conversation from its latest response`),
  /** An approved call whose MCP server the approving request does not bring: nothing runs, the approval stays usable. */
  approvalServerUnavailable: (id: string, server: string) =>
    errors.invalidValue(
      `Approval request with ID ${id} approves a call of MCP server '${server}', which this request does not make available (its tools, or the credentials that server needs); send the approval again with that server available`,
    ),
  promptTooLong: (cause = "The prompt exceeds the maximum allowed length.") => new ApiError(413, "Prompt is too long", cause),
  /** The input is more than the model takes: found by Parley's estimate or told by the backend (UPSTREAM's words for both). */
  contextWindowExceeded: (model: string) => errors.promptTooLong(`The input exceeds the context window size of model '${model}'.`),
  /** A conversation that has no room for another turn (README "Limits"). */
  conversationFull: (limit: number) =>
    new ApiError(413, "Prompt is too long", `The conversation keeps at most ${limit} characters of turns and has no room for this one; start a new conversation, or continue from an earlier response.`),
  conversationForbidden: (userId: string, conversationId: string, operation: "read" | "update" | "delete" = "read") =>
    new ApiError(403, "User does not have permission to perform this action", `User ${userId} does not have permission to ${operation} conversation with ID ${conversationId}`),
  fileTooLarge: (limit: number) => new ApiError(413, "File too large", `The file exceeds the maximum size of ${limit} bytes.`),

  /** A conversation with as many turns waiting as its object holds (README "Limits"). */
  conversationBusy: (conversationId: string, turns: number, units: number) =>
    new ApiError(
      429,
      "The quota has been exceeded",
      `Too many questions are waiting for conversation ${conversationId} (at most ${turns} turns, or ${units} characters of questions); try again once it has answered.`,
      { "Retry-After": "1" },
    ),
  /** `retryAfter` (seconds) when what is missing comes back soon: held by turns in progress. */
  quotaExceeded: (cause: string, retryAfter?: number) =>
    new ApiError(429, "The quota has been exceeded", cause, retryAfter === undefined ? {} : { "Retry-After": String(retryAfter) }),
  modelQuotaExceeded: (model: string) =>
    new ApiError(429, "The model quota has been exceeded", `token quota for model ${model} exceeded`),

  backendUnavailable: (cause = "Connection error while trying to reach backend service.") =>
    new ApiError(503, "Unable to connect to the inference backend", cause),
} as const;

/** The longest id an error repeats whole: past it, its start (a 2 MB id that no resource has is not sent back whole). */
const MAX_SHOWN_ID = 256;

function shownId(id: string): string {
  return id.length <= MAX_SHOWN_ID ? id : `${id.slice(0, MAX_SHOWN_ID)}… (${id.length} characters)`;
}
