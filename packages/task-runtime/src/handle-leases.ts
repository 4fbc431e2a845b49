import {
  assertOptions,
  type Context,
  CudaArgumentError,
  currentContext,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { processWide } from './process-wide.js';

/** Options of `configureHandles`. */
export interface HandleBoundOptions {
  /** The most handles per context of each cache that sets none itself (default 16). */
  maxHandlesPerContext?: number;
}

/** The options `configureHandles` takes (any other is refused). */
const HANDLE_BOUND_OPTIONS: readonly string[] = ['maxHandlesPerContext'];

/** Handles per context of a cache that sets no bound of its own. */
export const DEFAULT_MAX_HANDLES_PER_CONTEXT = 16;

/** What `configureHandles` and `warmHandles` need of a cache. */
export interface BoundedCache {
  /** The cache's name (the key of `warmHandles`'s result). */
  readonly name: string;
  /** Creates idle handles of `context` up to the bound; returns how many it has. */
  warm(count: undefined, context: Context): number;
  /** Destroys idle handles beyond the bounds (after a bound changed). */
  trimToBounds(): void;
}

interface HandleRegistry {
  /** Every cache not disposed, for `configureHandles` and `warmHandles`. */
  readonly caches: Set<BoundedCache>;
  maxHandlesPerContext: number;
}

const registry = processWide<HandleRegistry>('handle-caches', () => ({
  caches: new Set(),
  maxHandlesPerContext: DEFAULT_MAX_HANDLES_PER_CONTEXT,
}));

/** The bound of caches that set none (`configureHandles`'s). */
export function defaultMaxHandlesPerContext(): number {
  return registry.maxHandlesPerContext;
}

/** Makes `cache` one that `configureHandles` and `warmHandles` reach (until `unregister`). */
export function registerCache(cache: BoundedCache): void {
  registry.caches.add(cache);
}

/** Undoes `registerCache` (the cache is disposed). */
export function unregisterCache(cache: BoundedCache): void {
  registry.caches.delete(cache);
}

/**
 * Sets the default bound on handles per context for every cache that sets none itself (the
 * library packages' caches, unless configured), checked before anything changes: options that
 * are not an object (`null`), an unknown option or a bound out of range are a
 * CudaArgumentError. Idle handles beyond a lowered bound are destroyed.
 * @example configureHandles({ maxHandlesPerContext: 8 });
 */
export function configureHandles(options: HandleBoundOptions): void {
  assertOptions('configureHandles', options, HANDLE_BOUND_OPTIONS);
  // Undefined (no options, from JavaScript) sets nothing, as an omitted option does.
  const maxHandlesPerContext = options?.maxHandlesPerContext;
  checkBound('configureHandles: maxHandlesPerContext', maxHandlesPerContext, 1);
  if (maxHandlesPerContext !== undefined) registry.maxHandlesPerContext = maxHandlesPerContext;
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

/** Refuses a bound that is not a safe integer >= `minimum` with a CudaArgumentError naming it. */
export function checkBound(name: string, value: number | undefined, minimum: number): void {
  if (value !== undefined && (!Number.isSafeInteger(value) || value < minimum)) {
    throw new CudaArgumentError(`${name} must be an integer >= ${minimum}, got ${String(value)}`);
  }
}

/** What `ContextHandles` reads of a handle. */
export interface LeasedHandle {
  /** Tasks holding a lease on it now. */
  leases: number;
  /** The stream it was last bound to (leases prefer a match). */
  readonly lastBound: Stream | undefined;
}

/** The bounds `ContextHandles` keeps to, read at each use (they can change). */
export interface HandleBounds {
  /** The most handles of the context. */
  readonly maxHandlesPerContext: number;
  /** The most idle ones. */
  readonly maxIdlePerContext: number;
  /** Whether the cache is disposed (then nothing more is made). */
  readonly disposed: boolean;
}

/**
 * The handles of one context of a cache: every one alive, and the idle ones. It decides
 * which handle a new lease gets and when handles are made:
 *
 * - an idle one, preferring the one last bound to the task's stream;
 * - at the context's first use, a new one, with the rest of the bound made at once (as the
 *   stream pool does), so that a burst creates none;
 * - else one others hold (the least leased, round-robin among equals), while one more is
 *   made per event-loop turn below the bound (after idle handles were destroyed).
 */
export class ContextHandles<R extends LeasedHandle> {
  /** Every handle alive, in creation order. */
  readonly all: R[] = [];
  /** The idle ones, most recently idle last. */
  readonly idle: R[] = [];
  readonly #bounds: HandleBounds;
  readonly #create: () => R;
  /** Where the search for a handle to share starts. */
  #cursor = 0;
  /** Whether a creation ahead of need is scheduled (`#growAhead`). */
  #growing = false;

  /** The handles of one context, kept to `bounds`; `create` makes one (idle, not leased). */
  constructor(bounds: HandleBounds, create: () => R) {
    this.#bounds = bounds;
    this.#create = create;
  }

  /**
   * A handle for a new lease on `stream` (its `leases` not yet counted): shared with other
   * leases where it has some already.
   */
  take(stream: Stream): R {
    const record = this.#takeIdle(stream);
    if (record !== undefined) return record;
    if (this.all.length === 0) {
      const created = this.#make();
      this.#fillAhead();
      return created;
    }
    const shared = this.#leastLeased();
    this.#growAhead();
    return shared;
  }

  /** Creates idle handles up to `count` in all (and the idle bound); returns how many exist. */
  warm(count: number): number {
    while (this.all.length < count && this.idle.length < this.#bounds.maxIdlePerContext) {
      this.idle.unshift(this.#make());
    }
    return this.all.length;
  }

  /**
   * A handle nobody leases any more: idle (true), or false where the idle bound is full or
   * the cache is disposed (the caller destroys it).
   */
  putIdle(record: R): boolean {
    if (this.#bounds.disposed || this.idle.length >= this.#bounds.maxIdlePerContext) {
      return false;
    }
    this.idle.push(record);
    return true;
  }

  /** Forgets a handle being destroyed. */
  remove(record: R): void {
    const index = this.all.indexOf(record);
    if (index >= 0) this.all.splice(index, 1);
  }

  #make(): R {
    const record = this.#create();
    this.all.push(record);
    return record;
  }

  /**
   * An idle handle, preferring the one last bound to `stream` (pooled streams go back to
   * tasks, so a task often gets the stream its predecessor used, and the library still has
   * it). Else the most recently idle one.
   */
  #takeIdle(stream: Stream): R | undefined {
    const idle = this.idle;
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
  #leastLeased(): R {
    const all = this.all;
    const start = this.#cursor++ % all.length;
    let best = all[start]!;
    for (let i = 1; i < all.length; i++) {
      const candidate = all[(start + i) % all.length]!;
      if (candidate.leases < best.leases) best = candidate;
    }
    return best;
  }

  /**
   * Creates idle handles up to the bound (and the idle bound) now; a creation that fails (out
   * of memory) stops it quietly: tasks share what exists.
   */
  #fillAhead(): void {
    try {
      this.warm(this.#bounds.maxHandlesPerContext);
    } catch {
      // The leased handle exists; the others are made when resources allow.
    }
  }

  /**
   * Below the bound with no idle handle: creates one more in a later event-loop turn, outside
   * any task's call, and again each turn while fewer than two are idle.
   */
  #growAhead(): void {
    const bounds = this.#bounds;
    if (this.#growing || this.all.length >= bounds.maxHandlesPerContext) return;
    this.#growing = true;
    setImmediate(() => {
      this.#growing = false;
      if (
        bounds.disposed ||
        this.idle.length >= 2 ||
        this.all.length >= bounds.maxHandlesPerContext ||
        this.idle.length >= bounds.maxIdlePerContext
      ) {
        return;
      }
      try {
        this.idle.unshift(this.#make());
      } catch {
        return; // Out of resources: tasks share what exists.
      }
      this.#growAhead();
    });
  }
}
