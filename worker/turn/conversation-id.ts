// SPEC "Conversation identifiers": clients see 48 hex characters; the backend form adds `conv_`.
//
// The ids Parley mints also say where their conversation is, so that whatever a client can do right
// after an answer reaches the conversation's Durable Object directly, without a lookup in the record
// store (which is fed after the answer):
// - a new conversation id is 20 random hex characters (its locator) followed by 28 derived from them;
// - a request id (streaming_query's, for interrupts) is a UUID of version 8 carrying that locator,
//   plus 42 random bits of its own;
// - a response id is `resp_` + the conversation id + 16 random hex characters.
// Conversations created by earlier releases have fully random ids: their request ids are random
// UUIDs (version 4) registered in the record store, and their older response ids are found there.
import { createHash } from "node:crypto";

const NORMALIZED = /^[0-9a-f]{48}$/;
const BACKEND_PREFIX = "conv_";
const LOCATOR_HEX = 20;
const RESPONSE_ID = /^resp_([0-9a-f]{48})[0-9a-f]{16}$/;
const UUID_V8 = /^([0-9a-f]{8})-([0-9a-f]{4})-8([0-9a-f]{3})-[89ab]([0-9a-f]{3})-([0-9a-f]{2})[0-9a-f]{10}$/;

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));

/** `bytes` random bytes as lowercase hex: the body of every id the gateway makes up. */
export function randomHex(bytes: number): string {
  let hex = "";
  for (const byte of crypto.getRandomValues(new Uint8Array(bytes))) hex += HEX[byte];
  return hex;
}

/**
 * Conversation ids derived lately, by locator: every turn checks its conversation's id, and a
 * lookup costs less than a hash. Plain strings, bounded (emptied when full).
 */
const derived = new Map<string, string>();
const DERIVED_MAX = 4096;

/** The conversation id a locator stands for. */
function fromLocator(locator: string): string {
  let id = derived.get(locator);
  if (id === undefined) {
    id = locator + createHash("sha256").update(locator).digest("hex").slice(0, 48 - LOCATOR_HEX);
    if (derived.size >= DERIVED_MAX) derived.clear();
    derived.set(locator, id);
  }
  return id;
}

export function newConversationId(): string {
  return fromLocator(randomHex(LOCATOR_HEX / 2));
}

/** True for ids minted with a locator (not those of earlier releases). */
function isLocatable(conversationId: string): boolean {
  return isNormalizedId(conversationId) && fromLocator(conversationId.slice(0, LOCATOR_HEX)) === conversationId;
}

/** A request id for a turn of this conversation: one that leads back to it when it can. */
export function newRequestId(conversationId: string): string {
  if (!isLocatable(conversationId)) return crypto.randomUUID();
  const l = conversationId.slice(0, LOCATOR_HEX);
  const own = randomHex(6);
  const variant = "89ab"[parseInt(own[0]!, 16) % 4];
  return `${l.slice(0, 8)}-${l.slice(8, 12)}-8${l.slice(12, 15)}-${variant}${l.slice(15, 18)}-${l.slice(18, 20)}${own.slice(1, 11)}`;
}

/** The conversation a request id leads to; null for request ids that carry none (version 4). */
export function conversationOfRequest(requestId: string): string | null {
  const match = UUID_V8.exec(requestId.toLowerCase());
  return match ? fromLocator(match.slice(1, 6).join("")) : null;
}

export function newResponseId(conversationId: string): string {
  return `resp_${conversationId}${randomHex(8)}`;
}

/** The conversation a Parley response id belongs to; null for ids of other origin. */
export function conversationOfResponse(responseId: string): string | null {
  return RESPONSE_ID.exec(responseId)?.[1] ?? null;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** A UUID: a form of conversation id the original system accepts and Parley never makes (never found here). */
export function isUuid(id: string): boolean {
  return UUID.test(id);
}

export function isNormalizedId(id: string): boolean {
  return NORMALIZED.test(id);
}

export function toBackendId(id: string): string {
  return BACKEND_PREFIX + id;
}

/** Accepts either form (the responses endpoint does); null when it is neither. */
export function normalizeAnyForm(id: string): string | null {
  const bare = id.startsWith(BACKEND_PREFIX) ? id.slice(BACKEND_PREFIX.length) : id;
  return isNormalizedId(bare) ? bare : null;
}

/**
 * Besides a UUID, the original system's check accepts (UPSTREAM "POST /v1/feedback") 48 hex
 * characters of either case (it parses them as a number), after a lower-case `conv_` prefix or none.
 */
const HEX_OF_EITHER_CASE = /^(?:conv_)?[0-9a-fA-F]{48}$/;

/**
 * A conversation id in a form the original system accepts where it checks the form (feedback, the
 * responses endpoint's `conversation`): as SPEC stores it (48 hex, a `conv_` prefix removed), or
 * another accepted form kept as given, as the original looks it up (Parley never makes one: its
 * ids are lower-case hex, so it is never found). Null for any other form: "Improper conversation ID".
 */
export function properConversationId(id: string): string | null {
  return normalizeAnyForm(id) ?? (isUuid(id) || HEX_OF_EITHER_CASE.test(id) ? id : null);
}
