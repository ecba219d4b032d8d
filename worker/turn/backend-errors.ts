// How failures of the inference backend reach clients (REFERENCE "Errors"): the backend's own
// messages can carry internals, so only the status class and a safe cause are passed on.
import { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from "openai";
import { ApiError, errors } from "../errors.ts";
import type { Runtime } from "../runtime.ts";

export function backendError(error: unknown, model?: string): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof APIConnectionTimeoutError) return errors.backendUnavailable("The inference backend did not answer in time.");
  if (error instanceof APIConnectionError) return errors.backendUnavailable();
  if (error instanceof APIUserAbortError) return errors.internal("The backend call was aborted");
  if (error instanceof APIError) {
    const code = (error.error as { code?: unknown } | undefined)?.code ?? error.code;
    if (error.status === 429) return errors.modelQuotaExceeded(model ?? "unknown");
    if (code === "context_length_exceeded" || error.status === 413) return errors.promptTooLong();
    if (error.status === 404 && model) return errors.modelNotFound(model);
    if (error.status === 400 || error.status === 422) {
      return new ApiError(422, "Invalid attribute value", `the inference backend rejected the request: ${safeMessage(error)}`);
    }
    return errors.internal(`the inference backend answered ${error.status ?? "with an error"}`);
  }
  if (error instanceof TypeError && /fetch|connect|network/i.test(error.message)) return errors.backendUnavailable();
  console.error("unexpected backend failure", error);
  return errors.internal();
}

/** The backend's message without anything that looks like a credential. */
function safeMessage(error: APIError): string {
  const message = (error.error as { message?: unknown } | undefined)?.message;
  return typeof message === "string" ? message.replace(/(sk|key|token)[-_][A-Za-z0-9_-]{8,}/gi, "[redacted]").slice(0, 300) : "bad request";
}

/** Whether the backend answers, for probes: a short time-out and no retries, so a probe never hangs. */
export async function probeBackend(rt: Runtime): Promise<{ ok: true } | { ok: false; cause: string }> {
  try {
    await rt.backend.models.list({ timeout: 5_000, maxRetries: 0 });
    return { ok: true };
  } catch (error) {
    return { ok: false, cause: backendError(error).cause };
  }
}
