// How failures of the inference backend reach clients (REFERENCE "Errors"): the backend's own
// messages can carry internals, so only the status class and a safe cause are passed on.
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError, NotFoundError, OpenAIError } from "openai";
import { MalformedAnswer } from "../backends/answer-shapes.ts";
import { notServed, routeMissing } from "../backends/providers.ts";
import type { ProviderApi } from "../config/schema.ts";
import { ApiError, errors } from "../errors.ts";
import { log } from "../log.ts";

/** How backends say the input is too long, in words (vLLM, llama.cpp's server) or in a code-like name (UPSTREAM: "context_length" anywhere). */
const CONTEXT_LENGTH = /context[ _]length|maximum context|exceeds the available context/i;

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
    if (code === "context_length_exceeded" || error.status === 413 || (error.status !== undefined && error.status < 500 && CONTEXT_LENGTH.test(error.message))) {
      return model ? errors.contextWindowExceeded(model) : errors.promptTooLong();
    }
    // Anything else is the gateway's failure to get an answer, not the client's: a backend that
    // rejects what Parley sent it (a 400, a 404 for a model it listed) is 500 as well. A 4xx's
    // message says what was rejected; a 5xx's may carry the backend's internals and is left out.
    const status = error.status ?? "with an error";
    return errors.internal(typeof error.status === "number" && error.status < 500 ? `the inference backend answered ${status}: ${safeMessage(error)}` : `the inference backend answered ${status}`);
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

/**
 * Runs a call to the backend's `api` for a resource: a backend without that API answers 501, a 404
 * becomes `notFound()` when given, and so does an id the SDK refuses to put in a path ("..": it can
 * name nothing); anything else goes through backendError (503 when unreachable).
 */
export async function resourceCall<T>(api: ProviderApi, call: () => Promise<T>, notFound?: () => ApiError | Promise<ApiError>): Promise<T> {
  try {
    return await call();
  } catch (error) {
    if (error instanceof APIError && routeMissing(error)) throw notServed(api);
    if (notFound && (error instanceof NotFoundError || (error instanceof OpenAIError && !(error instanceof APIError)))) throw await notFound();
    throw backendError(error);
  }
}
