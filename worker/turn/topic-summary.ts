// A new conversation's topic summary: a short backend call of its own, run beside the turn.
import type { Runtime } from "../runtime.ts";
import { askModel } from "./backend-call.ts";
import type { ModelInfo } from "./models.ts";
import { log } from "../log.ts";

const TOPIC_SUMMARY_INSTRUCTIONS =
  "Write a topic summary of the user's question: at most five words, no punctuation at the end, nothing else.";

export async function generateTopicSummary(rt: Runtime, model: ModelInfo, question: string): Promise<string | null> {
  try {
    // Bounded by the backend's time-out like the turn's own call; nothing else stops it.
    const text = await askModel(rt, model, { instructions: TOPIC_SUMMARY_INSTRUCTIONS, input: question });
    return text ? text.slice(0, 1000) : null;
  } catch (error) {
    log.warn("topic summary failed", error);
    return null;
  }
}
