import { type Context, Stream } from '@cuda-tasks/cudadrv';

const POOL_KEY = Symbol.for('@cuda-tasks/task-runtime/stream-pool');

interface PoolState {
  idle: Map<Context, Stream[]>;
  created: number;
  releasedListeners: Set<(stream: Stream) => void>;
}

// Process-wide, shared by every loaded copy of this package.
const state: PoolState = ((globalThis as any)[POOL_KEY] ??= {
  idle: new Map(),
  created: 0,
  releasedListeners: new Set(),
});

/**
 * Takes a non-blocking stream of `context` from the pool, creating one only when none is
 * idle. In steady state a task's stream costs no cuStreamCreate.
 */
export function acquireStream(context: Context): Stream {
  const idle = state.idle.get(context);
  const stream = idle?.pop();
  if (stream !== undefined) return stream;
  state.created++;
  return Stream.create({ context, name: `task-stream-${state.created}` });
}

/** Gives a task's stream back to the pool; listeners (handle caches) unbind from it first. */
export function releaseStream(stream: Stream): void {
  for (const listener of state.releasedListeners) listener(stream);
  let idle = state.idle.get(stream.context);
  if (idle === undefined) state.idle.set(stream.context, (idle = []));
  idle.push(stream);
}

/**
 * Registers a callback that runs when a task's stream goes back to the pool (free
 * per-stream resources there). Returns a function that unregisters it.
 */
export function onStreamReleased(listener: (stream: Stream) => void): () => void {
  state.releasedListeners.add(listener);
  return () => state.releasedListeners.delete(listener);
}

/** Streams the pool has created and how many are idle now. */
export function streamPoolStatistics(): { created: number; idle: number } {
  let idle = 0;
  for (const list of state.idle.values()) idle += list.length;
  return { created: state.created, idle };
}
