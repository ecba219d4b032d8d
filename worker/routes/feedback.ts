// Feedback (SPEC "Feedback record", UPSTREAM "POST /v1/feedback", "Feedback status"):
// POST /v1/feedback and the unversioned POST /feedback store a user's feedback on an answer;
// GET /v1/feedback/status (public) reads whether feedback is accepted and PUT
// /v1/feedback/status (admin) switches it for every instance (see worker/data/feedback-switch.ts).
import { Hono, type MiddlewareHandler } from "hono";
import * as z from "zod";
import type { AppEnv } from "../app-env.ts";
import { ACTIONS } from "../auth/actions.ts";
import { ApiError, errors } from "../errors.ts";
import { guard } from "../middleware.ts";
import { isNormalizedId } from "../turn/conversation-id.ts";
import { conversationStub } from "../turn/turn-client.ts";
import { FeedbackRequestSchema, storeFeedback } from "../data/feedback.ts";
import { feedbackEnabled, setFeedbackEnabled } from "../data/feedback-switch.ts";
import { storagePrefix } from "../data/object-keys.ts";
import { readJson } from "../validation.ts";
import { turnBodyLimit } from "./streams.ts";
import { log } from "../log.ts";

export const feedback = new Hono<AppEnv>();

const feedbackDisabled = () => new ApiError(403, "Storing feedback is disabled", "Storing feedback is disabled.");
const storeFailed = (storage: string) => new ApiError(500, "Failed to store feedback", `Failed to store feedback under ${storagePrefix(storage) || "/"}`);

// The original system defaults a missing status to false.
export const StatusUpdateSchema = z.strictObject({ status: z.boolean().default(false) });

/** Switched off is said before the body is looked at (its size too), as the original system does. */
function acceptingFeedback(): MiddlewareHandler<AppEnv> {
  return async function acceptingFeedback(c, next) {
    if (!(await feedbackEnabled(c.get("store").settings, c.get("rt").config.user_data_collection))) throw feedbackDisabled();
    await next();
  };
}

for (const path of ["/v1/feedback", "/feedback"]) {
  // A feedback request carries a question and its answer, so it takes the turn endpoints' limit
  // (2 MiB, README "Feedback, transcripts and export"): each one becomes a single R2 object that the
  // exporter reads whole into a tarball.
  feedback.post(path, guard(ACTIONS.feedback), acceptingFeedback(), turnBodyLimit(), async (c) => {
    const store = c.get("store");
    const collection = c.get("rt").config.user_data_collection;
    // feedbackEnabled is false without feedback_storage; this only tells the type so.
    if (collection.feedback_storage === undefined) throw feedbackDisabled();
    const request = await readJson(c, FeedbackRequestSchema);
    const { userId } = c.get("auth");
    // The conversation's own Durable Object answers: feedback right after an answer finds it.
    const access = isNormalizedId(request.conversation_id) ? await conversationStub(c.env, request.conversation_id).checkAccess(userId) : "not_found";
    if (access === "not_found") throw errors.notFound("Conversation", request.conversation_id);
    if (access === "forbidden") {
      throw errors.actionForbidden(`User ${userId} does not have permission to submit feedback for conversation with ID ${request.conversation_id}`);
    }
    try {
      await storeFeedback({ bucket: c.env.DATA, sql: store.sql }, collection.feedback_storage, userId, request);
    } catch (error) {
      log.error("feedback: could not be stored", error);
      throw storeFailed(collection.feedback_storage);
    }
    return c.json({ response: "feedback received" });
  });
}

// Public, as in the original system (UPSTREAM §8, SPEC action "none"): it tells only whether feedback is on.
feedback.get("/v1/feedback/status", async (c) => {
  const enabled = await feedbackEnabled(c.get("store").settings, c.get("rt").config.user_data_collection);
  return c.json({ functionality: "feedback", status: { enabled } });
});

feedback.put("/v1/feedback/status", guard(ACTIONS.admin), async (c) => {
  const { status } = await readJson(c, StatusUpdateSchema);
  const collection = c.get("rt").config.user_data_collection;
  if (status && collection.feedback_storage === undefined) {
    throw errors.conflict("Feedback cannot be enabled", "user_data_collection.feedback_storage is not configured, so there is nowhere to store feedback");
  }
  const { userId } = c.get("auth");
  const change = await setFeedbackEnabled(c.get("store").settings, collection, status, userId);
  return c.json({
    status: { previous_status: change.previous, updated_status: change.updated, updated_by: userId, timestamp: change.at.toISOString() },
  });
});
