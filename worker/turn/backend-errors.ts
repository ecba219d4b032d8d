// How failures of the inference backend reach clients (REFERENCE "Errors"): the backend's own
// messages can carry internals, so only the status class and a safe cause are passed on.
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import { MalformedAnswer } from "../backends/answer-shapes.ts";
import { ApiError, errors } from "../errors.ts";
import { log } from "../log.ts";

const CONTEXT_LENGTH = /context length|maximum context|exceeds the available context/i;

export function backendError(error: unknown, model?: string): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof MalformedAnswer) {
    log.warn(error.message);
    return errors.internal(error.message);
  }
  if (error instanceof APIConnectionTimeoutError) return errors.backendUnavailable("The inference backend did not answer in time.");
  if (error instanceof APIConnectionError) return errors.backendUnavailable();
  if (error instanceof APIUserAbortError) return errors.internal("The backend call was aborted");
  if (error instanceof APIError) {
    const code = (error.error as { code?: unknown } | undefined)?.code ?? error.code;
    if (error.status === 429) return errors.modelQuotaExceeded(model ?? "unknown");
    // vLLM and llama.cpp's server say it only in words (a 400 without OpenAI's code).
    if (code === "context_length_exceeded" || error.status === 413 || (error.status === 400 && CONTEXT_LENGTH.test(error.message))) return errors.promptTooLong();
    if (error.status === 404 && model) return errors.modelNotFound(model);
    if (error.status === 400 || error.status === 422) {
      return new ApiError(422, "Invalid attribute value", `the inference backend rejected the request: ${safeMessage(error)}`);
    }
    return errors.internal(`the inference backend answered ${error.status ?? "with an error"}`);
  }
  // A connection that breaks while its body is read (workerd: "Network connection lost.") reaches
  // us as a plain Error from the body stream, not as the SDK's connection error.
  if (error instanceof TypeError && /fetch|connect|network/i.test(error.message)) return errors.backendUnavailable();
  if (error instanceof Error && /network connection lost|error reading a body|connection (reset|closed)/i.test(error.message)) return errors.backendUnavailable();
  log.error("unexpected backend failure", error);
  return errors.internal();
}

/** The backend's message, shortened; ApiError scrubs configured secrets from it. */
function safeMessage(error: APIError): string {
  const message = (error.error as { message?: unknown } | undefined)?.message;
  return typeof message === "string" ? message.slice(0, 300) : "bad request";
}
