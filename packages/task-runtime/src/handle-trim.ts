import type { Context } from '@cuda-tasks/cudadrv';
import { reportCleanupError } from './cleanup.js';
import type { ContextHandles } from './handle-leases.js';
import type { HandleRecord } from './handle-record.js';
import { throwCollected } from './handle-workspaces.js';

/**
 * What a cache gives back of what it keeps idle: the spare workspaces of handles idle for
 * `keepIdleMs` (an unreferenced timer, armed when a handle goes idle with spares), every spare
 * workspace now, the idle handles beyond the idle bound, every idle handle. Each handle in its
 * own try: what failed is thrown (or, from the timer, reported) after the rest is done.
 */
export class HandleTrim<H> {
  readonly #name: string;
  readonly #contexts: ReadonlyMap<Context, ContextHandles<HandleRecord<H>>>;
  readonly #records: ReadonlyMap<H, HandleRecord<H>>;
  readonly #keepIdleMs: number;
  readonly #destroy: (record: HandleRecord<H>) => void;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;

  /**
   * The trims of the cache `name`, whose handles are `records`, by context `contexts` (both
   * read at each trim); `destroy` destroys a handle and forgets it (throwing what failed).
   */
  constructor(
    name: string,
    contexts: ReadonlyMap<Context, ContextHandles<HandleRecord<H>>>,
    records: ReadonlyMap<H, HandleRecord<H>>,
    keepIdleMs: number,
    destroy: (record: HandleRecord<H>) => void,
  ) {
    this.#name = name;
    this.#contexts = contexts;
    this.#records = records;
    this.#keepIdleMs = keepIdleMs;
    this.#destroy = destroy;
  }

  /**
   * A handle went idle with spares: arms the idle trim in `ms` (default `keepIdleMs`) unless
   * it is armed, `ms` is Infinity, or the trims are stopped.
   */
  scheduleSpares(ms: number = this.#keepIdleMs): void {
    if (this.#timer !== undefined || !Number.isFinite(ms) || this.#stopped) return;
    this.#timer = setTimeout(() => this.#trimIdleSpares(), ms);
    this.#timer.unref?.();
  }

  /** Disarms the timer for good (the cache is disposed). */
  stop(): void {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
  }

  /** Frees the spares of handles idle for `keepIdleMs`; re-arms for those idle for less. */
  #trimIdleSpares(): void {
    this.#timer = undefined;
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
          workspaces.freeSpares(this.#name);
        } catch (error) {
          reportCleanupError(error, undefined);
        }
      }
    }
    if (next !== Number.POSITIVE_INFINITY) this.scheduleSpares(Math.max(1, next));
  }

  /**
   * Frees the spare workspaces of every handle (of `context`, or of every context), idle or
   * leased; bound ones stay. Returns the bytes freed.
   */
  releaseWorkspaces(context?: Context): number {
    let bytes = 0;
    const errors: unknown[] = [];
    for (const record of this.#records.values()) {
      if (record.workspaces === undefined) continue;
      if (context !== undefined && record.context !== context) continue;
      try {
        bytes += record.workspaces.freeSpares(this.#name);
      } catch (error) {
        errors.push(error);
      }
    }
    throwCollected(errors, `${this.#name}: freeing spare workspaces failed`);
    return bytes;
  }

  /** Destroys idle handles beyond `maxIdle` per context, the longest idle first. */
  toBound(maxIdle: number): void {
    const errors: unknown[] = [];
    for (const handles of this.#contexts.values()) {
      while (handles.idle.length > 0 && handles.idle.length > maxIdle) {
        try {
          this.#destroy(handles.idle.shift()!);
        } catch (error) {
          errors.push(error);
        }
      }
    }
    throwCollected(errors, `${this.#name}: destroying idle handles failed`);
  }

  /** Destroys the idle handles (of `context`, or of every context); returns how many. */
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
    throwCollected(errors, `${this.#name}: destroying idle handles failed`);
    return count;
  }
}
