import { type Context, contextParts } from '../context/device.js';
import { currentContext } from '../context/provider.js';
import { check, cudaError, driver, ffiValue, int32High, int32Low } from '../driver.js';
import { CaptureError, DisposedError } from '../errors.js';
import { CU_EVENT_DISABLE_TIMING, CU_STREAM_NON_BLOCKING, CUresult } from '../ffi/cuda.js';
import { CU_EVENT_WAIT_EXTERNAL } from '../ffi/graph.js';
import type { StreamCapture } from '../graph/capture.js';
import {
  assertOptions,
  booleanOption,
  contextOption,
  priorityOption,
  stringOption,
} from '../options-checks.js';
import { cudadrvState } from '../process-state.js';
import { useClock } from '../progress.js';
import { STREAM_BRAND } from '../stream-brand.js';
import type { IssueAttachment } from './issue-engine.js';
import { type StreamPriority, streamPriority } from './priority.js';

/** The options `Stream.create` takes. */
const STREAM_CREATE_OPTIONS: readonly string[] = Object.freeze([
  'context',
  'priority',
  'blocking',
  'name',
]);

/** Options for `Stream.create`. */
export interface StreamOptions {
  /** The context the stream belongs to (default: the current stream's context). */
  context?: Context;
  /**
   * Priority (default 0): a name ('high', 'normal', 'low', the names tasks take) or a number of
   * `Context.streamPriorityRange()` (lower numbers run first); see `streamPriority`.
   */
  priority?: StreamPriority | number;
  /** Synchronize with the legacy NULL stream (default false: non-blocking). */
  blocking?: boolean;
  /** A name shown in traces. */
  name?: string;
}

const disposedListeners = cudadrvState('stream-disposed', () => new Set<StreamDisposedListener>());

/**
 * A stream-disposed listener (`onStreamDisposed`). It returns `'keep-native-stream'` when
 * native work of its own may still reach the stream (another thread issuing on it): the
 * disposal then goes on (the stream is drained and takes no more work) but leaves the native
 * stream alive for the process's life instead of destroying it; the listener says so itself
 * (a process warning). Any other return value is ignored.
 */
export type StreamDisposedListener = (stream: Stream) => unknown;

/**
 * Registers a callback that runs when a stream is disposed, before it is destroyed (library
 * handles bound to it unbind there; see `StreamDisposedListener` for keeping the native
 * stream). One that throws does not stop the disposal: `dispose()` throws its error after the
 * stream is gone. Returns a function that unregisters it.
 */
export function onStreamDisposed(listener: StreamDisposedListener): () => void {
  disposedListeners.add(listener);
  return () => disposedListeners.delete(listener);
}

/**
 * @internal What a stream leaves to be given back when it goes: the record its finalizer holds
 * (it refers to no Stream, so that it keeps none alive), also read by `dispose()`.
 */
export interface StreamResources {
  /** The CUstream handle. */
  readonly handle: bigint;
  /** The handle as koffi converts it fastest (see `ffiValue`). */
  readonly ffiHandle: number | bigint;
  /** The context the stream belongs to. */
  readonly context: Context;
  /** Whether the native stream is ours to destroy. */
  readonly owned: boolean;
  /** The hand-off event (see `Stream.waitFor`), 0n until first needed. */
  handoffEvent: bigint;
  /** The event a graph capture records before it begins (see `Stream.captureEvent`), or 0n. */
  captureEvent: bigint;
  /**
   * What the block cache (memory/block-cache.ts) keeps for the stream, or null: its blocks go
   * back, ordered on the stream, before the stream is destroyed, whether by `dispose()` or by
   * the finalizer.
   */
  cachedBlocks: { release(): void } | null;
  /**
   * The issue engine's attachment while the engine drains the stream (as `Stream.issue`), so
   * that a stream the GC takes has its launches issued, and its slot freed, before it is
   * destroyed: the engine holds streams only weakly.
   */
  issue: { collected(): void } | null;
}

// A stream the GC takes without dispose(): give its cached blocks back on it, then destroy it
// (the driver lets queued work finish first) and its events.
const finalizer = new FinalizationRegistry<StreamResources>((held) => {
  try {
    // Its launches the issue engine holds are issued first (a fence), then its slot goes.
    held.issue?.collected();
  } catch {
    // The engine failed: its launches were lost, and its stop reports that.
  }
  try {
    held.context.makeCurrent();
    held.cachedBlocks?.release();
    if (held.owned) driver().cuStreamDestroy_v2(held.handle);
    if (held.handoffEvent !== 0n) driver().cuEventDestroy_v2(held.handoffEvent);
    if (held.captureEvent !== 0n) driver().cuEventDestroy_v2(held.captureEvent);
  } catch {
    // The process may be tearing down; nothing to report to.
  }
});

/**
 * A CUDA stream. Created non-blocking by default; `Stream.wrap` adopts a handle another
 * library created, without owning it.
 */
export class Stream {
  static {
    // The brand lives on the prototype: a per-instance symbol field slows construction.
    (Stream.prototype as any)[STREAM_BRAND] = true;
  }
  readonly #handle: bigint;
  readonly #ffiHandle: number | bigint;
  /** @internal The handle's low 32 bits, for the launch code (see `int32Low`). */
  readonly rawLo: number;
  /** @internal The handle's high 32 bits (see `int32High`). */
  readonly rawHi: number;
  /**
   * @internal The issue engine's record of this stream while the engine drains it (see
   * issue-engine.ts), else null.
   */
  issue: IssueAttachment | null = null;
  /** The context the stream belongs to. */
  readonly context: Context;
  /** Whether dispose() destroys the native stream. */
  readonly owned: boolean;
  /** A name shown in traces. */
  name: string | undefined;
  /**
   * @internal The use-clock tick through which all work on this stream is known complete
   * (see progress.ts): set by a query or synchronize that found the stream idle.
   */
  completedThrough = 0;
  /**
   * @internal The capture in progress on this stream (see `StreamCapture`), else null: work
   * issued to the stream is recorded into a graph, not run.
   */
  capture: StreamCapture | null = null;
  /** @internal The native resources, as the finalizer holds them (see `StreamResources`). */
  readonly resources: StreamResources;
  #disposed = false;
  #handoffEventValue: number | bigint = 0;
  #captureEventValue: number | bigint = 0;
  /**
   * For a wrapped stream after dispose(): the hand-off event, recorded at dispose, marking the
   * last work issued through this wrapper (its owner may still be running it); else 0.
   */
  #tailEvent: number | bigint = 0;

  private constructor(handle: bigint, context: Context, owned: boolean, name?: string) {
    this.#handle = handle;
    this.#ffiHandle = ffiValue(handle);
    this.rawLo = int32Low(handle);
    this.rawHi = int32High(handle);
    this.context = context;
    this.owned = owned;
    this.name = name;
    this.resources = {
      handle,
      ffiHandle: this.#ffiHandle,
      context,
      owned,
      handoffEvent: 0n,
      captureEvent: 0n,
      cachedBlocks: null,
      issue: null,
    };
    finalizer.register(this, this.resources, this);
  }

  /**
   * The CUstream handle. With the issue engine running (`startIssueEngine`), reading it first
   * waits until the stream's launches are issued, so that whatever is passed the handle comes
   * after them in the stream's order.
   */
  get handle(): bigint {
    const issue = this.issue;
    if (issue?.pending()) issue.fence();
    return this.#handle;
  }

  /**
   * The handle as koffi converts it fastest (a Number; see `ffiValue`): pass this to native
   * functions whose parameter is declared `uint64_t` on hot paths. Waits for the issue engine
   * as `handle` does.
   */
  get ffiHandle(): number | bigint {
    const issue = this.issue;
    if (issue?.pending()) issue.fence();
    return this.#ffiHandle;
  }

  /**
   * @internal The handle without waiting for the issue engine: for the engine itself, and for
   * calls that may come earlier in the stream's order than its launches not issued yet (a
   * stream-ordered allocation).
   */
  get rawHandle(): bigint {
    return this.#handle;
  }

  /** @internal `rawHandle` as koffi converts it fastest. */
  get rawFfiHandle(): number | bigint {
    return this.#ffiHandle;
  }

  /**
   * @internal `fence()` without its error report: waits until the issue engine has issued the
   * stream's launches (a library call through a handle bound to the stream comes after them).
   */
  waitForIssue(): void {
    const issue = this.issue;
    if (issue?.pending()) issue.fence();
  }

  /**
   * @internal Before a capture begins: the issue engine's launches for this stream are issued,
   * and its issuer no longer queries the stream for a wait (without the engine, nothing to do).
   */
  quiesceIssue(): void {
    const issue = this.issue;
    if (issue === null) return;
    issue.quiesce();
  }

  /**
   * @internal The work of a cancelled task: launches the issue engine holds for this stream
   * and has not issued yet never reach the driver (without the engine, nothing to do).
   */
  cancelIssue(): void {
    this.issue?.cancelPending();
  }

  /**
   * Waits (microseconds, on this thread) until the issue engine has issued every launch made
   * on this stream so far, and throws the first one the driver refused since the last check
   * (a CudaError naming the kernel). Without the engine it does nothing. Call it before native
   * work that reaches the stream without its handle: a library call through a handle bound to
   * the stream earlier (the kit's `IssueEnvelope` calls it for you).
   */
  fence(): void {
    this.#fenceIssue(false);
  }

  /**
   * `fence()`'s work: `blocking` when the caller blocks until the stream's work is done anyway
   * (its wait is then not counted as the engine's).
   */
  #fenceIssue(blocking: boolean): void {
    const issue = this.issue;
    if (issue === null) return;
    issue.fence(blocking);
    const error = issue.takeError();
    if (error !== null) throw error;
  }

  /**
   * Creates a stream (non-blocking unless `blocking: true`). A priority that is neither a name
   * nor an integer is a `CudaArgumentError`, before any native call.
   * @example const s = Stream.create({ priority: 'high' });
   */
  static create(options: StreamOptions = {}): Stream {
    assertOptions('Stream.create', options, STREAM_CREATE_OPTIONS);
    const blocking = booleanOption('Stream.create', 'blocking', options.blocking);
    priorityOption('Stream.create', options.priority);
    stringOption('Stream.create', 'name', options.name);
    const context = contextOption('Stream.create', options.context) ?? currentContext();
    const priority = options.priority === undefined ? 0 : streamPriority(options.priority, context);
    context.makeCurrent();
    const handle: (bigint | null)[] = [null];
    check(
      driver().cuStreamCreateWithPriority(handle, blocking ? 0 : CU_STREAM_NON_BLOCKING, priority),
      'cuStreamCreateWithPriority',
    );
    return new Stream(handle[0] as bigint, context, true, options.name);
  }

  /**
   * Wraps a CUstream created elsewhere (another library, another binding). The wrapper never
   * destroys it.
   */
  static wrap(handle: bigint, context: Context = currentContext(), name?: string): Stream {
    return new Stream(handle, context, false, name);
  }

  /** True for a Stream of any loaded copy of this package. */
  static isInstance(value: unknown): value is Stream {
    return typeof value === 'object' && value !== null && STREAM_BRAND in value;
  }

  /**
   * Whether `dispose()` has been called. A disposed stream takes no more work: every operation
   * given it throws a DisposedError naming it, before any native call.
   */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * Whether the stream is capturing a graph: its work is recorded, not run, until the capture
   * ends, so nothing can wait for it (`query`, `synchronize` give a CaptureError).
   */
  get capturing(): boolean {
    return this.capture !== null;
  }

  /** @internal A CaptureError for `operation`, which cannot happen while the stream captures. */
  capturingError(operation: string): CaptureError {
    return new CaptureError(
      operation,
      `${this} is capturing a graph: its work runs only when the graph is launched, and waiting for or querying the stream would invalidate the capture. Wait after the capture has ended (or after launching the graph)`,
    );
  }

  /**
   * @internal Whether the work of a buffer use stamped `stamp` is known complete: no hand-off
   * from this stream needs to be ordered on the GPU for it.
   */
  hasCompleted(stamp: number): boolean {
    return stamp <= this.completedThrough || stamp <= this.context.completedThrough;
  }

  /** @internal Records that all work issued before the clock read `stamp` has completed. */
  markCompleted(stamp: number): void {
    if (stamp > this.completedThrough) this.completedThrough = stamp;
  }

  /** True when all work submitted to the stream has completed. */
  query(): boolean {
    this.assertUsable();
    if (this.capture !== null) throw this.capturingError('Stream.query');
    if (this.issue !== null) this.fence();
    const stamp = useClock.value;
    const result = driver().cuStreamQuery(this.ffiHandle);
    if (result === CUresult.CUDA_SUCCESS) {
      this.markCompleted(stamp);
      return true;
    }
    if (result === CUresult.CUDA_ERROR_NOT_READY) return false;
    throw cudaError(result, 'cuStreamQuery');
  }

  /** Blocks the calling thread until the stream's work is done. Scripts only: it blocks the event loop. */
  synchronize(): void {
    this.assertUsable();
    if (this.capture !== null) throw this.capturingError('Stream.synchronize');
    // This call blocks until the work is done: the fence's wait is part of it, not the engine's.
    this.#fenceIssue(true);
    const stamp = useClock.value;
    check(driver().cuStreamSynchronize(this.ffiHandle), 'cuStreamSynchronize');
    this.markCompleted(stamp);
  }

  /**
   * Makes later work on this stream wait for `event` (on the GPU; the host does not wait).
   * While the stream captures, the wait is captured as an external event wait: each replay
   * waits for the event's latest record at that time.
   */
  waitEvent(event: { handle: bigint; ffiHandle?: number | bigint }): void {
    this.assertUsable();
    check(
      driver().cuStreamWaitEvent(
        this.ffiHandle,
        event.ffiHandle ?? event.handle,
        this.capture === null ? 0 : CU_EVENT_WAIT_EXTERNAL,
      ),
      'cuStreamWaitEvent',
    );
  }

  /**
   * Orders this stream after all work submitted so far to `other`, on the GPU: records an
   * event on `other` and makes this stream wait for it. The host never blocks. A disposed
   * `other` is fine: an owned one was drained by its dispose (nothing to wait for), a wrapped
   * one left the event recorded at its dispose, which this stream waits for. While this
   * stream captures, the graph's launches wait for `other` instead (its work at launch time);
   * while `other` captures, this stream waits for what `other` had before its capture began
   * (its captured work has not run).
   */
  waitFor(other: Stream): void {
    this.assertUsable();
    if (other === this) return;
    const capture = this.capture;
    if (capture !== null) {
      capture.dependOn(other);
      return;
    }
    const api = driver();
    if (other.#disposed) {
      const tail = other.#tailEvent;
      if (tail !== 0) check(api.cuStreamWaitEvent(this.ffiHandle, tail, 0), 'cuStreamWaitEvent');
      return;
    }
    const otherCapture = other.capture;
    if (otherCapture !== null) {
      check(
        api.cuStreamWaitEvent(this.ffiHandle, otherCapture.precaptureEvent, 0),
        'cuStreamWaitEvent',
      );
      return;
    }
    const event = other.handoffEvent();
    check(api.cuEventRecord(event, other.ffiHandle), 'cuEventRecord');
    check(api.cuStreamWaitEvent(this.ffiHandle, event, 0), 'cuStreamWaitEvent');
  }

  /**
   * @internal For a wrapped stream after dispose(): the event recorded at its dispose, which
   * marks the last work issued through it (as `ffiValue` gives it); else 0.
   */
  get tailEvent(): number | bigint {
    return this.#tailEvent;
  }

  /** The stream's priority. */
  priority(): number {
    this.assertUsable();
    const value = [0];
    check(driver().cuStreamGetPriority(this.handle, value), 'cuStreamGetPriority');
    return value[0]!;
  }

  /** A timing-free event used to hand work off from this stream to another (reused; waits capture its state). */
  private handoffEvent(): number | bigint {
    if (this.resources.handoffEvent === 0n) {
      this.context.makeCurrent();
      const handle: (bigint | null)[] = [null];
      check(driver().cuEventCreate(handle, CU_EVENT_DISABLE_TIMING), 'cuEventCreate');
      this.resources.handoffEvent = handle[0] as bigint;
      this.#handoffEventValue = ffiValue(handle[0] as bigint);
    }
    return this.#handoffEventValue;
  }

  /**
   * @internal The event a capture records on this stream just before it begins (reused, like
   * the hand-off event): what other streams wait for while the stream captures.
   */
  captureEvent(): number | bigint {
    if (this.resources.captureEvent === 0n) {
      this.context.makeCurrent();
      const handle: (bigint | null)[] = [null];
      check(driver().cuEventCreate(handle, CU_EVENT_DISABLE_TIMING), 'cuEventCreate');
      this.resources.captureEvent = handle[0] as bigint;
      this.#captureEventValue = ffiValue(handle[0] as bigint);
    }
    return this.#captureEventValue;
  }

  /**
   * Throws a DisposedError naming the stream after `dispose()` (one field read). Every
   * operation of cuda-tasks calls it before its first native call; call it yourself before
   * handing `handle` to foreign code.
   */
  assertUsable(): void {
    if (this.#disposed) throw new DisposedError(String(this));
  }

  /**
   * Destroys an owned stream after its pending work completes (the host waits for it, so that
   * buffers last used on it are safe to free elsewhere). A wrapped stream is not ours to wait
   * for or destroy: an event recorded on it now marks the last work issued through the
   * wrapper, and later hand-offs and frees of buffers it used wait for that event on the GPU.
   * Either way the stream takes no more work. Safe to call twice. A stream that is capturing
   * cannot be disposed (a CaptureError): end the capture first. A stream-disposed listener
   * may keep the native stream alive (`StreamDisposedListener`); one that throws
   * (`onStreamDisposed`) does not stop the others or the disposal: its error is thrown once
   * the stream is gone (an AggregateError for several).
   */
  dispose(): void {
    if (this.#disposed) return;
    if (this.capture !== null) throw this.capturingError('Stream.dispose');
    // Each listener in its own try: one that throws neither stops the others nor keeps the
    // stream alive; what they threw comes after the stream is gone.
    let errors: unknown[] | undefined;
    let keepNative = false;
    if (disposedListeners.size !== 0) {
      for (const listener of disposedListeners) {
        try {
          if (listener(this) === 'keep-native-stream') keepNative = true;
        } catch (error) {
          (errors ??= []).push(error);
        }
      }
    }
    this.#disposed = true;
    // Every launch the issue engine holds for the stream is issued before anything goes.
    const issue = this.issue;
    if (issue !== null) {
      this.issue = null;
      this.resources.issue = null;
      try {
        issue.detach(this);
      } catch (error) {
        (errors ??= []).push(error);
      }
    }
    const api = driver();
    const resources = this.resources;
    this.context.makeCurrent();
    // Cached blocks go back ordered on the stream, before it is destroyed.
    resources.cachedBlocks?.release();
    if (this.owned) {
      finalizer.unregister(this);
      const stamp = useClock.value;
      check(api.cuStreamSynchronize(this.ffiHandle), 'cuStreamSynchronize');
      // Every use of a buffer on this stream is complete: hand-offs from it need nothing more.
      this.markCompleted(stamp);
      // A listener said native work may still reach it: never destroyed (nor by the finalizer).
      if (!keepNative) check(api.cuStreamDestroy_v2(this.#handle), 'cuStreamDestroy_v2');
      if (resources.handoffEvent !== 0n) {
        api.cuEventDestroy_v2(resources.handoffEvent);
        resources.handoffEvent = 0n;
      }
    } else {
      // The event stays until the wrapper is collected (the finalizer destroys it).
      const tail = this.handoffEvent();
      check(api.cuEventRecord(tail, this.ffiHandle), 'cuEventRecord');
      this.#tailEvent = tail;
    }
    if (resources.captureEvent !== 0n) {
      api.cuEventDestroy_v2(resources.captureEvent);
      resources.captureEvent = 0n;
    }
    if (errors === undefined) return;
    if (errors.length === 1) throw errors[0];
    throw new AggregateError(errors, `${errors.length} stream-disposed listeners failed`);
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  /** `Stream(name)`, or the handle in hex for an unnamed stream. */
  toString(): string {
    return `Stream(${this.name ?? `0x${this.#handle.toString(16)}`})`;
  }
}

// A context's default stream is a Stream like any other, created on first use.
contextParts.createStream = (context) => Stream.create({ context });
