import {
  type Context,
  currentContext,
  currentStream,
  DeviceBuffer,
  DisposedError,
  onOutOfMemory,
  onReleaseCached,
  type Stream,
  type StreamCapture,
} from '@cuda-tasks/cudadrv';
import { onStreamDisposed } from '@cuda-tasks/cudadrv/internal';
import { reportCleanupError } from './cleanup.js';
import { onStreamReleased } from './pool.js';
import { processWide } from './process-wide.js';
import {
  currentTaskState,
  type TaskLease,
  type TaskResourceOwner,
  type TaskState,
} from './state.js';
import { StreamBinding } from './stream-binding.js';

/** A per-(handle, stream) workspace: how big, and how the library is told about it. */
export interface HandleWorkspace<H> {
  /**
   * Bytes of workspace `handle` needs on `stream` (0: none). Read at each bind, so a changed
   * size applies at the next bind (call `invalidate()` to force one). While `stream` captures
   * a graph, the workspace is one the graph owns, allocated outside the capture (a library
   * that needs one to be captured, like cuBLAS, returns its size here even where it otherwise
   * uses its own).
   */
  bytes(handle: H, stream: Stream): number;
  /**
   * Hands the workspace to the library (cublasSetWorkspace, cufftSetWorkArea), or with
   * `undefined` tells it to use none / its own. Called after `setStream`, and whenever the
   * workspace the library has differs from the one for the bound stream.
   */
  set(handle: H, workspace: DeviceBuffer | undefined, stream: Stream): void;
  /**
   * Whether `setStream` makes the library forget its workspace (cuBLAS's cublasSetStream
   * does); then `set` runs after every `setStream`.
   */
  resetBySetStream?: boolean;
  /**
   * The most workspaces one handle holds, bound or spare (default 2, at least 1). A handle
   * bound to more streams at once (shared past the handle bound, or used through `withStream`)
   * takes over the workspace it used least recently on another stream, ordered after that
   * stream's work on the GPU.
   */
  maxWorkspacesPerHandle?: number;
  /**
   * How long an idle handle keeps its spare workspaces, ms (default 500; `Infinity`: until
   * the handle is destroyed, `releaseWorkspaces()` or `MemoryPool.releaseCached()`).
   */
  keepIdleMs?: number;
}

/** Workspaces one handle holds at most, by default. */
export const DEFAULT_MAX_WORKSPACES_PER_HANDLE = 2;
/** How long an idle handle keeps its spare workspaces by default, ms. */
export const DEFAULT_KEEP_IDLE_WORKSPACES_MS = 500;

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

/** A handle bound to a stream, as `bind()` gives it. */
export interface HandleBinding<H> {
  /** The library handle. */
  readonly handle: H;
  /** The stream it is bound to. */
  readonly stream: Stream | undefined;
  /** Its workspace on that stream (undefined without a workspace option, or of 0 bytes). */
  readonly workspace: DeviceBuffer | undefined;
}

/** One handle and its bookkeeping. */
class HandleRecord<H> implements HandleBinding<H> {
  readonly handle: H;
  readonly context: Context;
  readonly binding: StreamBinding;
  /** Tasks holding a lease on it now (more than one: shared past the bound). */
  leases = 0;
  /** The stream it was last bound to, kept after release: leases prefer a match. */
  lastBound: Stream | undefined;
  /**
   * Its workspace per stream it is bound to, least recently bound first (each becomes a spare
   * when the handle goes idle or the stream goes back to the pool; freed when the stream is
   * disposed).
   */
  workspaces: Map<Stream, DeviceBuffer> | undefined;
  /**
   * Workspaces bound to no stream, kept for the next bind (each was last used on its
   * `lastStream`, whose work a new stream waits for). With `workspaces`, at most the cache's
   * `maxWorkspacesPerHandle`.
   */
  readonly spares: DeviceBuffer[] = [];
  /** When it last went idle (performance.now()), for the spares' idle trim. */
  idleSince = 0;
  /** Its workspace on the bound stream. */
  workspace: DeviceBuffer | undefined;
  /** The workspace the library has: address and size (0: none or the library's own). */
  nativeWorkspace: number | bigint = 0;
  nativeWorkspaceBytes = 0;
  /** The graph-owned workspace of each capture the handle is used in now. */
  captures: Map<StreamCapture, DeviceBuffer> | undefined;

  constructor(handle: H, context: Context, binding: StreamBinding) {
    this.handle = handle;
    this.context = context;
    this.binding = binding;
  }

  get stream(): Stream | undefined {
    return this.binding.stream;
  }
}

/** A task's lease of one handle of this cache (one per cache and context), in its lease list. */
interface Lease<H> extends TaskLease {
  readonly record: HandleRecord<H>;
}

/** The handles of one context. */
interface ContextHandles<H> {
  readonly all: HandleRecord<H>[];
  readonly idle: HandleRecord<H>[];
  /** Where the search for a handle to share starts (round-robin among the least leased). */
  cursor: number;
  /** Whether a creation ahead of need is scheduled (`#growAhead`). */
  growing: boolean;
}

/** Options of `configureHandles`. */
export interface HandleBoundOptions {
  /** The most handles per context of each cache that sets none itself (default 16). */
  maxHandlesPerContext?: number;
}

interface HandleRegistry {
  /** Every cache not disposed, for `configureHandles` and `warmHandles`. */
  readonly caches: Set<HandleCache<unknown>>;
  maxHandlesPerContext: number;
}

/** Handles per context of a cache that sets no bound of its own. */
export const DEFAULT_MAX_HANDLES_PER_CONTEXT = 16;

const registry = processWide<HandleRegistry>('handle-caches', () => ({
  caches: new Set(),
  maxHandlesPerContext: DEFAULT_MAX_HANDLES_PER_CONTEXT,
}));

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
  readonly #contexts = new Map<Context, ContextHandles<H>>();
  readonly #records = new Map<H, HandleRecord<H>>();
  /**
   * Per stream, how many handles hold a workspace there: a stream going back to the pool
   * where none does (nearly always) costs one lookup, not a walk over every handle.
   */
  readonly #workspaceHolders = new Map<Stream, number>();
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

  constructor(options: HandleCacheOptions<H>) {
    checkBound(`${options.name}: maxHandlesPerContext`, options.maxHandlesPerContext, 1);
    checkBound(`${options.name}: maxIdlePerContext`, options.maxIdlePerContext, 0);
    const workspace = options.workspace;
    checkBound(`${options.name}: maxWorkspacesPerHandle`, workspace?.maxWorkspacesPerHandle, 1);
    const keepIdleMs = workspace?.keepIdleMs ?? DEFAULT_KEEP_IDLE_WORKSPACES_MS;
    if (!(keepIdleMs >= 0)) {
      throw new RangeError(
        `${options.name}: keepIdleMs must be >= 0 (or Infinity), got ${String(keepIdleMs)}`,
      );
    }
    this.#maxWorkspaces = workspace?.maxWorkspacesPerHandle ?? DEFAULT_MAX_WORKSPACES_PER_HANDLE;
    this.#keepIdleMs = keepIdleMs;
    this.name = options.name;
    this.#options = options;
    this.#ordered = options.ordered ?? true;
    this.#maxHandles = options.maxHandlesPerContext;
    this.#maxIdle = options.maxIdlePerContext;
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
    registry.caches.add(this as HandleCache<unknown>);
  }

  /** The most handles per context (this cache's own bound, else `configureHandles`'s). */
  get maxHandlesPerContext(): number {
    return this.#maxHandles ?? registry.maxHandlesPerContext;
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
    return this.bind(stream).handle;
  }

  /**
   * `get()`, with the workspace: the running task's handle bound to `stream` (default: the
   * current stream), and its workspace there. A disposed stream gives a DisposedError naming
   * it, before any lease or bind.
   */
  bind(stream: Stream = currentStream()): HandleBinding<H> {
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
    const handle = record.handle;
    if (record.binding.bind(stream) && this.#options.workspace?.resetBySetStream) {
      record.nativeWorkspace = 0;
      record.nativeWorkspaceBytes = 0;
    }
    record.lastBound = stream;
    const workspaceOptions = this.#options.workspace;
    if (workspaceOptions !== undefined) {
      const bytes = workspaceOptions.bytes(handle, stream);
      const capture = stream.capture;
      const workspace =
        capture === null
          ? this.#streamWorkspace(record, stream, bytes)
          : this.#captureWorkspace(record, stream, capture, bytes);
      record.workspace = workspace;
      if (workspace !== undefined) {
        const address = workspace.address;
        if (address !== record.nativeWorkspace || bytes !== record.nativeWorkspaceBytes) {
          workspaceOptions.set(handle, workspace, stream);
          record.nativeWorkspace = address;
          record.nativeWorkspaceBytes = bytes;
        }
      } else if (record.nativeWorkspace !== 0) {
        workspaceOptions.set(handle, undefined, stream);
        record.nativeWorkspace = 0;
        record.nativeWorkspaceBytes = 0;
      }
    }
    this.#options.onBind?.(handle, stream);
  }

  /** The (handle, stream) workspace of `bytes`, allocated on `stream` when missing or resized. */
  #streamWorkspace(
    record: HandleRecord<H>,
    stream: Stream,
    bytes: number,
  ): DeviceBuffer | undefined {
    let workspaces = record.workspaces;
    let workspace = workspaces?.get(stream);
    if (bytes > 0 && (workspace === undefined || workspace.byteLength !== bytes)) {
      if (workspace !== undefined) {
        this.#dropWorkspace(record, stream);
        workspace.dispose();
      }
      // A spare or one taken over is handed to `stream` behind a GPU-side wait (useOn); a new
      // one is allocated on `stream` and used only there.
      workspace =
        this.#reuseWorkspace(record, stream, bytes) ?? DeviceBuffer.allocate(bytes, { stream });
      if (workspaces === undefined) record.workspaces = workspaces = new Map();
      workspaces.set(stream, workspace);
      this.#holdsWorkspace(stream, 1);
    } else if (bytes === 0 && workspace !== undefined) {
      this.#dropWorkspace(record, stream);
      workspace.dispose();
      workspace = undefined;
    } else if (workspace !== undefined && workspaces!.size > 1) {
      // Most recently bound last: a take-over picks the first.
      workspaces!.delete(stream);
      workspaces!.set(stream, workspace);
    }
    return workspace;
  }

  /**
   * A workspace of `bytes` for `stream` without allocating: a spare (one last used on
   * `stream` first), or at `maxWorkspacesPerHandle` the one bound least recently to another
   * stream, which `stream` then waits for on the GPU. Undefined: allocate one.
   */
  #reuseWorkspace(
    record: HandleRecord<H>,
    stream: Stream,
    bytes: number,
  ): DeviceBuffer | undefined {
    const spares = record.spares;
    let chosen = -1;
    for (let i = spares.length - 1; i >= 0; i--) {
      const spare = spares[i]!;
      if (spare.byteLength !== bytes) {
        // Of a size no longer asked for.
        spares.splice(i, 1);
        if (chosen > i) chosen--;
        spare.dispose();
        continue;
      }
      if (chosen < 0 || spare.lastStream === stream) chosen = i;
    }
    if (chosen >= 0) {
      const spare = spares.splice(chosen, 1)[0]!;
      spare.useOn(stream, 'write');
      return spare;
    }
    const workspaces = record.workspaces;
    if (workspaces === undefined || workspaces.size + spares.length < this.#maxWorkspaces) {
      return undefined;
    }
    for (const [other, victim] of workspaces) {
      // A capturing stream's own workspace is left alone (its pre-capture use is not ended).
      if (other === stream || other.capture !== null) continue;
      this.#dropWorkspace(record, other);
      if (victim.byteLength !== bytes) {
        victim.dispose();
        return undefined;
      }
      // Marks everything issued on `other` so far as its last use, then hands it over.
      victim.useOn(other, 'write');
      victim.useOn(stream, 'write');
      return victim;
    }
    return undefined;
  }

  /**
   * Keeps a workspace that `stream` no longer has as a spare of `record` (its use there ends
   * with the work issued so far), or frees it, ordered on `stream`, where the handle has its
   * fill of spares, the stream cannot take the mark (disposed, capturing) or the cache is
   * disposed.
   */
  #park(record: HandleRecord<H>, stream: Stream, workspace: DeviceBuffer): void {
    if (
      this.#disposed ||
      stream.disposed ||
      stream.capture !== null ||
      record.spares.length >= this.#maxWorkspaces
    ) {
      workspace.dispose();
      return;
    }
    workspace.useOn(stream, 'write');
    record.spares.push(workspace);
  }

  /**
   * While `stream` captures a graph: a workspace the graph owns (allocated outside the
   * capture, freed with the graph; each replay declares it used), never memory allocated on
   * the capturing stream. When the capture ends, the handle rebinds at its next use, so the
   * library gets a workspace of its own back.
   */
  #captureWorkspace(
    record: HandleRecord<H>,
    stream: Stream,
    capture: StreamCapture,
    bytes: number,
  ): DeviceBuffer | undefined {
    if (bytes === 0) return undefined;
    const captures = (record.captures ??= new Map());
    let workspace = captures.get(capture);
    if (workspace === undefined || workspace.byteLength !== bytes) {
      workspace = capture.allocateOwned(bytes);
      captures.set(capture, workspace);
      const owned = workspace;
      capture.afterEnd(() => {
        captures.delete(capture);
        if (record.workspace === owned) record.workspace = undefined;
        if (record.nativeWorkspace === owned.address) record.nativeWorkspace = -1;
        if (record.binding.stream === stream) record.binding.invalidate();
      });
    }
    return workspace;
  }

  #contextHandles(context: Context): ContextHandles<H> {
    let handles = this.#contexts.get(context);
    if (handles === undefined) {
      this.#contexts.set(context, (handles = { all: [], idle: [], cursor: 0, growing: false }));
    }
    return handles;
  }

  /** Creates a handle of `context` (idle, not yet leased). */
  #create(context: Context, handles: ContextHandles<H>): HandleRecord<H> {
    context.makeCurrent();
    const handle = this.#options.create(context);
    this.#created++;
    const setStream = this.#options.setStream;
    const binding = new StreamBinding({
      context,
      setStream: (stream) => setStream(handle, stream),
      ordered: this.#ordered,
      handOff: this.#options.handOff ?? true,
    });
    const record = new HandleRecord(handle, context, binding);
    this.#records.set(handle, record);
    handles.all.push(record);
    return record;
  }

  /**
   * Gives `task` a lease of a handle of `context`: an idle one; at the context's first use, a
   * new one, with the rest of the bound made at once (handles are made ahead of bursts, as
   * task streams are); otherwise one that other tasks hold (the least leased), while the
   * context grows ahead of need between event-loop turns below its bound.
   */
  #lease(task: TaskState, context: Context, stream: Stream): HandleRecord<H> {
    if (this.#disposed) throw new DisposedError(`HandleCache "${this.name}"`);
    const handles = this.#contextHandles(context);
    let record = takeIdle(handles.idle, stream);
    if (record === undefined) {
      if (handles.all.length === 0) {
        record = this.#create(context, handles);
        this.#fillAhead(context, handles);
      } else {
        record = leastLeased(handles);
        this.#shared++;
        this.#growAhead(context, handles);
      }
    }
    record.leases++;
    this.#leased++;
    const lease: Lease<H> = { owner: this, record, next: task.leases };
    task.leases = lease;
    return record;
  }

  /**
   * Creates idle handles of `context` up to the bound (and the idle bound) now; a creation
   * that fails (out of memory) stops it quietly: tasks share what exists.
   */
  #fillAhead(context: Context, handles: ContextHandles<H>): void {
    try {
      while (
        handles.all.length < this.maxHandlesPerContext &&
        handles.idle.length < this.maxIdlePerContext
      ) {
        handles.idle.unshift(this.#create(context, handles));
      }
    } catch {
      // The leased handle exists; the others are made when resources allow.
    }
  }

  /**
   * Below the bound with no idle handle: creates one more in a later event-loop turn, outside
   * any task's call, and again each turn while fewer than two are idle.
   */
  #growAhead(context: Context, handles: ContextHandles<H>): void {
    if (handles.growing || handles.all.length >= this.maxHandlesPerContext) return;
    handles.growing = true;
    setImmediate(() => {
      handles.growing = false;
      if (
        this.#disposed ||
        handles.idle.length >= 2 ||
        handles.all.length >= this.maxHandlesPerContext ||
        handles.idle.length >= this.maxIdlePerContext
      ) {
        return;
      }
      try {
        handles.idle.unshift(this.#create(context, handles));
      } catch {
        return; // Out of resources: tasks share what exists.
      }
      this.#growAhead(context, handles);
    });
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
      this.#parkWorkspaces(record);
    } finally {
      if (!this.#disposed && handles.idle.length < this.maxIdlePerContext) {
        handles.idle.push(record);
        record.idleSince = performance.now();
        if (record.spares.length > 0) this.#scheduleTrim(this.#keepIdleMs);
      } else {
        this.#destroy(record);
      }
    }
  }

  /** Makes every bound workspace of `record` a spare (or frees it; see `#park`). */
  #parkWorkspaces(record: HandleRecord<H>): void {
    const workspaces = record.workspaces;
    record.workspace = undefined;
    if (workspaces === undefined || workspaces.size === 0) return;
    const errors: unknown[] = [];
    for (const [stream, workspace] of workspaces) {
      this.#holdsWorkspace(stream, -1);
      try {
        this.#park(record, stream, workspace);
      } catch (error) {
        errors.push(error);
      }
    }
    workspaces.clear();
    throwCollected(errors, `${this.name}: releasing workspaces failed`);
  }

  /** Frees every workspace of `record`, bound and spare, each ordered on its stream. */
  #freeWorkspaces(record: HandleRecord<H>): void {
    const workspaces = record.workspaces;
    record.workspace = undefined;
    const errors: unknown[] = [];
    for (const spare of record.spares.splice(0)) {
      try {
        spare.dispose();
      } catch (error) {
        errors.push(error);
      }
    }
    if (workspaces !== undefined) {
      for (const [stream, workspace] of workspaces) {
        this.#holdsWorkspace(stream, -1);
        try {
          workspace.dispose();
        } catch (error) {
          errors.push(error);
        }
      }
      workspaces.clear();
    }
    throwCollected(errors, `${this.name}: freeing workspaces failed`);
  }

  /** Frees the spare workspaces of `record`; returns their bytes. */
  #freeSpares(record: HandleRecord<H>): number {
    let bytes = 0;
    const errors: unknown[] = [];
    for (const spare of record.spares.splice(0)) {
      bytes += spare.byteLength;
      try {
        spare.dispose();
      } catch (error) {
        errors.push(error);
      }
    }
    throwCollected(errors, `${this.name}: freeing spare workspaces failed`);
    return bytes;
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
        if (record.spares.length === 0) continue;
        const left = record.idleSince + this.#keepIdleMs - now;
        if (left > 0) {
          next = Math.min(next, left);
          continue;
        }
        try {
          this.#freeSpares(record);
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
      if (context !== undefined && record.context !== context) continue;
      try {
        bytes += this.#freeSpares(record);
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

  /** Counts a handle more (`change` 1) or less (-1) holding a workspace on `stream`. */
  #holdsWorkspace(stream: Stream, change: 1 | -1): void {
    const holders = (this.#workspaceHolders.get(stream) ?? 0) + change;
    if (holders > 0) this.#workspaceHolders.set(stream, holders);
    else this.#workspaceHolders.delete(stream);
  }

  /** Takes `record`'s workspace on `stream` out of its map (the caller frees it). */
  #dropWorkspace(record: HandleRecord<H>, stream: Stream): void {
    if (record.workspaces?.delete(stream)) this.#holdsWorkspace(stream, -1);
  }

  /** Destroys a handle; it is gone from the cache even when a step throws. */
  #destroy(record: HandleRecord<H>): void {
    this.#records.delete(record.handle);
    const handles = this.#contexts.get(record.context);
    if (handles !== undefined) remove(handles.all, record);
    this.#destroyed++;
    try {
      this.#freeWorkspaces(record);
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
        const spares = record.spares;
        for (let i = spares.length - 1; i >= 0; i--) {
          const spare = spares[i]!;
          if (spare.lastStream !== stream) continue;
          spares.splice(i, 1);
          spare.dispose(); // ordered on the stream, still alive while this runs
        }
        const workspace = record.workspaces?.get(stream);
        if (workspace !== undefined) {
          this.#dropWorkspace(record, stream);
          if (record.workspace === workspace) record.workspace = undefined;
          // The library may still point at it: the next bind sets a live one.
          record.nativeWorkspace = -1;
          workspace.dispose();
        }
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
      const workspace = record.workspaces?.get(stream);
      if (workspace === undefined) continue;
      try {
        this.#dropWorkspace(record, stream);
        if (record.workspace === workspace) record.workspace = undefined;
        if (record.binding.stream === stream) record.binding.invalidate();
        this.#park(record, stream, workspace);
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
    if (record === undefined) return undefined;
    if (record.binding.stream === stream && stream.capture !== null) return record.workspace;
    return record.workspaces?.get(stream);
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
    const handles = this.#contextHandles(context);
    const target = Math.min(count ?? this.maxHandlesPerContext, this.maxHandlesPerContext);
    while (handles.all.length < target && handles.idle.length < this.maxIdlePerContext) {
      handles.idle.unshift(this.#create(context, handles));
    }
    return handles.all.length;
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
    this.#trimIdle();
  }

  /** @internal Destroys idle handles beyond the bounds (after a bound changed). */
  trimToBounds(): void {
    this.#trimIdle();
  }

  #trimIdle(): void {
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
    let workspaces = 0;
    let workspaceBytes = 0;
    for (const record of this.#records.values()) {
      for (const spare of record.spares) {
        workspaces++;
        workspaceBytes += spare.byteLength;
      }
      if (record.workspaces === undefined) continue;
      for (const workspace of record.workspaces.values()) {
        workspaces++;
        workspaceBytes += workspace.byteLength;
      }
    }
    return {
      created: this.#created,
      destroyed: this.#destroyed,
      idle,
      leased: this.#leased,
      handles: this.#records.size,
      shared: this.#shared,
      workspaces,
      workspaceBytes,
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
    registry.caches.delete(this as HandleCache<unknown>);
    for (const remove of this.#removeListeners) remove();
    if (this.#trimTimer !== undefined) clearTimeout(this.#trimTimer);
    this.#trimTimer = undefined;
    this.destroyIdle();
    // Leased handles keep what they are bound with until their tasks settle.
    this.releaseWorkspaces();
  }

  [Symbol.dispose](): void {
    this.dispose();
  }
}

/**
 * An idle handle, preferring the one last bound to `stream` (pooled streams go back to tasks,
 * so a task often gets the stream its predecessor used, and the library still has it). Else
 * the most recently idle one.
 */
function takeIdle<H>(idle: HandleRecord<H>[], stream: Stream): HandleRecord<H> | undefined {
  const last = idle.length - 1;
  if (last < 0) return undefined;
  for (let i = last; i >= 0; i--) {
    const candidate = idle[i]!;
    if (candidate.lastBound === stream) {
      idle[i] = idle[last]!;
      idle.length = last;
      return candidate;
    }
  }
  return idle.pop();
}

/** The handle with the fewest leases, round-robin among equals. */
function leastLeased<H>(handles: ContextHandles<H>): HandleRecord<H> {
  const all = handles.all;
  const start = handles.cursor++ % all.length;
  let best = all[start]!;
  for (let i = 1; i < all.length; i++) {
    const candidate = all[(start + i) % all.length]!;
    if (candidate.leases < best.leases) best = candidate;
  }
  return best;
}

function remove<T>(list: T[], item: T): void {
  const index = list.indexOf(item);
  if (index >= 0) list.splice(index, 1);
}

function throwCollected(errors: unknown[], message: string): void {
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) throw new AggregateError(errors, message);
}

function checkBound(name: string, value: number | undefined, minimum: number): void {
  if (value !== undefined && (!Number.isSafeInteger(value) || value < minimum)) {
    throw new RangeError(`${name} must be an integer >= ${minimum}, got ${String(value)}`);
  }
}

/**
 * Sets the default bound on handles per context for every cache that sets none itself (the
 * library packages' caches, unless configured), checked before anything changes. Idle handles
 * beyond a lowered bound are destroyed.
 * @example configureHandles({ maxHandlesPerContext: 8 });
 */
export function configureHandles(options: HandleBoundOptions): void {
  checkBound('configureHandles: maxHandlesPerContext', options.maxHandlesPerContext, 1);
  if (options.maxHandlesPerContext !== undefined) {
    registry.maxHandlesPerContext = options.maxHandlesPerContext;
  }
  for (const cache of registry.caches) cache.trimToBounds();
}

/**
 * Warms every live handle cache (cuBLAS, cuSOLVER, cuRAND default generators, yours) on
 * `context`: creates its idle handles up to its bound, ahead of a burst. Returns the handles
 * each cache has, by name.
 */
export function warmHandles(context: Context = currentContext()): Record<string, number> {
  const result: Record<string, number> = {};
  for (const cache of registry.caches) result[cache.name] = cache.warm(undefined, context);
  return result;
}
