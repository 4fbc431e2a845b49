/**
 * A bound on the requests of a route whose GPU work runs at once: the others wait on the host,
 * in arrival order. Past a few requests in flight the GPU gains no throughput on work that
 * already fills its memory bandwidth (the search's GEMV reads all the embeddings); it only
 * shares itself among more of them, so each takes longer and the slowest take as long as all
 * the work in flight. Waiting in line for a slot instead keeps the overlap (a few requests
 * still run on their own streams) and gives the queue's order back.
 */

/** A waiting request: its grant, until it is granted or leaves the line. */
interface Waiter {
  grant: (() => void) | undefined;
}

/** At most `limit` holders at once; the others wait in arrival order. */
export class Admission {
  /** The most holders at once. */
  readonly limit: number;
  #free: number;
  /** The line, oldest first from `#head` (entries before it are done with). */
  #line: Waiter[] = [];
  #head = 0;
  #waiting = 0;

  constructor(limit: number) {
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(`Admission: limit must be a positive integer, got ${String(limit)}`);
    }
    this.limit = limit;
    this.#free = limit;
  }

  /** Requests waiting for a slot. */
  get waiting(): number {
    return this.#waiting;
  }

  /** Holders now. */
  get holders(): number {
    return this.limit - this.#free;
  }

  /**
   * Resolves once the caller holds a slot (at once when one is free and nobody waits);
   * `release()` it after. When `signal` aborts while the caller waits, it leaves the line and
   * the promise rejects with the signal's reason.
   */
  acquire(signal?: AbortSignal): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    if (this.#free > 0 && this.#waiting === 0) {
      this.#free--;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { grant: undefined };
      const onAbort = () => {
        waiter.grant = undefined;
        this.#waiting--;
        reject(signal!.reason);
      };
      waiter.grant = () => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#line.push(waiter);
      this.#waiting++;
    });
  }

  /** Gives a slot back: to the oldest waiting request, else to the pool. */
  release(): void {
    while (this.#head < this.#line.length) {
      const waiter = this.#line[this.#head++]!;
      const grant = waiter.grant;
      if (grant === undefined) continue; // it left the line
      waiter.grant = undefined;
      this.#waiting--;
      this.#compact();
      grant();
      return;
    }
    this.#compact();
    if (this.#free >= this.limit) throw new Error('Admission: release() without acquire()');
    this.#free++;
  }

  /** Drops the entries before `#head` once the line is empty, or they are most of it. */
  #compact(): void {
    if (this.#head === this.#line.length) {
      this.#line.length = 0;
      this.#head = 0;
    } else if (this.#head > 1024 && this.#head * 2 > this.#line.length) {
      this.#line = this.#line.slice(this.#head);
      this.#head = 0;
    }
  }
}
