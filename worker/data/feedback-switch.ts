// Whether feedback is accepted: user_data_collection.feedback_enabled, switched at run time by
// PUT /v1/feedback/status. The original system flips a flag in its process, so each worker answers
// differently and a restart forgets it; here the switch is a row of the record store's settings,
// which every instance reads, and it survives restarts.
//
// The row remembers the configured value it overrode. When an operator later changes
// feedback_enabled in the configuration, that newer decision wins: the first check that sees the
// configuration differ from the value the switch was set under clears the switch, so changing the
// configuration back later does not revive an old PUT. Until then the last PUT stands. A change and
// its undoing that no check saw in between (no request read the switch meanwhile) leave no trace
// the switch could see, so the PUT still stands after them. While instances run with different
// values (a rollout), a check on either side clears a switch set under the other.
import * as z from "zod";
import type { UserDataCollectionConfig } from "../config/schema.ts";
import type { Store } from "../storage/store.ts";

export const FEEDBACK_SWITCH_SETTING = "feedback.enabled";

const SwitchSchema = z.object({
  enabled: z.boolean(),
  /** feedback_enabled in the configuration when the switch was set. */
  configured: z.boolean(),
  updated_by: z.string(),
  updated_at: z.string(),
});

type Settings = Pick<Store["settings"], "get" | "set" | "clear">;

function parseSwitch(text: string): z.output<typeof SwitchSchema> | null {
  try {
    const parsed = SwitchSchema.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** Feedback is accepted only where it can be stored: feedback_storage must be configured. */
export async function feedbackEnabled(settings: Settings, collection: UserDataCollectionConfig): Promise<boolean> {
  if (collection.feedback_storage === undefined) return false;
  const text = await settings.get(FEEDBACK_SWITCH_SETTING);
  const stored = text === null ? null : parseSwitch(text);
  if (text === null || stored === null) return collection.feedback_enabled;
  if (stored.configured === collection.feedback_enabled) return stored.enabled;
  // The configuration changed since the switch was set. Only the value read is cleared: a PUT made
  // meanwhile is the newer decision and stays.
  await settings.clear(FEEDBACK_SWITCH_SETTING, text);
  return collection.feedback_enabled;
}

export interface FeedbackSwitchChange {
  previous: boolean;
  updated: boolean;
  at: Date;
}

/**
 * Sets the switch. Turning feedback on where feedback_storage is not configured is refused by the
 * caller (there would be nowhere to store it); this function only records.
 */
export async function setFeedbackEnabled(
  settings: Settings,
  collection: UserDataCollectionConfig,
  enabled: boolean,
  userId: string,
  at = new Date(),
): Promise<FeedbackSwitchChange> {
  const previous = await feedbackEnabled(settings, collection);
  const value: z.input<typeof SwitchSchema> = { enabled, configured: collection.feedback_enabled, updated_by: userId, updated_at: at.toISOString() };
  await settings.set(FEEDBACK_SWITCH_SETTING, JSON.stringify(value));
  return { previous, updated: enabled, at };
}
