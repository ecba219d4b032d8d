// Safety shields (REFERENCE "Shields"): configured moderation checks that run through the backend's
// OpenAI-compatible moderation endpoint, in order. An input shield checks the user's input before
// the model call; an output shield checks the whole answer before it is released. The first flag
// blocks the turn and its refusal becomes the answer.
import type { ChatCompletionChunk } from "openai/resources/chat/completions";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import type { ShieldConfig } from "../config/schema.ts";
import { errors } from "../errors.ts";
import { moderationFlagged } from "../backends/answer-shapes.ts";
import { ChatEventTranslator } from "../backends/chat-events.ts";
import { apiBackend, unservedApiError } from "../backends/providers.ts";
import type { Runtime } from "../runtime.ts";
import type { Item, TokenUsage } from "../domain/conversation.ts";
import { backendError } from "./backend-errors.ts";

/** The refusal when a shield's configuration gives no message of its own. */
export const DEFAULT_REFUSAL = "I cannot help with that request: it was flagged by the content safety policy.";

/** SPEC shield_ids: omitted/null → every configured shield; [] → none; an unknown name → 404. */
export function selectShields(rt: Runtime, shieldIds: string[] | null | undefined): ShieldConfig[] {
  const configured = rt.config.shields;
  if (shieldIds !== null && shieldIds !== undefined && rt.config.customization.disable_shield_ids_override) {
    throw errors.invalidValue("shield_ids: this service does not allow choosing shields per request (disable_shield_ids_override)");
  }
  if (shieldIds === null || shieldIds === undefined) return configured;
  return shieldIds.map((id) => {
    const shield = configured.find((candidate) => candidate.name === id);
    if (!shield) throw errors.notFound("Shield", id);
    return shield;
  });
}

export interface ShieldVerdict {
  shield: string;
  refusal: string;
}

/** Runs `shields` over `text` in order; the first flagged one decides. Null when nothing flagged. */
export async function moderate(rt: Runtime, shields: ShieldConfig[], text: string): Promise<ShieldVerdict | null> {
  for (const shield of shields) {
    let flagged: boolean;
    const backend = apiBackend(rt.backends, "moderations", shield.provider_id);
    try {
      flagged = moderationFlagged(await backend.client.moderations.create({ input: text, ...(shield.model ? { model: shield.model } : {}) }));
    } catch (error) {
      // A shield that cannot run must not let the input through unchecked.
      throw unservedApiError(error, "moderations", backend) ?? backendError(error);
    }
    if (flagged) return { shield: shield.name, refusal: shield.message ?? DEFAULT_REFUSAL };
  }
  return null;
}

/**
 * What input shields check: the text of this turn's user messages and of their attached files
 * (question and attachments; the retrieval context is added later and is not the user's input).
 */
export function moderationText(items: Item[]): string {
  const texts: string[] = [];
  for (const item of items) {
    if (item.role !== "user") continue;
    if (typeof item.content === "string") {
      texts.push(item.content);
      continue;
    }
    for (const part of (item.content ?? []) as Item[]) {
      if (part.type === "input_text") texts.push(String(part.text));
      if (part.type === "input_file" && typeof part.file_data === "string") texts.push(decodeTextData(part.file_data));
    }
  }
  return texts.filter(Boolean).join("\n");
}

/** The text of a `data:text/...;base64,` URL (attachments are text types); other data is skipped. */
function decodeTextData(url: string): string {
  const match = /^data:([^;,]+)(;base64)?,(.*)$/s.exec(url);
  if (!match || !/^(text\/|application\/(json|yaml|xml))/.test(match[1]!)) return "";
  if (!match[2]) return decodeURIComponent(match[3]!);
  const binary = atob(match[3]!);
  return new TextDecoder().decode(Uint8Array.from(binary, (ch) => ch.charCodeAt(0)));
}

/**
 * A blocked turn as the backend's stream would have shown an answer: the whole event sequence of
 * one message holding the refusal (as the chat translator makes it for any text answer), completed
 * with status `blocked`. `usage` is the model's when an output shield blocked its answer, none when
 * the input was blocked before any model call. Every endpoint's adapter then renders a refusal the
 * way it renders an answer.
 */
export function blockedEvents(refusal: string, model: string, instructions: string, usage: TokenUsage | null): ResponseStreamEvent[] {
  const input = usage?.input ?? 0;
  const output = usage?.output ?? 0;
  const answer = new ChatEventTranslator({ model, instructions }, input);
  const chunk: ChatCompletionChunk = {
    id: "",
    object: "chat.completion.chunk",
    created: 0,
    model,
    choices: [{ index: 0, delta: { content: refusal }, finish_reason: "stop", logprobs: null }],
    usage: { prompt_tokens: input, completion_tokens: output, total_tokens: input + output },
  };
  const events = [...answer.start(), ...answer.chunk(chunk), ...answer.end()];
  for (const event of events) if (event.type === "response.completed") (event.response as { status: string }).status = "blocked";
  return events;
}
