import {
  assertOptions,
  type Context,
  CudaArgumentError,
  Graph,
  StreamCapture,
} from '@cuda-tasks/cudadrv';
import { acquireExclusiveStream, releaseStream } from './pool.js';
import { streamPriority } from './priority.js';
import { processWide } from './process-wide.js';
import { currentFrame, device, enterFrame, streamFrame } from './state.js';

/** The options `capture` takes. */
const CAPTURE_OPTIONS: readonly string[] = Object.freeze(['update']);

/** Options for `capture`. */
export interface CaptureOptions {
  /**
   * A graph captured before from the same work (the same operations in the same order) with
   * other arguments: the new capture's parameters go into its executable graph
   * (cuGraphExecUpdate), which is returned, instead of instantiating a new graph. Cheaper
   * than instantiating; a different topology gives a CudaError and leaves `update` as it was.
   */
  update?: Graph;
}

/**
 * Captures what `fn` does on the GPU into a graph, and returns it instantiated. `fn` (sync or
 * async) runs with a stream of its own as its current stream, in capture mode (relaxed): its
 * launches, copies, memsets, library calls and stream-ordered allocations are recorded, not
 * run; code outside `fn` (other tasks, and the rest of this task) keeps launching, allocating
 * and synchronizing on its streams meanwhile. The capture ends when `fn` settles, also when
 * it throws (then the error is rethrown and no stream is left capturing).
 *
 * Inside `fn`, what cannot be captured gives a `CaptureError` that says why, before any native
 * call, so the capture is not harmed: `synchronize()`, `toHost()`, copies from pageable host
 * memory, library routines that read their status back. Buffers allocated inside `fn` and
 * disposed there are graph memory; those still alive at the end are the graph's outputs
 * (usable once the graph has been launched). Tasks started inside `fn` run on their own
 * streams, outside the capture.
 * @example
 * const graph = await capture(() => {
 *   for (let i = 0; i < 20; i++) launch(step, config, y, x, n);
 * });
 * graph.launch();          // one driver call for the 20 kernels, on the current stream
 * await synchronize();
 */
export async function capture(fn: () => unknown, options: CaptureOptions = {}): Promise<Graph> {
  if (typeof fn !== 'function') {
    throw new CudaArgumentError(`capture: fn must be a function, got ${typeof fn}`);
  }
  assertOptions('capture', options, CAPTURE_OPTIONS);
  const update = options.update;
  if (update !== undefined && (!Graph.isInstance(update) || update.disposed)) {
    throw new CudaArgumentError('capture: options.update must be a Graph that is not disposed');
  }
  const frame = currentFrame();
  // A cancelled task captures nothing more (as it issues nothing more).
  const signal = frame.task.signal;
  if (signal?.aborted) throw signal.reason;
  const context = device().primaryContext();
  if (update !== undefined && update.context !== context) {
    throw new CudaArgumentError(
      `capture: options.update belongs to ${update.context}, the capture runs on ${context}`,
    );
  }
  // A stream of its own: a stream shared with other tasks would capture their work too.
  const pooled = acquireExclusiveStream(context, streamPriority(context, frame.task.priority));
  const captureStream = pooled.stream;
  let session: StreamCapture;
  try {
    session = StreamCapture.begin(captureStream);
  } catch (error) {
    releaseStream(pooled);
    throw error;
  }
  let failure: { error: unknown } | undefined;
  try {
    // Code of fn that outlives the capture (a timer it started) falls back to the task's
    // stream once the capture stream is back in the pool (see streamFrame).
    await enterFrame(streamFrame(frame.task, captureStream), fn);
  } catch (error) {
    failure = { error };
  }
  let graph: Graph | undefined;
  try {
    if (failure !== undefined) session.abort();
    else graph = session.end();
  } catch (error) {
    failure ??= { error };
  }
  try {
    // A stream still capturing (its end failed in the driver) leaves capture on release, or
    // is retired from the pool.
    releaseStream(pooled);
  } catch (error) {
    failure ??= { error };
  }
  if (failure !== undefined) throw failure.error;
  const captured = graph!;
  try {
    if (update === undefined) return captured.instantiate();
    update.update(captured);
    return update;
  } catch (error) {
    captured.dispose();
    throw error;
  }
}

interface CacheEntry {
  readonly promise: Promise<Graph>;
  /** The graph once captured. */
  graph: Graph | undefined;
}

/**
 * Graphs captured once per key and context: the first `get(key, fn)` captures `fn`, later
 * ones (also while that capture is in progress) return the same graph. The pattern of a
 * service that captures its work once per request shape and replays it for each request
 * (inputs copied into, or updated into, the graph's buffers). A failed capture is not kept;
 * a graph disposed by its user is captured anew on the next `get`.
 * @example
 * const graphs = new GraphCache();
 * const graph = await graphs.get(`${rows}x${columns}`, () => step(input, output));
 * input.copyFromHost(request); graph.launch(); await synchronize();
 */
export class GraphCache {
  readonly #entries = new Map<Context, Map<unknown, CacheEntry>>();

  /** The graph for `key` on the current device, capturing `fn` (see `capture`) the first time. */
  get(key: unknown, fn: () => unknown): Promise<Graph> {
    const context = device().primaryContext();
    let byKey = this.#entries.get(context);
    if (byKey === undefined) this.#entries.set(context, (byKey = new Map()));
    const existing = byKey.get(key);
    if (existing !== undefined && existing.graph?.disposed !== true) return existing.promise;
    const entry: CacheEntry = { promise: capture(fn), graph: undefined };
    byKey.set(key, entry);
    entry.promise.then(
      (graph) => {
        entry.graph = graph;
      },
      () => {
        if (byKey.get(key) === entry) byKey.delete(key);
      },
    );
    return entry.promise;
  }

  /** Whether a graph (captured or being captured) is kept for `key` on the current device. */
  has(key: unknown): boolean {
    const entry = this.#entries.get(device().primaryContext())?.get(key);
    return entry !== undefined && entry.graph?.disposed !== true;
  }

  /** Forgets `key` on the current device and disposes its graph; true when there was one. */
  delete(key: unknown): boolean {
    const byKey = this.#entries.get(device().primaryContext());
    const entry = byKey?.get(key);
    if (entry === undefined) return false;
    byKey!.delete(key);
    disposeWhenCaptured(entry);
    return true;
  }

  /** Disposes every graph kept (on every device) and forgets them. */
  clear(): void {
    for (const byKey of this.#entries.values()) {
      for (const entry of byKey.values()) disposeWhenCaptured(entry);
    }
    this.#entries.clear();
  }

  /** Graphs kept (captured or being captured), on every device. */
  get size(): number {
    let size = 0;
    for (const byKey of this.#entries.values()) size += byKey.size;
    return size;
  }
}

function disposeWhenCaptured(entry: CacheEntry): void {
  if (entry.graph !== undefined) entry.graph.dispose();
  else
    entry.promise.then(
      (graph) => graph.dispose(),
      () => undefined,
    );
}

// Process-wide: a second loaded copy of this package shares the cache.
const sharedCache: GraphCache = processWide('graph-cache', () => new GraphCache());

/**
 * `capture(fn)` once per `key` and device, from a process-wide `GraphCache`: the first call
 * captures, every later call (also one made while the capture is in progress) returns the same
 * graph without calling `fn`. Keys are compared like Map keys (a string per shape is usual).
 * `capturedGraphs()` is the cache, to `delete` or `clear`.
 * @example
 * const graph = await capturedOnce(`step-${n}`, () => step(x, y, n));
 * graph.launch();
 */
export function capturedOnce(key: unknown, fn: () => unknown): Promise<Graph> {
  return sharedCache.get(key, fn);
}

/** The process-wide cache behind `capturedOnce`. */
export function capturedGraphs(): GraphCache {
  return sharedCache;
}
