// User feedback on an answer (SPEC "Feedback record", UPSTREAM "POST /v1/feedback"): the request
// as the original system validates it, and the record stored as <feedback_storage>/<uuid>.json.
import * as z from "zod";
import { properConversationId } from "../turn/conversation-id.ts";
import { writeDataObject, type DataDeps } from "./data-object-writer.ts";
import { feedbackKey } from "./object-keys.ts";

export const FEEDBACK_CATEGORIES = ["incorrect", "not_relevant", "incomplete", "outdated_information", "unsafe", "other"] as const;
export const MAX_USER_FEEDBACK = 4096;

export const FeedbackRequestSchema = z
  .strictObject({
    conversation_id: z.string().transform((id, ctx) => {
      const normalized = properConversationId(id);
      if (normalized === null) {
        ctx.addIssue({ code: "custom", message: `Improper conversation ID ${id}` });
        return z.NEVER;
      }
      return normalized;
    }),
    user_question: z.string(),
    llm_response: z.string(),
    sentiment: z
      .number()
      .nullish()
      .superRefine((value, ctx) => {
        if (value !== null && value !== undefined && value !== -1 && value !== 1) {
          ctx.addIssue({ code: "custom", message: `Improper sentiment value of ${value}, needs to be -1 or 1` });
        }
      }),
    user_feedback: z.string().max(MAX_USER_FEEDBACK, `must be at most ${MAX_USER_FEEDBACK} characters`).nullish(),
    // Repeats are dropped (first occurrence kept); an empty list means none.
    categories: z
      .array(z.enum(FEEDBACK_CATEGORIES))
      .nullish()
      .transform((list) => (list && list.length > 0 ? [...new Set(list)] : null)),
  })
  .superRefine((request, ctx) => {
    const given =
      (request.sentiment !== null && request.sentiment !== undefined) ||
      (request.user_feedback !== null && request.user_feedback !== undefined && request.user_feedback.trim() !== "") ||
      request.categories !== null;
    if (!given) {
      ctx.addIssue({ code: "custom", message: "At least one form of feedback must be provided: 'sentiment', 'user_feedback', or 'categories'" });
    }
  });

export type FeedbackRequest = z.output<typeof FeedbackRequestSchema>;

/** The stored record, in the original system's key order; missing values are null. */
export function feedbackRecord(userId: string, request: FeedbackRequest, at: Date) {
  return {
    user_id: userId,
    timestamp: at.toISOString(),
    conversation_id: request.conversation_id,
    user_question: request.user_question,
    llm_response: request.llm_response,
    sentiment: request.sentiment ?? null,
    user_feedback: request.user_feedback ?? null,
    categories: request.categories,
  };
}

/** Writes the record under `storage`; returns its key. Throws when R2 or the record store fails. */
export async function storeFeedback(deps: DataDeps, storage: string, userId: string, request: FeedbackRequest, at = new Date()): Promise<string> {
  const key = feedbackKey(storage, crypto.randomUUID());
  await writeDataObject(deps, { key, kind: "feedback", body: JSON.stringify(feedbackRecord(userId, request, at)), createdAt: at });
  return key;
}
