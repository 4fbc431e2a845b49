import type { Context } from '../context/device.js';
import { currentContext, currentStream } from '../context/provider.js';
import { check, cudaError, driver, ffiValue, scratch } from '../driver.js';
import { DisposedError } from '../errors.js';
import { CU_EVENT_BLOCKING_SYNC, CU_EVENT_DISABLE_TIMING, CUresult } from '../ffi/cuda.js';
import type { Stream } from './stream.js';

/** Options for `Event.create`. */
export interface EventOptions {
  /** Record timestamps so that `elapsedTime` works (default false: timing off). */
  timing?: boolean;
  /** cuEventSynchronize yields the thread instead of spinning (default false). */
  blockingSync?: boolean;
  /** The context to create the event in (default: the current context, the current device's). */
  context?: Context;
}

const finalizer = new FinalizationRegistry<{ handle: bigint }>((held) => {
  try {
    driver().cuEventDestroy_v2(held.handle);
  } catch {
    // Process teardown.
  }
});

/** A CUDA event: a marker in a stream that the host or other streams can wait for. */
export class Event {
  /** The CUevent handle. */
  readonly handle: bigint;
  /** The handle as koffi converts it fastest (see `ffiValue`). */
  readonly ffiHandle: number | bigint;
  /** The context the event belongs to. */
  readonly context: Context;
  /** Whether the event records timestamps (`Event.elapsedTime` needs them). */
  readonly timing: boolean;
  #disposed = false;
  /** What a DisposedError names (the class the user made). */
  readonly #kind: string;

  /** @internal Wraps a created or opened CUevent (the event's owner destroys it). */
  protected constructor(handle: bigint, context: Context, timing: boolean, kind = 'Event') {
    this.handle = handle;
    this.ffiHandle = ffiValue(handle);
    this.context = context;
    this.timing = timing;
    this.#kind = kind;
    finalizer.register(this, { handle }, this);
  }

  /**
   * Creates an event; timing is off unless asked.
   * @example
   * const start = Event.create({ timing: true }), end = Event.create({ timing: true });
   * start.record(); launch(...); end.record(); end.synchronize();
   * console.log(Event.elapsedTime(start, end), 'ms');
   */
  static create(options: EventOptions = {}): Event {
    const context = options.context ?? currentContext();
    context.makeCurrent();
    const flags =
      (options.timing ? 0 : CU_EVENT_DISABLE_TIMING) |
      (options.blockingSync ? CU_EVENT_BLOCKING_SYNC : 0);
    const handle: (bigint | null)[] = [null];
    check(driver().cuEventCreate(handle, flags), 'cuEventCreate');
    return new Event(handle[0] as bigint, context, options.timing ?? false);
  }

  /** Records the event on `stream` (default: the current stream). */
  record(stream: Stream = currentStream()): this {
    this.assertUsable();
    stream.assertUsable();
    check(driver().cuEventRecord(this.ffiHandle, stream.ffiHandle), 'cuEventRecord');
    return this;
  }

  /** True when the work before the last record has completed. */
  query(): boolean {
    this.assertUsable();
    const result = driver().cuEventQuery(this.ffiHandle);
    if (result === CUresult.CUDA_SUCCESS) return true;
    if (result === CUresult.CUDA_ERROR_NOT_READY) return false;
    throw cudaError(result, 'cuEventQuery');
  }

  /** Blocks the calling thread until the event has completed. */
  synchronize(): void {
    this.assertUsable();
    check(driver().cuEventSynchronize(this.ffiHandle), 'cuEventSynchronize');
  }

  /** Milliseconds between two completed, timing-enabled events. */
  static elapsedTime(start: Event, end: Event): number {
    start.assertUsable();
    end.assertUsable();
    const out = scratch();
    check(driver().cuEventElapsedTime(out.f32, start.handle, end.handle), 'cuEventElapsedTime');
    return out.f32[0]!;
  }

  /** @internal Throws a DisposedError once `dispose()` has been called. */
  protected assertUsable(): void {
    if (this.#disposed) throw new DisposedError(this.#kind);
  }

  /** Whether `dispose()` has been called. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /** Destroys the event. Safe to call twice. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    finalizer.unregister(this);
    check(driver().cuEventDestroy_v2(this.handle), 'cuEventDestroy_v2');
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
