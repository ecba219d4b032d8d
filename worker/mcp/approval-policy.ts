// Whether a call of an MCP tool waits for a person's approval (a server's require_approval).
import type { ApprovalPolicy } from "./servers.ts";

/**
 * "always" and "never" speak for every tool. With lists, a tool named in `always` needs approval,
 * one named in `never` does not, and a tool named in neither needs it too: a tool the operator did
 * not think of is not run unseen (the Responses API reads its filters the same way).
 */
export function approvalRequired(server: { requireApproval: ApprovalPolicy }, toolName: string): boolean {
  const policy = server.requireApproval;
  if (policy === "always") return true;
  if (policy === "never") return false;
  if (policy.always.includes(toolName)) return true;
  if (policy.never.includes(toolName)) return false;
  return true;
}
