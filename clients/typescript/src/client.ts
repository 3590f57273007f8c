// AirlockClient: one connection to one daemon and every call of its API, each delegated to
// the module of its concern (tools, runs, approvals, sessions, changes, policy, daemon).
// Made by connect() (connect.ts); nothing here imports Node.

import type { DescMessage, DescMethodUnary, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import {
  type ApprovalConsole,
  type AutoApproveOptions,
  type AutoApproveSummary,
  type DecisionOptions,
  type WatchApprovalsOptions,
  approvals,
  autoApprove,
  decideApproval,
  watchApprovals,
} from "./approvals.js";
import {
  type ForkRunOptions,
  type ListChangesOptions,
  type RevertOptions,
  forkRun,
  listChanges,
  readBlob,
  revertRun,
} from "./changes.js";
import { type CallOptions, type Context, call } from "./context.js";
import { collectGarbage, getInfo } from "./daemon.js";
import type { TokenSource } from "./errors.js";
import type { RunInfo, Session } from "./gen/airlock/v1/agent_pb.js";
import type { ApprovalRequest } from "./gen/airlock/v1/approval_pb.js";
import type { DaemonInfo } from "./gen/airlock/v1/daemon_pb.js";
import { type CheckPolicyOptions, checkPolicy, listPolicyRules, revokeGrant } from "./policy.js";
import {
  type FollowOptions,
  type ListRunsOptions,
  type RunHandle,
  type StartRunOptions,
  allRuns,
  attachRun,
  cancelRun,
  getCassette,
  getRun,
  getTrace,
  listRuns,
  startRun,
  watchRun,
  watchRuns,
} from "./runs.js";
import {
  type CreateSessionOptions,
  type ListSessionsOptions,
  allSessions,
  createSession,
  getSession,
  listSessions,
} from "./sessions.js";
import {
  type ExecuteOptions,
  type Execution,
  type ReadAllOutputOptions,
  type ReadOutputOptions,
  cancelExecution,
  execute,
  getTool,
  listTools,
  readAllOutput,
  readOutput,
} from "./tools.js";

/** A connection to one daemon, over gRPC (HTTP/2). Made by connect(); close() it when done. */
export class AirlockClient {
  readonly #ctx: Context;
  readonly #close: () => void;
  /** What the daemon said about itself when the client connected (GetInfo), if it was asked. */
  readonly info: DaemonInfo | undefined;

  constructor(ctx: Context, close: () => void, info?: DaemonInfo) {
    this.#ctx = ctx;
    this.#close = close;
    this.info = info;
  }

  /** The address this client is connected to. */
  get endpoint(): string {
    return this.#ctx.peer.endpoint;
  }

  /** Where the token this client sends came from. */
  get tokenSource(): TokenSource {
    return this.#ctx.peer.token;
  }

  /** Closes the connection; calls in flight fail. */
  close(): void {
    this.#close();
  }

  /**
   * Any unary call of the API by its method descriptor (e.g. `Agent.method.getRun`), with the
   * token and error mapping of every other call: for RPCs newer than this client's wrappers.
   */
  unary<I extends DescMessage, O extends DescMessage>(
    method: DescMethodUnary<I, O>,
    request: MessageInitShape<I>,
    options?: CallOptions,
  ): Promise<MessageShape<O>> {
    return call(this.#ctx, method, request, options);
  }

  // Daemon

  /** The daemon's version, the caller's tenant, the workspace roots it may name, and its limits. */
  getInfo(options?: CallOptions) {
    return getInfo(this.#ctx, options);
  }

  /** Deletes what is older than `olderThanMs` (0: the configured retention). The operator's call. */
  collectGarbage(olderThanMs: number | bigint = 0, options?: CallOptions) {
    return collectGarbage(this.#ctx, olderThanMs, options);
  }

  // Tools

  /** Every tool the daemon serves. */
  listTools(options?: CallOptions) {
    return listTools(this.#ctx, options);
  }

  /** One tool by name; NotFoundError (field `tool`) when the daemon serves none of that name. */
  getTool(name: string, options?: CallOptions) {
    return getTool(this.#ctx, name, options);
  }

  /** Runs one tool: `for await` its events, or await `result()`. */
  execute(tool: string, args: Record<string, unknown> | string, options?: ExecuteOptions): Promise<Execution> {
    return execute(this.#ctx, tool, args, options);
  }

  /** One page of the whole output kept for a call whose result was cut. */
  readOutput(executionId: string, options?: ReadOutputOptions) {
    return readOutput(this.#ctx, executionId, options);
  }

  /** The whole output kept for a call, every page read, checked against its digest. */
  readAllOutput(executionId: string, options?: ReadAllOutputOptions) {
    return readAllOutput(this.#ctx, executionId, options);
  }

  /** Stops a running call; its result is then CANCELLED. */
  cancelExecution(executionId: string, options?: CallOptions) {
    return cancelExecution(this.#ctx, executionId, options);
  }

  // Runs

  /** Starts an agent run on the Run stream; the handle follows and steers it. */
  startRun(options: StartRunOptions): Promise<RunHandle> {
    return startRun(this.#ctx, options);
  }

  /** Follows a run on the Run stream from after event `afterSeq` (0: all of them). */
  attachRun(runId: string, afterSeq: number | bigint = 0n, options?: FollowOptions): Promise<RunHandle> {
    return attachRun(this.#ctx, runId, afterSeq, options);
  }

  /** Follows a run with WatchRun (server stream); decisions and cancel go as unary calls. */
  watchRun(runId: string, afterSeq: number | bigint = 0n, options?: FollowOptions): Promise<RunHandle> {
    return watchRun(this.#ctx, runId, afterSeq, options);
  }

  getRun(runId: string, options?: CallOptions): Promise<RunInfo> {
    return getRun(this.#ctx, runId, options);
  }

  /** One page of runs, newest first. */
  listRuns(options?: ListRunsOptions) {
    return listRuns(this.#ctx, options);
  }

  /** Every run, newest first, page after page. */
  allRuns(options?: ListRunsOptions) {
    return allRuns(this.#ctx, options);
  }

  /** A live list of runs. */
  watchRuns(options?: ListRunsOptions) {
    return watchRuns(this.#ctx, options);
  }

  getTrace(runId: string, options?: CallOptions) {
    return getTrace(this.#ctx, runId, options);
  }

  cancelRun(runId: string, reason = "", options?: CallOptions) {
    return cancelRun(this.#ctx, runId, reason, options);
  }

  getCassette(runId: string, options?: CallOptions) {
    return getCassette(this.#ctx, runId, options);
  }

  // Approvals

  /** An approver console: pending requests, then updates; decide() answers any of them. */
  approvals(options?: CallOptions): Promise<ApprovalConsole> {
    return approvals(this.#ctx, options);
  }

  /** Pending requests, then every change to them (server stream). */
  watchApprovals(options?: WatchApprovalsOptions) {
    return watchApprovals(this.#ctx, options);
  }

  /** Answers one pending request with one call, bound to its digest. */
  decideApproval(request: ApprovalRequest, decision: DecisionOptions, options?: CallOptions) {
    return decideApproval(this.#ctx, request, decision, options);
  }

  /** Approves what `predicate` accepts, denies the rest with a reason, until `signal` fires. */
  autoApprove(
    predicate: (request: ApprovalRequest) => boolean | Promise<boolean>,
    options?: AutoApproveOptions,
  ): Promise<AutoApproveSummary> {
    return autoApprove(this.#ctx, predicate, options);
  }

  // Sessions

  createSession(options?: CreateSessionOptions): Promise<Session> {
    return createSession(this.#ctx, options);
  }

  getSession(sessionId: string, options?: CallOptions): Promise<Session> {
    return getSession(this.#ctx, sessionId, options);
  }

  listSessions(options?: ListSessionsOptions) {
    return listSessions(this.#ctx, options);
  }

  allSessions(options?: ListSessionsOptions) {
    return allSessions(this.#ctx, options);
  }

  // Changes

  /** A run's change sets, step by step, all pages joined. */
  listChanges(runId: string, options?: ListChangesOptions) {
    return listChanges(this.#ctx, runId, options);
  }

  readBlob(runId: string, digest: string, options?: CallOptions) {
    return readBlob(this.#ctx, runId, digest, options);
  }

  /** Puts a finished run's workspace back as it was before step `toStep`. */
  revertRun(runId: string, toStep: number, options?: RevertOptions) {
    return revertRun(this.#ctx, runId, toStep, options);
  }

  /** Starts a run from `runId`'s conversation up to a step; follow it with attachRun. */
  forkRun(runId: string, options?: ForkRunOptions) {
    return forkRun(this.#ctx, runId, options);
  }

  // Policy

  checkPolicy(tool: string, args: Record<string, unknown> | string, options?: CheckPolicyOptions) {
    return checkPolicy(this.#ctx, tool, args, options);
  }

  listPolicyRules(sessionId = "", options?: CallOptions) {
    return listPolicyRules(this.#ctx, sessionId, options);
  }

  revokeGrant(sessionId: string, grantId: string, options?: CallOptions) {
    return revokeGrant(this.#ctx, sessionId, grantId, options);
  }
}
