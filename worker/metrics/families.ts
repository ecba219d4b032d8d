// The metric families /metrics exposes, with the original system's names, labels and buckets
// (UPSTREAM "Metrics and readiness"), so its dashboards and alerts keep working. A leaf module: the
// metrics Durable Object and the turn engine read it too.

/** Upper bounds (seconds) of both histograms' buckets; +Inf is implicit. */
export const DURATION_BUCKETS = [0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120] as const;

export type FamilyType = "counter" | "gauge" | "histogram";

export interface Family {
  name: string;
  type: FamilyType;
  help: string;
  /** Label names in the order samples carry them (a histogram's `le` comes last, added here). */
  labels: readonly string[];
}

function family<const L extends readonly string[]>(name: string, type: FamilyType, labels: L, help: string) {
  return { name, type, labels, help } satisfies Family;
}

/** Every family, in the order of the exposition. */
export const FAMILIES = {
  restApiCalls: family("ls_rest_api_calls_total", "counter", ["path", "status_code"], "REST API calls by route template and final status code (/metrics itself excluded)"),
  responseDuration: family("ls_response_duration_seconds", "histogram", ["path"], "Time until the answer's head is ready, by route template"),
  providerModel: family("ls_provider_model_configuration", "gauge", ["provider", "model"], "Language models the backend serves; 1 for the configured default, 0 for the others"),
  llmCalls: family("ls_llm_calls_total", "counter", ["provider", "model", "endpoint"], "Calls to the inference backend, failed ones included"),
  llmFailures: family("ls_llm_calls_failures_total", "counter", ["provider", "model", "endpoint"], "Calls to the inference backend that failed"),
  validationErrors: family("ls_llm_validation_errors_total", "counter", ["endpoint"], "Questions a safety shield refused"),
  tokensSent: family("ls_llm_token_sent_total", "counter", ["provider", "model", "endpoint"], "Input tokens the backend reported"),
  tokensReceived: family("ls_llm_token_received_total", "counter", ["provider", "model", "endpoint"], "Output tokens the backend reported"),
  inferenceDuration: family("ls_llm_inference_duration_seconds", "histogram", ["provider", "model", "endpoint", "result"], "Duration of calls to the inference backend"),
  deliveryFailures: family("parley_delivery_failures_total", "counter", ["kind"], "Extension: attempts to deliver what follows a turn (transcript, quota settlement, record, token history) that failed and will be retried or were given up"),
  providerUp: family("parley_provider_up", "gauge", ["provider"], "Extension: 1 when the provider's backend answered its model list at scrape time, else 0"),
  degraded: family("ls_started_in_degraded_mode", "gauge", [], "1 while the gateway serves in degraded mode (backend unreachable, allow_degraded_mode set), judged at scrape time"),
} as const;

export type FamilyKey = keyof typeof FAMILIES;
