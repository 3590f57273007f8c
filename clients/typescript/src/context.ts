// The calls themselves: every RPC of the client goes through call() (unary) or open()
// (streams) here, on one connect Transport, so that every failure is mapped by the one
// function toAirlockError with the name of the call. Browser-safe.

import type { DescMessage, DescMethodStreaming, DescMethodUnary, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { Code, InternalError, type Peer, toAirlockError } from "./errors.js";

/** What every concern module needs: the transport to the daemon, and how errors name it. */
export interface Context {
  transport: Transport;
  peer: Peer;
}

/** Options every call takes. */
export interface CallOptions {
  /** Cancels the call (a stream: stops reading it; the daemon sees the stream go). */
  signal?: AbortSignal | undefined;
  /** A deadline for the call, in milliseconds. */
  timeoutMs?: number | undefined;
}

/** `airlock.v1.Tools/ListTools` for the ListTools method. */
export function methodName(method: { name: string; parent: { typeName: string } }): string {
  return `${method.parent.typeName}/${method.name}`;
}

/** Runs one unary call; a failure is an AirlockError. */
export async function call<I extends DescMessage, O extends DescMessage>(
  ctx: Context,
  method: DescMethodUnary<I, O>,
  input: MessageInitShape<I>,
  options: CallOptions = {},
): Promise<MessageShape<O>> {
  try {
    const response = await ctx.transport.unary(method, options.signal, options.timeoutMs, undefined, input);
    return response.message;
  } catch (error) {
    throw toAirlockError(error, ctx.peer, methodName(method), { aborted: options.signal?.aborted ?? false });
  }
}

/** An open stream's messages, each read mapping a failure to an AirlockError. */
export interface OpenStream<O> {
  next(): Promise<IteratorResult<O, undefined>>;
  /** Stops the call: the daemon sees the stream go. */
  abort(): void;
}

/**
 * Opens a streaming call and waits for the daemon to answer it (its response headers), so a
 * refused call (unknown run, bad token) fails here rather than at the first read.
 */
export async function open<I extends DescMessage, O extends DescMessage>(
  ctx: Context,
  method: DescMethodStreaming<I, O>,
  input: AsyncIterable<MessageInitShape<I>>,
  options: CallOptions = {},
): Promise<OpenStream<MessageShape<O>>> {
  const controller = new AbortController();
  const outer = options.signal;
  const onAbort = () => controller.abort(outer?.reason);
  if (outer?.aborted) onAbort();
  else outer?.addEventListener("abort", onAbort, { once: true });
  const name = methodName(method);
  let iterator: AsyncIterator<MessageShape<O>>;
  try {
    const response = await ctx.transport.stream(method, controller.signal, options.timeoutMs, undefined, input);
    iterator = response.message[Symbol.asyncIterator]();
  } catch (error) {
    outer?.removeEventListener("abort", onAbort);
    throw toAirlockError(error, ctx.peer, name, { aborted: controller.signal.aborted });
  }
  return {
    async next() {
      try {
        const result = await iterator.next();
        if (result.done) {
          outer?.removeEventListener("abort", onAbort);
          return { done: true, value: undefined };
        }
        return result;
      } catch (error) {
        outer?.removeEventListener("abort", onAbort);
        throw toAirlockError(error, ctx.peer, name, { aborted: controller.signal.aborted });
      }
    },
    abort() {
      outer?.removeEventListener("abort", onAbort);
      controller.abort();
    },
  };
}

/** A server stream as an async iterable: a failure is an AirlockError; breaking out stops the call. */
export async function* iterate<O>(stream: OpenStream<O>): AsyncGenerator<O, void, undefined> {
  let done = false;
  try {
    for (;;) {
      const result = await stream.next();
      if (result.done) {
        done = true;
        return;
      }
      yield result.value;
    }
  } finally {
    if (!done) stream.abort();
  }
}

/** One message as the request stream of a server-streaming call. */
export async function* once<T>(message: T): AsyncGenerator<T> {
  yield message;
}

/** Sends `authorization: Bearer <token>` on every call, when there is a token. */
export function bearer(token: string | undefined): Interceptor {
  return (next) => async (req) => {
    if (token) req.header.set("authorization", `Bearer ${token}`);
    return next(req);
  };
}

/**
 * Every item of a paged list, page after page: `page(token)` fetches one page, `items` takes
 * its items. A daemon that hands back a token it gave before would page forever: that is an
 * InternalError naming it.
 */
export async function* allPages<P extends { nextPageToken: string }, T>(
  ctx: Context,
  page: (pageToken: string) => Promise<P>,
  items: (page: P) => T[],
): AsyncGenerator<T, void, undefined> {
  const seen = new Set<string>();
  let pageToken = "";
  do {
    const next = await page(pageToken);
    yield* items(next);
    seen.add(pageToken);
    if (next.nextPageToken && seen.has(next.nextPageToken)) {
      throw new InternalError(
        `airlockd at ${ctx.peer.endpoint} answered with page token ${JSON.stringify(next.nextPageToken)} again`,
        { code: Code.Internal, endpoint: ctx.peer.endpoint },
      );
    }
    pageToken = next.nextPageToken;
  } while (pageToken);
}
