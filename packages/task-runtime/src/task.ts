import {
  assertOptions,
  CaptureError,
  type Context,
  CudaArgumentError,
  Device,
  type Stream,
  type StreamPriority,
  waitForStream,
} from '@cuda-tasks/cudadrv';
import { stringOption, turnElapsed } from '@cuda-tasks/cudadrv/internal';
import { reportCleanupError } from './cleanup.js';
import { warmHandles } from './handle-cache.js';
import { prewarmPoolOf } from './pool.js';
import { streamPriority, TASK_PRIORITIES } from './priority.js';
import {
  currentFrame,
  device,
  enterFrame,
  enterFrameWith,
  enterStreamFrame,
  type Frame,
  shownArgument,
  stream,
  streamOf,
  TaskState,
  taskDeviceOrdinal,
} from './state.js';
import { taskObserver } from './trace.js';

/** The options `task` takes. */
const TASK_OPTION_NAMES: readonly string[] = Object.freeze(['name', 'priority', 'signal']);

/** Options for `task`. */
export interface TaskOptions {
  /** A name shown in traces and errors. */
  name?: string;
  /**
   * How urgent the task's GPU work is (default: the parent task's; 'normal' at the top level).
   * Its streams come from a pool of that CUDA stream priority: 'high' is the device's greatest,
   * 'normal' the default (0), 'low' the least. When the GPU has more work than it can run at
   * once, the scheduler starts blocks of higher-priority streams first, so a high-priority
   * task's short kernels overtake long low-priority ones. On most GPUs the default priority is
   * also the least, so 'low' runs as 'normal' does; on a device with a single priority level
   * the option changes nothing. `withStream` keeps its own stream whatever the priority.
   */
  priority?: StreamPriority;
  /**
   * Cancels the task when it aborts (`AbortSignal.timeout(ms)` gives a deadline). Then the
   * task's pending `synchronize()` (and `toHost()`) rejects at once with the signal's reason
   * (an `AbortError` DOMException when none was given), and every later launch, copy,
   * allocation or library call issued from the task throws that reason before any native
   * call. Work already queued on the GPU runs to completion (CUDA cannot recall it); the
   * task's stream and handles go back when it settles, and its buffers' frees stay ordered
   * after that work. Nested tasks inherit it, combined with their own. An already-aborted
   * signal rejects the task with its reason without starting `fn`.
   */
  signal?: AbortSignal;
}

/** The signal a task runs under: its own, its parent's, or both combined. */
function combineSignals(inherited: AbortSignal | undefined, own: AbortSignal): AbortSignal {
  if (inherited === undefined || own === inherited) return own;
  return AbortSignal.any([inherited, own]);
}

/**
 * Runs `fn` (sync or async) as a new task and returns a promise of its result. The task has
 * its own state: it inherits the current device (the innermost `withDevice`, else the
 * process default device, which it keeps while it runs whatever `setDefaultDevice` does
 * meanwhile), and gets its own stream on first GPU use (from a per-context pool, returned
 * when the task settles, also when it throws). Kernel
 * launches, copies and library calls inside go to that stream, so independent tasks overlap
 * on the GPU. Plain async functions called inside a task share its stream; start a nested
 * `task()` to get another. `options.priority` and `options.signal` make it urgent or
 * cancellable (see `TaskOptions`); bad options throw a CudaArgumentError. A stream capture
 * the task left open (`StreamCapture.begin` without `end()` or `abort()`) is ended when it
 * settles, what it recorded discarded, before its stream goes back to the pool: a task whose
 * `fn` fulfilled then rejects with a CaptureError (its work after the capture began never
 * ran); one that failed keeps its error, and the CaptureError goes to `onCleanupError`.
 * @example
 * const [x, y] = await Promise.all([
 *   task(async () => { gemm(a, b, c1); await synchronize(); return c1.toHost(); }),
 *   task(async () => { gemm(a, b, c2); await synchronize(); return c2.toHost(); }),
 * ]);
 * @example
 * // A deadline: past 50 ms the task's awaits reject with a TimeoutError and it issues nothing more.
 * await task(() => answer(request), { priority: 'high', signal: AbortSignal.timeout(50) });
 */
export function task<T>(fn: () => T | Promise<T>, options?: TaskOptions): Promise<T> {
  if (typeof fn !== 'function') throw notAFunction('task', fn);
  const parent = currentFrame();
  const inherited = parent.task;
  // No default `{}`: an options object allocated per task for nothing.
  let priority = inherited.priority;
  let signal = inherited.signal;
  if (options !== undefined) {
    // A misspelt option (`{ priorty: 'high' }`) is refused, not ignored.
    assertOptions('task', options, TASK_OPTION_NAMES);
    stringOption('task', 'name', options.name);
    const ownPriority = options.priority;
    if (ownPriority !== undefined) {
      if (!TASK_PRIORITIES.includes(ownPriority)) {
        throw new CudaArgumentError(
          `task: priority must be 'high', 'normal' or 'low', got ${JSON.stringify(ownPriority)}`,
        );
      }
      priority = ownPriority;
    }
    const ownSignal = options.signal;
    if (ownSignal !== undefined) {
      if (!(ownSignal instanceof AbortSignal)) {
        throw new CudaArgumentError(
          `task: signal must be an AbortSignal (e.g. controller.signal or AbortSignal.timeout(ms)), got ${Object.prototype.toString.call(ownSignal)}`,
        );
      }
      signal = combineSignals(signal, ownSignal);
    }
  }
  // Cancelled before it starts: fn never runs, and nothing is taken from the pools.
  if (signal?.aborted) return Promise.reject(signal.reason);
  const state = new TaskState(
    options?.name,
    inherited,
    priority,
    signal,
    taskDeviceOrdinal(inherited),
  );
  const frame: Frame = {
    task: state,
    signal: state.signal,
    device: parent.device,
    stream: undefined,
    pooled: undefined,
    epoch: 0,
  };
  if (starts.head === starts.queue.length && turnElapsed() <= START_SLICE_MS) {
    return enterFrameWith(frame, startTask<T>, fn, state);
  }
  return deferStart(fn, state, frame);
}

/**
 * Task starts (each task's `fn` up to its first await) run while the turn of the event loop
 * has used at most this many milliseconds of its budget (cudadrv's turn clock, shared with
 * the waiters' spin passes, which may go on to `TURN_BUDGET_MS`): a task started later in the
 * same turn (a burst of tasks, each issuing its first GPU work synchronously) starts in a later
 * turn instead, in order, so that a burst never holds the event loop for long and the tasks
 * already started still get their waits settled in each turn.
 */
const START_SLICE_MS = 2;

interface DeferredStart {
  fn: () => unknown;
  state: TaskState;
  frame: Frame;
  resolve: (value: unknown) => void;
  reject: (reason: unknown) => void;
}

/** The task starts waiting for a later turn (first in, first out). */
const starts = {
  queue: [] as (DeferredStart | undefined)[],
  head: 0,
};

/** Queues a task's start for a later turn; its promise settles as the task's would. */
function deferStart<T>(fn: () => T | Promise<T>, state: TaskState, frame: Frame): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (starts.head === starts.queue.length) setImmediate(startDeferred);
    starts.queue.push({
      fn,
      state,
      frame,
      resolve: resolve as (value: unknown) => void,
      reject,
    });
  });
}

/**
 * Starts the queued tasks while this turn has used at most `START_SLICE_MS` (at least one), then
 * leaves the rest to the next turn. A task whose signal aborted while it waited is rejected
 * with the signal's reason, its function never run.
 */
function startDeferred(): void {
  const queue = starts.queue;
  let started = 0;
  while (starts.head < queue.length) {
    if (started > 0 && turnElapsed() > START_SLICE_MS) break;
    const next = queue[starts.head]!;
    queue[starts.head++] = undefined;
    const signal = next.state.signal;
    if (signal?.aborted) {
      next.state.settled = true;
      next.reject(signal.reason);
      continue;
    }
    if (started++ === 0) turnElapsed(); // starts this turn's clock if nothing else did
    next.resolve(enterFrameWith(next.frame, startTask, next.fn, next.state));
  }
  if (starts.head < queue.length) setImmediate(startDeferred);
  else {
    queue.length = 0;
    starts.head = 0;
  }
}

/**
 * Runs the task's `fn` in its frame (entered by `enterFrameWith`), and settles the task when
 * what `fn` returns settles: one reaction on fn's promise, no async wrapper (which would add
 * two promises per task, each paying the async-local storage's hooks).
 */
function startTask<T>(fn: () => T | Promise<T>, state: TaskState): Promise<T> {
  const observer = taskObserver();
  if (observer !== null) {
    state.observer = observer;
    observer.taskStarted(state);
  }
  let result: T | Promise<T>;
  try {
    result = fn();
  } catch (error) {
    failTask(state);
    return Promise.reject(error);
  }
  // Promise.resolve gives a native promise back as it is. The reactions run in the task's
  // frame (the async context of this call), where they find the task: nothing is allocated
  // per task for them.
  return Promise.resolve(result).then(taskFulfilled, taskRejected);
}

/** A task whose function fulfilled: rejects instead when it left a stream capture open. */
function taskFulfilled<T>(value: T): T {
  const leftOpen = finishTask(currentFrame().task);
  if (leftOpen !== undefined) throw leftOpen;
  return value;
}

function taskRejected(error: unknown): never {
  failTask(currentFrame().task);
  throw error;
}

/**
 * The task's function has settled: tell the trace, give its resources back (never throws).
 * Returns the CaptureError of a stream capture it left open (ended by then), or undefined.
 */
function finishTask(state: TaskState): CaptureError | undefined {
  state.observer?.taskSettled(state);
  return state.settle();
}

/** `finishTask` for a task that failed: it keeps its own error; a capture it left open is reported. */
function failTask(state: TaskState): void {
  const leftOpen = finishTask(state);
  if (leftOpen !== undefined) reportCleanupError(leftOpen, state);
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
  if (typeof fn !== 'function') throw notAFunction('withStream', fn);
  return enterStreamFrame(s, fn);
}

/**
 * Runs `fn` on device `d` (an ordinal or a Device): operations use the task's stream for
 * that device, and tasks started inside inherit it. An ordinal that does not exist gives a
 * CudaArgumentError.
 * @example await withDevice(1, () => task(async () => { ... }));
 */
export function withDevice<T>(d: Device | number, fn: () => T): T {
  const target = deviceArgument('withDevice', d);
  const frame = currentFrame();
  return enterFrame(
    {
      task: frame.task,
      signal: frame.task.signal,
      device: target,
      stream: undefined,
      pooled: undefined,
      epoch: 0,
    },
    fn,
  );
}

/** The CudaArgumentError for a `fn` argument that is not a function. */
function notAFunction(call: string, fn: unknown): CudaArgumentError {
  return new CudaArgumentError(`${call}: fn must be a function, got ${shownArgument(fn)}`);
}

/**
 * The Device `d` names (an ordinal or a Device), or a CudaArgumentError naming `call` for
 * anything else (before any native call).
 */
function deviceArgument(call: string, d: unknown): Device {
  if (typeof d === 'number') return Device.get(d);
  if (typeof d !== 'object' || d === null || typeof (d as Device).primaryContext !== 'function') {
    throw new CudaArgumentError(
      `${call}: the device must be an ordinal or a Device, got ${shownArgument(d)}`,
    );
  }
  return d as Device;
}

/** What `currentTask()` reports. */
export interface TaskInfo {
  /** The task's id (unique in the process). */
  id: number;
  /** The name given in its options. */
  name: string | undefined;
  /** Whether this is the root task (code outside any `task()`). */
  isRoot: boolean;
  /** The priority of its streams (see `TaskOptions.priority`). */
  priority: StreamPriority;
  /**
   * What cancels it: its `signal` option combined with its parents' (undefined: nothing).
   * Pass it on to other cancellable work (`fetch(url, { signal })`).
   */
  signal: AbortSignal | undefined;
}

/** The running task's id, name, priority and signal (the root task's outside any task). */
export function currentTask(): TaskInfo {
  const state = currentFrame().task;
  return {
    id: state.id,
    name: state.name,
    isRoot: state.isRoot,
    priority: state.priority,
    signal: state.signal,
  };
}

/**
 * Waits for the current stream only (not other tasks' work). The promise never blocks the
 * event loop: a short spin on cuStreamQuery, then a wait off the main thread. A device error
 * found while waiting (an illegal address, ...) rejects it with a CudaError; inside `capture()`
 * it rejects with a CaptureError (the captured work has not run). When the task's signal
 * aborts, it rejects at once with the signal's reason, without waiting for the GPU (whose
 * queued work runs on).
 * @example launch(kernel, config, x); await synchronize();
 */
export function synchronize(): Promise<void> {
  const frame = currentFrame();
  let current: Stream;
  try {
    current = streamOf(frame); // throws the reason in a cancelled task
  } catch (error) {
    return Promise.reject(error);
  }
  if (current.capturing) {
    return Promise.reject(
      new CaptureError(
        'synchronize()',
        `${current} is capturing a graph: its work runs only when the graph is launched, so inside capture() there is nothing to wait for (and waiting would invalidate the capture). Await synchronize() after capture() returns, or after graph.launch()`,
      ),
    );
  }
  const signal = frame.task.signal;
  return signal === undefined ? waitForStream(current) : waitForStream(current, { signal });
}

/** Blocks until the current stream's work is done. For scripts: it blocks the event loop. */
export function synchronizeSync(): void {
  stream().synchronize();
}

/** Blocks until all work on the current device is done (cuCtxSynchronize). For scripts. */
export function deviceSynchronize(): void {
  device().synchronize();
}

/** The pools to make, once per stream priority: `priorities` checked, in `context`. */
function prewarmPools(
  context: Context,
  priorities: readonly StreamPriority[],
  call: string,
): number {
  if (!Array.isArray(priorities) || priorities.length === 0) {
    throw new CudaArgumentError(
      `${call}: priorities must be a non-empty array of 'high', 'normal' and 'low'`,
    );
  }
  for (const priority of priorities) {
    if (!TASK_PRIORITIES.includes(priority)) {
      throw new CudaArgumentError(
        `${call}: priorities must be 'high', 'normal' or 'low', got ${JSON.stringify(priority)}`,
      );
    }
  }
  const made = new Set<number>();
  let streams = 0;
  for (const priority of priorities) {
    const level = streamPriority(context, priority);
    if (made.has(level)) continue; // two priorities of one level (a single-level device) share a pool
    made.add(level);
    streams += prewarmPoolOf(context, level);
  }
  return streams;
}

/**
 * Creates the task stream pools of `d` (an ordinal or a Device; default: the current device)
 * now, for each of `priorities` (default: only 'normal'), up to their `prewarm` size (see
 * `configureStreams`): call it at startup, while the GPU is idle, so that the first burst of
 * tasks finds its streams made (creating streams while kernels run can stall the event loop).
 * A service that starts tasks at several priorities lists them all. Returns how many streams
 * those pools have.
 * @example prewarmStreams(); // before the server starts accepting requests
 * @example prewarmStreams(0, ['normal', 'high']);
 */
export function prewarmStreams(
  d?: Device | number,
  priorities: readonly StreamPriority[] = ['normal'],
): number {
  const target = d === undefined ? device() : deviceArgument('prewarmStreams', d);
  return prewarmPools(target.primaryContext(), priorities, 'prewarmStreams');
}

/**
 * Makes what a burst of tasks on `d` (an ordinal or a Device; default: the current device)
 * needs, now, while the GPU is idle: the task stream pools of `priorities` (default: only
 * 'normal'; see `prewarmStreams`) and, for every library handle cache alive (cuBLAS,
 * cuSOLVER, cuRAND's default generators, yours), its handles up to its bound
 * (`HandleCache.warm`). Call it at startup; a library package takes part once it is imported.
 * Returns the streams and the handles per cache.
 * @example
 * import '@cuda-tasks/cublas';
 * prewarm(); // { streams: 128, handles: { cublas: 16, ... } }
 */
export function prewarm(
  d?: Device | number,
  priorities: readonly StreamPriority[] = ['normal'],
): {
  streams: number;
  handles: Record<string, number>;
} {
  const target = d === undefined ? device() : deviceArgument('prewarm', d);
  const context = target.primaryContext();
  const streams = prewarmPools(context, priorities, 'prewarm');
  return { streams, handles: warmHandles(context) };
}
