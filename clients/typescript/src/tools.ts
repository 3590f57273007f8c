// Tools: list the daemon's tools, run one directly (no model) and follow its events, page
// through the whole output of a cut result, cancel a running call. Browser-safe, though
// only listTools/getTool are offered on the gRPC-Web entry.

import { type Context, type CallOptions, call, open, once } from "./context.js";
import { DataLossError, FailedPreconditionError, IncompleteStreamError, NotFoundError, Code } from "./errors.js";
import type { ApprovalRequest } from "./gen/airlock/v1/approval_pb.js";
import type { ToolInfo, ToolResult } from "./gen/airlock/v1/tool_pb.js";
import { type ExecuteToolEvent, type ReadOutputResponse, type ToolOutput, Tools } from "./gen/airlock/v1/tools_pb.js";
import type { OpenStream } from "./context.js";
import { deferred } from "./queue.js";

/** One event of a tool call: `started`, `output` (any number), `approval`, then `finished`. */
export type ExecutionEvent = Exclude<ExecuteToolEvent["event"], { case: undefined }>;

/** Every tool the daemon serves, in the daemon's order. */
export async function listTools(ctx: Context, options?: CallOptions): Promise<ToolInfo[]> {
  return (await call(ctx, Tools.method.listTools, {}, options)).tools;
}

/** One tool by name, from the daemon's list; NotFoundError when it serves none of that name. */
export async function getTool(ctx: Context, name: string, options?: CallOptions): Promise<ToolInfo> {
  const tool = (await listTools(ctx, options)).find((t) => t.name === name);
  if (!tool) {
    const message = `tool: no tool named \`${name}\` on airlockd at ${ctx.peer.endpoint}`;
    throw new NotFoundError(message, {
      code: Code.NotFound,
      field: "tool",
      endpoint: ctx.peer.endpoint,
      method: "airlock.v1.Tools/ListTools",
    });
  }
  return tool;
}

export interface ExecuteOptions {
  /** Absolute path of the workspace on the daemon's host, inside one of its roots. */
  workspace?: string;
  /** Ask a person (an approver console of the tenant) before a risky tool runs. */
  requireApproval?: boolean;
  /** The tool's deadline in ms; can only shorten the tool's own. */
  timeoutMs?: number | bigint;
  /** Called with each chunk of output as the tool writes it. */
  onOutput?: (chunk: ToolOutput) => void;
  /** Drops the call's stream, which cancels the call. */
  signal?: AbortSignal;
}

/**
 * Runs one tool. Resolves once the daemon has answered with the call's first event, so an
 * unknown tool or a workspace outside the roots fails here; arguments that do not match the
 * tool's schema are not an error but a result with status INVALID_ARGUMENTS.
 */
export async function execute(
  ctx: Context,
  tool: string,
  args: Record<string, unknown> | string,
  options: ExecuteOptions = {},
): Promise<Execution> {
  const request = {
    tool,
    argumentsJson: typeof args === "string" ? args : JSON.stringify(args),
    workspace: options.workspace ?? "",
    timeoutMs: BigInt(options.timeoutMs ?? 0),
    requireApproval: options.requireApproval ?? false,
  };
  const stream = await open(ctx, Tools.method.executeTool, once(request), { signal: options.signal });
  const execution = new Execution(ctx, tool, stream);
  if (options.onOutput) execution.onOutput(options.onOutput);
  await execution.ready();
  return execution;
}

/**
 * A running tool call. `for await` over it for its events, or await result() for the
 * ToolResult (output still reaches the onOutput callbacks). The stream is read once: events
 * read by result() are not yielded again.
 */
export class Execution implements AsyncIterable<ExecutionEvent> {
  readonly tool: string;
  #ctx: Context;
  #stream: OpenStream<ExecuteToolEvent>;
  #buffered: ExecutionEvent[] = [];
  #listeners: ((chunk: ToolOutput) => void)[] = [];
  #result: ToolResult | undefined;
  #executionId: string | undefined;
  #approval: ApprovalRequest | undefined;
  #reading: Promise<ToolResult> | undefined;
  #iterating = false;
  #done = deferred<ToolResult>();

  /** @internal Made by execute(). */
  constructor(ctx: Context, tool: string, stream: OpenStream<ExecuteToolEvent>) {
    this.#ctx = ctx;
    this.tool = tool;
    this.#stream = stream;
  }

  /** The call's id, once `started` has arrived (none for a call refused before it ran). */
  get executionId(): string | undefined {
    return this.#executionId ?? (this.#result?.executionId || undefined);
  }

  /** The approval the call waits for (`requireApproval`), once it has arrived. */
  get approval(): ApprovalRequest | undefined {
    return this.#approval;
  }

  /** Whether the call has finished (its result arrived). */
  get finished(): boolean {
    return this.#result !== undefined;
  }

  /** Calls `listener` with each chunk of output read from now on. */
  onOutput(listener: (chunk: ToolOutput) => void): this {
    this.#listeners.push(listener);
    return this;
  }

  /** @internal Reads the first event, keeping it for the iteration. */
  async ready(): Promise<void> {
    const event = await this.#read();
    if (event) this.#buffered.push(event);
  }

  async #read(): Promise<ExecutionEvent | undefined> {
    if (this.#result) return undefined;
    try {
      return await this.#readOne();
    } catch (error) {
      this.#done.reject(error);
      throw error;
    }
  }

  async #readOne(): Promise<ExecutionEvent> {
    for (;;) {
      const next = await this.#stream.next();
      if (next.done) {
        throw new IncompleteStreamError(
          `airlockd at ${this.#ctx.peer.endpoint} closed the stream of the call of ${this.tool} before sending its result`,
          { code: Code.Unavailable, retryable: true, endpoint: this.#ctx.peer.endpoint, method: "airlock.v1.Tools/ExecuteTool" },
        );
      }
      const event = next.value.event;
      // An event of a kind added after this client was built: skipped.
      if (event.case === undefined) continue;
      switch (event.case) {
        case "started":
          this.#executionId = event.value.executionId;
          break;
        case "approval":
          this.#approval = event.value;
          break;
        case "output":
          for (const listener of this.#listeners) listener(event.value);
          break;
        case "finished":
          this.#result = event.value;
          this.#done.resolve(event.value);
          break;
      }
      return event;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<ExecutionEvent, void, undefined> {
    this.#iterating = true;
    try {
      for (;;) {
        const event = this.#buffered.shift() ?? (await this.#read());
        if (!event) return;
        yield event;
        if (event.case === "finished") return;
      }
    } finally {
      this.#iterating = false;
    }
  }

  /**
   * The call's result. Reads the stream to its end (passing output to the onOutput
   * callbacks), or, while a `for await` reads it, waits for that loop to reach the result.
   */
  result(): Promise<ToolResult> {
    if (this.#result) return Promise.resolve(this.#result);
    if (this.#iterating) return this.#done.promise;
    this.#reading ??= (async () => {
      this.#buffered = [];
      while (!this.#result) await this.#read();
      return this.#result;
    })();
    return this.#reading;
  }

  /** Asks the daemon to stop the call; its result then has status CANCELLED. */
  async cancel(options?: CallOptions): Promise<void> {
    const id = this.executionId;
    if (!id) {
      throw new FailedPreconditionError(`the call of ${this.tool} has no execution id (it did not start)`, {
        code: Code.FailedPrecondition,
        endpoint: this.#ctx.peer.endpoint,
      });
    }
    await cancelExecution(this.#ctx, id, options);
  }

  /** Drops the stream without waiting: the daemon cancels a call still running. */
  abort(): void {
    this.#stream.abort();
  }
}

/** Asks the daemon to stop a running call; the call's stream then ends with CANCELLED. */
export async function cancelExecution(ctx: Context, executionId: string, options?: CallOptions): Promise<void> {
  await call(ctx, Tools.method.cancelExecution, { executionId }, options);
}

export interface ReadOutputOptions extends CallOptions {
  /** Where to start, in bytes of the whole output. */
  offset?: number | bigint;
  /** Bytes to read; 0 or unset = the daemon's page size (it caps it at its largest page). */
  length?: number | bigint;
}

/** One page of the whole output the daemon kept for a call whose result was cut. */
export async function readOutput(
  ctx: Context,
  executionId: string,
  options: ReadOutputOptions = {},
): Promise<ReadOutputResponse> {
  return call(
    ctx,
    Tools.method.readOutput,
    { executionId, offset: BigInt(options.offset ?? 0), length: BigInt(options.length ?? 0) },
    options,
  );
}

export interface ReadAllOutputOptions extends CallOptions {
  /** Bytes per page; unset = the daemon's page size. */
  pageBytes?: number;
}

/**
 * The whole output the daemon kept for a call, every page read and joined, checked against
 * the digest the daemon gives (DataLossError when it differs).
 */
export async function readAllOutput(
  ctx: Context,
  executionId: string,
  options: ReadAllOutputOptions = {},
): Promise<Uint8Array> {
  const pages: Uint8Array[] = [];
  let offset = 0n;
  let total = 0n;
  let digest = "";
  for (;;) {
    const page = await readOutput(ctx, executionId, { ...options, offset, length: options.pageBytes ?? 0 });
    pages.push(page.data);
    offset += BigInt(page.data.length);
    total = page.totalBytes;
    digest = page.digest;
    if (page.eof || offset >= total || page.data.length === 0) break;
  }
  const whole = new Uint8Array(Number(offset));
  let at = 0;
  for (const page of pages) {
    whole.set(page, at);
    at += page.length;
  }
  if (offset !== total) {
    throw new DataLossError(`the output of ${executionId} ended at ${offset} bytes of ${total}`, {
      code: Code.DataLoss,
      endpoint: ctx.peer.endpoint,
    });
  }
  const subtle = globalThis.crypto?.subtle;
  if (digest && subtle) {
    const hash = new Uint8Array(await subtle.digest("SHA-256", whole));
    const hex = Array.from(hash, (b) => b.toString(16).padStart(2, "0")).join("");
    if (hex !== digest.toLowerCase()) {
      throw new DataLossError(`the output of ${executionId} read does not match its digest ${digest}`, {
        code: Code.DataLoss,
        endpoint: ctx.peer.endpoint,
      });
    }
  }
  return whole;
}
