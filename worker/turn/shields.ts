// Safety shields (REFERENCE "Shields"): configured moderation checks that run through the backend's
// OpenAI-compatible moderation endpoint, in order. An input shield checks the user's input before
// the model call; an output shield checks the whole answer before it is released. The first flag
// blocks the turn and its refusal becomes the answer. The original system's own kinds (its newer
// configurations) run here too: `question_validity`, an input check by a model that must answer
// ALLOWED, and `redaction`, regex rules applied to the user's text when the turn is planned.
import type { ChatCompletionChunk } from "openai/resources/chat/completions";
import type { ResponseStreamEvent } from "openai/resources/responses/responses";
import { isModeration, type ModerationShieldConfig, type QuestionValidityShieldConfig, type RedactionShieldConfig, type ShieldConfig } from "../config/schema.ts";
import { errors } from "../errors.ts";
import { moderationFlagged } from "../backends/answer-shapes.ts";
import { ChatEventTranslator } from "../backends/chat-events.ts";
import { apiBackend, unservedApiError } from "../backends/providers.ts";
import type { Runtime } from "../runtime.ts";
import type { Item, TokenUsage } from "../domain/conversation.ts";
import { backendError } from "./backend-errors.ts";
import { askModel } from "./backend-call.ts";
import { findModel, listModels } from "./models.ts";

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

/** The shields that check the user's input before the model call, in order, and those that check the answer. */
export function checksOf(shields: ShieldConfig[]): { input: InputCheck[]; output: ModerationShieldConfig[] } {
  return {
    input: shields.filter((shield): shield is InputCheck => (isModeration(shield) ? shield.input : shield.provider_id === "question_validity")),
    output: shields.filter((shield): shield is ModerationShieldConfig => isModeration(shield) && shield.output),
  };
}

type InputCheck = ModerationShieldConfig | QuestionValidityShieldConfig;

/** Runs `shields` over `text` in order; the first flagged one decides. Null when nothing flagged. */
export async function moderate(rt: Runtime, shields: InputCheck[], text: string): Promise<ShieldVerdict | null> {
  for (const shield of shields) {
    const verdict = "config" in shield ? await classify(rt, shield, text) : await moderation(rt, shield, text);
    if (verdict) return verdict;
  }
  return null;
}

async function moderation(rt: Runtime, shield: ModerationShieldConfig, text: string): Promise<ShieldVerdict | null> {
  let flagged: boolean;
  const backend = apiBackend(rt.backends, "moderations", shield.provider_id);
  try {
    flagged = moderationFlagged(await backend.client.moderations.create({ input: text, ...(shield.model ? { model: shield.model } : {}) }));
  } catch (error) {
    // A shield that cannot run must not let the input through unchecked.
    throw unservedApiError(error, "moderations", backend) ?? backendError(error);
  }
  return flagged ? { shield: shield.name, refusal: shield.message ?? DEFAULT_REFUSAL } : null;
}

// The question_validity shield's defaults (Parley's wording; the original's default is a
// Kubernetes/OpenShift topic classifier too) and its verdict words.
const QUESTION_VALIDITY_PROMPT = `You decide whether a question is about Kubernetes or OpenShift.
Answer with one word and nothing else: \${allowed} when it is, \${rejected} when it is not (an empty
question is \${rejected}).

Question:
\${message}
Answer:`;
const INVALID_QUESTION_RESPONSE = "I can only answer questions about OpenShift and Kubernetes. Please ask a question about them.";
const ALLOWED = "ALLOWED";
const REJECTED = "REJECTED";

/**
 * Asks the shield's model whether the question is on topic: its prompt with `${message}`,
 * `${allowed}` and `${rejected}` filled in (Python string.Template placeholders, `$$` a dollar),
 * sent on its own (no history, not stored). Only the answer ALLOWED (spaces around it aside) lets
 * the question through; a model that cannot be reached fails the turn.
 */
async function classify(rt: Runtime, shield: QuestionValidityShieldConfig, question: string): Promise<ShieldVerdict | null> {
  const model = findModel(await listModels(rt), undefined, shield.config.model_id);
  if (!model) throw errors.internal(`shield ${shield.name}: its model ${shield.config.model_id} is not among the backends' models`);
  const values: Record<string, string> = { message: question, allowed: ALLOWED, rejected: REJECTED };
  const prompt = (shield.config.model_prompt ?? QUESTION_VALIDITY_PROMPT).replace(/\$(?:\$|(\w+)|\{(\w+)\})/g, (whole, bare?: string, braced?: string) => {
    const name = bare ?? braced;
    return name === undefined ? "$" : (values[name] ?? whole);
  });
  const answer = await askModel(rt, model, { input: prompt });
  return answer === ALLOWED ? null : { shield: shield.name, refusal: shield.config.invalid_question_response ?? INVALID_QUESTION_RESPONSE };
}

/**
 * The user's text with the redaction shields' rules applied, in order (a rule's `case_sensitive`,
 * else its shield's; the replacement is inserted as written).
 */
export function redact(shields: RedactionShieldConfig[], text: string): string {
  let shown = text;
  for (const { config } of shields) {
    for (const rule of config.rules) {
      const flags = (rule.case_sensitive ?? config.case_sensitive) ? "g" : "gi";
      shown = shown.replace(new RegExp(rule.pattern, flags), () => rule.replacement);
    }
  }
  return shown;
}

/** The turn's input with `redact` applied to the text of its user messages (question and text parts). */
export function redactedInput(shields: RedactionShieldConfig[], input: Item[]): Item[] {
  if (shields.length === 0) return input;
  return input.map((item) => {
    if (item.role !== "user") return item;
    if (typeof item.content === "string") return { ...item, content: redact(shields, item.content) };
    const parts = (item.content ?? []) as Item[];
    return { ...item, content: parts.map((part) => (part.type === "input_text" ? { ...part, text: redact(shields, String(part.text)) } : part)) };
  });
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
