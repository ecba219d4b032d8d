// Role rules with operator `match` carry the original system's Python regular expressions, which it
// runs with re.search. JavaScript's RegExp reads most of them alike; this translates the Python forms
// it lacks or reads differently into ones with the same meaning, and refuses, saying why, the few
// it cannot express. The configuration check and the matcher both compile through here, so a
// pattern that loads is the pattern that runs.
//
// What changes (Python meaning → JavaScript form):
// - leading global flags (?aiLmsux): i becomes the RegExp flag; s, m and x are applied here (below);
//   a is JavaScript's own reading of \w \d \s \b, which are ASCII there;
// - (?P<name>…) → (?<name>…), (?P=name) → \k<name>, (?#comment) is dropped;
// - `.` matches everything but \n (JavaScript also stops at \r, U+2028, U+2029), or everything with s;
// - `$` matches at the end or before a final \n; with m, `^` and `$` are at \n only (JavaScript's m
//   also breaks lines at \r, U+2028, U+2029); \A and \Z are the very start and end;
// - `]` first in a class is literal (JavaScript reads `[]` as an empty class); {,n} is {0,n};
// - \a is BEL; \UXXXXXXXX is the character; verbose mode (x) drops blanks and # comments outside classes.
// Not translated: without (?a), Python's \w \d \s \b also take non-ASCII letters, digits and blanks,
// JavaScript's never do.
//
// Compiled without JavaScript's u flag: Python accepts escaped punctuation such as \- or \@ anywhere,
// which u mode refuses.

export type PythonRegex = { ok: true; regex: RegExp } | { ok: false; problem: string };

/** Thrown inside the translation: a Python form JavaScript cannot run, or a pattern neither takes. */
class Untranslatable extends Error {}

const cannot = (why: string) => new Untranslatable(`a Python regular expression JavaScript cannot run: ${why}`);
const invalid = (why: string) => new Untranslatable(`invalid regular expression: ${why}`);

const START = "(?<![\\s\\S])";
const END = "(?![\\s\\S])";
const GLOBAL_FLAGS = /^\(\?([a-zA-Z]+)\)/;
// Escapes whose meaning Python and JavaScript share (\b is backspace inside a class in both).
const SHARED_ESCAPES = new Set("bBdDsSwWfnrtv");
const QUANTIFIER_BRACES = /^\{(\d*)(,(\d*))?\}/;

/** The pattern as a RegExp meaning what re.search means by it, or why it cannot be one. */
export function pythonRegex(pattern: string): PythonRegex {
  try {
    const { source, ignoreCase } = translate(pattern);
    try {
      return { ok: true, regex: new RegExp(source, ignoreCase ? "i" : "") };
    } catch (error) {
      // Python took it (or the operator wrote something neither takes): say what JavaScript said.
      throw invalid(error instanceof Error ? error.message.replace(/^Invalid regular expression: /, "") : String(error));
    }
  } catch (error) {
    if (error instanceof Untranslatable) return { ok: false, problem: error.message };
    throw error;
  }
}

interface Flags {
  ignoreCase: boolean;
  dotAll: boolean;
  multiline: boolean;
  verbose: boolean;
}

function leadingFlags(pattern: string): { flags: Flags; rest: string } {
  const flags: Flags = { ignoreCase: false, dotAll: false, multiline: false, verbose: false };
  let rest = pattern;
  let group: RegExpExecArray | null;
  while ((group = GLOBAL_FLAGS.exec(rest)) !== null) {
    const letters = group[1]!;
    for (const letter of letters) {
      if (letter === "i") flags.ignoreCase = true;
      else if (letter === "s") flags.dotAll = true;
      else if (letter === "m") flags.multiline = true;
      else if (letter === "x") flags.verbose = true;
      else if (letter === "L") throw cannot("flag L (locale) applies to byte patterns only");
      else if (letter !== "a" && letter !== "u") throw invalid(`unknown flag ${letter}`);
    }
    if (letters.includes("a") && letters.includes("u")) throw invalid("flags a and u are incompatible");
    rest = rest.slice(group[0].length);
  }
  return { flags, rest };
}

function translate(pattern: string): { source: string; ignoreCase: boolean } {
  const { flags, rest: text } = leadingFlags(pattern);
  let out = "";
  let i = 0;
  let inClass = false;
  // Set after a quantifier: a `+` straight after it would make it possessive.
  let quantified = false;

  while (i < text.length) {
    const char = text[i]!;
    if (!inClass && flags.verbose && /\s/.test(char)) {
      i += 1;
      continue;
    }
    if (!inClass && flags.verbose && char === "#") {
      const newline = text.indexOf("\n", i);
      i = newline < 0 ? text.length : newline + 1;
      continue;
    }
    const wasQuantified = quantified;
    quantified = false;

    if (char === "\\") {
      const [piece, length] = escape(text, i, inClass);
      out += piece;
      i += length;
      continue;
    }
    if (inClass) {
      if (char === "]") inClass = false;
      out += char;
      i += 1;
      continue;
    }
    switch (char) {
      case "[": {
        inClass = true;
        out += "[";
        i += 1;
        if (text[i] === "^") {
          out += "^";
          i += 1;
        }
        // Python reads a `]` right after the opening as a member; JavaScript would close the class.
        if (text[i] === "]") {
          out += "\\]";
          i += 1;
        }
        continue;
      }
      case "(": {
        const [piece, length] = group(text, i);
        out += piece;
        i += length;
        continue;
      }
      case ".":
        out += flags.dotAll ? "[\\s\\S]" : "[^\\n]";
        break;
      case "^":
        out += flags.multiline ? "(?<![^\\n])" : START;
        break;
      case "$":
        out += flags.multiline ? "(?![^\\n])" : `(?=\\n?${END})`;
        break;
      case "*":
      case "?":
        if (wasQuantified && char === "?") {
          out += "?"; // lazy
          break;
        }
        if (wasQuantified) throw invalid("multiple repeat");
        out += char;
        quantified = true;
        break;
      case "+":
        if (wasQuantified) throw cannot("possessive quantifiers (*+, ++, ?+, {m,n}+) have no JavaScript form");
        out += "+";
        quantified = true;
        break;
      case "{": {
        const braces = QUANTIFIER_BRACES.exec(text.slice(i));
        // Python reads {,n} as {0,n} and {,} as {0,}; JavaScript would read those braces as text.
        // Braces that are no quantifier ({}, {x}) are text in both.
        if (braces && (braces[1] !== "" || braces[2] !== undefined)) {
          if (wasQuantified) throw invalid("multiple repeat");
          out += `{${braces[1] || "0"}${braces[2] ?? ""}}`;
          i += braces[0].length;
          quantified = true;
          continue;
        }
        out += "\\{";
        break;
      }
      default:
        out += char;
    }
    i += 1;
  }
  return { source: out, ignoreCase: flags.ignoreCase };
}

/** The JavaScript form of the group opening at text[at], and how much of the text it covers. */
function group(text: string, at: number): [string, number] {
  const rest = text.slice(at);
  if (!rest.startsWith("(?")) return ["(", 1];
  const named = /^\(\?P<([^>]*)>/.exec(rest);
  if (named) return [`(?<${named[1]}>`, named[0].length];
  const backreference = /^\(\?P=([^)]*)\)/.exec(rest);
  if (backreference) return [`\\k<${backreference[1]}>`, backreference[0].length];
  if (rest.startsWith("(?#")) {
    const close = rest.indexOf(")");
    if (close < 0) throw invalid("missing ), unterminated comment");
    return ["", close + 1];
  }
  if (/^\(\?(?::|=|!|<=|<!)/.test(rest)) return [rest.startsWith("(?<") ? rest.slice(0, 4) : rest.slice(0, 3), rest.startsWith("(?<") ? 4 : 3];
  if (rest.startsWith("(?>")) throw cannot("atomic groups (?>…) have no JavaScript form");
  if (rest.startsWith("(?(")) throw cannot("conditional groups (?(id)yes|no) have no JavaScript form");
  if (/^\(\?[a-zA-Z-]+:/.test(rest)) throw cannot("flags scoped to a group (?flags:…) have no JavaScript form here");
  if (/^\(\?[a-zA-Z]+\)/.test(rest)) throw cannot("global flags such as (?i) must stand at the start of the expression");
  throw invalid(`unknown extension ${rest.slice(0, 3)}`);
}

/** The JavaScript form of the escape at text[at], and how much of the text it covers. */
function escape(text: string, at: number, inClass: boolean): [string, number] {
  const next = text[at + 1];
  if (next === undefined) throw invalid("bad escape (end of pattern)");
  if (SHARED_ESCAPES.has(next) || /[0-9]/.test(next)) return [`\\${next}`, 2];
  if (!/[a-zA-Z]/.test(next)) return [`\\${next}`, 2];
  switch (next) {
    case "a":
      return ["\\x07", 2];
    case "A":
    case "Z":
      if (inClass) throw invalid(`bad escape \\${next}`);
      return [next === "A" ? START : END, 2];
    case "x": {
      const hex = /^[0-9a-fA-F]{2}/.exec(text.slice(at + 2));
      if (!hex) throw invalid("incomplete escape \\x");
      return [`\\x${hex[0]}`, 4];
    }
    case "u": {
      const hex = /^[0-9a-fA-F]{4}/.exec(text.slice(at + 2));
      if (!hex) throw invalid("incomplete escape \\u");
      return [`\\u${hex[0]}`, 6];
    }
    case "U": {
      const hex = /^[0-9a-fA-F]{8}/.exec(text.slice(at + 2));
      if (!hex) throw invalid("incomplete escape \\U");
      const code = Number.parseInt(hex[0], 16);
      if (code > 0x10ffff) throw invalid(`bad escape \\U${hex[0]}`);
      if (code <= 0xffff) return [`\\u${hex[0].slice(4)}`, 10];
      // Without the u flag a character beyond the BMP is two code units: a pair outside a class, but
      // a class would take each half as a member.
      if (inClass) throw cannot("a character beyond U+FFFF (\\U) inside a class");
      const units = String.fromCodePoint(code);
      return [`(?:${[...Array(units.length).keys()].map((k) => `\\u${units.charCodeAt(k).toString(16).padStart(4, "0")}`).join("")})`, 10];
    }
    case "N":
      throw cannot("named characters \\N{…} need Python's Unicode name table");
    default:
      // Python refuses the escapes of other ASCII letters; JavaScript would read them as the letter.
      throw invalid(`bad escape \\${next}`);
  }
}
