import { type Context, Device, Stream } from '@cuda-tasks/cudadrv';
import { processWide } from './process-wide.js';

/** A stream of the pool and who holds it now. */
export interface PooledStream {
  readonly stream: Stream;
  readonly pool: ContextStreamPool;
  /** Tasks holding the stream now (0: idle in the pool). */
  holders: number;
  /**
   * Bumped each time the stream goes back to idle: a `withStream` frame opened on the stream
   * remembers the epoch, and stops using the stream once it changes.
   */
  epoch: number;
}

/** The streams of one context. */
export interface ContextStreamPool {
  readonly context: Context;
  /** Idle streams, most recently released last (handed out last-in first-out). */
  readonly idle: PooledStream[];
  /** Every stream of the pool, idle or held. */
  readonly streams: PooledStream[];
}

interface PoolState {
  readonly pools: Map<Context, ContextStreamPool>;
  readonly byStream: Map<Stream, PooledStream>;
  created: number;
  destroyed: number;
  maxIdle: number;
  readonly releasedListeners: Set<(stream: Stream) => void>;
  /** Streams being destroyed, polled until their work is done. */
  readonly retiring: Set<PooledStream>;
  retireTimer: ReturnType<typeof setTimeout> | undefined;
}

/** Idle streams kept per context by default (more are destroyed once their work is done). */
export const DEFAULT_MAX_IDLE_STREAMS = 32;

// Process-wide, shared by every loaded copy of this package.
const state = processWide<PoolState>('stream-pool', 2, () => ({
  pools: new Map(),
  byStream: new Map(),
  created: 0,
  destroyed: 0,
  maxIdle: DEFAULT_MAX_IDLE_STREAMS,
  releasedListeners: new Set(),
  retiring: new Set(),
  retireTimer: undefined,
}));

function poolOf(context: Context): ContextStreamPool {
  let pool = state.pools.get(context);
  if (pool === undefined) state.pools.set(context, (pool = { context, idle: [], streams: [] }));
  return pool;
}

/**
 * Takes a non-blocking stream of `context` from the pool, creating one only when none is
 * idle. In steady state a task's stream costs no cuStreamCreate.
 */
export function acquireStream(context: Context): PooledStream {
  const pool = poolOf(context);
  let entry = pool.idle.pop();
  if (entry === undefined) {
    const stream = Stream.create({ context, name: `task-stream-${state.created + 1}` });
    state.created++;
    entry = { stream, pool, holders: 0, epoch: 0 };
    pool.streams.push(entry);
    state.byStream.set(stream, entry);
  }
  entry.holders++;
  return entry;
}

/**
 * Gives a task's stream back. When its last holder lets go, the release listeners run
 * (handle caches unbind from it), each in its own try, and the stream goes back to the idle
 * list whatever they throw. Beyond the idle bound, it is destroyed instead once its work is
 * done (never blocking the event loop). Throws what the listeners threw (an AggregateError
 * for several), after all of that is done.
 */
export function releaseStream(entry: PooledStream): void {
  if (--entry.holders > 0) return;
  entry.epoch++;
  const errors: unknown[] = [];
  for (const listener of state.releasedListeners) {
    try {
      listener(entry.stream);
    } catch (error) {
      errors.push(error);
    }
  }
  const pool = entry.pool;
  if (pool.idle.length < state.maxIdle) pool.idle.push(entry);
  else retire(entry);
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) {
    throw new AggregateError(errors, `${errors.length} stream-released listeners failed`);
  }
}

/**
 * Takes a stream out of the pool and destroys it once its work has completed: a query each
 * few milliseconds (an unreferenced timer: it never keeps the process alive), so that the
 * destroy (whose dispose synchronizes) never blocks the event loop. Disposing also gives the
 * stream's cached blocks back to the memory pool.
 */
function retire(entry: PooledStream): void {
  const pool = entry.pool;
  const index = pool.streams.indexOf(entry);
  if (index >= 0) pool.streams.splice(index, 1);
  state.byStream.delete(entry.stream);
  state.retiring.add(entry);
  destroyRetired();
}

function destroyRetired(): void {
  const retiring = state.retiring;
  for (const entry of retiring) {
    const stream = entry.stream;
    let done: boolean;
    try {
      done = stream.disposed || stream.query();
    } catch {
      done = true; // A sticky error: destroying is all that is left to do.
    }
    if (!done) continue;
    retiring.delete(entry);
    try {
      stream.dispose();
    } catch {
      // The context is gone or broken; nothing more to free.
    }
    state.destroyed++;
  }
  if (retiring.size > 0 && state.retireTimer === undefined) {
    state.retireTimer = setTimeout(() => {
      state.retireTimer = undefined;
      destroyRetired();
    }, 5);
    state.retireTimer.unref?.();
  }
}

/** @internal The pool's record of `stream`, or undefined for a stream that is not the pool's. */
export function pooledStream(stream: Stream): PooledStream | undefined {
  return state.byStream.get(stream);
}

/** Options of `configureStreams`. */
export interface StreamPoolOptions {
  /**
   * Idle streams kept per context (default 32). A stream released beyond it is destroyed once
   * its work is done, which also gives its cached memory blocks back.
   */
  maxIdle?: number;
}

/**
 * Configures the task streams' pool. Applies from the next release; a lower `maxIdle`
 * destroys the idle streams beyond it at once (each after its work is done).
 * @example configureStreams({ maxIdle: 8 });
 */
export function configureStreams(options: StreamPoolOptions): void {
  if (options.maxIdle !== undefined) {
    if (!Number.isSafeInteger(options.maxIdle) || options.maxIdle < 0) {
      throw new RangeError(
        `configureStreams: maxIdle must be a non-negative integer, got ${options.maxIdle}`,
      );
    }
    state.maxIdle = options.maxIdle;
    for (const pool of state.pools.values()) {
      while (pool.idle.length > state.maxIdle) retire(pool.idle.shift()!);
    }
  }
}

/**
 * Registers a callback that runs when a task's stream goes back to the pool (free
 * per-stream resources there). Returns a function that unregisters it.
 */
export function onStreamReleased(listener: (stream: Stream) => void): () => void {
  state.releasedListeners.add(listener);
  return () => state.releasedListeners.delete(listener);
}

/**
 * Streams the pool has created and destroyed (process-wide), and how many are idle now: in
 * every context, or in `device`'s (an ordinal or a Device) only.
 */
export function streamPoolStatistics(device?: Device | number): {
  created: number;
  destroyed: number;
  idle: number;
} {
  let idle = 0;
  if (device === undefined) {
    for (const pool of state.pools.values()) idle += pool.idle.length;
  } else {
    const context = (typeof device === 'number' ? Device.get(device) : device).primaryContext();
    idle = state.pools.get(context)?.idle.length ?? 0;
  }
  return { created: state.created, destroyed: state.destroyed, idle };
}
