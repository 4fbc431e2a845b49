import { CaptureError, Device, type Stream, waitForStream } from '@cuda-tasks/cudadrv';
import { warmHandles } from './handle-cache.js';
import { prewarmPoolOf } from './pool.js';
import {
  currentFrame,
  device,
  type Frame,
  storage,
  stream,
  streamFrame,
  TaskState,
} from './state.js';
import { taskObserver } from './trace.js';

/** Options for `task`. */
export interface TaskOptions {
  /** A name shown in traces and errors. */
  name?: string;
}

/**
 * Runs `fn` (sync or async) as a new task and returns a promise of its result. The task has
 * its own state: it inherits the current device, and gets its own stream on first GPU use
 * (from a per-context pool, returned when the task settles, also when it throws). Kernel
 * launches, copies and library calls inside go to that stream, so independent tasks overlap
 * on the GPU. Plain async functions called inside a task share its stream; start a nested
 * `task()` to get another.
 * @example
 * const [x, y] = await Promise.all([
 *   task(async () => { gemm(a, b, c1); await synchronize(); return c1.toHost(); }),
 *   task(async () => { gemm(a, b, c2); await synchronize(); return c2.toHost(); }),
 * ]);
 */
export function task<T>(fn: () => T | Promise<T>, options?: TaskOptions): Promise<T> {
  const parent = currentFrame();
  // No default `{}`: an options object allocated per task for nothing.
  const state = new TaskState(options?.name, parent.task);
  const frame: Frame = {
    task: state,
    device: parent.device,
    stream: undefined,
    pooled: undefined,
    epoch: 0,
  };
  return storage.run(frame, async () => {
    const observer = taskObserver();
    observer?.taskStarted(state);
    try {
      return await fn();
    } finally {
      // settle() never throws: a cleanup failure is reported, and fn's outcome stands.
      observer?.taskSettled(state);
      state.settle();
    }
  });
}

/**
 * Runs `fn` with `s` as the current stream, and restores the previous stream when `fn`
 * returns or throws (for an async `fn`, the override holds across its awaits and ends
 * with it). The device follows the stream's.
 *
 * `s` may be a task's own stream (`withStream(stream(), ...)`). Such a pool stream is the
 * task's only while it runs: code of the frame that outlives the task (a timer it started)
 * falls back, once every task holding the stream has settled, to the stream it would use
 * without the override (the default stream, its task being settled), as code that outlives
 * its task always does. A pool stream that no task holds any more is refused with a
 * CudaArgumentError. Streams of your own (`Stream.create()`) stay current as long as the
 * frame runs. A disposed stream is refused with a DisposedError naming it; one disposed while
 * the frame runs makes each later operation in it throw that error, before any native call.
 * @example withStream(myStream, () => launch(kernel, { grid: 1, block: 1 }));
 */
export function withStream<T>(s: Stream, fn: () => T): T {
  const frame = storage.getStore();
  const task = frame === undefined ? currentFrame().task : frame.task;
  return storage.run(streamFrame(task, s), fn);
}

/**
 * Runs `fn` on device `d` (an ordinal or a Device): operations use the task's stream for
 * that device, and tasks started inside inherit it. An ordinal that does not exist gives a
 * CudaArgumentError.
 * @example await withDevice(1, () => task(async () => { ... }));
 */
export function withDevice<T>(d: Device | number, fn: () => T): T {
  const target = typeof d === 'number' ? Device.get(d) : d;
  const frame = currentFrame();
  return storage.run(
    { task: frame.task, device: target, stream: undefined, pooled: undefined, epoch: 0 },
    fn,
  );
}

/** The running task's name and id (the root task outside any task). */
export function currentTask(): { id: number; name: string | undefined; isRoot: boolean } {
  const state = currentFrame().task;
  return { id: state.id, name: state.name, isRoot: state.isRoot };
}

/**
 * Waits for the current stream only (not other tasks' work). The promise never blocks the
 * event loop: a short spin on cuStreamQuery, then a wait off the main thread. A device error
 * found while waiting (an illegal address, ...) rejects it with a CudaError; inside `capture()`
 * it rejects with a CaptureError (the captured work has not run).
 * @example launch(kernel, config, x); await synchronize();
 */
export function synchronize(): Promise<void> {
  const current = stream();
  if (current.capturing) {
    return Promise.reject(
      new CaptureError(
        'synchronize()',
        `${current} is capturing a graph: its work runs only when the graph is launched, so inside capture() there is nothing to wait for (and waiting would invalidate the capture). Await synchronize() after capture() returns, or after graph.launch()`,
      ),
    );
  }
  return waitForStream(current);
}

/** Blocks until the current stream's work is done. For scripts: it blocks the event loop. */
export function synchronizeSync(): void {
  stream().synchronize();
}

/** Blocks until all work on the current device is done (cuCtxSynchronize). For scripts. */
export function deviceSynchronize(): void {
  device().synchronize();
}

/**
 * Creates the task stream pool of `d` (an ordinal or a Device; default: the current device)
 * now, up to its `prewarm` size (see `configureStreams`): call it at startup, while the GPU is
 * idle, so that the first burst of tasks finds its streams made (creating streams while
 * kernels run can stall the event loop). Returns how many streams the pool has.
 * @example prewarmStreams(); // before the server starts accepting requests
 */
export function prewarmStreams(d?: Device | number): number {
  const target = d === undefined ? device() : typeof d === 'number' ? Device.get(d) : d;
  return prewarmPoolOf(target.primaryContext());
}

/**
 * Makes what a burst of tasks on `d` (an ordinal or a Device; default: the current device)
 * needs, now, while the GPU is idle: the task stream pool (`prewarmStreams`) and, for every
 * library handle cache alive (cuBLAS, cuSOLVER, cuRAND's default generators, yours), its
 * handles up to its bound (`HandleCache.warm`). Call it at startup; a library package takes
 * part once it is imported. Returns the streams and the handles per cache.
 * @example
 * import '@cuda-tasks/cublas';
 * prewarm(); // { streams: 32, handles: { cublas: 16, ... } }
 */
export function prewarm(d?: Device | number): {
  streams: number;
  handles: Record<string, number>;
} {
  const target = d === undefined ? device() : typeof d === 'number' ? Device.get(d) : d;
  const context = target.primaryContext();
  const streams = prewarmPoolOf(context);
  return { streams, handles: warmHandles(context) };
}
