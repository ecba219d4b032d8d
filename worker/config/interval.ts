// Quota periods (quota_handlers.limiters[].period) are PostgreSQL intervals in the original system,
// so operators write them as PostgreSQL reads interval input: "1 day", "12 hours", "2 mons",
// "1 year", the verbose "@ 1 hour", the printed "3 days 04:05:06", "01:00:00", ISO 8601 "P1D" or
// "P0001-02-03T04:05:06"; also a plain number of seconds. Everything downstream works in seconds:
// an interval is as many seconds as EXTRACT(EPOCH FROM interval '…') gives, so a month is 30 days
// and a year 365.25 days (twelve months make a year, so "12 mons" is 365.25 days too).
//
// Hand-written: the postgres-interval package (pg's) reads only the form PostgreSQL prints, and
// reads any text at all (what it does not recognise it skips), so it can neither take the verbose
// and ISO forms nor tell an operator that a period is not an interval.

const SECONDS_PER_DAY = 86_400;
const DAYS_PER_MONTH = 30;
const DAYS_PER_YEAR = 365.25;

/** An interval as PostgreSQL keeps it: months, days and seconds apart, each signed. */
interface Interval {
  months: number;
  days: number;
  seconds: number;
}

type Unit = "year" | "month" | "week" | "day" | "second";

/** Unit names PostgreSQL's interval input takes, with the unit each counts and how many of it. */
const UNITS: ReadonlyMap<string, readonly [Unit, number]> = new Map(
  (
    [
      [["us", "usec", "usecs", "useconds", "microsecon", "microsecond", "microseconds"], "second", 1e-6],
      [["ms", "msec", "msecs", "mseconds", "millisecon", "millisecond", "milliseconds"], "second", 1e-3],
      [["s", "sec", "secs", "second", "seconds"], "second", 1],
      [["m", "min", "mins", "minute", "minutes"], "second", 60],
      [["h", "hr", "hrs", "hour", "hours"], "second", 3_600],
      [["d", "day", "days"], "day", 1],
      [["w", "week", "weeks"], "week", 1],
      [["mon", "mons", "month", "months"], "month", 1],
      [["y", "yr", "yrs", "year", "years"], "year", 1],
      [["dec", "decs", "decade", "decades"], "year", 10],
      [["c", "cent", "century", "centuries"], "year", 100],
      [["mil", "mils", "millennium", "millennia"], "year", 1_000],
    ] as const
  ).flatMap(([names, unit, count]) => names.map((name) => [name, [unit, count] as const] as const)),
);

const NUMBER = String.raw`[+-]?(?:\d+(?:\.\d*)?|\.\d+)`;
// One field of the PostgreSQL form: a time (h:m, h:m:s, m:s.f) or an amount with an optional unit.
const FIELD = new RegExp(String.raw`([+-])?(\d+):(\d+)(?::(\d+(?:\.\d*)?))?(?![\d:.])|([+-])?(\d+):(\d+\.\d*)|(${NUMBER})\s*([a-z]*)`, "y");
const SEPARATOR = /[\s,]+/y;
const ISO = new RegExp(
  String.raw`^P(?:(${NUMBER})Y)?(?:(${NUMBER})M)?(?:(${NUMBER})W)?(?:(${NUMBER})D)?(?:T(?:(${NUMBER})H)?(?:(${NUMBER})M)?(?:(${NUMBER})S)?)?$`,
  "i",
);
const ISO_ALTERNATIVE = /^P(?:(\d+)-(\d+)-(\d+))?(?:T(\d+):(\d+):(\d+(?:\.\d*)?))?$/i;

/** PostgreSQL's rint: halves go to the even neighbour. */
function rint(value: number): number {
  const rounded = Math.round(value);
  return Math.abs(value % 1) === 0.5 && rounded % 2 !== 0 ? rounded - 1 : rounded;
}

/** Adds `amount` of `unit` as PostgreSQL does: a fraction spills into the next smaller part. */
function add(interval: Interval, unit: Unit, amount: number): void {
  const whole = Math.trunc(amount);
  const fraction = amount - whole;
  switch (unit) {
    case "year":
      // A fraction of a year is whole months.
      interval.months += whole * 12 + rint(fraction * 12);
      return;
    case "month":
      interval.months += whole;
      add(interval, "day", fraction * DAYS_PER_MONTH);
      return;
    case "week":
      add(interval, "day", amount * 7);
      return;
    case "day":
      interval.days += whole;
      interval.seconds += fraction * SECONDS_PER_DAY;
      return;
    case "second":
      interval.seconds += amount;
  }
}

/** The interval the PostgreSQL form (not ISO 8601) of `source` writes, or null. */
function postgresForm(text: string): Interval | null {
  let source = text.toLowerCase().replace(/^@\s*/, "");
  const ago = /\s+ago$/.exec(source);
  if (ago) source = source.slice(0, ago.index);
  const interval: Interval = { months: 0, days: 0, seconds: 0 };
  let at = 0;
  while (at < source.length) {
    if (at > 0) {
      // Fields are set apart by blanks or commas.
      SEPARATOR.lastIndex = at;
      if (!SEPARATOR.test(source)) return null;
      at = SEPARATOR.lastIndex;
    }
    FIELD.lastIndex = at;
    const field = FIELD.exec(source);
    if (field === null) return null;
    at = FIELD.lastIndex;
    const [, sign, hours, minutes, seconds, shortSign, shortMinutes, shortSeconds, amount, unitName] = field;
    if (hours !== undefined) {
      const value = Number(hours) * 3_600 + Number(minutes) * 60 + Number(seconds ?? 0);
      add(interval, "second", sign === "-" ? -value : value);
    } else if (shortMinutes !== undefined) {
      const value = Number(shortMinutes) * 60 + Number(shortSeconds);
      add(interval, "second", shortSign === "-" ? -value : value);
    } else {
      // A number without a unit counts seconds.
      const unit = unitName ? UNITS.get(unitName) : (["second", 1] as const);
      if (unit === undefined) return null;
      add(interval, unit[0], Number(amount) * unit[1]);
    }
  }
  if (at === 0) return null;
  if (ago) {
    interval.months = -interval.months;
    interval.days = -interval.days;
    interval.seconds = -interval.seconds;
  }
  return interval;
}

/** The interval the ISO 8601 form of `source` writes ("P1DT2H", "P0001-02-03T04:05:06"), or null. */
function isoForm(source: string): Interval | null {
  const interval: Interval = { months: 0, days: 0, seconds: 0 };
  const designators = ISO.exec(source);
  if (designators) {
    const units: readonly (readonly [Unit, number])[] = [
      ["year", 1],
      ["month", 1],
      ["week", 1],
      ["day", 1],
      ["second", 3_600],
      ["second", 60],
      ["second", 1],
    ];
    const given = designators.slice(1);
    if (given.every((amount) => amount === undefined)) return null;
    given.forEach((amount, index) => {
      if (amount !== undefined) add(interval, units[index]![0], Number(amount) * units[index]![1]);
    });
    return interval;
  }
  const alternative = ISO_ALTERNATIVE.exec(source);
  if (alternative === null || alternative.slice(1).every((amount) => amount === undefined)) return null;
  const [, years, months, days, hours, minutes, seconds] = alternative.map((amount) => Number(amount ?? 0));
  add(interval, "year", years!);
  add(interval, "month", months!);
  add(interval, "day", days!);
  add(interval, "second", hours! * 3_600 + minutes! * 60 + seconds!);
  return interval;
}

/**
 * Length in seconds of the interval `text` writes, as EXTRACT(EPOCH) gives it (possibly zero,
 * negative or fractional), or null when the text is not an interval. A number is seconds.
 */
export function intervalSeconds(text: string | number): number | null {
  if (typeof text === "number") return Number.isFinite(text) ? text : null;
  const source = text.trim();
  if (source === "") return null;
  const interval = /^p/i.test(source) ? isoForm(source) : postgresForm(source);
  if (interval === null) return null;
  const years = Math.trunc(interval.months / 12);
  const months = interval.months % 12;
  return (years * DAYS_PER_YEAR + months * DAYS_PER_MONTH + interval.days) * SECONDS_PER_DAY + interval.seconds;
}

/** Length of the interval in whole seconds, or null when it is not an interval, not positive or not whole. */
export function parseInterval(text: string | number): number | null {
  const seconds = intervalSeconds(text);
  return seconds === null ? null : wholePositive(seconds);
}

/** The seconds, when whole and positive; else null. */
export function wholePositive(seconds: number): number | null {
  // Fractional amounts ("0.1 hours") pick up binary rounding noise; a whole second survives it.
  const rounded = Math.round(seconds);
  return Math.abs(seconds - rounded) < 1e-6 && rounded > 0 ? rounded : null;
}
