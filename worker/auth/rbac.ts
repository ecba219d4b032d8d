// Role-based authorization (SPEC "Authentication" 5): an access rule gives a role a list of actions.
import type { AccessRule } from "./types.ts";

/** The role every user has, whatever the authentication module assigned. */
export const EVERYONE_ROLE = "*";
/** The action that implies every other action. It is an action, not a role. */
export const ADMIN_ACTION = "admin";

/**
 * Whether a user with these roles may perform the action. No rules configured (undefined) means
 * authorization is off and everything is allowed; an empty list of rules allows nothing.
 */
export function isAllowed(rules: readonly AccessRule[] | undefined, roles: readonly string[], action: string): boolean {
  if (rules === undefined) return true;
  return rules.some(
    (rule) =>
      (rule.role === EVERYONE_ROLE || roles.includes(rule.role)) &&
      (rule.actions.includes(action) || rule.actions.includes(ADMIN_ACTION)),
  );
}
