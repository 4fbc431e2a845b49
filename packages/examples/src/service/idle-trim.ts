/**
 * Gives the device memory pool's reserve back once the GPU has been idle a while: under load the
 * pool keeps what it reserved (allocations then make no driver call), and after it, once no GPU
 * work has run for `idleMs`, an unref'd timer trims the pool down to what is in use plus a
 * headroom. Nothing of this runs while GPU work is in flight.
 */

/** The part of cudadrv's `MemoryPool` that trimming uses. */
export interface TrimmablePool {
  /** The pool's figures; `usedBytes` is what allocations hold now. */
  statistics(): { usedBytes: number };
  /** Returns reserved memory beyond `minBytesToKeep` to the system (`cuMemPoolTrimTo`). */
  trim(minBytesToKeep: number): void;
}

/** Options of `IdleTrim`. */
export interface IdleTrimOptions {
  /** How long no GPU work may have been in flight before the pool is trimmed, ms (default 2000). */
  idleMs?: number;
  /** Reserve kept above the bytes in use, in bytes (default 256 MiB). */
  headroomBytes?: number;
}

/** `IdleTrimOptions`' defaults. */
export const DEFAULT_IDLE_TRIM: Readonly<Required<IdleTrimOptions>> = Object.freeze({
  idleMs: 2000,
  headroomBytes: 256 * 1024 * 1024,
});

/**
 * Counts the GPU work in flight (`begin` / the function it returns) and trims the pool once
 * none has been in flight for `idleMs` after some ran: one trim per idle period, never while
 * work runs. `pool` is asked for when the timer fires (undefined: nothing to trim); a trim that
 * throws goes to `onError`.
 * @example
 * const idle = new IdleTrim(() => Device.get(0).primaryContext().memoryPool);
 * const end = idle.begin(); try { await work(); } finally { end(); }
 */
export class IdleTrim {
  readonly #pool: () => TrimmablePool | undefined;
  readonly #idleMs: number;
  readonly #headroomBytes: number;
  readonly #onError: (error: unknown) => void;
  #inFlight = 0;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;
  /** Trims done so far. */
  trims = 0;

  constructor(
    pool: () => TrimmablePool | undefined,
    options: IdleTrimOptions = {},
    onError: (error: unknown) => void = () => undefined,
  ) {
    const idleMs = options.idleMs ?? DEFAULT_IDLE_TRIM.idleMs;
    const headroomBytes = options.headroomBytes ?? DEFAULT_IDLE_TRIM.headroomBytes;
    if (!(idleMs >= 0) || !Number.isFinite(idleMs)) {
      throw new RangeError(`IdleTrim: idleMs must be a finite number >= 0, got ${String(idleMs)}`);
    }
    if (!(headroomBytes >= 0) || !Number.isFinite(headroomBytes)) {
      throw new RangeError(
        `IdleTrim: headroomBytes must be a finite number >= 0, got ${String(headroomBytes)}`,
      );
    }
    this.#pool = pool;
    this.#idleMs = idleMs;
    this.#headroomBytes = headroomBytes;
    this.#onError = onError;
  }

  /** GPU work in flight now. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Whether a trim is scheduled (the GPU is idle after work). */
  get scheduled(): boolean {
    return this.#timer !== undefined;
  }

  /** Marks GPU work as begun; call the function it returns once it ended (once). */
  begin(): () => void {
    this.#inFlight++;
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.#inFlight--;
      if (this.#inFlight === 0 && !this.#stopped) {
        this.#timer = setTimeout(() => this.#fire(), this.#idleMs);
        this.#timer.unref?.();
      }
    };
  }

  /** Cancels a scheduled trim and schedules none again. */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  #fire(): void {
    this.#timer = undefined;
    if (this.#inFlight > 0 || this.#stopped) return;
    try {
      const pool = this.#pool();
      if (pool === undefined) return;
      pool.trim(pool.statistics().usedBytes + this.#headroomBytes);
      this.trims++;
    } catch (error) {
      this.#onError(error);
    }
  }
}
