// A new conversation's topic summary: a short backend call of its own, run beside the turn.
import type { Runtime } from "../runtime.ts";
import type { ModelInfo } from "./models.ts";

const TOPIC_SUMMARY_INSTRUCTIONS =
  "Write a topic summary of the user's question: at most five words, no punctuation at the end, nothing else.";

export async function generateTopicSummary(rt: Runtime, model: ModelInfo, question: string): Promise<string | null> {
  try {
    const response = await rt.backend.responses.create({
      model: model.identifier,
      instructions: TOPIC_SUMMARY_INSTRUCTIONS,
      input: question,
      store: false,
    });
    const text = response.output_text.trim();
    return text ? text.slice(0, 1000) : null;
  } catch (error) {
    console.warn("topic summary failed", error);
    return null;
  }
}
