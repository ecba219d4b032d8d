// The Prometheus text exposition format, version 0.0.4: HELP and TYPE lines for every family (also
// those without samples yet, as the original system's client writes them), then its samples;
// histograms as cumulative `_bucket` series with `le`, `_sum` and `_count`.
import type { Family } from "./families.ts";
import { BUCKET_PARTS, SUM_PART, type SeriesRow } from "./series.ts";

export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

/** Renders `rows` (summed per series) as the exposition of `families`, in their order. */
export function renderExposition(families: readonly Family[], rows: Iterable<SeriesRow>): string {
  const byFamily = new Map<string, Map<string, Map<string, number>>>();
  for (const [family, labels, part, value] of rows) {
    let sets = byFamily.get(family);
    if (!sets) byFamily.set(family, (sets = new Map()));
    let parts = sets.get(labels);
    if (!parts) sets.set(labels, (parts = new Map()));
    parts.set(part, (parts.get(part) ?? 0) + value);
  }
  const lines: string[] = [];
  for (const family of families) {
    lines.push(`# HELP ${family.name} ${escapeHelp(family.help)}`, `# TYPE ${family.name} ${family.type}`);
    const sets = byFamily.get(family.name);
    if (!sets) continue;
    for (const labelsJson of [...sets.keys()].sort()) {
      const parts = sets.get(labelsJson)!;
      const labels = labelPairs(family, labelsJson);
      if (family.type !== "histogram") {
        lines.push(`${family.name}${labelText(labels)} ${numberText(parts.get("") ?? 0)}`);
        continue;
      }
      let cumulative = 0;
      for (const bound of BUCKET_PARTS) {
        cumulative += parts.get(bound) ?? 0;
        lines.push(`${family.name}_bucket${labelText([...labels, ["le", bound]])} ${numberText(cumulative)}`);
      }
      lines.push(`${family.name}_sum${labelText(labels)} ${numberText(parts.get(SUM_PART) ?? 0)}`);
      lines.push(`${family.name}_count${labelText(labels)} ${numberText(cumulative)}`);
    }
  }
  return `${lines.join("\n")}\n`;
}

/** The family's labels in order, from a stored label set (unknown keys dropped, missing ones empty). */
function labelPairs(family: Family, labelsJson: string): Array<[string, string]> {
  let values: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(labelsJson);
    if (parsed && typeof parsed === "object") values = parsed as Record<string, unknown>;
  } catch {
    // An unreadable label set renders as empty labels rather than failing the scrape.
  }
  return family.labels.map((name) => [name, typeof values[name] === "string" ? (values[name] as string) : ""]);
}

function labelText(pairs: Array<[string, string]>): string {
  if (pairs.length === 0) return "";
  return `{${pairs.map(([name, value]) => `${name}="${escapeLabelValue(value)}"`).join(",")}}`;
}

function escapeLabelValue(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
}

function escapeHelp(text: string): string {
  return text.replace(/\\/g, "\\\\").replace(/\n/g, "\\n");
}

/**
 * A sample value as the original's client (Python's prometheus_client) writes it: a float, so a
 * whole number keeps its ".0" (`ls_started_in_degraded_mode 0.0`, which its checks look for).
 */
function numberText(value: number): string {
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "+Inf";
  if (value === -Infinity) return "-Inf";
  return Number.isInteger(value) && Math.abs(value) < 1e16 ? `${value}.0` : String(value);
}
