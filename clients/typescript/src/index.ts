// The Node entry of @airlock/client: connect() over gRPC (HTTP/2, TLS, Unix socket) and the
// whole airlock.v1 surface. Browsers use "@airlock/client/web" (gRPC-Web) instead.

export { connect, type ConnectOptions } from "./connect.js";
export { AirlockClient } from "./client.js";
export { DEFAULT_ENDPOINT, MAX_MESSAGE_BYTES, isLocalEndpoint, parseEndpoint, type Endpoint } from "./endpoint.js";
export { defaultStateDir, discoverToken, TOKEN_FILE } from "./token.js";
export * from "./errors.js";
export type { CallOptions } from "./context.js";
export {
  Execution,
  type ExecutionEvent,
  type ExecuteOptions,
  type ReadOutputOptions,
  type ReadAllOutputOptions,
} from "./tools.js";
export { RunHandle, type StartRunOptions, type FollowOptions, type ListRunsOptions } from "./runs.js";
export {
  ApprovalConsole,
  decisionFor,
  type DecisionOptions,
  type AutoApproveOptions,
  type AutoApproveSummary,
  type WatchApprovalsOptions,
} from "./approvals.js";
export type { CreateSessionOptions, ListSessionsOptions } from "./sessions.js";
export type { ListChangesOptions, RevertOptions, ForkRunOptions } from "./changes.js";
export type { CheckPolicyOptions } from "./policy.js";
export * from "./types.js";
