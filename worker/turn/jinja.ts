// The configured system prompt as /v1/infer renders it: a Jinja2 template, as in the original
// system (UPSTREAM "/v1/infer": a sandboxed Jinja2 template with date, os, version and arch).
// @huggingface/jinja interprets templates without generating code, which workerd forbids; like
// Jinja2's default, an undefined name renders as nothing.
import { Template } from "@huggingface/jinja";

/** One parsed template, kept while the configuration names the same text (plain data, no I/O). */
let cached: { text: string; template: Template | Error } | null = null;

function parsed(text: string): Template | Error {
  if (cached?.text !== text) {
    let template: Template | Error;
    try {
      template = new Template(text);
    } catch (error) {
      template = error instanceof Error ? error : new Error(String(error));
    }
    cached = { text, template };
  }
  return cached.template;
}

/** Why `text` is not a template that can be rendered, or null when it is. */
export function templateProblem(text: string): string | null {
  const template = parsed(text);
  return template instanceof Error ? template.message : null;
}

/** `text` rendered with `values`; throws an Error saying why when it cannot be. */
export function renderTemplate(text: string, values: Record<string, string>): string {
  const template = parsed(text);
  if (template instanceof Error) throw template;
  return template.render(values);
}
