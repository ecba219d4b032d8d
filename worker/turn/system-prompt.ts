// SPEC's system prompt precedence: the client's own (unless disabled), the custom profile's
// default, the configured prompt, the built-in default.
import { errors } from "../errors.ts";
import type { Runtime } from "../runtime.ts";

export const DEFAULT_SYSTEM_PROMPT =
  "You are a helpful assistant. Answer the user's questions accurately and concisely. " +
  "When documents are provided, base your answer on them; when a knowledge_search tool is available, use it to find documents.";

export interface SystemPrompt {
  text: string;
  /** True when the client supplied it. */
  fromClient: boolean;
}

/** `field` names the request field the client used (system_prompt or instructions), for the 422. */
export function resolveSystemPrompt(rt: Runtime, requested: string | null | undefined, field: string): SystemPrompt {
  if (requested !== null && requested !== undefined) {
    if (rt.config.customization?.disable_query_system_prompt) {
      throw errors.instructionsRejected(field);
    }
    return { text: requested, fromClient: true };
  }
  const text = rt.profilePrompts.default ?? rt.systemPrompt ?? DEFAULT_SYSTEM_PROMPT;
  return { text, fromClient: false };
}
