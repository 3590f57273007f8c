// Policy: what the rules would decide for a call and why (running nothing), the rules in
// force layer by layer, and withdrawing a grant a person made. Browser-safe.

import { type Context, type CallOptions, call } from "./context.js";
import { Policy } from "./gen/airlock/v1/policy_pb.js";
import type { ApprovalPolicy } from "./gen/airlock/v1/run_event_pb.js";
import type { PolicyRule, PolicyVerdict } from "./gen/airlock/v1/rules_pb.js";

export interface CheckPolicyOptions extends CallOptions {
  /** Judge the call as a call of this session's runs would be. */
  sessionId?: string;
  /** Absolute; where paths are normalised when no session names one. */
  workspace?: string;
  /** The level no rule speaking falls back to; unset = the session's, else the daemon's. */
  approvalPolicy?: ApprovalPolicy;
  /** A run's rules (TOML, ask and deny only), as StartRun.rules would add. */
  rules?: string;
}

/** What the policy would decide for a call of `tool` with `args`, and every rule behind it. */
export function checkPolicy(
  ctx: Context,
  tool: string,
  args: Record<string, unknown> | string,
  options: CheckPolicyOptions = {},
): Promise<PolicyVerdict> {
  const { signal, timeoutMs, ...rest } = options;
  const argumentsJson = typeof args === "string" ? args : JSON.stringify(args);
  return call(ctx, Policy.method.checkPolicy, { ...rest, tool, argumentsJson }, { signal, timeoutMs });
}

/** The rules in force for the caller's tenant; with `sessionId`, also its own rules and grants. */
export async function listPolicyRules(ctx: Context, sessionId = "", options?: CallOptions): Promise<PolicyRule[]> {
  return (await call(ctx, Policy.method.listPolicyRules, { sessionId }, options)).rules;
}

/** Withdraws grant `grantId` (its first 16 characters will do) of session `sessionId`. */
export async function revokeGrant(
  ctx: Context,
  sessionId: string,
  grantId: string,
  options?: CallOptions,
): Promise<void> {
  await call(ctx, Policy.method.revokeGrant, { sessionId, grantId }, options);
}
