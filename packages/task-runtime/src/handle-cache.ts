import {
  type Context,
  currentContext,
  currentStream,
  type DeviceBuffer,
  DisposedError,
  type Stream,
} from '@cuda-tasks/cudadrv';
import {
  ContextHandles,
  checkBound,
  defaultMaxHandlesPerContext,
  registerCache,
  unregisterCache,
} from './handle-leases.js';
import { HandleListeners } from './handle-listeners.js';
import { type CacheSettings, cacheSettings, type HandleCacheOptions } from './handle-options.js';
import { type HandleBinding, HandleRecord } from './handle-record.js';
import { HandleCounters, type HandleStatistics } from './handle-statistics.js';
import { HandleTrim } from './handle-trim.js';
import { WorkspaceHolders } from './handle-workspaces.js';
import {
  currentTaskState,
  type TaskLease,
  type TaskResourceOwner,
  type TaskState,
} from './state.js';

// The kit in parts: handle-options.ts (what a library tells the cache, checked),
// handle-leases.ts (the handles of a context, leases, bounds), handle-workspaces.ts (a
// handle's workspaces), capture-workspaces.ts (the graph-owned ones), handle-record.ts (a
// handle's bookkeeping and the view `bind()` hands out), handle-listeners.ts (streams disposed
// or given back, memory short), handle-trim.ts (what idle handles and spares give back),
// handle-statistics.ts (the counters). This file ties them to the task runtime: a lease per
// task and context, bound to the task's stream at each call.
export {
  configureHandles,
  DEFAULT_MAX_HANDLES_PER_CONTEXT,
  type HandleBoundOptions,
  warmHandles,
} from './handle-leases.js';
export type { HandleCacheOptions } from './handle-options.js';
export type { HandleBinding } from './handle-record.js';
export {
  DEFAULT_KEEP_IDLE_WORKSPACES_MS,
  DEFAULT_MAX_WORKSPACES_PER_HANDLE,
  type HandleWorkspace,
} from './handle-workspaces.js';

/** A task's lease of one handle of this cache (one per cache and context), in its lease list. */
interface Lease<H> extends TaskLease {
  readonly record: HandleRecord<H>;
}

/**
 * The library kit: library handles (cuBLAS, cuSOLVER, cuRAND generators, or your own: cuFFT
 * plans, cuSPARSE, ...) that follow the current task's stream. A library gives it what is
 * specific to it (create, destroy, setStream, optionally a workspace); the kit does the rest,
 * the same way for every library:
 *
 * - **A lease per task and context**, taken at the task's first call and given back when the
 *   task settles (never left to the GC), each lease in its own try.
 * - **Made ahead, bounded per context** (`maxHandlesPerContext`, default 16): the first task
 *   to use the cache in a context creates the whole bound at once, as the stream pool does,
 *   so that a burst creates none; tasks beyond it share the least-leased ones, rebound at
 *   each call (a SetStream costs tens of nanoseconds). Handles destroyed later (idle trim,
 *   out of memory) are made again between event-loop turns, tasks sharing meanwhile.
 *   `warm()` (and the runtime's `prewarm()`) makes them at startup instead.
 * - **Lazy binding with one rebind-skip rule**: `get()` binds only when the current stream
 *   differs from the bound one, and calls `setStream` only when the library does not have
 *   that stream already (a pooled stream that came back with the same handle costs nothing).
 * - **A workspace per (handle, stream)** if asked, so two streams never use one at once: at
 *   most `maxWorkspacesPerHandle` per handle (default 2), allocated from the stream-ordered
 *   pool and kept with the handle when it goes idle (the next task's stream waits on the GPU
 *   for the last one's use), so tasks allocate none; freed (ordered on their streams) after
 *   `keepIdleMs` idle, by `releaseWorkspaces()` / `MemoryPool.releaseCached()` / out of
 *   memory, when the handle is destroyed or the stream disposed.
 * - **A GPU-side hand-off**: when a handle goes idle, an event is recorded where its work went
 *   last, and the next bind to another stream waits for it; with `ordered`, every switch of
 *   streams is ordered so.
 * - `dispose()` removes its listeners and destroys its handles (leased ones when their tasks
 *   settle).
 * @example
 * const plans = new HandleCache<number>({
 *   name: 'cufft 1024',
 *   create: () => makePlan(1024),
 *   destroy: (plan) => check(cufftDestroy(plan), 'cufftDestroy'),
 *   setStream: (plan, stream) => check(cufftSetStream(plan, stream.handle), 'cufftSetStream'),
 *   ordered: false,
 * });
 * check(cufftExecC2C(plans.get(), input, output, -1), 'cufftExecC2C'); // the task's plan, on its stream
 */
export class HandleCache<H> implements TaskResourceOwner {
  /** The name given in the options (in errors and traces). */
  readonly name: string;
  readonly #options: HandleCacheOptions<H>;
  readonly #settings: CacheSettings<H>;
  readonly #contexts = new Map<Context, ContextHandles<HandleRecord<H>>>();
  readonly #records = new Map<H, HandleRecord<H>>();
  readonly #workspaceHolders = new WorkspaceHolders();
  readonly #counters = new HandleCounters();
  readonly #listeners: HandleListeners<H>;
  readonly #trim: HandleTrim<H>;
  #maxHandles: number | undefined;
  #maxIdle: number | undefined;
  #disposed = false;

  /** A cache of the library's handles that `options` describes (its bounds checked first). */
  constructor(options: HandleCacheOptions<H>) {
    this.#settings = cacheSettings(options);
    this.name = options.name;
    this.#options = options;
    this.#maxHandles = options.maxHandlesPerContext;
    this.#maxIdle = options.maxIdlePerContext;
    const keepIdleMs = this.#settings.keepIdleMs;
    this.#trim = new HandleTrim(this.name, this.#contexts, this.#records, keepIdleMs, (record) =>
      this.#destroy(record),
    );
    this.#listeners = new HandleListeners(this, this.#records, this.#workspaceHolders);
    registerCache(this);
  }

  /** The most handles per context (this cache's own bound, else `configureHandles`'s). */
  get maxHandlesPerContext(): number {
    return this.#maxHandles ?? defaultMaxHandlesPerContext();
  }

  /** Idle handles kept per context. */
  get maxIdlePerContext(): number {
    return this.#maxIdle ?? this.maxHandlesPerContext;
  }

  /** The most workspaces one handle holds, bound or spare (`maxWorkspacesPerHandle`). */
  get maxWorkspacesPerHandle(): number {
    return this.#settings.maxWorkspaces;
  }

  /** Whether `dispose()` has been called. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * The running task's handle for the stream's context, bound to `stream` (default: the
   * current stream). Allocates nothing once the task holds its lease and the handle is bound.
   * A disposed stream gives a DisposedError naming it, before any lease or bind.
   */
  get(stream: Stream = currentStream()): H {
    return this.#bound(stream).handle;
  }

  /**
   * `get()`, with the workspace: the running task's handle bound to `stream` (default: the
   * current stream), and its workspace there. What it returns is a read-only view, one per
   * handle, returned again at each call (nothing allocated once the task holds its lease):
   * it reads the handle's state now, so use it within the call it came from. A disposed stream
   * gives a DisposedError naming it, before any lease or bind.
   */
  bind(stream: Stream = currentStream()): HandleBinding<H> {
    return this.#bound(stream).view;
  }

  /** The task's record for the stream's context, leased and bound to `stream`. */
  #bound(stream: Stream): HandleRecord<H> {
    stream.assertUsable();
    const task = currentTaskState();
    const context = stream.context;
    // The task's leases (one per cache and context it used): a short list, walked in place.
    let lease = task.leases;
    while (
      lease !== undefined &&
      (lease.owner !== this || (lease as Lease<H>).record.context !== context)
    ) {
      lease = lease.next;
    }
    const record =
      lease === undefined ? this.#lease(task, context, stream) : (lease as Lease<H>).record;
    if (record.binding.stream !== stream) this.#bind(record, stream);
    return record;
  }

  /** Binds `record` to `stream`: stream, then workspace, then the library's own settings. */
  #bind(record: HandleRecord<H>, stream: Stream): void {
    stream.context.makeCurrent();
    const setStreamCalled = record.binding.bind(stream);
    record.lastBound = stream;
    record.workspaces?.bind(stream, setStreamCalled);
    this.#options.onBind?.(record.handle, stream);
  }

  #contextHandles(context: Context): ContextHandles<HandleRecord<H>> {
    let handles = this.#contexts.get(context);
    if (handles === undefined) {
      handles = new ContextHandles(this, () => this.#create(context));
      this.#contexts.set(context, handles);
    }
    return handles;
  }

  /** Creates a handle of `context` (idle, not yet leased). */
  #create(context: Context): HandleRecord<H> {
    context.makeCurrent();
    const handle = this.#options.create(context);
    this.#counters.created++;
    const record = HandleRecord.of(handle, context, this.#settings, this.#workspaceHolders);
    this.#records.set(handle, record);
    return record;
  }

  /** Gives `task` a lease of a handle of `context` (see `ContextHandles.take`). */
  #lease(task: TaskState, context: Context, stream: Stream): HandleRecord<H> {
    if (this.#disposed) throw new DisposedError(`HandleCache "${this.name}"`);
    const record = this.#contextHandles(context).take(stream);
    this.#counters.leaseTaken(record.leases);
    record.leases++;
    const lease: Lease<H> = { owner: this, record, next: task.leases };
    task.leases = lease;
    return record;
  }

  /**
   * @internal Gives back one lease of a settled task (called by the runtime). A handle whose
   * last lease this was goes idle: its hand-off event is recorded, its workspaces freed on
   * their streams; beyond the idle bound (or after `dispose()`) it is destroyed. Throws what
   * failed, after the lease is given back.
   */
  releaseLease(_task: TaskState, lease: TaskLease): void {
    const record = (lease as Lease<H>).record;
    this.#counters.leaseReturned();
    if (--record.leases > 0) return;
    this.#idle(record);
  }

  /**
   * A handle nobody leases any more: hand-off, its workspaces become spares (freed after
   * `keepIdleMs` idle), then idle or destroy.
   */
  #idle(record: HandleRecord<H>): void {
    const handles = this.#contextHandles(record.context);
    try {
      record.binding.release();
      record.workspaces?.parkAll(!this.#disposed, this.name);
    } finally {
      if (handles.putIdle(record)) {
        record.idleSince = performance.now();
        if ((record.workspaces?.spareCount ?? 0) > 0) this.#trim.scheduleSpares();
      } else {
        this.#destroy(record);
      }
    }
  }

  /**
   * Frees the spare workspaces of every handle (of `context`, or of every context), idle or
   * leased; bound ones stay. `MemoryPool.releaseCached()` and out-of-memory call it. Returns
   * the bytes freed (each free ordered on the stream the workspace was used on last).
   */
  releaseWorkspaces(context?: Context): number {
    return this.#trim.releaseWorkspaces(context);
  }

  /** Destroys a handle; it is gone from the cache even when a step throws. */
  #destroy(record: HandleRecord<H>): void {
    this.#records.delete(record.handle);
    this.#contexts.get(record.context)?.remove(record);
    this.#counters.destroyed++;
    try {
      record.workspaces?.freeAll(this.name);
    } finally {
      try {
        record.context.makeCurrent();
        this.#options.destroy(record.handle, record.context);
      } finally {
        record.binding.dispose();
      }
    }
  }

  /**
   * Makes every handle rebind at its next use (its library settings changed: a workspace
   * size, a math mode). The rebind skips `setStream` when the library has the stream.
   */
  invalidate(): void {
    for (const record of this.#records.values()) record.binding.invalidate();
  }

  /** The handle's bound stream, or undefined (not bound, or not a handle of this cache). */
  boundStream(handle: H): Stream | undefined {
    return this.#records.get(handle)?.binding.stream;
  }

  /**
   * The handle's workspace on `stream` (the graph's while `stream` captures and the handle is
   * bound there), or undefined.
   */
  workspaceOf(handle: H, stream: Stream): DeviceBuffer | undefined {
    const record = this.#records.get(handle);
    const workspaces = record?.workspaces;
    if (workspaces === undefined) return undefined;
    if (record!.binding.stream === stream && stream.capture !== null) return workspaces.bound;
    return workspaces.on(stream);
  }

  /**
   * Creates idle handles of `context` (default: the current device's) up to `count` in all
   * (default and at most: `maxHandlesPerContext`), so that a burst of tasks finds them made.
   * Call it at startup, while the GPU is idle. Returns how many handles the context has.
   * @example cache.warm(); // before the first requests
   */
  warm(count?: number, context: Context = currentContext()): number {
    if (this.#disposed) throw new DisposedError(`HandleCache "${this.name}"`);
    checkBound(`${this.name}: warm count`, count, 0);
    const target = Math.min(count ?? this.maxHandlesPerContext, this.maxHandlesPerContext);
    return this.#contextHandles(context).warm(target);
  }

  /**
   * Sets this cache's bounds (validated before anything changes). Lowering the idle bound
   * destroys idle handles beyond it.
   */
  configure(options: { maxHandlesPerContext?: number; maxIdlePerContext?: number }): void {
    checkBound(`${this.name}: maxHandlesPerContext`, options.maxHandlesPerContext, 1);
    checkBound(`${this.name}: maxIdlePerContext`, options.maxIdlePerContext, 0);
    if (options.maxHandlesPerContext !== undefined) {
      this.#maxHandles = options.maxHandlesPerContext;
    }
    if (options.maxIdlePerContext !== undefined) this.#maxIdle = options.maxIdlePerContext;
    this.trimToBounds();
  }

  /** @internal Destroys idle handles beyond the bounds (after a bound changed). */
  trimToBounds(): void {
    this.#trim.toBound(this.maxIdlePerContext);
  }

  /**
   * Destroys the idle handles (of `context`, or of every context); it runs on out-of-memory
   * too. Returns how many. Each in its own try: throws what failed after all are gone.
   */
  destroyIdle(context?: Context): number {
    return this.#trim.destroyIdle(context);
  }

  /**
   * Handles created and destroyed so far; idle and leased now (`leased` counts task leases,
   * `handles` the handles alive); `shared`: leases that shared a handle past the bound;
   * `workspaces` and `workspaceBytes`: the workspaces the handles hold now, bound or spare (at
   * most `maxWorkspacesPerHandle` per handle).
   */
  statistics(): HandleStatistics {
    return this.#counters.statistics(this.#contexts, this.#records);
  }

  /**
   * Removes the cache's listeners and destroys its idle handles; leased handles are destroyed
   * when their tasks settle. A later `get()` by a task without a lease throws DisposedError.
   * Safe to call twice.
   */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    unregisterCache(this);
    this.#listeners.remove();
    this.#trim.stop();
    this.destroyIdle();
    // Leased handles keep what they are bound with until their tasks settle.
    this.releaseWorkspaces();
  }

  /** `dispose()`, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
