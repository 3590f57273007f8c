// Approvals: answering the questions runs (and tool calls with requireApproval) put to a
// person — the bidirectional approver console, its server half (WatchApprovals) with the
// unary DecideApproval, and autoApprove, a policy written as a predicate. Every decision is
// bound to the request's approval_id and digest. Browser-safe: the console needs the Node
// entry (client streaming); watchApprovals, decideApproval and autoApprove work on both.

import type { MessageInitShape } from "@bufbuild/protobuf";
import { type Context, type CallOptions, call, iterate, open, once, type OpenStream } from "./context.js";
import { AirlockError, NotFoundError, FailedPreconditionError, StreamClosedError, Code } from "./errors.js";
import {
  type ApprovalDecisionSchema,
  type ApprovalRequest,
  ApprovalState,
  Decision,
} from "./gen/airlock/v1/approval_pb.js";
import { Agent } from "./gen/airlock/v1/agent_pb.js";
import { AsyncQueue, sleep } from "./queue.js";

export type ApprovalDecisionInit = MessageInitShape<typeof ApprovalDecisionSchema>;

/** What to answer an approval request. */
export interface DecisionOptions {
  /** Run the call (true), or refuse it (false). */
  approve: boolean;
  /** Approve this call and the same one for the rest of the session (APPROVE_SESSION). */
  forSession?: boolean;
  /** For a denial: what the model is told. */
  reason?: string;
  /** With forSession, for a command line: grant every command starting with these words. */
  grantPrefix?: string[];
}

/** The ApprovalDecision answering `request`, bound to its id and digest. */
export function decisionFor(request: ApprovalRequest, options: DecisionOptions): ApprovalDecisionInit {
  const decision = options.approve
    ? options.forSession
      ? Decision.APPROVE_SESSION
      : Decision.APPROVE_ONCE
    : Decision.DENY;
  return {
    approvalId: request.approvalId,
    digest: request.digest,
    decision,
    reason: options.reason ?? "",
    grantPrefix: options.grantPrefix ?? [],
  };
}

/**
 * Answers one pending request with one call: NotFoundError when nothing of the caller's is
 * pending under its id (already answered), FailedPreconditionError when the digest names
 * another call or the deadline passed.
 */
export async function decideApproval(
  ctx: Context,
  request: ApprovalRequest,
  decision: DecisionOptions,
  options?: CallOptions,
): Promise<void> {
  await call(ctx, Agent.method.decideApproval, decisionFor(request, decision), options);
}

export interface WatchApprovalsOptions extends CallOptions {
  /** Only the requests of this run. */
  runId?: string;
}

/**
 * Every pending request the caller may answer (those already waiting first), then every
 * change to them, until the signal fires or the loop breaks.
 */
export async function watchApprovals(
  ctx: Context,
  options: WatchApprovalsOptions = {},
): Promise<AsyncGenerator<ApprovalRequest, void, undefined>> {
  const stream = await open(ctx, Agent.method.watchApprovals, once({ runId: options.runId ?? "" }), options);
  return iterate(stream);
}

/**
 * An approver console (Agent.Approvals): every request pending now, then every new request
 * and every update on one, for all runs; decisions sent on it answer for any run. A decision
 * the daemon refuses comes back as an update in state DECISION_REJECTED with `detail`.
 */
export class ApprovalConsole implements AsyncIterable<ApprovalRequest> {
  #ctx: Context;
  #stream: OpenStream<ApprovalRequest>;
  #decisions: AsyncQueue<ApprovalDecisionInit>;
  #closed = false;

  /** @internal Made by approvals(). */
  constructor(ctx: Context, stream: OpenStream<ApprovalRequest>, decisions: AsyncQueue<ApprovalDecisionInit>) {
    this.#ctx = ctx;
    this.#stream = stream;
    this.#decisions = decisions;
  }

  /** The next request or update; undefined when the daemon ends the stream. */
  async next(): Promise<ApprovalRequest | undefined> {
    if (this.#closed) return undefined;
    try {
      const result = await this.#stream.next();
      if (!result.done) return result.value;
      // The stream is over: a decision sent now would go nowhere, so decide() says so.
      this.#decisions.end();
      return undefined;
    } catch (error) {
      this.#decisions.end();
      if (this.#closed) return undefined;
      throw error;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ApprovalRequest, void, undefined> {
    for (;;) {
      const request = await this.next();
      if (!request) return;
      yield request;
    }
  }

  /** Only the requests still waiting for an answer (state PENDING). */
  async *pending(): AsyncGenerator<ApprovalRequest, void, undefined> {
    for await (const request of this) {
      if (request.state === ApprovalState.PENDING) yield request;
    }
  }

  /** Answers a request of any run, bound to its id and digest. */
  decide(request: ApprovalRequest, decision: DecisionOptions): void {
    if (!this.#decisions.push(decisionFor(request, decision))) {
      throw new StreamClosedError(
        `the approver console to airlockd at ${this.#ctx.peer.endpoint} is closed; the decision was not sent`,
        { code: Code.FailedPrecondition, endpoint: this.#ctx.peer.endpoint },
      );
    }
  }

  /** Closes the console. */
  close(): void {
    this.#closed = true;
    this.#decisions.end();
    this.#stream.abort();
  }
}

/** Opens an approver console (bidirectional: the Node entry only). */
export async function approvals(ctx: Context, options: CallOptions = {}): Promise<ApprovalConsole> {
  const decisions = new AsyncQueue<ApprovalDecisionInit>();
  const stream = await open(ctx, Agent.method.approvals, decisions, options);
  return new ApprovalConsole(ctx, stream, decisions);
}

/** What autoApprove did. */
export interface AutoApproveSummary {
  approved: ApprovalRequest[];
  denied: ApprovalRequest[];
}

export interface AutoApproveOptions {
  /** Stops approving when it fires; autoApprove then resolves. */
  signal?: AbortSignal;
  /** Only the requests of this run. */
  runId?: string;
  /** What a denied call's model is told; a function of the request, or a fixed text. */
  reason?: string | ((request: ApprovalRequest) => string);
  /** Approve for the session rather than once. */
  forSession?: boolean;
  /** Called after each decision. */
  onDecision?: (request: ApprovalRequest, approved: boolean) => void;
  /** Bounded retries when the watch stream breaks (default 5). */
  retries?: number;
}

/**
 * Approves the pending requests `predicate` accepts and denies the rest with a reason, until
 * `signal` fires. Uses WatchApprovals and DecideApproval, so it works over gRPC-Web too. A
 * request another approver answered first is skipped.
 */
export async function autoApprove(
  ctx: Context,
  predicate: (request: ApprovalRequest) => boolean | Promise<boolean>,
  options: AutoApproveOptions = {},
): Promise<AutoApproveSummary> {
  const summary: AutoApproveSummary = { approved: [], denied: [] };
  const answered = new Set<string>();
  const signal = options.signal;
  let failures = 0;
  while (!signal?.aborted) {
    try {
      const requests = await watchApprovals(ctx, { runId: options.runId ?? "", signal });
      for await (const request of requests) {
        failures = 0;
        if (request.state !== ApprovalState.PENDING || answered.has(request.approvalId)) continue;
        // The daemon filters by run; a request of another run is never this approver's to answer.
        if (options.runId && request.runId !== options.runId) continue;
        answered.add(request.approvalId);
        const approve = await predicate(request);
        const reason = approve
          ? ""
          : typeof options.reason === "function"
            ? options.reason(request)
            : (options.reason ?? "denied by the approver's policy");
        try {
          await decideApproval(ctx, request, { approve, reason, forSession: options.forSession ?? false });
        } catch (error) {
          // Answered elsewhere or expired meanwhile: nothing left to decide.
          if (error instanceof NotFoundError || error instanceof FailedPreconditionError) continue;
          // Not answered: when the watch is opened again, the request (still pending) comes
          // back and is decided then.
          answered.delete(request.approvalId);
          throw error;
        }
        (approve ? summary.approved : summary.denied).push(request);
        options.onDecision?.(request, approve);
      }
      return summary;
    } catch (error) {
      if (signal?.aborted) break;
      // The predicate's own failure (or onDecision's) is the caller's, as it was thrown.
      if (!(error instanceof AirlockError)) throw error;
      if (!error.retryable || ++failures > (options.retries ?? 5)) throw error;
      await sleep(Math.min(2000, 100 * 2 ** failures), signal);
    }
  }
  return summary;
}
