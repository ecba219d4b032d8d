// What every part of the reliability suite shares (RELIABILITY.md): the form it runs in (short in
// CI, full with RELIABILITY=full), the seed its generators start from (RELIABILITY_SEED replays a
// run), the figure lines the figures in RELIABILITY.md are read from, and what an error answer must
// look like (SPEC "Errors": {"detail": {"response", "cause"}}, nothing else).
import { inject } from "vitest";

const settings = inject("reliability");

export const FORM = settings.form;
export const FULL = settings.form === "full";
export const SEED = settings.seed;

/** `short` in the CI form, `full` with RELIABILITY=full. */
export const scaled = (short: number, full: number) => (FULL ? full : short);

/**
 * Prints one figure line; RELIABILITY.md's tables are these lines (`grep '^RELIABILITY'` in the
 * run's output). `failed` must be 0: the tests assert that separately, listing every failure.
 */
export function figure(name: string, tried: number, failed: number, notes = ""): void {
  console.log(`RELIABILITY ${name}: tried ${tried}, failed ${failed}${notes ? `; ${notes}` : ""} [form ${FORM}, seed ${SEED}]`);
}

/** What is wrong with an error answer, or null when it is SPEC's envelope with JSON content. */
export function envelopeProblem(status: number, contentType: string | null, text: string): string | null {
  if (!(contentType ?? "").toLowerCase().startsWith("application/json")) return `${status} with content type ${contentType ?? "(none)"}`;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `${status} whose body is not JSON: ${text.slice(0, 120)}`;
  }
  const detail = (body as { detail?: unknown } | null)?.detail as Record<string, unknown> | undefined;
  const keys = body && typeof body === "object" ? Object.keys(body).sort().join(",") : "";
  if (keys !== "detail" || !detail || typeof detail !== "object") return `${status} without SPEC's envelope: ${text.slice(0, 200)}`;
  if (Object.keys(detail).sort().join(",") !== "cause,response") return `${status} whose detail has fields ${Object.keys(detail).join(",")}`;
  if (typeof detail.response !== "string" || typeof detail.cause !== "string" || detail.response === "") {
    return `${status} whose detail is not two texts: ${text.slice(0, 200)}`;
  }
  return null;
}

/** Runs `tasks` with at most `limit` at a time, in order of start. */
export async function inBatches<T, R>(items: readonly T[], limit: number, task: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** Milliseconds since `started` (performance.now() does not advance inside workerd between I/O). */
export const since = (started: number) => Date.now() - started;
