// Which conversation a turn belongs to, with SPEC's identifier rules. Whether it exists and whose it
// is, the conversation's Durable Object answers when the turn begins (404 / 403).
import { errors } from "../errors.ts";
import type { Store } from "../storage/store.ts";
import { conversationOfResponse, isNormalizedId, newConversationId, normalizeAnyForm } from "./conversation-id.ts";

export interface ConversationTarget {
  conversationId: string;
  create: boolean;
  /** Continue from this response: the conversation's latest, else a fork from there. */
  previousResponseId?: string;
}

/** Query endpoints: a normalized id continues a conversation; none starts one; anything else is not found. */
export function targetConversation(id: string | null | undefined): ConversationTarget {
  if (id === null || id === undefined) return { conversationId: newConversationId(), create: true };
  if (!isNormalizedId(id)) throw errors.notFound("Conversation", id);
  return { conversationId: id, create: false };
}

/** SPEC "Conversation continuity (responses endpoint)": by conversation (either form), by previous response, or new. */
export async function responsesConversation(
  store: Store,
  request: { conversation?: string | null; previous_response_id?: string | null },
): Promise<ConversationTarget> {
  if (request.conversation) {
    const id = normalizeAnyForm(request.conversation);
    if (!id) throw errors.notFound("Conversation", request.conversation);
    return { conversationId: id, create: false };
  }
  const previous = request.previous_response_id;
  if (previous) {
    // Parley's response ids name their conversation; those of earlier releases are in the record store.
    const id = conversationOfResponse(previous) ?? (await store.responses.get(previous))?.conversationId;
    if (!id) throw errors.notFound("Response", previous);
    return { conversationId: id, create: false, previousResponseId: previous };
  }
  return { conversationId: newConversationId(), create: true };
}
