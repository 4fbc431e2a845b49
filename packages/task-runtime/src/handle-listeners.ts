import { type Context, onOutOfMemory, onReleaseCached, type Stream } from '@cuda-tasks/cudadrv';
import { onStreamDisposed } from '@cuda-tasks/cudadrv/internal';
import { reportCleanupError } from './cleanup.js';
import type { HandleRecord } from './handle-record.js';
import type { WorkspaceHolders } from './handle-workspaces.js';
import { onStreamReleased } from './pool.js';

/** What a cache's listeners ask of it when device memory is short. */
export interface ListeningCache {
  /** Whether the cache is disposed (workspaces are then freed, not kept as spares). */
  readonly disposed: boolean;
  /** Destroys the idle handles of `context`; throws what failed after all are gone. */
  destroyIdle(context: Context): number;
  /** Frees the spare workspaces of `context`; throws what failed after all are freed. */
  releaseWorkspaces(context: Context): number;
}

/**
 * A cache's listeners on three channels, subscribed when made, until `remove()`:
 *
 * - **a stream disposed**: each handle's workspaces there are freed, and the handles forget
 *   the stream (their binding, the stream they were last bound to);
 * - **a pool stream given back** (every task holding it has settled): the workspaces handles
 *   still leased hold there become their spares (freed, once the cache is disposed); a
 *   stream where no handle holds one costs a lookup;
 * - **device memory short**: on out-of-memory the context's idle handles are destroyed and its
 *   spare workspaces freed; on `MemoryPool.releaseCached()` the spares only.
 *
 * A listener never throws: each step that fails, in its own try, goes to the cleanup errors.
 */
export class HandleListeners<H> {
  readonly #cache: ListeningCache;
  readonly #records: ReadonlyMap<H, HandleRecord<H>>;
  readonly #holders: WorkspaceHolders;
  readonly #remove: (() => void)[];

  /**
   * The listeners of `cache`, whose handles are `records` (read at each event) and whose
   * workspaces' streams `holders` counts.
   */
  constructor(
    cache: ListeningCache,
    records: ReadonlyMap<H, HandleRecord<H>>,
    holders: WorkspaceHolders,
  ) {
    this.#cache = cache;
    this.#records = records;
    this.#holders = holders;
    this.#remove = [
      onStreamDisposed((stream) => this.#streamDisposed(stream)),
      onStreamReleased((stream) => this.#streamReleased(stream)),
      onOutOfMemory((context) => this.#outOfMemory(context)),
      onReleaseCached((context) => this.#releaseQuietly(context)),
    ];
  }

  /** Unsubscribes from every channel. Safe to call twice. */
  remove(): void {
    for (const remove of this.#remove.splice(0)) remove();
  }

  /** A stream is being disposed: free workspaces there and forget it. */
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
   * A pool stream went back to the pool: the workspaces leased handles (shared, or used there
   * through withStream) hold on it become their spares (their use there ends with the work
   * issued so far); a handle bound there rebinds at its next use.
   */
  #streamReleased(stream: Stream): void {
    if (!this.#holders.has(stream)) return;
    for (const record of this.#records.values()) {
      try {
        record.workspaces?.streamReleased(stream, !this.#cache.disposed);
      } catch (error) {
        reportCleanupError(error, undefined);
      }
    }
  }

  /** Device memory ran out in `context`: its idle handles go, then its spare workspaces. */
  #outOfMemory(context: Context): void {
    try {
      this.#cache.destroyIdle(context);
    } catch (error) {
      reportCleanupError(error, undefined);
    }
    this.#releaseQuietly(context);
  }

  /** The spare workspaces of `context` freed; failures go to the cleanup errors. */
  #releaseQuietly(context: Context): void {
    try {
      this.#cache.releaseWorkspaces(context);
    } catch (error) {
      reportCleanupError(error, undefined);
    }
  }
}
