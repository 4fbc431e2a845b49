import { AsyncLocalStorage } from 'node:async_hooks';
import { Device, type Stream } from '@cuda-tasks/cudadrv';
import { setCurrentStreamProvider } from '@cuda-tasks/cudadrv/internal';
import { acquireStream, releaseStream } from './pool.js';

let nextTaskId = 0;

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
  /** The task's stream per device ordinal (taken on first use). */
  readonly streams: (Stream | undefined)[] = [];
  /** Per-owner lease records (handle caches store their lease chains here). */
  readonly leases = new Map<TaskResourceOwner, unknown>();
  settled = false;

  constructor(name: string | undefined, parent: TaskState | undefined) {
    this.id = nextTaskId++;
    this.name = name;
    this.parent = parent;
    this.isRoot = parent === undefined;
  }

  /** The task's stream on `device`: the context's default stream for the root task, a pooled stream otherwise. */
  streamFor(device: Device): Stream {
    const own = this.streams[device.ordinal];
    if (own !== undefined) return own;
    const context = device.primaryContext();
    // The root task, and code that outlives its task, use the context's default stream.
    if (this.isRoot || this.settled) return context.defaultStream;
    const stream = acquireStream(context);
    this.streams[device.ordinal] = stream;
    return stream;
  }

  /** Returns leases, then streams (so handle caches can unbind from the streams first). */
  settle(): void {
    if (this.settled) return;
    this.settled = true;
    for (const owner of this.leases.keys()) owner.releaseTask(this);
    this.leases.clear();
    for (let i = 0; i < this.streams.length; i++) {
      const stream = this.streams[i];
      if (stream !== undefined) {
        this.streams[i] = undefined;
        releaseStream(stream);
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
}

const RUNTIME_KEY = Symbol.for('@cuda-tasks/task-runtime/state');
interface RuntimeState {
  storage: AsyncLocalStorage<Frame>;
  root: Frame;
  defaultDevice: number;
}

// Process-wide: a second loaded copy of this package shares the same storage and root task.
const runtime: RuntimeState = ((globalThis as any)[RUNTIME_KEY] ??= {
  storage: new AsyncLocalStorage<Frame>(),
  root: { task: new TaskState('root', undefined), device: undefined, stream: undefined },
  defaultDevice: 0,
});

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
 * the device's default stream. Allocates nothing once the task has its stream.
 */
export function stream(): Stream {
  const frame = storage.getStore() ?? runtime.root;
  const override = frame.stream;
  if (override !== undefined) return override;
  const task = frame.task;
  const target = frame.device ?? Device.get(runtime.defaultDevice);
  const own = task.streams[target.ordinal];
  return own !== undefined ? own : task.streamFor(target);
}

// On import: every driver operation without an explicit stream uses the task's stream.
setCurrentStreamProvider(stream, device);
