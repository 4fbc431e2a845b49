import {
  type Context,
  CudaArgumentError,
  currentContext,
  currentStream,
  type DeviceBuffer,
  DisposedError,
  onOutOfMemory,
  onReleaseCached,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { onStreamDisposed } from '@cuda-tasks/cudadrv/internal';
import { reportCleanupError } from './cleanup.js';
import {
  ContextHandles,
  checkBound,
  defaultMaxHandlesPerContext,
  registerCache,
  unregisterCache,
} from './handle-leases.js';
import { type HandleBinding, HandleRecord } from './handle-record.js';
import {
  DEFAULT_KEEP_IDLE_WORKSPACES_MS,
  DEFAULT_MAX_WORKSPACES_PER_HANDLE,
  type HandleWorkspace,
  HandleWorkspaces,
  throwCollected,
  type WorkspaceCount,
  WorkspaceHolders,
} from './handle-workspaces.js';
import { onStreamReleased } from './pool.js';
import {
  currentTaskState,
  type TaskLease,
  type TaskResourceOwner,
  type TaskState,
} from './state.js';
import { StreamBinding } from './stream-binding.js';

// The kit in parts: handle-leases.ts (the handles of a context, leases, bounds),
// handle-workspaces.ts (a handle's workspaces), capture-workspaces.ts (the graph-owned ones),
// handle-record.ts (a handle's bookkeeping and the view `bind()` hands out); this file ties
// them to the task runtime (a lease per task), the listeners and the statistics.
export {
  configureHandles,
  DEFAULT_MAX_HANDLES_PER_CONTEXT,
  type HandleBoundOptions,
  warmHandles,
} from './handle-leases.js';
export type { HandleBinding } from './handle-record.js';
export {
  DEFAULT_KEEP_IDLE_WORKSPACES_MS,
  DEFAULT_MAX_WORKSPACES_PER_HANDLE,
  type HandleWorkspace,
} from './handle-workspaces.js';

/** What a `HandleCache` needs to know of a library: how to make, bind and destroy a handle. */
export interface HandleCacheOptions<H> {
  /** Library name for diagnostics, e.g. 'cublas'. */
  name: string;
  /** Creates a handle in `context` (already current). Expensive: milliseconds for cuBLAS. */
  create(context: Context): H;
  /** Destroys a handle (its context is current). */
  destroy(handle: H, context: Context): void;
  /**
   * Makes the library issue the handle's work on `stream` (cublasSetStream, cufftSetStream,
   * ...). Called only when the library does not have that stream for the handle already.
   */
  setStream(handle: H, stream: Stream): void;
  /** An optional workspace per (handle, stream), from the stream-ordered pool. */
  workspace?: HandleWorkspace<H>;
  /**
   * Called after each (re)bind, once stream and workspace are set: apply library settings that
   * changed since (`invalidate()` makes every handle rebind at its next use).
   */
  onBind?(handle: H, stream: Stream): void;
  /**
   * Whether the handle's work must run in issue order across streams (default true): it
   * holds device state that its calls share (a cuRAND generator's state, cuSOLVER's internal
   * buffers), so a bind to another stream makes that stream wait for the previous one's work.
   * False where calls on two streams share nothing (cuBLAS with a workspace per stream).
   */
  ordered?: boolean;
  /**
   * Whether a handle going idle hands its work on to the next user's stream (default true:
   * the next bind elsewhere waits for it on the GPU). False for handles the GPU never reads
   * (host-side state that only supplies kernel arguments, such as a counter-based random
   * generator's seed and offset): consecutive tasks then share no GPU-side wait.
   */
  handOff?: boolean;
  /**
   * The most handles per context (default: `configureHandles`'s, 16). Tasks beyond it share
   * the least-leased handles, each call rebinding it to the caller's stream.
   */
  maxHandlesPerContext?: number;
  /** Idle handles kept per context (default: `maxHandlesPerContext`); more are destroyed. */
  maxIdlePerContext?: number;
}

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
  readonly #ordered: boolean;
  readonly #handOff: boolean;
  readonly #contexts = new Map<Context, ContextHandles<HandleRecord<H>>>();
  readonly #records = new Map<H, HandleRecord<H>>();
  readonly #workspaceHolders = new WorkspaceHolders();
  readonly #removeListeners: (() => void)[];
  #maxHandles: number | undefined;
  #maxIdle: number | undefined;
  readonly #maxWorkspaces: number;
  readonly #keepIdleMs: number;
  #trimTimer: ReturnType<typeof setTimeout> | undefined;
  #created = 0;
  #destroyed = 0;
  #leased = 0;
  #shared = 0;
  #disposed = false;

  /** A cache of the library's handles that `options` describes (its bounds checked first). */
  constructor(options: HandleCacheOptions<H>) {
    checkBound(`${options.name}: maxHandlesPerContext`, options.maxHandlesPerContext, 1);
    checkBound(`${options.name}: maxIdlePerContext`, options.maxIdlePerContext, 0);
    const workspace = options.workspace;
    checkBound(`${options.name}: maxWorkspacesPerHandle`, workspace?.maxWorkspacesPerHandle, 1);
    const keepIdleMs = workspace?.keepIdleMs ?? DEFAULT_KEEP_IDLE_WORKSPACES_MS;
    if (!(keepIdleMs >= 0)) {
      throw new CudaArgumentError(
        `${options.name}: keepIdleMs must be >= 0 (or Infinity), got ${String(keepIdleMs)}`,
      );
    }
    this.#maxWorkspaces = workspace?.maxWorkspacesPerHandle ?? DEFAULT_MAX_WORKSPACES_PER_HANDLE;
    this.#keepIdleMs = keepIdleMs;
    this.name = options.name;
    this.#options = options;
    this.#ordered = options.ordered ?? true;
    this.#handOff = options.handOff ?? true;
    this.#maxHandles = options.maxHandlesPerContext;
    this.#maxIdle = options.maxIdlePerContext;
    // Three channels: streams disposed, pool streams given back, device memory short.
    this.#removeListeners = [
      onStreamDisposed((stream) => this.#streamDisposed(stream)),
      onStreamReleased((stream) => this.#streamReleased(stream)),
      onOutOfMemory((context) => {
        try {
          this.destroyIdle(context);
        } catch (error) {
          reportCleanupError(error, undefined);
        }
        this.#releaseQuietly(context);
      }),
      onReleaseCached((context) => this.#releaseQuietly(context)),
    ];
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
    return this.#maxWorkspaces;
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
    this.#created++;
    const setStream = this.#options.setStream;
    const binding = new StreamBinding({
      context,
      setStream: (stream) => setStream(handle, stream),
      ordered: this.#ordered,
      handOff: this.#handOff,
    });
    const workspace = this.#options.workspace;
    const workspaces =
      workspace === undefined
        ? undefined
        : new HandleWorkspaces(
            handle,
            workspace,
            binding,
            this.#workspaceHolders,
            this.#maxWorkspaces,
          );
    const record = new HandleRecord(handle, context, binding, workspaces);
    this.#records.set(handle, record);
    return record;
  }

  /** Gives `task` a lease of a handle of `context` (see `ContextHandles.take`). */
  #lease(task: TaskState, context: Context, stream: Stream): HandleRecord<H> {
    if (this.#disposed) throw new DisposedError(`HandleCache "${this.name}"`);
    const record = this.#contextHandles(context).take(stream);
    if (record.leases > 0) this.#shared++;
    record.leases++;
    this.#leased++;
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
    this.#leased--;
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
        if ((record.workspaces?.spareCount ?? 0) > 0) this.#scheduleTrim(this.#keepIdleMs);
      } else {
        this.#destroy(record);
      }
    }
  }

  /** Arms the idle trim of spares in `ms` (an unreferenced timer) unless armed or disabled. */
  #scheduleTrim(ms: number): void {
    if (this.#trimTimer !== undefined || !Number.isFinite(ms) || this.#disposed) return;
    this.#trimTimer = setTimeout(() => this.#trimIdleSpares(), ms);
    this.#trimTimer.unref?.();
  }

  /** Frees the spares of handles idle for `keepIdleMs`; re-arms for those idle for less. */
  #trimIdleSpares(): void {
    this.#trimTimer = undefined;
    const now = performance.now();
    let next = Number.POSITIVE_INFINITY;
    for (const handles of this.#contexts.values()) {
      for (const record of handles.idle) {
        const workspaces = record.workspaces;
        if (workspaces === undefined || workspaces.spareCount === 0) continue;
        const left = record.idleSince + this.#keepIdleMs - now;
        if (left > 0) {
          next = Math.min(next, left);
          continue;
        }
        try {
          workspaces.freeSpares(this.name);
        } catch (error) {
          reportCleanupError(error, undefined);
        }
      }
    }
    if (next !== Number.POSITIVE_INFINITY) this.#scheduleTrim(Math.max(1, next));
  }

  /**
   * Frees the spare workspaces of every handle (of `context`, or of every context), idle or
   * leased; bound ones stay. `MemoryPool.releaseCached()` and out-of-memory call it. Returns
   * the bytes freed (each free ordered on the stream the workspace was used on last).
   */
  releaseWorkspaces(context?: Context): number {
    let bytes = 0;
    const errors: unknown[] = [];
    for (const record of this.#records.values()) {
      if (record.workspaces === undefined) continue;
      if (context !== undefined && record.context !== context) continue;
      try {
        bytes += record.workspaces.freeSpares(this.name);
      } catch (error) {
        errors.push(error);
      }
    }
    throwCollected(errors, `${this.name}: freeing spare workspaces failed`);
    return bytes;
  }

  /** `releaseWorkspaces` for a hook: failures go to the cleanup errors. */
  #releaseQuietly(context: Context): void {
    try {
      this.releaseWorkspaces(context);
    } catch (error) {
      reportCleanupError(error, undefined);
    }
  }

  /** Destroys a handle; it is gone from the cache even when a step throws. */
  #destroy(record: HandleRecord<H>): void {
    this.#records.delete(record.handle);
    this.#contexts.get(record.context)?.remove(record);
    this.#destroyed++;
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

  /** A stream is being disposed: free workspaces there and forget it; never throws. */
  #streamDisposed(stream: Stream): void {
    for (const record of this.#records.values()) {
      try {
        record.workspaces?.streamDisposed(stream);
        record.binding.forget(stream);
        if (record.lastBound === stream) record.lastBound = undefined;
      } catch (error) {
        reportCleanupError(error, undefined);
      }
    }
  }

  /**
   * A pool stream went back to the pool (every task holding it has settled): the workspaces
   * handles still leased (shared, or used there through withStream) hold on it become their
   * spares (their use there ends with the work issued so far); a handle bound there rebinds
   * at its next use. Never throws.
   */
  #streamReleased(stream: Stream): void {
    if (!this.#workspaceHolders.has(stream)) return;
    for (const record of this.#records.values()) {
      try {
        record.workspaces?.streamReleased(stream, !this.#disposed);
      } catch (error) {
        reportCleanupError(error, undefined);
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
    const errors: unknown[] = [];
    for (const handles of this.#contexts.values()) {
      while (handles.idle.length > 0 && handles.idle.length > this.maxIdlePerContext) {
        try {
          this.#destroy(handles.idle.shift()!);
        } catch (error) {
          errors.push(error);
        }
      }
    }
    throwCollected(errors, `${this.name}: destroying idle handles failed`);
  }

  /**
   * Destroys the idle handles (of `context`, or of every context); it runs on out-of-memory
   * too. Returns how many. Each in its own try: throws what failed after all are gone.
   */
  destroyIdle(context?: Context): number {
    let count = 0;
    const errors: unknown[] = [];
    for (const [owner, handles] of this.#contexts) {
      if (context !== undefined && owner !== context) continue;
      for (const record of handles.idle.splice(0)) {
        count++;
        try {
          this.#destroy(record);
        } catch (error) {
          errors.push(error);
        }
      }
    }
    throwCollected(errors, `${this.name}: destroying idle handles failed`);
    return count;
  }

  /**
   * Handles created and destroyed so far; idle and leased now (`leased` counts task leases,
   * `handles` the handles alive); `shared`: leases that shared a handle past the bound;
   * `workspaces` and `workspaceBytes`: the workspaces the handles hold now, bound or spare (at
   * most `maxWorkspacesPerHandle` per handle).
   */
  statistics(): {
    created: number;
    destroyed: number;
    idle: number;
    leased: number;
    handles: number;
    shared: number;
    workspaces: number;
    workspaceBytes: number;
  } {
    let idle = 0;
    for (const handles of this.#contexts.values()) idle += handles.idle.length;
    const count: WorkspaceCount = { workspaces: 0, workspaceBytes: 0 };
    for (const record of this.#records.values()) record.workspaces?.count(count);
    return {
      created: this.#created,
      destroyed: this.#destroyed,
      idle,
      leased: this.#leased,
      handles: this.#records.size,
      shared: this.#shared,
      workspaces: count.workspaces,
      workspaceBytes: count.workspaceBytes,
    };
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
    for (const remove of this.#removeListeners) remove();
    if (this.#trimTimer !== undefined) clearTimeout(this.#trimTimer);
    this.#trimTimer = undefined;
    this.destroyIdle();
    // Leased handles keep what they are bound with until their tasks settle.
    this.releaseWorkspaces();
  }

  /** `dispose()`, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
