// The browser entry of @airlock/client ("@airlock/client/web"): gRPC-Web through
// connect-web, and only what gRPC-Web can carry (no client streaming): list tools, GetInfo,
// list/get runs, follow a run (WatchRun) and steer it with CancelRun and DecideApproval,
// watch and decide approvals. Nothing here imports Node.

import { createGrpcWebTransport } from "@connectrpc/connect-web";
import { type AutoApproveOptions, type AutoApproveSummary, type DecisionOptions, type WatchApprovalsOptions, autoApprove, decideApproval, watchApprovals } from "./approvals.js";
import { bearer, type CallOptions, type Context } from "./context.js";
import { getInfo } from "./daemon.js";
import type { ApprovalRequest } from "./gen/airlock/v1/approval_pb.js";
import { type FollowOptions, type ListRunsOptions, type RunHandle, allRuns, cancelRun, getRun, listRuns, watchRun, watchRuns } from "./runs.js";
import { getTool, listTools } from "./tools.js";

export interface WebClientOptions {
  /** The access token sent as `authorization: Bearer …` on every call. */
  token?: string;
  /** The fetch to use (default: the global one). */
  fetch?: typeof globalThis.fetch;
}

/**
 * A gRPC-Web client of the daemon at `baseUrl` (its http(s) origin; in the console's page,
 * `location.origin`). A call that names an Origin other than the daemon's is refused (403).
 */
export function createWebClient(baseUrl: string, options: WebClientOptions = {}): AirlockWebClient {
  const transport = createGrpcWebTransport({
    baseUrl,
    useBinaryFormat: true,
    interceptors: [bearer(options.token)],
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  return new AirlockWebClient({
    transport,
    peer: { endpoint: baseUrl, token: options.token ? { kind: "given" } : { kind: "none" } },
  });
}

/** The gRPC-Web surface of the API. */
export class AirlockWebClient {
  readonly #ctx: Context;

  constructor(ctx: Context) {
    this.#ctx = ctx;
  }

  get endpoint(): string {
    return this.#ctx.peer.endpoint;
  }

  getInfo(options?: CallOptions) {
    return getInfo(this.#ctx, options);
  }

  listTools(options?: CallOptions) {
    return listTools(this.#ctx, options);
  }

  getTool(name: string, options?: CallOptions) {
    return getTool(this.#ctx, name, options);
  }

  getRun(runId: string, options?: CallOptions) {
    return getRun(this.#ctx, runId, options);
  }

  listRuns(options?: ListRunsOptions) {
    return listRuns(this.#ctx, options);
  }

  allRuns(options?: ListRunsOptions) {
    return allRuns(this.#ctx, options);
  }

  watchRuns(options?: ListRunsOptions) {
    return watchRuns(this.#ctx, options);
  }

  /** Follows a run (WatchRun): its events after `afterSeq`, then live ones, deltas included. */
  watchRun(runId: string, afterSeq: number | bigint = 0n, options?: FollowOptions): Promise<RunHandle> {
    return watchRun(this.#ctx, runId, afterSeq, options);
  }

  cancelRun(runId: string, reason = "", options?: CallOptions) {
    return cancelRun(this.#ctx, runId, reason, options);
  }

  watchApprovals(options?: WatchApprovalsOptions) {
    return watchApprovals(this.#ctx, options);
  }

  decideApproval(request: ApprovalRequest, decision: DecisionOptions, options?: CallOptions) {
    return decideApproval(this.#ctx, request, decision, options);
  }

  autoApprove(
    predicate: (request: ApprovalRequest) => boolean | Promise<boolean>,
    options?: AutoApproveOptions,
  ): Promise<AutoApproveSummary> {
    return autoApprove(this.#ctx, predicate, options);
  }
}

export * from "./errors.js";
export type { CallOptions } from "./context.js";
export { RunHandle, type FollowOptions, type ListRunsOptions } from "./runs.js";
export { decisionFor, type DecisionOptions, type AutoApproveOptions, type AutoApproveSummary, type WatchApprovalsOptions } from "./approvals.js";
export * from "./types.js";
