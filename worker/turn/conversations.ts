// Which conversation a turn belongs to, with SPEC's identifier rules. Whether it exists and whose
// it is, the conversation's Durable Object answers when the turn begins (404 / 403).
import { errors } from "../errors.ts";
import type { AuthContext } from "../auth/types.ts";
import type { ConversationRecord, Store } from "../storage/store.ts";
import { isNormalizedId, newConversationId } from "./conversation-id.ts";
import { conversationForbidden } from "./engine.ts";

export interface ConversationTarget {
  id: string;
  isNew: boolean;
}

/** A normalized id continues a conversation; none starts a new one; anything else is not found. */
export function targetConversation(id: string | null | undefined): ConversationTarget {
  if (id === null || id === undefined) return { id: newConversationId(), isNew: true };
  if (!isNormalizedId(id)) throw errors.notFound("Conversation", id);
  return { id, isNew: false };
}

/** The record of a conversation the user owns: 404 when the id is malformed or unknown, 403 when another user's. */
export async function ownedConversation(store: Store, auth: AuthContext, id: string): Promise<ConversationRecord> {
  const record = isNormalizedId(id) ? await store.conversations.get(id) : null;
  if (!record) throw errors.notFound("Conversation", id);
  if (record.userId !== auth.userId) throw conversationForbidden(auth.userId, id);
  return record;
}
