import { type Context, Device } from '../context/device.js';
import { currentContext, currentStream } from '../context/provider.js';
import { check, cudaError, driver, ffiValue, scratch } from '../driver.js';
import { CudaArgumentError, DisposedError } from '../errors.js';
import { CU_EVENT_BLOCKING_SYNC, CU_EVENT_DISABLE_TIMING, CUresult } from '../ffi/cuda.js';
import { assertOptions, booleanOption, contextOption } from '../options-checks.js';
import type { Stream } from './stream.js';

/** The options `Event.create` takes. */
const EVENT_CREATE_OPTIONS: readonly string[] = Object.freeze([
  'timing',
  'blockingSync',
  'context',
]);

/** Options for `Event.create`. */
export interface EventOptions {
  /** Record timestamps so that `elapsedTime` works (default false: timing off). */
  timing?: boolean;
  /** cuEventSynchronize yields the thread instead of spinning (default false). */
  blockingSync?: boolean;
  /** The context to create the event in (default: the current context, the current device's). */
  context?: Context;
}

/**
 * What the finalizer needs: the handle, and for an event shared with other threads the shared
 * count of its holders (the last one destroys it).
 */
interface Held {
  handle: bigint;
  holders: Int32Array | null;
}

const finalizer = new FinalizationRegistry<Held>((held) => {
  try {
    release(held);
  } catch {
    // Process teardown.
  }
});

/** Drops one holder of the event; the last one destroys it. */
function release(held: Held): void {
  if (held.holders !== null && Atomics.sub(held.holders, 0, 1) !== 1) return;
  check(driver().cuEventDestroy_v2(held.handle), 'cuEventDestroy_v2');
}

const EVENT_KIND = 'cuda-tasks/event@1';

/** What crosses to another thread of this process for an event (`Event.toThreadDescriptor`). */
export interface ThreadEventDescriptor {
  /** What made it: `Event.toThreadDescriptor`. */
  readonly kind: typeof EVENT_KIND;
  /** The process that made it: another process refuses the descriptor. */
  readonly pid: number;
  /** The CUevent handle. */
  readonly handle: bigint;
  /** The device ordinal. */
  readonly device: number;
  /** The handle of the device's primary context. */
  readonly context: bigint;
  /** Whether the event records timestamps. */
  readonly timing: boolean;
  /** One Int32 word: how many threads' Event objects hold the event. */
  readonly holders: SharedArrayBuffer;
}

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
  /** The handle, and the shared count of holders once shared with another thread. */
  readonly #held: Held;

  /** @internal Wraps a created or opened CUevent (the event's owner destroys it). */
  protected constructor(handle: bigint, context: Context, timing: boolean, kind = 'Event') {
    this.handle = handle;
    this.ffiHandle = ffiValue(handle);
    this.context = context;
    this.timing = timing;
    this.#kind = kind;
    this.#held = { handle, holders: null };
    finalizer.register(this, this.#held, this);
  }

  /**
   * Creates an event; timing is off unless asked.
   * @example
   * const start = Event.create({ timing: true }), end = Event.create({ timing: true });
   * start.record(); launch(...); end.record(); end.synchronize();
   * console.log(Event.elapsedTime(start, end), 'ms');
   */
  static create(options: EventOptions = {}): Event {
    assertOptions('Event.create', options, EVENT_CREATE_OPTIONS);
    const timing = booleanOption('Event.create', 'timing', options.timing);
    const blockingSync = booleanOption('Event.create', 'blockingSync', options.blockingSync);
    const context = contextOption('Event.create', options.context) ?? currentContext();
    context.makeCurrent();
    const flags =
      (timing ? 0 : CU_EVENT_DISABLE_TIMING) | (blockingSync ? CU_EVENT_BLOCKING_SYNC : 0);
    const handle: (bigint | null)[] = [null];
    check(driver().cuEventCreate(handle, flags), 'cuEventCreate');
    return new Event(handle[0] as bigint, context, timing);
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

  /**
   * Destroys the event (for an event shared with other threads, once every thread's Event of
   * it has been disposed). Safe to call twice.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    finalizer.unregister(this);
    release(this.#held);
  }

  /**
   * A descriptor of this event for another thread of this process (`worker_threads`): plain
   * data that `postMessage` clones, which `Event.fromThreadDescriptor` opens there. The event
   * lives until every thread's Event of it is disposed (or collected); record, wait and query
   * work from any of them.
   * @example worker.postMessage({ done: event.toThreadDescriptor() });
   */
  toThreadDescriptor(): ThreadEventDescriptor {
    this.assertUsable();
    const held = this.#held;
    if (held.holders === null) {
      held.holders = new Int32Array(new SharedArrayBuffer(4));
      held.holders[0] = 1;
    }
    return Object.freeze({
      kind: EVENT_KIND,
      pid: process.pid,
      handle: this.handle,
      device: this.context.device.ordinal,
      context: this.context.handle,
      timing: this.timing,
      holders: held.holders.buffer as SharedArrayBuffer,
    });
  }

  /**
   * Opens in this thread an event another thread of this process described
   * (`toThreadDescriptor`). A CudaArgumentError for a descriptor that does not hold together,
   * one of another process or context, or one whose event every holder has disposed.
   * @example const done = Event.fromThreadDescriptor(message.done); stream.waitEvent(done);
   */
  static fromThreadDescriptor(descriptor: ThreadEventDescriptor): Event {
    const d = descriptor as unknown as Record<string, unknown>;
    const bad = (what: string): never => {
      throw new CudaArgumentError(`Event.fromThreadDescriptor: ${what}`);
    };
    if (typeof d !== 'object' || d === null || d.kind !== EVENT_KIND) {
      bad('not a descriptor from Event.toThreadDescriptor');
    }
    if (d.pid !== process.pid) {
      bad(
        `the descriptor comes from process ${String(d.pid)}, this is ${process.pid}: share events between processes with InterprocessEvent`,
      );
    }
    if (typeof d.handle !== 'bigint' || d.handle <= 0n) bad(`handle ${String(d.handle)}`);
    if (typeof d.context !== 'bigint') bad('context');
    if (!Number.isInteger(d.device) || (d.device as number) < 0) bad(`device ${String(d.device)}`);
    if (typeof d.timing !== 'boolean') bad('timing');
    if (!(d.holders instanceof SharedArrayBuffer) || d.holders.byteLength < 4) bad('holders');
    const context = Device.get(d.device as number).primaryContext();
    if (context.handle !== d.context) {
      bad(`its context is not device ${String(d.device)}'s primary context in this process`);
    }
    const holders = new Int32Array(d.holders as SharedArrayBuffer);
    for (;;) {
      const count = Atomics.load(holders, 0);
      if (count <= 0) bad('every holder of this event has disposed it');
      if (Atomics.compareExchange(holders, 0, count, count + 1) === count) break;
    }
    const event = new Event(d.handle as bigint, context, d.timing as boolean);
    event.#held.holders = holders;
    return event;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}
