// Reads a /metrics answer as Prometheus would, with the `parse-prometheus-text-format` parser (used
// by the unit, Worker and system tests). That parser drops the labels, `_sum` and `_count` of a
// histogram that has labels (yunyu/parse-prometheus-text-format issue #13), so the samples are read
// a second time with histogram TYPE lines declared untyped, where every `_bucket`, `_sum` and
// `_count` line comes back with its labels and value.

export interface ParsedFamily {
  name: string;
  help: string;
  type: string;
  metrics: Array<{ value?: string; labels?: Record<string, string>; buckets?: Record<string, string>; count?: string; sum?: string }>;
}

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  /** The families as the parser reads the text unchanged. */
  families: ParsedFamily[];
  /** Every sample line with its labels (histograms as `_bucket`, `_sum`, `_count`). */
  samples: Sample[];
  /** The sample of `name` with exactly `labels`, or undefined. */
  get(name: string, labels?: Record<string, string>): number | undefined;
  /** The sum over samples of `name` whose labels include `labels`. */
  total(name: string, labels?: Record<string, string>): number;
}

// The parser ships no types; a non-literal specifier keeps TypeScript from looking for them.
const parse = ((await import("parse-prometheus-text-format" as string)) as { default: (text: string) => ParsedFamily[] }).default;

export function parseExposition(text: string): Exposition {
  const families = parse(text);
  const samples: Sample[] = [];
  for (const family of parse(text.replace(/^# TYPE (\S+) histogram$/gm, "# TYPE $1 untyped"))) {
    for (const metric of family.metrics) samples.push({ name: family.name, labels: metric.labels ?? {}, value: Number(metric.value) });
  }
  const includes = (sample: Sample, labels: Record<string, string>) => Object.entries(labels).every(([key, value]) => sample.labels[key] === value);
  return {
    families,
    samples,
    get(name, labels = {}) {
      return samples.find((sample) => sample.name === name && includes(sample, labels) && Object.keys(sample.labels).length === Object.keys(labels).length)?.value;
    },
    total(name, labels = {}) {
      return samples.filter((sample) => sample.name === name && includes(sample, labels)).reduce((sum, sample) => sum + sample.value, 0);
    },
  };
}
