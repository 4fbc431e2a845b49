import { AsyncLocalStorage, executionAsyncId, executionAsyncResource } from 'node:async_hooks';
import {
  type CaptureError,
  CudaArgumentError,
  Device,
  DisposedError,
  type Stream,
} from '@cuda-tasks/cudadrv';
import {
  defaultDevice,
  defaultDeviceOrdinal,
  setCurrentStreamProvider,
} from '@cuda-tasks/cudadrv/internal';
import { reportCleanupError } from './cleanup.js';
import {
  acquireStream,
  endLeftOpenCapture,
  type PooledStream,
  pooledStream,
  releaseStream,
} from './pool.js';
import { streamPriority } from './priority.js';
import { processWide } from './process-wide.js';

// Process-wide: task ids stay unique when two copies of this package load.
const taskIds = processWide('task-ids', () => ({ next: 0 }));

import type { StreamPriority } from '@cuda-tasks/cudadrv';
import type { TaskPriority } from './priority.js';

export type { TaskPriority };

/**
 * A resource a task holds until it settles: an entry of the task's lease list (see
 * `TaskState.leases`). Owners extend it with what they need to give the resource back.
 */
export interface TaskLease {
  /** Who gives it back when the task settles. */
  readonly owner: TaskResourceOwner;
  /** The lease the task took before this one (of any owner), or undefined. */
  readonly next: TaskLease | undefined;
}

/** Something that holds per-task resources and gives them back when the task settles. */
export interface TaskResourceOwner {
  /** Gives back `lease`, one of `task`'s from this owner (called once per lease, when the task settles). */
  releaseLease(task: TaskState, lease: TaskLease): void;
}

/** What a trace recorder hears of a task (see trace.ts). */
export interface TaskObserver {
  /** The task starts (before its function runs). */
  taskStarted(task: TaskState): void;
  /** The task's function has settled (before its resources go back). */
  taskSettled(task: TaskState): void;
}

/**
 * A task's state: its streams (one per device, taken lazily from the pool), its library
 * handle leases, and its place in the task tree. A task that runs on one device and makes no
 * library call keeps all of it in the record's own fields: starting and settling it allocates
 * no array, map or closure.
 */
export class TaskState {
  readonly id: number;
  readonly name: string | undefined;
  readonly parent: TaskState | undefined;
  readonly isRoot: boolean;
  /** The priority of its streams (inherited from the parent unless the task gave its own). */
  readonly priority: StreamPriority;
  /**
   * What cancels the task: its own `signal` option combined with its parent's (undefined:
   * nothing). Once aborted, every GPU operation issued from the task throws its reason.
   */
  readonly signal: AbortSignal | undefined;
  /**
   * The ordinal of the device the task runs on where no `withDevice` is in force: the process
   * default device when it started (or its parent's), kept while it runs whatever
   * `setDefaultDevice` does meanwhile. -1 for the root task, which follows the process default.
   */
  readonly deviceOrdinal: number;
  /** The device ordinal of `ownStream` (-1 while the task has taken no stream). */
  ownOrdinal = -1;
  /** The task's stream on the first device it used (from the pool; undefined before). */
  ownStream: Stream | undefined = undefined;
  /** The pool's record of `ownStream`. */
  ownPooled: PooledStream | undefined = undefined;
  /** Its pool streams on further devices, per ordinal (undefined until it uses a second device). */
  otherStreams: (PooledStream | undefined)[] | undefined = undefined;
  /** The resources it holds (handle leases), newest first; undefined while it holds none. */
  leases: TaskLease | undefined = undefined;
  /** The trace recorder that saw it start (told when it settles), or null. */
  observer: TaskObserver | null = null;
  settled = false;
  /**
   * The frames of its last two `withStream` streams, reused while still valid (see
   * `streamFrame`): alternating two streams allocates no frame per call.
   */
  lastStreamFrame: Frame | undefined = undefined;
  previousStreamFrame: Frame | undefined = undefined;
  /**
   * Registered on `signal` once the task takes a stream: cancels the launches cudadrv's issue
   * engine holds for its streams and has not issued yet (see `cancelIssued`).
   */
  #onAbort: (() => void) | undefined = undefined;

  constructor(
    name: string | undefined,
    parent: TaskState | undefined,
    priority: StreamPriority = 'normal',
    signal: AbortSignal | undefined = undefined,
    deviceOrdinal = -1,
  ) {
    this.id = taskIds.next++;
    this.deviceOrdinal = deviceOrdinal;
    this.name = name;
    this.parent = parent;
    this.isRoot = parent === undefined;
    this.priority = priority;
    this.signal = signal;
  }

  /** The task's stream on `device`: the context's default stream for the root task, a pooled stream otherwise. */
  streamFor(device: Device): Stream {
    const ordinal = device.ordinal;
    if (ordinal === this.ownOrdinal) return this.ownStream!;
    const other = this.otherStreams?.[ordinal];
    if (other !== undefined) return other.stream;
    const context = device.primaryContext();
    // The root task, and code that outlives its task, use the context's default stream.
    if (this.isRoot || this.settled) return context.defaultStream;
    const entry = acquireStream(context, streamPriority(context, this.priority));
    if (this.signal !== undefined && this.#onAbort === undefined) {
      this.#onAbort = () => this.#cancelIssued();
      this.signal.addEventListener('abort', this.#onAbort, { once: true });
    }
    if (this.ownOrdinal < 0) {
      this.ownOrdinal = ordinal;
      this.ownStream = entry.stream;
      this.ownPooled = entry;
    } else {
      (this.otherStreams ??= [])[ordinal] = entry;
    }
    return entry.stream;
  }

  /**
   * Ends stream captures left open on the streams only it holds (before anything is given
   * back: a handle's hand-off event or a workspace free would otherwise be recorded into the
   * orphaned graph), returns leases, then streams (so handle caches can unbind from the
   * streams first). Each lease and each stream is given back in its own try: one failure (a
   * destroy after a sticky error) strands nothing else. Never throws: failures go to
   * `onCleanupError` listeners (or become process warnings), so they never replace the task's
   * own outcome. Returns the CaptureError of a capture it left open (ended by then), for the
   * task to report, or undefined.
   */
  settle(): CaptureError | undefined {
    if (this.settled) return undefined;
    this.settled = true;
    if (this.#onAbort !== undefined) {
      this.signal!.removeEventListener('abort', this.#onAbort);
      this.#onAbort = undefined;
    }
    const own = this.ownPooled;
    const others = this.otherStreams;
    let leftOpen = own === undefined ? undefined : this.#endCapture(own);
    if (others !== undefined) {
      for (const entry of others) {
        if (entry === undefined) continue;
        const found = this.#endCapture(entry);
        if (found === undefined) continue;
        if (leftOpen === undefined) leftOpen = found;
        else reportCleanupError(found, this);
      }
    }
    let lease = this.leases;
    this.leases = undefined;
    while (lease !== undefined) {
      const next = lease.next;
      try {
        lease.owner.releaseLease(this, lease);
      } catch (error) {
        reportCleanupError(error, this);
      }
      lease = next;
    }
    if (own !== undefined) {
      this.ownPooled = undefined;
      this.ownStream = undefined;
      this.ownOrdinal = -1;
      this.#release(own);
    }
    if (others !== undefined) {
      this.otherStreams = undefined;
      for (const entry of others) if (entry !== undefined) this.#release(entry);
    }
    return leftOpen;
  }

  /**
   * Ends a capture left open on `entry` when this task alone holds it (a shared stream's is
   * ended when its last holder lets go). Never throws.
   */
  #endCapture(entry: PooledStream): CaptureError | undefined {
    if (entry.holders !== 1) return undefined;
    try {
      // The task itself, named only in a message: no string made at every task's end.
      return endLeftOpenCapture(entry, this);
    } catch (error) {
      reportCleanupError(error, this);
      return undefined;
    }
  }

  /**
   * The task aborted: the launches the issue engine holds for the streams only this task holds
   * are not issued (nothing reaches the driver after the abort; a stream shared with other
   * tasks keeps theirs). Without the engine, nothing to do.
   */
  #cancelIssued(): void {
    if (this.settled) return;
    const own = this.ownPooled;
    if (own !== undefined && own.holders === 1) own.stream.cancelIssue?.();
    const others = this.otherStreams;
    if (others !== undefined) {
      for (const entry of others) {
        if (entry !== undefined && entry.holders === 1) entry.stream.cancelIssue?.();
      }
    }
  }

  #release(entry: PooledStream): void {
    try {
      // A cancelled task's stream may still run its queued work: handed out last. A stream
      // only this task held has had its capture ended in settle().
      releaseStream(entry, this.signal?.aborted === true, entry.holders === 1);
    } catch (error) {
      reportCleanupError(error, this);
    }
  }

  toString(): string {
    return this.name === undefined ? `task #${this.id}` : `task #${this.id} "${this.name}"`;
  }
}

/** What an async scope sees: its task, and the device and stream overrides in force. */
export interface Frame {
  readonly task: TaskState;
  /**
   * The task's `signal`, kept here too: a launch resolves its stream from the frame alone,
   * without reading the task (see `streamOf`).
   */
  readonly signal: AbortSignal | undefined;
  /** The device for operations (undefined: the process default device). */
  readonly device: Device | undefined;
  /** A stream set by withStream (undefined: the task's own stream for the device). */
  readonly stream: Stream | undefined;
  /**
   * When `stream` is a pool stream: its pool record, and the record's epoch when the frame
   * was opened. Once the epoch moves on (every task holding the stream has settled, and the
   * pool may hand it to another task), the frame stops using it.
   */
  readonly pooled: PooledStream | undefined;
  readonly epoch: number;
}

interface RuntimeState {
  storage: AsyncLocalStorage<Frame>;
  root: Frame;
  /** The async id (`executionAsyncId()`) `frameCache` was found under; -1: none. */
  frameCacheId: number;
  /** The frame the code running under `frameCacheId` sees (see `currentFrame`). */
  frameCache: Frame;
  /**
   * The frames `withStream` entered last, two of them, each with the frame it was entered
   * from and its stream (see `enterStreamFrame`): a loop that alternates two streams finds
   * both here. Undefined until used (also where an older loaded copy made this state).
   */
  scopeOuter?: Frame | undefined;
  scopeStream?: Stream | undefined;
  scopeFrame?: Frame | undefined;
  scopeOuterB?: Frame | undefined;
  scopeStreamB?: Stream | undefined;
  scopeFrameB?: Frame | undefined;
}

// Process-wide: a second loaded copy of this package shares the same storage and root task.
const runtime = processWide<RuntimeState>('runtime', () => {
  const root: Frame = {
    task: new TaskState('root', undefined),
    signal: undefined,
    device: undefined,
    stream: undefined,
    pooled: undefined,
    epoch: 0,
  };
  return {
    storage: new AsyncLocalStorage<Frame>(),
    root,
    frameCacheId: -1,
    frameCache: root,
    scopeOuter: undefined,
    scopeStream: undefined,
    scopeFrame: undefined,
    scopeOuterB: undefined,
    scopeStreamB: undefined,
    scopeFrameB: undefined,
  };
});

/**
 * @internal A wrong argument as the runtime's messages show it: `null`, an object's
 * `[object Type]`, anything else as `String` gives it.
 */
export function shownArgument(value: unknown): string {
  if (value === null) return 'null';
  return typeof value === 'object' ? Object.prototype.toString.call(value) : String(value);
}

/**
 * @internal A frame that makes `stream` current for `task` on the stream's device. A disposed
 * stream is refused with a DisposedError naming it. A pool stream is usable only while some
 * task holds it: one that no task holds (its task settled; the pool may give it to another
 * task at any time) is refused with a CudaArgumentError.
 */
export function streamFrame(task: TaskState, stream: Stream): Frame {
  const last = task.lastStreamFrame;
  if (last !== undefined && last.stream === stream && frameStillValid(last)) return last;
  const previous = task.previousStreamFrame;
  if (previous !== undefined && previous.stream === stream && frameStillValid(previous)) {
    task.previousStreamFrame = last;
    task.lastStreamFrame = previous;
    return previous;
  }
  if (
    typeof stream !== 'object' ||
    stream === null ||
    typeof (stream as { context?: unknown }).context !== 'object'
  ) {
    throw new CudaArgumentError(`withStream: s must be a Stream, got ${shownArgument(stream)}`);
  }
  if (stream.disposed) throw new DisposedError(`withStream: ${stream}`);
  const pooled = pooledStream(stream);
  if (pooled !== undefined && pooled.holders === 0) {
    throw new CudaArgumentError(
      `withStream: ${stream} is a task stream of the runtime's pool and no task holds it now ` +
        '(the task it came from has settled, and the pool hands it to the next task); ' +
        'create a stream of your own with Stream.create() to keep one',
    );
  }
  const frame: Frame = {
    task,
    signal: task.signal,
    device: stream.context.device,
    stream,
    pooled,
    epoch: pooled === undefined ? 0 : pooled.epoch,
  };
  task.previousStreamFrame = last;
  task.lastStreamFrame = frame;
  return frame;
}

/**
 * Whether a frame `streamFrame` made earlier would be made the same now: its stream is not
 * disposed and, for a pool stream, is still held by the tasks that held it then (the pool
 * bumps the epoch when it goes back). Frames are never changed, so one can be reused.
 */
function frameStillValid(frame: Frame): boolean {
  if (frame.stream!.disposed) return false;
  const pooled = frame.pooled;
  return pooled === undefined || (pooled.epoch === frame.epoch && pooled.holders > 0);
}

/**
 * The async-local storage of frames. Not exported: it is entered only through `enterFrame`
 * and `enterFrameWith`, which keep `currentFrame`'s cache right.
 */
const storage = runtime.storage;

/**
 * @internal The frame of the running code (the root frame outside any task).
 *
 * Every launch, copy and library call looks it up (through `stream()`), and the storage's
 * lookup costs tens of nanoseconds (it finds the running async resource, then the store on
 * it). The frame is kept for the async id it was found under instead: code running under the
 * same id sees the same frame, because the id names the running async resource (each promise
 * reaction, timer or callback its own, ids never reused) and the store of a resource changes
 * only inside `storage.run`, which `enterFrame` brackets by keeping `fn`'s frame on entry and
 * the outer one again on exit (`enterFrameWith` drops the kept frame instead). A launch after the first in the same synchronous run then costs a read of the
 * id and a comparison. Id 0 (code that runs outside any async resource) is never kept.
 */
export function currentFrame(): Frame {
  const id = executionAsyncId();
  if (id === runtime.frameCacheId) return runtime.frameCache;
  const frame = storage.getStore() ?? runtime.root;
  if (id > 0) {
    runtime.frameCacheId = id;
    runtime.frameCache = frame;
  }
  return frame;
}

/**
 * The property under which `storage` keeps a resource's store, where this Node keeps stores
 * on async resources (Node 20 and 22: `AsyncLocalStorage#kResourceStore`); undefined where it
 * keeps them otherwise (async context frames), and `run()` is used.
 */
const resourceStoreKey: symbol | undefined = (() => {
  const key = (storage as unknown as { kResourceStore?: unknown }).kResourceStore;
  return typeof key === 'symbol' ? key : undefined;
})();

/**
 * Whether `storage` propagates stores to new async resources (`run` enables it). Once it
 * does, it always will (only `disable()` ends it, and nothing outside this file holds the
 * storage): `enterFrame` then reads the answer kept here rather than the storage.
 */
let storageEnabledSeen = false;
function storageEnabled(): boolean {
  if (storageEnabledSeen) return true;
  storageEnabledSeen = (storage as unknown as { enabled?: unknown }).enabled === true;
  return storageEnabledSeen;
}

/**
 * @internal Runs `fn()` with `frame` as the current frame (see `currentFrame`).
 *
 * This is `storage.run(frame, fn)` written out where the store lives on the running async
 * resource: set the store on it, run `fn`, put the outer store back, which is what `run`
 * does after its own lookups (the store in force, the rest arguments). Promises and
 * callbacks `fn` creates take the store from the resource as with `run`. Elsewhere (async
 * context frames, or before the storage's first `run` enables its propagation), `run` itself.
 */
export function enterFrame<R>(frame: Frame, fn: () => R): R {
  return enterFrameAt(executionAsyncId(), frame, fn);
}

/** `enterFrame` where the running code's async id (`executionAsyncId()`) has been read. */
function enterFrameAt<R>(id: number, frame: Frame, fn: () => R): R {
  // The async id stays the same: code of `fn` that runs before any await finds `frame` in
  // the cache (id 0 is never kept, see `currentFrame`). On the way out the store is the
  // outer one again, so the outer entry of the cache is valid again too: a loop of
  // `withStream` calls finds its own frame in the cache at every call.
  const outerId = runtime.frameCacheId;
  const outer = runtime.frameCache;
  runtime.frameCacheId = id > 0 ? id : -1;
  runtime.frameCache = frame;
  const key = resourceStoreKey;
  if (key !== undefined && storageEnabled()) {
    const resource = executionAsyncResource() as Record<symbol, unknown>;
    const saved = resource[key];
    resource[key] = frame;
    try {
      return fn();
    } finally {
      resource[key] = saved;
      runtime.frameCacheId = outerId;
      runtime.frameCache = outer;
    }
  }
  try {
    return storage.run(frame, fn);
  } finally {
    runtime.frameCacheId = outerId;
    runtime.frameCache = outer;
  }
}

/**
 * @internal `withStream`: runs `fn()` in the frame that makes `stream` current for the running
 * code's task (`streamFrame`). The frames entered last are kept with the frame they were
 * entered from and their stream (two of them, see `RuntimeState.scopeFrame`): entered again
 * from the same frame on the same stream, and still valid, the frame is taken from there
 * without reading the task, so that a loop of `withStream` calls reads the runtime's state,
 * the stream and the frame it enters (decision 0051).
 */
export function enterStreamFrame<R>(stream: Stream, fn: () => R): R {
  const state = runtime;
  const id = executionAsyncId();
  const outer = id === state.frameCacheId ? state.frameCache : currentFrame();
  let frame = state.scopeFrame;
  if (
    frame === undefined ||
    state.scopeStream !== stream ||
    state.scopeOuter !== outer ||
    !frameStillValid(frame)
  ) {
    const other = state.scopeFrameB;
    if (
      other !== undefined &&
      state.scopeStreamB === stream &&
      state.scopeOuterB === outer &&
      frameStillValid(other)
    ) {
      frame = other;
    } else {
      frame = streamFrame(outer.task, stream);
    }
    state.scopeOuterB = state.scopeOuter;
    state.scopeStreamB = state.scopeStream;
    state.scopeFrameB = state.scopeFrame;
    state.scopeOuter = outer;
    state.scopeStream = stream;
    state.scopeFrame = frame;
  }
  return enterFrameAt(id, frame, fn);
}

/** @internal `enterFrame` for a function of two arguments (no closure made to pass them). */
export function enterFrameWith<R, A, B>(frame: Frame, fn: (a: A, b: B) => R, a: A, b: B): R {
  runtime.frameCacheId = -1;
  try {
    return storage.run(frame, fn, a, b);
  } finally {
    runtime.frameCacheId = -1;
  }
}

/** @internal The running task's state; code that outlives its task counts as the root task's. */
export function currentTaskState(): TaskState {
  const task = currentFrame().task;
  return task.settled ? runtime.root.task : task;
}

/**
 * @internal The device ordinal a task started now from `parent` runs on where no `withDevice`
 * is in force: the process default device's (cudadrv's `setDefaultDevice`) for a top-level
 * task, its parent's for a nested one. Reads no driver state.
 */
export function taskDeviceOrdinal(parent: TaskState): number {
  return parent.isRoot ? defaultDeviceOrdinal() : parent.deviceOrdinal;
}

/** The device of `task` where no `withDevice` is in force (the root task's: the process default). */
function deviceOfTask(task: TaskState): Device {
  const ordinal = task.deviceOrdinal;
  return ordinal < 0 ? defaultDevice() : Device.get(ordinal);
}

/**
 * The device the running code uses: the innermost `withDevice`, else its task's device (the
 * process default device when the task started; see `setDefaultDevice`), else, outside any
 * task, the process default device.
 */
export function device(): Device {
  const frame = currentFrame();
  return frame.device ?? deviceOfTask(frame.task);
}

/**
 * The current stream: the innermost `withStream`'s stream, else the running task's own
 * stream on the current device (taken from the pool on first use), else (outside any task)
 * the device's default stream. Allocates nothing once the task has its stream. In a task
 * whose signal has aborted, it throws the signal's reason (nothing more is issued for it).
 *
 * A `withStream` frame on a task's pool stream that outlives the task (a timer it started)
 * falls back, once every task holding that stream has settled, to what the frame would see
 * without the override: its task's own stream, or the default stream after that task settled.
 */
export function stream(): Stream {
  return streamOf(currentFrame());
}

/** @internal `stream()` for the code running in `frame` (see `currentFrame`). */
export function streamOf(frame: Frame): Stream {
  const signal = signalOf(frame);
  // A cancelled task issues nothing more: every operation resolves its stream here first.
  if (signal?.aborted) throw signal.reason;
  const override = frame.stream;
  if (override !== undefined) {
    const pooled = frame.pooled;
    if (pooled === undefined || pooled.epoch === frame.epoch) return override;
  }
  const task = frame.task;
  const target = frame.device;
  if (target !== undefined) {
    return target.ordinal === task.ownOrdinal ? task.ownStream! : task.streamFor(target);
  }
  const ordinal = task.deviceOrdinal;
  if (ordinal >= 0 && ordinal === task.ownOrdinal) return task.ownStream!;
  return task.streamFor(ordinal < 0 ? defaultDevice() : Device.get(ordinal));
}

/** The running task's AbortSignal (see `TaskState.signal`), for the driver layer's checks. */
export function currentSignal(): AbortSignal | undefined {
  return signalOf(currentFrame());
}

/**
 * The signal of the frame's task: the frame's own copy, or the task's where the frame has
 * none (one made by an older loaded copy of this package, which shares this state).
 */
function signalOf(frame: Frame): AbortSignal | undefined {
  const signal = frame.signal;
  return signal !== undefined || 'signal' in (frame as object) ? signal : frame.task.signal;
}

// On import: every driver operation without an explicit stream uses the task's stream, and
// every operation of a cancelled task (explicit streams included) throws its reason.
setCurrentStreamProvider(stream, device, currentSignal);
