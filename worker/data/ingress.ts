// Uploading an archive to the ingress server (UPSTREAM "Exporter"): multipart, one part named
// `file` with the archive's name and the type application/vnd.redhat.<service>.periodic+tar,
// Bearer ingress_server_auth_token, bounded by connection_timeout_seconds. Only 202 is success.
import type { DataCollectorConfig } from "../config/schema.ts";
import { SERVICE_VERSION } from "../version.ts";
import type { Archive } from "./archive.ts";

export const INGRESS_USER_AGENT = `Parley/${SERVICE_VERSION} user-data-collection`;

export type IngressResult = { ok: true; requestId: string | null } | { ok: false; reason: string };

export function ingressContentType(collector: DataCollectorConfig): string {
  return `application/vnd.redhat.${collector.ingress_content_service_name}.periodic+tar`;
}

/** Never throws: a refusal, an outage or a timeout comes back as { ok: false, reason }. */
export async function uploadArchive(collector: DataCollectorConfig, archive: Pick<Archive, "name" | "data">): Promise<IngressResult> {
  if (!collector.ingress_server_url) return { ok: false, reason: "ingress_server_url is not configured" };
  const form = new FormData();
  form.append("file", new File([archive.data], archive.name, { type: ingressContentType(collector) }));
  const headers: Record<string, string> = { "User-Agent": INGRESS_USER_AGENT };
  if (collector.ingress_server_auth_token) headers.Authorization = `Bearer ${collector.ingress_server_auth_token}`;
  try {
    // The bound covers the whole exchange (connecting, sending, the answer): fetch has no separate
    // connect timeout, and a server that accepts the connection but never answers must not hold
    // the export (and its lease) forever.
    const response = await fetch(collector.ingress_server_url, {
      method: "POST",
      headers,
      body: form,
      signal: AbortSignal.timeout(collector.connection_timeout_seconds * 1000),
    });
    const text = await response.text();
    if (response.status !== 202) return { ok: false, reason: `HTTP ${response.status} ${text.slice(0, 200)}`.trim() };
    return { ok: true, requestId: requestIdOf(text) };
  } catch (error) {
    if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError")) {
      return { ok: false, reason: `no answer within ${collector.connection_timeout_seconds} s` };
    }
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
}

function requestIdOf(text: string): string | null {
  try {
    const body = JSON.parse(text) as { request_id?: unknown };
    return typeof body.request_id === "string" ? body.request_id : null;
  } catch {
    return null;
  }
}
