// Telemetry to a Splunk HTTP Event Collector (UPSTREAM "Splunk HEC"), when splunk.enabled. Only
// /v1/infer and /v1/responses send events: completed, shield-blocked and error. The endpoint hands
// sendSplunkEvent to waitUntil after its answer, so the collector is never on the client's wait
// path; a collector that is down, slow or refuses costs a log line and nothing else.
import type { Config } from "../config/schema.ts";
import type { Runtime } from "../runtime.ts";
import { SERVICE_VERSION } from "../version.ts";
import { log } from "../log.ts";

/** The HEC envelope: what is POSTed, as JSON, to splunk.url. */
export interface SplunkEvent<E extends Record<string, unknown> = Record<string, unknown>> {
  /** Epoch seconds. */
  time: number;
  host: string;
  /** "<splunk.source> (v<Parley version>)". */
  source: string;
  sourcetype: string;
  index: string;
  event: E;
}

/** How the turn ended, as telemetry tells it. */
export type TelemetryOutcome =
  | { kind: "completed"; text: string }
  /** An input or output shield stopped the turn; `refusal` is what the client was answered. */
  | { kind: "shield_blocked"; refusal: string }
  | { kind: "error"; error: unknown };

/** Who asked, where the authentication module knows it (rh-identity); "auth_disabled" otherwise. */
export interface TelemetryIdentity {
  orgId?: string | null;
  systemId?: string | null;
}

export interface InferTelemetry {
  outcome: TelemetryOutcome;
  question: string;
  /** Seconds from the request to the answer. */
  inferenceTime: number;
  requestId: string;
  /** Input + output tokens. */
  totalTokens: number;
  identity?: TelemetryIdentity;
  /** The User-Agent header: the command line assistant's version. */
  userAgent?: string | null;
  /** context.systeminfo of the request. */
  systemInfo?: { os?: string | null; version?: string | null; arch?: string | null } | null;
}

export interface ResponsesTelemetry {
  outcome: TelemetryOutcome;
  inputText: string;
  /** Normalized (48 hex). */
  conversationId: string;
  inferenceTime: number;
  /** The answering model as provider/model. */
  model: string;
  totalTokens: number;
  identity?: TelemetryIdentity;
  userAgent?: string | null;
}

const INFER_SOURCETYPES = { completed: "infer_with_llm", shield_blocked: "infer_shield_blocked", error: "infer_error" } as const;
const RESPONSES_SOURCETYPES = { completed: "responses_completed", shield_blocked: "responses_shield_blocked", error: "responses_error" } as const;
const NO_IDENTITY = "auth_disabled";
const MAX_USER_AGENT = 128;
// C0 controls (CR and LF among them) and DEL.
const CONTROL_CHARACTERS = /[\u0000-\u001f\u007f]/g;

/** The answer's text, the refusal, or on error the error's class name (never its message). */
function responseText(outcome: TelemetryOutcome): string {
  switch (outcome.kind) {
    case "completed":
      return outcome.text;
    case "shield_blocked":
      return outcome.refusal;
    case "error":
      return errorClassName(outcome.error);
  }
}

function errorClassName(error: unknown): string {
  if (error instanceof Error) return error.name || error.constructor.name || "Error";
  return typeof error;
}

/** Control characters removed, at most 128 characters; null when nothing is left. */
export function sanitizeUserAgent(value: string | null | undefined): string | null {
  if (!value) return null;
  const clean = value.replace(CONTROL_CHARACTERS, "").slice(0, MAX_USER_AGENT);
  return clean === "" ? null : clean;
}

/** Workers have no host name; the deployment's public host (service.base_url) stands for it. */
function hostName(config: Config): string {
  if (config.service.base_url) return new URL(config.service.base_url).hostname;
  return "parley";
}

function envelope<E extends Record<string, unknown>>(config: Config, sourcetype: string, event: E, at: number): SplunkEvent<E> {
  return {
    time: Math.floor(at / 1000),
    host: hostName(config),
    source: `${config.splunk.source} (v${SERVICE_VERSION})`,
    sourcetype,
    index: config.splunk.index ?? "",
    event,
  };
}

/** The /v1/infer (rlsapi) event. `at` is the event time in epoch milliseconds. */
export function inferEvent(config: Config, data: InferTelemetry, at = Date.now()) {
  return envelope(
    config,
    INFER_SOURCETYPES[data.outcome.kind],
    {
      question: data.question.trim(),
      refined_questions: [] as string[],
      context: "",
      response: responseText(data.outcome),
      inference_time: data.inferenceTime,
      // The original system reports the configured default model here, not the one that answered.
      model: config.inference?.default_model ?? "",
      deployment: config.deployment_environment,
      org_id: data.identity?.orgId || NO_IDENTITY,
      system_id: data.identity?.systemId || NO_IDENTITY,
      total_llm_tokens: data.totalTokens,
      request_id: data.requestId,
      cla_version: data.userAgent ?? "",
      system_os: data.systemInfo?.os ?? "",
      system_version: data.systemInfo?.version ?? "",
      system_arch: data.systemInfo?.arch ?? "",
    },
    at,
  );
}

/** The /v1/responses event. `at` is the event time in epoch milliseconds. */
export function responsesEvent(config: Config, data: ResponsesTelemetry, at = Date.now()) {
  return envelope(
    config,
    RESPONSES_SOURCETYPES[data.outcome.kind],
    {
      input_text: data.inputText,
      response_text: responseText(data.outcome),
      conversation_id: data.conversationId,
      inference_time: data.inferenceTime,
      model: data.model,
      deployment: config.deployment_environment,
      org_id: data.identity?.orgId || NO_IDENTITY,
      system_id: data.identity?.systemId || NO_IDENTITY,
      total_llm_tokens: data.totalTokens,
      user_agent: sanitizeUserAgent(data.userAgent),
    },
    at,
  );
}

/**
 * Sends one event to the collector, bounded by splunk.timeout (the whole exchange). Never throws:
 * resolves true when the collector accepted it, false when splunk is disabled or the event was not
 * delivered (logged). Meant for waitUntil, after the answer.
 */
export async function sendSplunkEvent(rt: Pick<Runtime, "config" | "heldSecrets">, event: SplunkEvent): Promise<boolean> {
  const splunk = rt.config.splunk;
  if (!splunk.enabled || !splunk.url) return false;
  const token = rt.heldSecrets.get("splunk.token_path");
  if (!token) {
    log.warn("splunk: no HEC token was loaded from splunk.token_path; event not sent");
    return false;
  }
  try {
    const response = await fetch(splunk.url, {
      method: "POST",
      headers: { Authorization: `Splunk ${token}`, "Content-Type": "application/json" },
      body: JSON.stringify(event),
      signal: AbortSignal.timeout(splunk.timeout * 1000),
    });
    // Read to the end either way, so the connection is released; the collector's text explains a refusal.
    const text = await response.text();
    if (response.ok) return true;
    log.warn(`splunk: collector refused the ${event.sourcetype} event: HTTP ${response.status} ${text.slice(0, 200)}`);
  } catch (error) {
    const reason = error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError") ? `no answer within ${splunk.timeout} s` : String(error);
    log.warn(`splunk: ${event.sourcetype} event not delivered: ${reason}`);
  }
  return false;
}
