// Runs: start an agent run on the bidirectional Agent.Run stream (or follow one with
// WatchRun), and the RunHandle that reads its numbered events (deltas kept apart from
// committed events), answers its approvals, cancels it, sends it input, and re-attaches from
// the last committed event when the stream drops before run_finished. Also the bookkeeping
// calls on runs: getRun, listRuns, watchRuns, getTrace, cancelRun, getCassette.
// Browser-safe: the Run stream needs the Node entry; WatchRun works over gRPC-Web.

import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { type Context, type CallOptions, allPages, call, iterate, open, once, type OpenStream } from "./context.js";
import { type DecisionOptions, decideApproval, decisionFor } from "./approvals.js";
import {
  AirlockError,
  CanceledError,
  ConnectionLostError,
  IncompleteRunError,
  StreamClosedError,
  UnavailableError,
  UnreachableError,
  Code,
} from "./errors.js";
import type { ApprovalRequest } from "./gen/airlock/v1/approval_pb.js";
import type { GetCassetteResponse } from "./gen/airlock/v1/cassette_pb.js";
import {
  Agent,
  type ListRunsRequestSchema,
  type ListRunsResponse,
  type ModelConfigSchema,
  type RunInfo,
  type RunRequestSchema,
  RunState,
  type StartRunSchema,
} from "./gen/airlock/v1/agent_pb.js";
import {
  ApprovalPolicy,
  type BudgetsSchema,
  type RunEvent,
  type RunFinished,
  RunFinishedSchema,
} from "./gen/airlock/v1/run_event_pb.js";
import type { Trace } from "./gen/airlock/v1/trace_pb.js";
import { AsyncQueue, deferred, sleep } from "./queue.js";

type RunRequestInit = MessageInitShape<typeof RunRequestSchema>;

/** Every field of StartRun; `model` may be a model name alone. */
export interface StartRunOptions extends FollowOptions {
  /** What the user asks for. */
  input: string;
  /** Absolute workspace path on the daemon's host; empty continues `sessionId`'s. */
  workspace?: string;
  /** Continue this session (its settings and conversation); empty starts a new session. */
  sessionId?: string;
  /** `openai:MODEL`, `anthropic:MODEL`, `scripted`, `replay`, or the whole ModelConfig. */
  model?: string | MessageInitShape<typeof ModelConfigSchema>;
  /** Tools the model may call; empty = every tool the session allows. */
  tools?: string[];
  approvalPolicy?: ApprovalPolicy;
  budgets?: MessageInitShape<typeof BudgetsSchema>;
  /** How long an approval waits for an answer, in ms; 0 = the daemon's default. */
  approvalTimeoutMs?: number | bigint;
  /** A denied call ends the run instead of being told to the model. */
  stopOnDenial?: boolean;
  /** Instructions added to the daemon's system prompt. */
  instructions?: string;
  /** Policy rules (TOML; ask and deny only) for this run. */
  rules?: string;
}

/** How a RunHandle follows its run. */
export interface FollowOptions {
  /**
   * Re-attach from the last committed event when the stream drops before run_finished
   * (the connection is lost, the daemon restarts). Default on, with bounded retries.
   */
  reattach?: boolean | { retries?: number; initialDelayMs?: number; maxDelayMs?: number };
  /** Stops following the run (the run goes on in the daemon). */
  signal?: AbortSignal;
}

interface Connection {
  stream: OpenStream<RunEvent>;
  /** The Run stream's request half; none for WatchRun. */
  requests: AsyncQueue<RunRequestInit> | undefined;
}

type Opener = (afterSeq: bigint, runId: string) => Promise<Connection>;

/** Starts a run on the Run stream; resolves with its handle once its first event arrived. */
export async function startRun(ctx: Context, options: StartRunOptions): Promise<RunHandle> {
  const model = typeof options.model === "string" ? { model: options.model } : options.model;
  const start: MessageInitShape<typeof StartRunSchema> = {
    sessionId: options.sessionId ?? "",
    workspace: options.workspace ?? "",
    input: options.input,
    tools: options.tools ?? [],
    approvalPolicy: options.approvalPolicy ?? ApprovalPolicy.UNSPECIFIED,
    approvalTimeoutMs: BigInt(options.approvalTimeoutMs ?? 0),
    stopOnDenial: options.stopOnDenial ?? false,
    instructions: options.instructions ?? "",
    rules: options.rules ?? "",
    ...(model ? { model } : {}),
    ...(options.budgets ? { budgets: options.budgets } : {}),
  };
  const first = await openRun(ctx, { request: { case: "start", value: start } }, options.signal);
  const handle = new RunHandle(ctx, undefined, 0n, first, runOpener(ctx, options.signal), options);
  await handle.ready();
  return handle;
}

/**
 * Follows an existing run on the Run stream: every event after `afterSeq` (0 for all), then
 * live ones. The handle can answer the run's approvals, cancel it and send it input.
 */
export async function attachRun(
  ctx: Context,
  runId: string,
  afterSeq: number | bigint = 0n,
  options: FollowOptions = {},
): Promise<RunHandle> {
  const opener = runOpener(ctx, options.signal);
  const after = BigInt(afterSeq);
  const first = await opener(after, runId);
  return new RunHandle(ctx, runId, after, first, opener, options);
}

/**
 * Follows an existing run with WatchRun (a server stream: what gRPC-Web can carry). The
 * handle answers approvals with DecideApproval and cancels with CancelRun; it cannot send
 * input.
 */
export async function watchRun(
  ctx: Context,
  runId: string,
  afterSeq: number | bigint = 0n,
  options: FollowOptions = {},
): Promise<RunHandle> {
  const opener = async (seq: bigint, id: string): Promise<Connection> => ({
    stream: await open(ctx, Agent.method.watchRun, once({ runId: id, afterSeq: seq }), { signal: options.signal }),
    requests: undefined,
  });
  const after = BigInt(afterSeq);
  return new RunHandle(ctx, runId, after, await opener(after, runId), opener, options);
}

async function openRun(ctx: Context, first: RunRequestInit, signal: AbortSignal | undefined): Promise<Connection> {
  const requests = new AsyncQueue<RunRequestInit>();
  // The daemon answers the call once it has read the first message: queue it first.
  requests.push(first);
  try {
    const stream = await open(ctx, Agent.method.run, requests, { signal });
    return { stream, requests };
  } catch (error) {
    requests.end();
    throw error;
  }
}

function runOpener(ctx: Context, signal: AbortSignal | undefined) {
  return (afterSeq: bigint, runId: string): Promise<Connection> =>
    openRun(ctx, { request: { case: "attach", value: { runId, afterSeq } } }, signal);
}

/** A decision or a cancel: kept until an event answers it. */
function isAnswerable(request: RunRequestInit): boolean {
  const kind = request.request?.case;
  return kind === "decision" || kind === "cancel";
}

/** The errors after which following the run again may work. */
function worthReattaching(error: unknown): boolean {
  return (
    error instanceof ConnectionLostError ||
    error instanceof UnreachableError ||
    error instanceof UnavailableError ||
    error instanceof IncompleteRunError
  );
}

/**
 * One run's stream: its numbered events, and the messages that steer it. Read it once, with
 * `for await` over the handle (or events(), committed(), text()), or wait() for the end.
 * Closing the handle stops following the run; the run itself goes on in the daemon.
 */
export class RunHandle implements AsyncIterable<RunEvent> {
  #ctx: Context;
  #runId: string | undefined;
  #lastSeq: bigint;
  #finished: RunFinished | undefined;
  #conn: Connection;
  #open: Opener;
  #buffered: RunEvent[] = [];
  #reading = false;
  #closed = false;
  #ended = false;
  #done = deferred<RunFinished>();
  #retries: number;
  #initialDelayMs: number;
  #maxDelayMs: number;
  #reattaches = 0;
  #unsent: RunRequestInit[] = [];
  /** Decisions and a cancel sent on the stream and not yet answered by an event: re-sent after a re-attach. */
  #unanswered = new Map<string, RunRequestInit>();

  /** @internal Made by startRun(), attachRun() and watchRun(). */
  constructor(
    ctx: Context,
    runId: string | undefined,
    afterSeq: bigint,
    conn: Connection,
    opener: Opener,
    options: FollowOptions,
  ) {
    this.#ctx = ctx;
    this.#runId = runId;
    this.#lastSeq = afterSeq;
    this.#conn = conn;
    this.#open = opener;
    const reattach = options.reattach ?? true;
    const settings = typeof reattach === "object" ? reattach : {};
    this.#retries = reattach === false ? 0 : (settings.retries ?? 8);
    this.#initialDelayMs = settings.initialDelayMs ?? 200;
    this.#maxDelayMs = settings.maxDelayMs ?? 2000;
    options.signal?.addEventListener("abort", () => this.close(), { once: true });
  }

  /** The run's id (known once its first event arrived, for a run this handle started). */
  get runId(): string {
    return this.#runId ?? "";
  }

  /**
   * The seq of the last committed event received: the `afterSeq` to re-attach with. Deltas do
   * not count — a delta carries the seq of the committed event still to come.
   */
  get lastSeq(): bigint {
    return this.#lastSeq;
  }

  /** The run's end, once `run_finished` arrived. */
  get finished(): RunFinished | undefined {
    return this.#finished;
  }

  /** How many times the handle followed the run again after its stream dropped. */
  get reattaches(): number {
    return this.#reattaches;
  }

  /** @internal Reads the first event (a run's `run_started`), so that the run's id is known. */
  async ready(): Promise<void> {
    const event = await this.#next();
    if (event) this.#buffered.push(event);
  }

  #record(event: RunEvent): void {
    if (this.#runId === undefined && event.runId) this.#runId = event.runId;
    if (!event.delta && event.seq > this.#lastSeq) this.#lastSeq = event.seq;
    const e = event.event;
    if (e.case === "approvalResolved" || e.case === "decisionRejected") this.#unanswered.delete(e.value.approvalId);
    if (event.event.case === "runFinished" && !event.delta) {
      this.#finished = event.event.value;
      this.#done.resolve(event.event.value);
    }
  }

  async #next(): Promise<RunEvent | undefined> {
    const buffered = this.#buffered.shift();
    if (buffered) return buffered;
    if (this.#ended || this.#closed) return undefined;
    for (;;) {
      let failure: unknown;
      try {
        const result = await this.#conn.stream.next();
        if (!result.done) {
          this.#record(result.value);
          return result.value;
        }
        if (this.#finished) return this.#end();
        failure = await this.#endedEarly();
        if (failure === undefined) return this.#end();
      } catch (error) {
        failure = error;
      }
      if (this.#closed) return this.#end();
      if (this.#finished) return this.#end();
      // Without the run's id (its first event never came) there is nothing to attach to.
      if (!worthReattaching(failure) || this.#retries === 0 || !this.#runId) throw this.#fail(failure);
      await this.#reattach(failure);
    }
  }

  /**
   * The stream ended without run_finished. A run that had already finished (attached after
   * its last event) ends the handle cleanly; anything else is an IncompleteRunError.
   */
  async #endedEarly(): Promise<AirlockError | undefined> {
    if (this.#runId) {
      try {
        const info = await getRun(this.#ctx, this.#runId);
        if (info.state === RunState.FINISHED && this.#lastSeq >= info.lastSeq) {
          this.#finished = finishedFromInfo(info);
          this.#done.resolve(this.#finished);
          return undefined;
        }
      } catch {
        // The check is a courtesy; the stream's early end is the error.
      }
    }
    return new IncompleteRunError(
      `airlockd at ${this.#ctx.peer.endpoint} closed the stream of run ${this.runId || "(unknown)"} ` +
        `before the run finished (last event received: ${this.#lastSeq})`,
      {
        code: Code.Unavailable,
        retryable: true,
        endpoint: this.#ctx.peer.endpoint,
        runId: this.runId,
        lastSeq: this.#lastSeq,
      },
    );
  }

  async #reattach(failure: unknown): Promise<void> {
    let last = failure;
    // What was queued on the broken stream and not taken is sent again on the new one, and so
    // are the decisions and the cancel no event has answered yet (one the daemon did apply
    // comes back as a harmless `decision_rejected`).
    const untaken = this.#conn.requests?.drain() ?? [];
    this.#unsent.push(...untaken.filter((r) => !isAnswerable(r)), ...this.#unanswered.values());
    this.#conn.requests?.end();
    for (let attempt = 1; attempt <= this.#retries; attempt++) {
      if (this.#closed) return;
      await sleep(Math.min(this.#maxDelayMs, this.#initialDelayMs * 2 ** (attempt - 1)));
      if (this.#closed) return;
      try {
        this.#conn = await this.#open(this.#lastSeq, this.runId);
        this.#reattaches++;
        for (const request of this.#unsent.splice(0)) this.#conn.requests?.push(request);
        return;
      } catch (error) {
        last = error;
        if (!worthReattaching(error)) break;
      }
    }
    throw this.#fail(last);
  }

  #fail(error: unknown): unknown {
    this.#conn.requests?.end();
    this.#ended = true;
    this.#done.reject(error);
    return error;
  }

  #end(): undefined {
    this.#ended = true;
    this.#conn.requests?.end();
    if (!this.#finished) {
      this.#done.reject(
        new CanceledError(`stopped following run ${this.runId} before it finished`, {
          code: Code.Canceled,
          endpoint: this.#ctx.peer.endpoint,
        }),
      );
    }
    return undefined;
  }

  /** Every event: committed ones and streamed deltas (`delta` true), in order. */
  async *events(): AsyncGenerator<RunEvent, void, undefined> {
    if (this.#reading) {
      throw new Error("this run's events are already being read: a RunHandle is read by one loop at a time");
    }
    this.#reading = true;
    try {
      for (;;) {
        const event = await this.#next();
        if (!event) return;
        yield event;
      }
    } finally {
      this.#reading = false;
    }
  }

  [Symbol.asyncIterator](): AsyncGenerator<RunEvent, void, undefined> {
    return this.events();
  }

  /** The committed events only: what a client attaching later gets too. */
  async *committed(): AsyncGenerator<RunEvent, void, undefined> {
    for await (const event of this.events()) {
      if (!event.delta) yield event;
    }
  }

  /**
   * The model's text as it streams: each text delta, and of a committed `model_text` the
   * part no delta carried (all of it when the model did not stream, or the handle attached
   * after the deltas went by).
   */
  async *text(): AsyncGenerator<string, void, undefined> {
    let streamed = "";
    for await (const event of this.events()) {
      const e = event.event;
      if (e.case === "textDelta" && event.delta) {
        streamed += e.value.text;
        if (e.value.text) yield e.value.text;
      } else if (e.case === "modelText" && !event.delta) {
        const rest = e.value.text.startsWith(streamed) ? e.value.text.slice(streamed.length) : e.value.text;
        streamed = "";
        if (rest) yield rest;
      }
    }
  }

  /** Reads the run to its end (unless a loop is reading it) and resolves with its RunFinished. */
  async wait(): Promise<RunFinished> {
    if (this.#finished) return this.#finished;
    if (this.#reading) return this.#done.promise;
    for await (const _ of this.events()) {
      // Read to the end.
    }
    return this.#done.promise;
  }

  /** The run's record now (state, stop reason, final text, usage). */
  info(options?: CallOptions): Promise<RunInfo> {
    return getRun(this.#ctx, this.runId, options);
  }

  /**
   * Answers one of the run's approval requests, bound to its id and digest. On the Run stream
   * a decision the daemon refuses comes back as a `decision_rejected` event; on a WatchRun
   * handle the decision is a DecideApproval call and its refusal an error.
   */
  async decide(request: ApprovalRequest, decision: DecisionOptions): Promise<void> {
    if (!this.#conn.requests) {
      await decideApproval(this.#ctx, request, decision);
      return;
    }
    const message: RunRequestInit = { request: { case: "decision", value: decisionFor(request, decision) } };
    this.#unanswered.set(request.approvalId, message);
    this.#send(message);
  }

  /** Asks the daemon to stop the run; it ends CANCELLED with `reason` as its detail. */
  async cancel(reason = ""): Promise<void> {
    if (!this.#conn.requests) {
      await cancelRun(this.#ctx, this.runId, reason);
      return;
    }
    const message: RunRequestInit = { request: { case: "cancel", value: { reason } } };
    this.#unanswered.set("", message);
    this.#send(message);
  }

  /** More input from the user, read before the run's next model call (Run stream only). */
  async sendInput(text: string): Promise<void> {
    if (!this.#conn.requests) {
      throw new StreamClosedError("input can only be sent on the Run stream (startRun or attachRun), not WatchRun", {
        code: Code.FailedPrecondition,
        endpoint: this.#ctx.peer.endpoint,
      });
    }
    this.#send({ request: { case: "input", value: { text } } });
  }

  #send(request: RunRequestInit): void {
    if (this.#closed || (this.#ended && !this.#finished)) {
      throw new StreamClosedError(
        `the stream of run ${this.runId} to airlockd at ${this.#ctx.peer.endpoint} is closed; the message was not sent`,
        { code: Code.FailedPrecondition, endpoint: this.#ctx.peer.endpoint },
      );
    }
    if (this.#ended || this.#finished) {
      throw new StreamClosedError(`run ${this.runId} has finished; the message was not sent`, {
        code: Code.FailedPrecondition,
        endpoint: this.#ctx.peer.endpoint,
      });
    }
    if (!this.#conn.requests?.push(request)) this.#unsent.push(request);
  }

  /** Stops following the run; the run goes on in the daemon. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#conn.requests?.end();
    this.#conn.stream.abort();
  }
}

/** The RunFinished a finished run's record stands for. */
function finishedFromInfo(info: RunInfo): RunFinished {
  return create(RunFinishedSchema, {
    reason: info.stopReason,
    finalText: info.finalText,
    detail: info.stopDetail,
    steps: info.steps,
    ...(info.usage ? { usage: info.usage } : {}),
  });
}

/** One run's record: its state, and once finished its stop reason, final text and usage. */
export function getRun(ctx: Context, runId: string, options?: CallOptions): Promise<RunInfo> {
  return call(ctx, Agent.method.getRun, { runId }, options);
}

export type ListRunsOptions = MessageInitShape<typeof ListRunsRequestSchema> & CallOptions;

/** One page of runs, newest first; `nextPageToken` asks for the next. */
export function listRuns(ctx: Context, options: ListRunsOptions = {}): Promise<ListRunsResponse> {
  const { signal, timeoutMs, ...request } = options;
  return call(ctx, Agent.method.listRuns, request, { signal, timeoutMs });
}

/** Every run (in `sessionId`, in `state`, when set), newest first, page after page. */
export function allRuns(ctx: Context, options: ListRunsOptions = {}): AsyncGenerator<RunInfo, void, undefined> {
  return allPages(ctx, (pageToken) => listRuns(ctx, { ...options, pageToken }), (page) => page.runs);
}

/** A live list of runs: the ListRuns page first, then each run again whenever it changes. */
export async function watchRuns(
  ctx: Context,
  options: ListRunsOptions = {},
): Promise<AsyncGenerator<RunInfo, void, undefined>> {
  const { signal, timeoutMs, ...request } = options;
  return iterate(await open(ctx, Agent.method.watchRuns, once(request), { signal, timeoutMs }));
}

/** The run's spans so far, in start order (the run's own span is recorded when it ends). */
export function getTrace(ctx: Context, runId: string, options?: CallOptions): Promise<Trace> {
  return call(ctx, Agent.method.getTrace, { runId }, options);
}

/** Asks the daemon to stop a run; it ends CANCELLED with `reason` as its detail. */
export async function cancelRun(ctx: Context, runId: string, reason = "", options?: CallOptions): Promise<void> {
  await call(ctx, Agent.method.cancelRun, { runId, reason }, options);
}

/** A finished run's model exchanges as a cassette, for a `replay` model to play back. */
export function getCassette(ctx: Context, runId: string, options?: CallOptions): Promise<GetCassetteResponse> {
  return call(ctx, Agent.method.getCassette, { runId }, options);
}
