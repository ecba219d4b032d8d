// Compaction (README "Conversations", UPSTREAM "Compaction"): when a conversation's input grows
// past `threshold_ratio` of the model's context window (and past `token_floor`), its older turns
// are summarised by the model and the summary takes their place in what is sent, the last
// `buffer_turns` turns (within `buffer_max_ratio` of the window) kept as they are. When that is
// still too large, fewer recent turns are kept, step by step, each time summarising again. The
// summary is kept with the conversation (one, covering everything up to a turn), so it is made once
// and extended later; the history clients read stays complete. Sizes are the gateway's estimate
// (UTF-8 bytes / 4), as for the context window check.
import type { CompactionConfig } from "../config/schema.ts";
import { turnHistory, utf8Bytes, type Item, type ModelInfo, type StoredTurn } from "../domain/conversation.ts";
import { errors, type ApiError } from "../errors.ts";
import type { Runtime } from "../runtime.ts";
import { askModel } from "./backend-call.ts";
import { backendError } from "./backend-errors.ts";

/** A conversation's summary: what replaces its turns up to `throughTurn` in the model's input. */
export interface ConversationSummary {
  throughTurn: number;
  text: string;
  model: string;
  createdAt: string;
}

const SUMMARY_INSTRUCTIONS =
  "You summarise a conversation between a user and an assistant so that the summary can replace it as " +
  "the context of the rest of the conversation. Keep: what the user wants and asked; facts, names, " +
  "versions, commands, configuration and error messages given; answers and decisions reached; what is " +
  "still open. Leave out greetings and repetition. Write plain, concise prose.";

const estimate = (items: Item[]) => Math.ceil(utf8Bytes(JSON.stringify(items)) / 4);

/** The summary as the model receives it, in place of the turns it covers. */
function summaryItem(summary: ConversationSummary): Item {
  return { type: "message", role: "user", content: `Summary of earlier conversation:\n${summary.text}` };
}

/** The history a turn sends: the summary, then the turns after it (all turns without one). */
export function compactedHistory(turns: StoredTurn[], summary: ConversationSummary | null): Item[] {
  if (!summary) return turns.flatMap(turnHistory);
  return [summaryItem(summary), ...turns.filter((turn) => turn.turnNumber > summary.throughTurn).flatMap(turnHistory)];
}

/** Whether a turn of this estimated size must be compacted first (both bounds strict, as the original). */
export function compactionDue(config: CompactionConfig, window: number, inputTokens: number): boolean {
  return config.enabled && inputTokens > window * config.threshold_ratio && inputTokens > config.token_floor;
}

export interface Compacted {
  summary: ConversationSummary;
  history: Item[];
}

/**
 * Summarises until the turn fits the window: `fixedTokens` is what the turn adds besides history
 * (instructions and its input). Null when there is nothing left to summarise (the caller's 413
 * then stands); an ApiError when the model could not summarise (the history is left as it was).
 * `signal` stops the summary's model call (the turn was interrupted, or its stream's reader left).
 */
export async function compact(
  rt: Runtime,
  model: ModelInfo,
  turns: StoredTurn[],
  previous: ConversationSummary | null,
  window: number,
  fixedTokens: number,
  signal: AbortSignal = new AbortController().signal,
): Promise<Compacted | null | ApiError> {
  const config = rt.config.compaction;
  const after = (summary: ConversationSummary | null) => turns.filter((turn) => turn.status !== "failed" && (!summary || turn.turnNumber > summary.throughTurn));
  const budget = Math.floor(window * config.buffer_max_ratio);
  // The most recent turns kept whole: as many as buffer_turns allows within the budget.
  let keep = config.buffer_turns;
  const pending = after(previous);
  while (keep > 0 && (keep > pending.length || estimate(pending.slice(-keep).flatMap(turnHistory)) > budget)) keep--;

  let summary = previous;
  for (;;) {
    const candidates = after(summary);
    const older = keep > 0 ? candidates.slice(0, -keep) : candidates;
    if (older.length === 0) {
      if (keep > 0) {
        keep--;
        continue;
      }
      return summary === previous ? null : { summary: summary!, history: compactedHistory(turns, summary) };
    }
    const made = await summarise(rt, model, summary, older, signal);
    if ("status" in made) return made;
    summary = made;
    const history = compactedHistory(turns, summary);
    if (estimate(history) + fixedTokens <= window) return { summary, history };
    if (keep === 0) return { summary, history };
    keep--;
  }
}

/** One call of the model over the earlier summary and the turns it should now cover. */
async function summarise(rt: Runtime, model: ModelInfo, previous: ConversationSummary | null, turns: StoredTurn[], signal: AbortSignal): Promise<ConversationSummary | ApiError> {
  const lines = turns.flatMap((turn) => [`user: ${turn.summary.user}`, ...(turn.summary.assistant ? [`assistant: ${turn.summary.assistant}`] : [])]);
  const input = `${previous ? `Summary of the conversation before:\n${previous.text}\n\n` : ""}Conversation:\n${lines.join("\n")}`;
  let text: string;
  try {
    text = await askModel(rt, model, { instructions: SUMMARY_INSTRUCTIONS, input }, signal);
  } catch (error) {
    return backendError(error, model.identifier);
  }
  if (!text) return errors.internal("The conversation could not be compacted: the model gave an empty summary.");
  return { throughTurn: turns.at(-1)!.turnNumber, text, model: `${model.provider_id}/${model.provider_resource_id}`, createdAt: new Date().toISOString() };
}
