// A queue that is an AsyncIterable: the request half of a bidirectional stream (Agent.Run,
// Agent.Approvals), fed by push() as the caller decides, ended by end().

export class AsyncQueue<T> implements AsyncIterable<T> {
  #items: T[] = [];
  #waiting: ((result: IteratorResult<T>) => void) | undefined;
  #ended = false;

  /** Whether end() was called: nothing pushed after it is sent. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Queues one item; false when the queue has ended (the item is dropped). */
  push(item: T): boolean {
    if (this.#ended) return false;
    const waiting = this.#waiting;
    if (waiting) {
      this.#waiting = undefined;
      waiting({ value: item, done: false });
    } else {
      this.#items.push(item);
    }
    return true;
  }

  /** Takes back the items not yet taken by the reader. */
  drain(): T[] {
    return this.#items.splice(0);
  }

  /** Ends the stream once the items queued so far are taken. */
  end(): void {
    this.#ended = true;
    const waiting = this.#waiting;
    if (waiting && this.#items.length === 0) {
      this.#waiting = undefined;
      waiting({ value: undefined, done: true });
    }
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: (): Promise<IteratorResult<T>> => {
        if (this.#items.length > 0) {
          return Promise.resolve({ value: this.#items.shift() as T, done: false });
        }
        if (this.#ended) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => {
          this.#waiting = resolve;
        });
      },
      return: (): Promise<IteratorResult<T>> => {
        this.end();
        this.#items = [];
        return Promise.resolve({ value: undefined, done: true });
      },
      // The reader gave up (the call was aborted or failed): nothing more is sent.
      throw: (error?: unknown): Promise<IteratorResult<T>> => {
        this.end();
        return Promise.reject(error);
      },
    };
  }
}

/** A promise with its resolve and reject (Promise.withResolvers, which Node 20 lacks). */
export interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(reason: unknown): void;
  settled: boolean;
}

export function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (reason: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  // A rejection nobody awaits is not an unhandled one: callers that care await it.
  promise.catch(() => undefined);
  const d: Deferred<T> = {
    promise,
    settled: false,
    resolve(value) {
      if (d.settled) return;
      d.settled = true;
      resolve(value);
    },
    reject(reason) {
      if (d.settled) return;
      d.settled = true;
      reject(reason);
    },
  };
  return d;
}

/** Resolves after `ms`, or at once when `signal` fires. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
