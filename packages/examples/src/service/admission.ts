/**
 * A bound on the GPU work of requests that runs at once, in units (requests, or estimated bytes
 * of device memory): the others wait on the host, in arrival order, in a short line with a
 * deadline. Past a few requests in flight the GPU gains no throughput on work that already
 * fills it; it only shares itself among more of them, so each takes longer, and past its
 * memory every allocation fails (and each failure synchronizes the context). Waiting in line
 * keeps the overlap of the requests that run and gives the queue's order back; a line that is
 * full, or a wait past its deadline, is refused at once (the service answers 503 with
 * Retry-After) instead of piling up.
 */

/** Why `Admission.acquire` refused: the line was full, or the wait passed its deadline. */
export class AdmissionRefused extends Error {
  /** 'full': the line already held `maxWaiting` requests; 'timeout': waited `maxWaitMs`. */
  readonly kind: 'full' | 'timeout';

  constructor(kind: 'full' | 'timeout', message: string) {
    super(message);
    this.name = 'AdmissionRefused';
    this.kind = kind;
  }
}

/** Options of `new Admission(limit, options)`. */
export interface AdmissionOptions {
  /** Requests that may wait in line (default unbounded); past it `acquire` is refused at once. */
  maxWaiting?: number;
  /** How long a request may wait in line, ms (default unbounded); then it is refused. */
  maxWaitMs?: number;
}

/** A waiting request: its units and its grant, until it is granted or leaves the line. */
interface Waiter {
  units: number;
  grant: (() => void) | undefined;
}

/** At most `limit` units held at once; the others wait in arrival order. */
export class Admission {
  /** The most units held at once. */
  readonly limit: number;
  /** Requests that may wait in line. */
  readonly maxWaiting: number;
  /** How long a request may wait in line, ms. */
  readonly maxWaitMs: number;
  #free: number;
  /** The line, oldest first from `#head` (entries before it are done with). */
  #line: Waiter[] = [];
  #head = 0;
  #waiting = 0;

  constructor(limit: number, options: AdmissionOptions = {}) {
    if (!Number.isSafeInteger(limit) || limit < 1) {
      throw new RangeError(`Admission: limit must be a positive integer, got ${String(limit)}`);
    }
    const maxWaiting = options.maxWaiting ?? Number.POSITIVE_INFINITY;
    if (!(maxWaiting >= 0) || (Number.isFinite(maxWaiting) && !Number.isInteger(maxWaiting))) {
      throw new RangeError(
        `Admission: maxWaiting must be an integer >= 0 (or Infinity), got ${String(maxWaiting)}`,
      );
    }
    const maxWaitMs = options.maxWaitMs ?? Number.POSITIVE_INFINITY;
    if (!(maxWaitMs >= 0)) {
      throw new RangeError(
        `Admission: maxWaitMs must be a number >= 0 (or Infinity), got ${String(maxWaitMs)}`,
      );
    }
    this.limit = limit;
    this.maxWaiting = maxWaiting;
    this.maxWaitMs = maxWaitMs;
    this.#free = limit;
  }

  /** Requests waiting in line. */
  get waiting(): number {
    return this.#waiting;
  }

  /** Units held now (requests, for a bound on requests). */
  get holders(): number {
    return this.limit - this.#free;
  }

  /**
   * Resolves once the caller holds `units` (default 1; more than `limit` counts as `limit`, so
   * that such a request runs alone): at once when they are free and nobody waits; otherwise in
   * arrival order. `release(units)` them after. Rejects with the signal's reason when `signal`
   * aborts while it waits (it leaves the line), and with an `AdmissionRefused` when the line is
   * full or the wait passes `maxWaitMs`.
   */
  acquire(signal?: AbortSignal, units = 1): Promise<void> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const wanted = this.#clamp(units);
    if (this.#free >= wanted && this.#waiting === 0) {
      this.#free -= wanted;
      return Promise.resolve();
    }
    if (this.#waiting >= this.maxWaiting) {
      return Promise.reject(
        new AdmissionRefused('full', `${this.#waiting} requests already wait in line`),
      );
    }
    return new Promise<void>((resolve, reject) => {
      const waiter: Waiter = { units: wanted, grant: undefined };
      let timer: ReturnType<typeof setTimeout> | undefined;
      const leave = (reason: unknown) => {
        if (waiter.grant === undefined) return;
        waiter.grant = undefined;
        this.#waiting--;
        signal?.removeEventListener('abort', onAbort);
        if (timer !== undefined) clearTimeout(timer);
        reject(reason);
        this.#grantWaiting(); // it may have held back smaller requests behind it
      };
      const onAbort = () => leave(signal!.reason);
      waiter.grant = () => {
        signal?.removeEventListener('abort', onAbort);
        if (timer !== undefined) clearTimeout(timer);
        resolve();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      if (Number.isFinite(this.maxWaitMs)) {
        timer = setTimeout(
          () =>
            leave(
              new AdmissionRefused('timeout', `waited ${this.maxWaitMs} ms in line without a turn`),
            ),
          this.maxWaitMs,
        );
        timer.unref?.();
      }
      this.#line.push(waiter);
      this.#waiting++;
    });
  }

  /** Gives `units` back (default 1), then grants the oldest waiting requests that now fit. */
  release(units = 1): void {
    const returned = this.#clamp(units);
    if (this.#free + returned > this.limit) {
      throw new Error('Admission: release() without acquire()');
    }
    this.#free += returned;
    this.#grantWaiting();
  }

  #clamp(units: number): number {
    if (!Number.isSafeInteger(units) || units < 1) {
      throw new RangeError(`Admission: units must be a positive integer, got ${String(units)}`);
    }
    return Math.min(units, this.limit);
  }

  /** Grants waiters from the oldest while their units fit; a waiter that does not fit waits first. */
  #grantWaiting(): void {
    while (this.#head < this.#line.length) {
      const waiter = this.#line[this.#head]!;
      const grant = waiter.grant;
      if (grant === undefined) {
        this.#head++; // it left the line
        continue;
      }
      if (waiter.units > this.#free) break;
      this.#head++;
      this.#free -= waiter.units;
      waiter.grant = undefined;
      this.#waiting--;
      grant();
    }
    this.#compact();
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
