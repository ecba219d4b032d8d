// Quota periods are written by operators the way they speak ("1 day", "12 hours"), the way
// Postgres prints intervals, or as plain seconds. Everything downstream works in seconds.

const SECONDS_PER_UNIT: ReadonlyMap<string, number> = new Map(
  (
    [
      [["s", "sec", "secs", "second", "seconds"], 1],
      [["m", "min", "mins", "minute", "minutes"], 60],
      [["h", "hr", "hrs", "hour", "hours"], 3_600],
      [["d", "day", "days"], 86_400],
      [["w", "week", "weeks"], 604_800],
      // A calendar month has no fixed length; quotas need one, and 30 days is the usual choice.
      [["mon", "month", "months"], 2_592_000],
    ] as const
  ).flatMap(([names, seconds]) => names.map((name) => [name, seconds] as const)),
);

const NUMBER = /^\d+(?:\.\d+)?$/;
const TERM = /(\d+(?:\.\d+)?)\s*([a-z]+)/g;

/**
 * Length of an interval in whole seconds, or null when the text is not an interval or not
 * positive. Accepts a number of seconds, a numeric string, and one or more "<amount> <unit>"
 * terms ("1 day", "1 hour 30 minutes", "45s").
 */
export function parseInterval(text: string | number): number | null {
  if (typeof text === "number") return wholePositive(text);
  const source = text.trim().toLowerCase();
  if (NUMBER.test(source)) return wholePositive(Number(source));

  let total = 0;
  let consumed = 0;
  for (const match of source.matchAll(TERM)) {
    const gap = source.slice(consumed, match.index);
    // Only blanks or a comma may separate terms; anything else means we misread the text.
    if (!/^[\s,]*$/.test(gap) || (consumed > 0 && gap === "")) return null;
    const seconds = SECONDS_PER_UNIT.get(match[2]);
    if (seconds === undefined) return null;
    total += Number(match[1]) * seconds;
    consumed = match.index + match[0].length;
  }
  if (consumed === 0 || source.slice(consumed).trim() !== "") return null;
  return wholePositive(total);
}

function wholePositive(seconds: number): number | null {
  // Fractional amounts ("0.1 hours") pick up binary rounding noise; a whole second survives it.
  const rounded = Math.round(seconds);
  return Math.abs(seconds - rounded) < 1e-6 && rounded > 0 ? rounded : null;
}
