// Errors on the JSON-RPC endpoint are JSON-RPC errors in an HTTP 200 answer, never HTTP errors.
// The gateway's own errors (SPEC envelope) keep their words: they travel in the error's `data`.
import { A2AError } from "@a2a-js/sdk/server";
import { ApiError, errors } from "../errors.ts";
import { log } from "../log.ts";

/** JSON-RPC's "invalid params": the request named something it may not (a model, a store). */
const INVALID_PARAMS = -32602;

/**
 * The JSON-RPC error for anything a method threw. Client-side problems of the gateway (a model that
 * does not exist, MODEL_OVERRIDE missing) are invalid params; quota and server-side failures are
 * internal errors. Unexpected errors are logged and shown without their message, which may hold
 * internals.
 */
export function toA2AError(error: unknown): A2AError {
  if (error instanceof A2AError) return error;
  const known = error instanceof ApiError ? error : null;
  if (!known) log.error("A2A method failed", error);
  const failure = known ?? errors.internal();
  const data = { status_code: failure.status, response: failure.response, cause: failure.cause };
  const message = `${failure.response}: ${failure.cause}`;
  return failure.status < 500 && failure.status !== 429 ? new A2AError(INVALID_PARAMS, message, data) : A2AError.internalError(message, data);
}
