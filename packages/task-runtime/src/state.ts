import { AsyncLocalStorage } from 'node:async_hooks';
import { CudaArgumentError, Device, DisposedError, type Stream } from '@cuda-tasks/cudadrv';
import { setCurrentStreamProvider } from '@cuda-tasks/cudadrv/internal';
import { reportCleanupError } from './cleanup.js';
import { acquireStream, type PooledStream, pooledStream, releaseStream } from './pool.js';
import { streamPriority } from './priority.js';
import { processWide } from './process-wide.js';

// Process-wide: task ids stay unique when two copies of this package load.
const taskIds = processWide('task-ids', () => ({ next: 0 }));

/**
 * How urgent a task's GPU work is: its streams come from the pool of that priority (CUDA
 * stream priorities: 'high' is the device's greatest, 'normal' the default, 'low' the least).
 */
export type TaskPriority = 'high' | 'normal' | 'low';

/** Something that holds per-task resources and gives them back when the task settles. */
export interface TaskResourceOwner {
  /** Gives back what `task` holds (called once, when the task settles). */
  releaseTask(task: TaskState): void;
}

/**
 * A task's state: its streams (one per device, taken lazily from the pool), its library
 * handle leases, and its place in the task tree.
 */
export class TaskState {
  readonly id: number;
  readonly name: string | undefined;
  readonly parent: TaskState | undefined;
  readonly isRoot: boolean;
  /** The priority of its streams (inherited from the parent unless the task gave its own). */
  readonly priority: TaskPriority;
  /**
   * What cancels the task: its own `signal` option combined with its parent's (undefined:
   * nothing). Once aborted, every GPU operation issued from the task throws its reason.
   */
  readonly signal: AbortSignal | undefined;
  /** The task's stream per device ordinal (taken on first use). */
  readonly streams: (Stream | undefined)[] = [];
  /** The pool's records of `streams`, per device ordinal. */
  readonly pooled: (PooledStream | undefined)[] = [];
  /** Per-owner lease records (handle caches store their lease chains here). */
  readonly leases = new Map<TaskResourceOwner, unknown>();
  settled = false;

  constructor(
    name: string | undefined,
    parent: TaskState | undefined,
    priority: TaskPriority = 'normal',
    signal: AbortSignal | undefined = undefined,
  ) {
    this.id = taskIds.next++;
    this.name = name;
    this.parent = parent;
    this.isRoot = parent === undefined;
    this.priority = priority;
    this.signal = signal;
  }

  /** The task's stream on `device`: the context's default stream for the root task, a pooled stream otherwise. */
  streamFor(device: Device): Stream {
    const own = this.streams[device.ordinal];
    if (own !== undefined) return own;
    const context = device.primaryContext();
    // The root task, and code that outlives its task, use the context's default stream.
    if (this.isRoot || this.settled) return context.defaultStream;
    const entry = acquireStream(context, streamPriority(context, this.priority));
    this.pooled[device.ordinal] = entry;
    this.streams[device.ordinal] = entry.stream;
    return entry.stream;
  }

  /**
   * Returns leases, then streams (so handle caches can unbind from the streams first). Each
   * owner and each stream is given back in its own try: one failure (a destroy after a sticky
   * error) strands nothing else. Never throws: failures go to `onCleanupError` listeners (or
   * become process warnings), so they never replace the task's own outcome.
   */
  settle(): void {
    if (this.settled) return;
    this.settled = true;
    for (const owner of this.leases.keys()) {
      try {
        owner.releaseTask(this);
      } catch (error) {
        reportCleanupError(error, this);
      }
    }
    this.leases.clear();
    const aborted = this.signal?.aborted === true;
    for (let i = 0; i < this.pooled.length; i++) {
      const entry = this.pooled[i];
      if (entry === undefined) continue;
      this.pooled[i] = undefined;
      this.streams[i] = undefined;
      try {
        // A cancelled task's stream may still run its queued work: handed out last.
        releaseStream(entry, aborted);
      } catch (error) {
        reportCleanupError(error, this);
      }
    }
  }

  toString(): string {
    return this.name === undefined ? `task #${this.id}` : `task #${this.id} "${this.name}"`;
  }
}

/** What an async scope sees: its task, and the device and stream overrides in force. */
export interface Frame {
  readonly task: TaskState;
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
  defaultDevice: number;
}

// Process-wide: a second loaded copy of this package shares the same storage and root task.
const runtime = processWide<RuntimeState>('runtime', () => ({
  storage: new AsyncLocalStorage<Frame>(),
  root: {
    task: new TaskState('root', undefined),
    device: undefined,
    stream: undefined,
    pooled: undefined,
    epoch: 0,
  },
  defaultDevice: 0,
}));

/**
 * @internal A frame that makes `stream` current for `task` on the stream's device. A disposed
 * stream is refused with a DisposedError naming it. A pool stream is usable only while some
 * task holds it: one that no task holds (its task settled; the pool may give it to another
 * task at any time) is refused with a CudaArgumentError.
 */
export function streamFrame(task: TaskState, stream: Stream): Frame {
  if (stream.disposed) throw new DisposedError(`withStream: ${stream}`);
  const pooled = pooledStream(stream);
  if (pooled !== undefined && pooled.holders === 0) {
    throw new CudaArgumentError(
      `withStream: ${stream} is a task stream of the runtime's pool and no task holds it now ` +
        '(the task it came from has settled, and the pool hands it to the next task); ' +
        'create a stream of your own with Stream.create() to keep one',
    );
  }
  return {
    task,
    device: stream.context.device,
    stream,
    pooled,
    epoch: pooled === undefined ? 0 : pooled.epoch,
  };
}

/** @internal The async-local storage of frames. */
export const storage = runtime.storage;

/** @internal The frame of the running code (the root frame outside any task). */
export function currentFrame(): Frame {
  return storage.getStore() ?? runtime.root;
}

/** @internal The running task's state; code that outlives its task counts as the root task's. */
export function currentTaskState(): TaskState {
  const task = (storage.getStore() ?? runtime.root).task;
  return task.settled ? runtime.root.task : task;
}

/** The device that code outside any `withDevice` uses (default 0). */
export function setDefaultDevice(device: Device | number): void {
  runtime.defaultDevice = typeof device === 'number' ? Device.get(device).ordinal : device.ordinal;
}

/** The device the running code uses: the innermost `withDevice`, else the default device. */
export function device(): Device {
  const frame = storage.getStore() ?? runtime.root;
  return frame.device ?? Device.get(runtime.defaultDevice);
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
  const frame = storage.getStore() ?? runtime.root;
  const task = frame.task;
  const signal = task.signal;
  // A cancelled task issues nothing more: every operation resolves its stream here first.
  if (signal?.aborted) throw signal.reason;
  const override = frame.stream;
  if (override !== undefined) {
    const pooled = frame.pooled;
    if (pooled === undefined || pooled.epoch === frame.epoch) return override;
  }
  const target = frame.device ?? Device.get(runtime.defaultDevice);
  const own = task.streams[target.ordinal];
  return own !== undefined ? own : task.streamFor(target);
}

/** The running task's AbortSignal (see `TaskState.signal`), for the driver layer's checks. */
export function currentSignal(): AbortSignal | undefined {
  return (storage.getStore() ?? runtime.root).task.signal;
}

// On import: every driver operation without an explicit stream uses the task's stream, and
// every operation of a cancelled task (explicit streams included) throws its reason.
setCurrentStreamProvider(stream, device, currentSignal);
