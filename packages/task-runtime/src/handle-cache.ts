import { type Context, currentStream, onOutOfMemory, type Stream } from '@cuda-tasks/cudadrv';
import { onStreamDisposed } from '@cuda-tasks/cudadrv/internal';
import { reportCleanupError } from './cleanup.js';
import { onStreamReleased } from './pool.js';
import { currentTaskState, type TaskResourceOwner, type TaskState } from './state.js';

/** How a `HandleCache` makes, binds and destroys a library's handles. */
export interface HandleCacheOptions<H> {
  /** Library name for diagnostics, e.g. 'cublas'. */
  name: string;
  /** Creates a handle in `context` (already current). Expensive: milliseconds for cuBLAS. */
  create(context: Context): H;
  /** Destroys a handle (its context is current). */
  destroy(handle: H, context: Context): void;
  /**
   * Binds the handle to `stream` (e.g. cublasSetStream); called only when the stream changes.
   * `previous` is the stream it was last bound to, also after an unbind (undefined for a new
   * handle): when it is `stream` (a pooled stream that came back with the same handle), the
   * library still has that stream and a SetStream call can be skipped.
   */
  bindStream(handle: H, stream: Stream, previous: Stream | undefined): void;
  /**
   * Called when `stream` stops being usable for the handle: the stream went back to the
   * runtime's pool, or the handle is about to be destroyed. Free per-(handle, stream)
   * resources here; the next use rebinds.
   */
  unbindStream?(handle: H, stream: Stream): void;
  /** Idle handles kept per context (default 32); more are destroyed. */
  maxIdlePerContext?: number;
}

/** One handle and what it is bound to; a task's leases form a chain, one per context. */
interface HandleRecord<H> {
  readonly handle: H;
  readonly context: Context;
  bound: Stream | undefined;
  /** The stream it was last bound to (kept after unbinding): leases prefer a match. */
  lastBound: Stream | undefined;
  /** The next lease of the same task (another context). */
  nextLease: HandleRecord<H> | undefined;
}

/**
 * A cache of library handles (cuBLAS, cuSOLVER, cuRAND generators, or your own: cuFFT,
 * cuSPARSE, ...): idle pools per context; one lease per task and context, returned when the
 * task settles (never left to the GC); a bounded idle pool; and lazy binding: each `get()`
 * rebinds only when the current stream differs from the handle's bound stream, so a stream
 * switch without a library call costs nothing.
 * @example
 * const cache = new HandleCache<bigint>({
 *   name: 'cufft',
 *   create: () => { const out = [null]; check(cufftCreate(out)); return out[0]; },
 *   destroy: (plan) => cufftDestroy(plan),
 *   bindStream: (plan, stream) => cufftSetStream(plan, stream.handle),
 * });
 * cufftExecC2C(cache.get(), ...); // the current task's plan, on the current stream
 */
export class HandleCache<H> implements TaskResourceOwner {
  /** The name given in the options (in errors and traces). */
  readonly name: string;
  readonly #options: HandleCacheOptions<H>;
  readonly #maxIdle: number;
  readonly #idle = new Map<Context, HandleRecord<H>[]>();
  readonly #records = new Map<H, HandleRecord<H>>();
  /** The records bound to each stream, so that releasing a stream touches only those. */
  readonly #boundTo = new Map<Stream, Set<HandleRecord<H>>>();
  #created = 0;
  #destroyed = 0;
  #leased = 0;

  constructor(options: HandleCacheOptions<H>) {
    this.name = options.name;
    this.#options = options;
    this.#maxIdle = options.maxIdlePerContext ?? 32;
    onStreamReleased((stream) => this.unbindFrom(stream));
    onStreamDisposed((stream) => this.unbindFrom(stream));
    onOutOfMemory(() => this.destroyIdle());
  }

  /**
   * The running task's handle for the stream's context, bound to `stream` (default: the
   * current stream). Allocates nothing once the task holds its lease. A disposed stream gives
   * a DisposedError naming it, before any lease or bind.
   */
  get(stream: Stream = currentStream()): H {
    stream.assertUsable();
    const task = currentTaskState();
    const context = stream.context;
    let record = task.leases.get(this) as HandleRecord<H> | undefined;
    while (record !== undefined && record.context !== context) record = record.nextLease;
    if (record === undefined) record = this.lease(task, context, stream);
    if (record.bound !== stream) {
      this.#options.bindStream(record.handle, stream, record.lastBound);
      this.#setBound(record, stream);
    }
    return record.handle;
  }

  #setBound(record: HandleRecord<H>, stream: Stream | undefined): void {
    const previous = record.bound;
    if (previous !== undefined) {
      const set = this.#boundTo.get(previous);
      set?.delete(record);
      if (set?.size === 0) this.#boundTo.delete(previous);
    }
    record.bound = stream;
    if (stream !== undefined) {
      record.lastBound = stream;
      let set = this.#boundTo.get(stream);
      if (set === undefined) this.#boundTo.set(stream, (set = new Set()));
      set.add(record);
    }
  }

  /** The stream `handle` is bound to, or undefined. */
  boundStream(handle: H): Stream | undefined {
    return this.#records.get(handle)?.bound;
  }

  private lease(task: TaskState, context: Context, stream: Stream): HandleRecord<H> {
    let record = this.#takeIdle(context, stream);
    if (record === undefined) {
      context.makeCurrent();
      const handle = this.#options.create(context);
      this.#created++;
      record = { handle, context, bound: undefined, lastBound: undefined, nextLease: undefined };
      this.#records.set(handle, record);
    }
    record.nextLease = task.leases.get(this) as HandleRecord<H> | undefined;
    task.leases.set(this, record);
    this.#leased++;
    return record;
  }

  /**
   * An idle handle of `context`, preferring the one last bound to `stream` (pooled streams go
   * back to tasks, so a task often gets the stream its predecessor used): rebinding a handle
   * to the stream it had is the cheap case (a per-stream workspace freed on that stream is
   * reused at once by the stream-ordered pool). Else the most recently idle one.
   */
  #takeIdle(context: Context, stream: Stream): HandleRecord<H> | undefined {
    const idle = this.#idle.get(context);
    if (idle === undefined || idle.length === 0) return undefined;
    const last = idle.length - 1;
    for (let i = last; i >= 0; i--) {
      const candidate = idle[i]!;
      if (candidate.lastBound === stream) {
        idle[i] = idle[last]!;
        idle.length = last;
        return candidate;
      }
    }
    return idle.pop();
  }

  /**
   * @internal Returns a settled task's leases to the idle pools (called by the runtime). Each
   * lease in its own try: a destroy that throws strands no other lease. Throws what failed
   * (an AggregateError for several) once every lease is back.
   */
  releaseTask(task: TaskState): void {
    const errors: unknown[] = [];
    let record = task.leases.get(this) as HandleRecord<H> | undefined;
    while (record !== undefined) {
      const next = record.nextLease;
      record.nextLease = undefined;
      this.#leased--;
      let idle = this.#idle.get(record.context);
      if (idle === undefined) this.#idle.set(record.context, (idle = []));
      if (idle.length < this.#maxIdle) idle.push(record);
      else {
        try {
          this.destroyRecord(record);
        } catch (error) {
          errors.push(error);
        }
      }
      record = next;
    }
    if (errors.length === 1) throw errors[0];
    if (errors.length > 1) {
      throw new AggregateError(errors, `${this.name}: ${errors.length} handles failed to release`);
    }
  }

  /** Unbinds every handle bound to `stream`; never throws (failures go to onCleanupError). */
  private unbindFrom(stream: Stream): void {
    const records = this.#boundTo.get(stream);
    if (records === undefined) return;
    this.#boundTo.delete(stream);
    for (const record of records) {
      record.bound = undefined;
      try {
        this.#options.unbindStream?.(record.handle, stream);
      } catch (error) {
        reportCleanupError(error, undefined);
      }
    }
  }

  /** Unbinds and destroys; the record is gone from the cache even when destroy throws. */
  private destroyRecord(record: HandleRecord<H>): void {
    this.#records.delete(record.handle);
    this.#destroyed++;
    const bound = record.bound;
    try {
      if (bound !== undefined) {
        this.#setBound(record, undefined);
        this.#options.unbindStream?.(record.handle, bound);
      }
    } finally {
      record.context.makeCurrent();
      this.#options.destroy(record.handle, record.context);
    }
  }

  /** Destroys all idle handles (it runs on out-of-memory too); returns how many. */
  destroyIdle(): number {
    let count = 0;
    for (const idle of this.#idle.values()) {
      for (const record of idle.splice(0)) {
        this.destroyRecord(record);
        count++;
      }
    }
    return count;
  }

  /** Handles created and destroyed so far, and idle and leased now. */
  statistics(): { created: number; destroyed: number; idle: number; leased: number } {
    let idle = 0;
    for (const list of this.#idle.values()) idle += list.length;
    return { created: this.#created, destroyed: this.#destroyed, idle, leased: this.#leased };
  }
}
