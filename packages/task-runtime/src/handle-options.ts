import { type Context, CudaArgumentError, type Stream } from '@cuda-tasks/cudadrv';
import { checkBound } from './handle-leases.js';
import {
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

/** A cache's options, checked, with their defaults applied (what its handles are made with). */
export interface CacheSettings<H> {
  /** The options as given. */
  readonly options: HandleCacheOptions<H>;
  /** `ordered` (default true). */
  readonly ordered: boolean;
  /** `handOff` (default true). */
  readonly handOff: boolean;
  /** The workspace's `maxWorkspacesPerHandle` (default 2). */
  readonly maxWorkspaces: number;
  /** The workspace's `keepIdleMs` (default 500). */
  readonly keepIdleMs: number;
}

/**
 * The settings of a cache that `options` describes; a bound out of range is a
 * CudaArgumentError naming the cache and the option, before anything is made.
 */
export function cacheSettings<H>(options: HandleCacheOptions<H>): CacheSettings<H> {
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
  return {
    options,
    ordered: options.ordered ?? true,
    handOff: options.handOff ?? true,
    maxWorkspaces: workspace?.maxWorkspacesPerHandle ?? DEFAULT_MAX_WORKSPACES_PER_HANDLE,
    keepIdleMs,
  };
}
