// Stored prompt templates: `{{name}}` placeholders filled from a responses request's
// `prompt.variables`. Text values go into the text; images and files cannot, so their placeholder
// becomes a short reference and the part itself is handed back to ride along in the user's message.
import { errors } from "../errors.ts";
import type { InputContentPart } from "./responses-request.ts";

/** `{{name}}`, spaces allowed inside the braces. */
const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

export type PromptVariableValue = InputContentPart | string | null;

export interface RenderedPrompt {
  text: string;
  /** Image and file values, in the order the template first uses them. */
  parts: InputContentPart[];
}

/** The placeholder names of a template, each once, in order of first use. */
export function templateVariables(template: string): string[] {
  return [...new Set(Array.from(template.matchAll(PLACEHOLDER), (match) => match[1]!))];
}

/** For prompt create/update: every placeholder must be a declared variable. */
export function checkTemplate(template: string, declared: readonly string[]): void {
  const known = new Set(declared);
  const undeclared = templateVariables(template).filter((name) => !known.has(name));
  if (undeclared.length > 0) {
    throw errors.invalidValue(`prompt uses placeholder(s) not listed in variables: ${undeclared.join(", ")}`);
  }
}

/**
 * Fills the declared placeholders of `template` from `given`. Placeholders of undeclared names are
 * not variables and stay as written (create/update reject them, so only old or foreign templates
 * have any).
 */
export function renderPrompt(
  template: string,
  declared: readonly string[],
  given: Readonly<Record<string, PromptVariableValue>> | null | undefined,
): RenderedPrompt {
  const values = given ?? {};
  const known = new Set(declared);

  const unknown = Object.keys(values).filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw errors.invalidValue(`prompt variable(s) not declared by the prompt: ${unknown.join(", ")} (declared: ${declared.join(", ") || "none"})`);
  }

  const used = templateVariables(template).filter((name) => known.has(name));
  const missing = used.filter((name) => values[name] === undefined || values[name] === null);
  if (missing.length > 0) throw errors.missingAttributes(`prompt variable(s) without a value: ${missing.join(", ")}`);

  const parts: InputContentPart[] = [];
  for (const name of used) {
    const value = values[name]!;
    if (typeof value !== "string" && value.type !== "input_text") parts.push(value);
  }

  // One pass, so text inside a value is never itself taken for a placeholder.
  const text = template.replace(PLACEHOLDER, (placeholder, name: string) => {
    if (!known.has(name)) return placeholder;
    const value = values[name]!;
    if (typeof value === "string") return value;
    switch (value.type) {
      case "input_text":
        return value.text;
      case "input_image":
        return `[image: ${name}]`;
      case "input_file":
        return `[file: ${name}]`;
    }
  });

  return { text, parts };
}
