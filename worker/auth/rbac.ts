// Role-based authorization (SPEC "Authentication" 5): an access rule gives a role a list of actions.
// It applies whatever the authentication module (unlike the original system, where noop, k8s and
// api-key-token skip it): a rule that loads always does something.
import { ACTIONS, type Action } from "./actions.ts";
import type { AccessRule } from "./types.ts";

/** The role every user has, whatever the authentication module assigned. */
export const EVERYONE_ROLE = "*";

/**
 * Actions over conversations of other users. Without them SPEC's rule stands (only the owner sees
 * a conversation), so they are never implied by the absence of `authorization`: an access rule
 * must grant them, by name or through `admin`.
 */
const ACTIONS_ON_OTHERS: ReadonlySet<string> = new Set<Action>([
  ACTIONS.listOtherConversations,
  ACTIONS.readOtherConversations,
  ACTIONS.queryOtherConversations,
  ACTIONS.deleteOtherConversations,
]);

/**
 * Whether a user with these roles may perform the action. No rules configured (no `authorization`
 * section, or an empty list of rules, which the original system reads as no RBAC under every
 * module) means authorization is off: everything is allowed except acting on other users'
 * conversations. `admin` grants every action.
 */
export function isAllowed(rules: readonly AccessRule[] | undefined, roles: readonly string[], action: string): boolean {
  if (rules === undefined || rules.length === 0) return !ACTIONS_ON_OTHERS.has(action);
  return rules.some(
    (rule) =>
      (rule.role === EVERYONE_ROLE || roles.includes(rule.role)) &&
      (rule.actions.includes(action as Action) || rule.actions.includes(ACTIONS.admin)),
  );
}

/** What a caller does to a conversation that another user owns. */
export type ConversationOperation = "list" | "read" | "continue" | "update" | "delete";

/**
 * The action each operation on another user's conversation needs (the original system's table):
 * listing them with one's own, reading one, continuing one with a new turn (query, streaming_query,
 * responses, A2A), changing its topic summary, deleting it.
 */
export const OTHERS_ACTION_FOR: Readonly<Record<ConversationOperation, Action>> = {
  list: ACTIONS.listOtherConversations,
  read: ACTIONS.readOtherConversations,
  continue: ACTIONS.readOtherConversations,
  update: ACTIONS.queryOtherConversations,
  delete: ACTIONS.deleteOtherConversations,
};

/** Whether these roles may perform `operation` on conversations owned by other users. */
export function mayActOnOthers(rules: readonly AccessRule[] | undefined, roles: readonly string[], operation: ConversationOperation): boolean {
  return isAllowed(rules, roles, OTHERS_ACTION_FOR[operation]);
}
