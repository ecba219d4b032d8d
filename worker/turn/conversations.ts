// Which conversation a turn belongs to, with SPEC's identifier and ownership rules.
import type { AuthContext } from "../auth/types.ts";
import { errors } from "../errors.ts";
import type { ConversationRecord, Store } from "../storage/store.ts";
import { isNormalizedId, newConversationId } from "./conversation-id.ts";
import { conversationForbidden } from "./engine.ts";

export interface ConversationTarget {
  id: string;
  isNew: boolean;
  record: ConversationRecord | null;
}

/** A normalized id names an existing conversation of this user; none starts a new one. */
export async function targetConversation(store: Store, auth: AuthContext, id: string | null | undefined): Promise<ConversationTarget> {
  if (id === null || id === undefined) return { id: newConversationId(), isNew: true, record: null };
  return { id, isNew: false, record: await ownedConversation(store, auth, id) };
}

/** The record of a conversation the user owns: 404 when the id is malformed or unknown, 403 when another user's. */
export async function ownedConversation(store: Store, auth: AuthContext, id: string): Promise<ConversationRecord> {
  const record = isNormalizedId(id) ? await store.conversations.get(id) : null;
  if (!record) throw errors.notFound("Conversation", id);
  if (record.userId !== auth.userId) throw conversationForbidden(auth.userId, id);
  return record;
}
