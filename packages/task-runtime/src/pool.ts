/**
 * The task streams: one pool per (context, priority), created ahead of the work that needs
 * them. Creating a stream while a kernel runs can block until the kernel finishes, so a burst
 * of tasks must find its streams made: the pool creates `prewarm` streams (default: all
 * `maxStreams`, 128) at its first use or at `prewarmStreams()`, grows ahead of need one stream
 * per event-loop turn when `prewarm` is lower, and past `maxStreams` gives tasks streams that
 * other tasks hold, round-robin. A task never creates a stream inline, except the very first
 * of a pool configured with `prewarm: 0`. `configureStreams` applies to pools already in use:
 * a higher `prewarm` creates the missing streams at once, a higher `maxStreams` lets them grow.
 * See docs/decisions/0035-a-stream-per-task-up-to-128.md.
 */
import {
  assertOptions,
  CaptureError,
  type Context,
  CudaArgumentError,
  Device,
  Stream,
  StreamCapture,
} from '@cuda-tasks/cudadrv';
import { releaseStreamCache } from '@cuda-tasks/cudadrv/internal';
import { processWide } from './process-wide.js';

/** A stream of the pool and who holds it now. */
export interface PooledStream {
  readonly stream: Stream;
  readonly pool: ContextStreamPool;
  /** Tasks holding the stream now (0: idle in the pool; more than 1: shared). */
  holders: number;
  /** Held by one user that must not share it (a graph capture): never handed out shared. */
  exclusive: boolean;
  /**
   * Bumped each time the stream goes back to idle: a `withStream` frame opened on the stream
   * remembers the epoch, and stops using the stream once it changes.
   */
  epoch: number;
  /** When the stream last went idle (performance.now()), for the idle trim. */
  idleSince: number;
  /** Whether its cached memory blocks were given back since it went idle. */
  trimmed: boolean;
  /** A capture left open on it could not be ended: it is retired on release, never reused. */
  broken: boolean;
  /**
   * It was released while part of a capture it did not begin (see `endLeftOpenCapture`): once
   * retired, it is destroyed only after the driver says it left that capture.
   */
  inForeignCapture?: boolean;
}

/** The streams of one (context, priority). */
export interface ContextStreamPool {
  readonly context: Context;
  readonly priority: number;
  /** Idle streams, most recently released last (handed out last-in first-out). */
  readonly idle: PooledStream[];
  /** Every stream of the pool, idle or held. */
  readonly streams: PooledStream[];
  /** Where the next shared hand-out starts (round-robin over `streams`). */
  cursor: number;
  /** Whether the prewarm streams were created. */
  prewarmed: boolean;
  /** Whether a growth step is scheduled. */
  growing: boolean;
}

/** The pool's settings (see `configureStreams`). */
export interface Settings {
  prewarm: number;
  maxStreams: number;
  maxIdle: number;
  spare: number;
  trimIdleAfterMs: number;
}

interface PoolState {
  /** Pools by context, then by priority. */
  readonly pools: Map<Context, Map<number, ContextStreamPool>>;
  readonly byStream: Map<Stream, PooledStream>;
  readonly settings: Settings;
  created: number;
  destroyed: number;
  shared: number;
  readonly releasedListeners: Set<(stream: Stream) => void>;
  /** Streams being destroyed, polled until their work is done. */
  readonly retiring: Set<PooledStream>;
  retireTimer: ReturnType<typeof setTimeout> | undefined;
  trimTimer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * Streams per (context, priority) by default: as many kernels as recent GPUs run at once
 * (128 on Hopper and later), so that up to 128 concurrent tasks each get a stream of their
 * own; tasks beyond share streams.
 */
export const DEFAULT_MAX_STREAMS = 128;

/** Reads a non-negative integer setting from the environment; warns and ignores a bad one. */
function fromEnvironment(environment: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const text = environment[name];
  if (text === undefined || text === '') return fallback;
  const value = Number(text);
  if (Number.isSafeInteger(value) && value >= 0 && value <= MAX_ENVIRONMENT_STREAMS) return value;
  // Shown as given, but bounded: the environment is not ours to trust.
  const shown = JSON.stringify(text.length > 40 ? `${text.slice(0, 40)}...` : text);
  process.emitWarning(
    `${name}=${shown} is not an integer in 0..${MAX_ENVIRONMENT_STREAMS}; ignored`,
    { type: 'CudaTasksConfigurationWarning' },
  );
  return fallback;
}

/**
 * The most streams per pool the environment may ask for: a planted `CUDA_TASKS_MAX_STREAMS`
 * of millions would otherwise have the first task create them all (`configureStreams`, the
 * program's own call, takes any count).
 */
const MAX_ENVIRONMENT_STREAMS = 4096;

/**
 * @internal The pool's settings at start: the defaults, with `CUDA_TASKS_MAX_STREAMS` and
 * `CUDA_TASKS_PREWARM_STREAMS` from `environment` applied (a bad value is ignored with a
 * warning).
 */
export function settingsFrom(environment: NodeJS.ProcessEnv): Readonly<Settings> {
  const maxStreams = Math.max(
    1,
    fromEnvironment(environment, 'CUDA_TASKS_MAX_STREAMS', DEFAULT_MAX_STREAMS),
  );
  const prewarm = Math.min(
    maxStreams,
    fromEnvironment(environment, 'CUDA_TASKS_PREWARM_STREAMS', maxStreams),
  );
  return { prewarm, maxStreams, maxIdle: maxStreams, spare: 2, trimIdleAfterMs: 1000 };
}

// Process-wide, shared by every loaded copy of this package.
const state = processWide<PoolState>('stream-pool', () => ({
  pools: new Map(),
  byStream: new Map(),
  settings: { ...settingsFrom(process.env) },
  created: 0,
  destroyed: 0,
  shared: 0,
  releasedListeners: new Set(),
  retiring: new Set(),
  retireTimer: undefined,
  trimTimer: undefined,
}));

/**
 * The pool `poolOf` found last (pools are never removed, so it stays valid): a process of one
 * context and one priority finds its pool with two comparisons, no map lookup.
 */
let lastPool: ContextStreamPool | undefined;

/** The pool of (context, priority), created empty on first use. */
function poolOf(context: Context, priority: number): ContextStreamPool {
  const last = lastPool;
  if (last !== undefined && last.context === context && last.priority === priority) return last;
  const pool = findPool(context, priority);
  lastPool = pool;
  return pool;
}

function findPool(context: Context, priority: number): ContextStreamPool {
  let byPriority = state.pools.get(context);
  if (byPriority === undefined) state.pools.set(context, (byPriority = new Map()));
  let pool = byPriority.get(priority);
  if (pool === undefined) {
    pool = {
      context,
      priority,
      idle: [],
      streams: [],
      cursor: 0,
      prewarmed: false,
      growing: false,
    };
    byPriority.set(priority, pool);
  }
  return pool;
}

/** Creates one stream in `pool` and puts it in the idle list (at the bottom: used last). */
function createStream(pool: ContextStreamPool): PooledStream {
  const stream = Stream.create({
    context: pool.context,
    priority: pool.priority,
    name: `task-stream-${state.created + 1}`,
  });
  state.created++;
  const entry: PooledStream = {
    stream,
    pool,
    holders: 0,
    exclusive: false,
    epoch: 0,
    idleSince: performance.now(),
    trimmed: true,
    broken: false,
  };
  pool.streams.push(entry);
  state.byStream.set(stream, entry);
  pool.idle.unshift(entry);
  return entry;
}

/** Creates the pool's prewarm streams (those it lacks), once. */
function prewarmPool(pool: ContextStreamPool): void {
  pool.prewarmed = true;
  const settings = state.settings;
  const target = Math.min(settings.prewarm, settings.maxStreams, settings.maxIdle);
  while (pool.streams.length < target) createStream(pool);
}

/**
 * Schedules growth ahead of need: while the pool has fewer than `spare` idle streams and is
 * below `maxStreams`, one stream per event-loop turn (creations in a row are what blocks
 * behind a running kernel; one alone costs about a quarter of a millisecond).
 */
function growAhead(pool: ContextStreamPool): void {
  if (pool.growing) return;
  const settings = state.settings;
  if (pool.idle.length >= settings.spare || pool.streams.length >= settings.maxStreams) return;
  pool.growing = true;
  setImmediate(() => {
    pool.growing = false;
    const current = state.settings;
    if (pool.idle.length >= current.spare || pool.streams.length >= current.maxStreams) return;
    try {
      createStream(pool);
    } catch {
      return; // Out of resources or a broken context: tasks share what exists.
    }
    growAhead(pool);
  });
}

/**
 * Gives a task a stream of `context` at `priority` (default 0): an idle one (last-in
 * first-out); else, past `maxStreams` or while the pool grows, one that other tasks hold,
 * round-robin; a stream is created inline only when the pool has none to share. Release it
 * with `releaseStream`.
 */
export function acquireStream(context: Context, priority = 0): PooledStream {
  const pool = poolOf(context, priority);
  if (!pool.prewarmed) prewarmPool(pool);
  let entry = pool.idle.pop();
  if (entry === undefined) entry = shareable(pool) ?? takeCreated(pool);
  entry.holders++;
  growAhead(pool);
  return entry;
}

/**
 * A stream of `context` that nobody else gets until it is released (a graph capture records
 * everything issued to its stream): an idle one, else a new one, beyond `maxStreams` if need
 * be (it is destroyed on release while the pool is over its bound).
 */
export function acquireExclusiveStream(context: Context, priority = 0): PooledStream {
  const pool = poolOf(context, priority);
  if (!pool.prewarmed) prewarmPool(pool);
  const entry = pool.idle.pop() ?? takeCreated(pool);
  entry.holders = 1;
  entry.exclusive = true;
  growAhead(pool);
  return entry;
}

/** The next stream other tasks hold that may be shared (round-robin), or undefined. */
function shareable(pool: ContextStreamPool): PooledStream | undefined {
  const streams = pool.streams;
  for (let tries = 0; tries < streams.length; tries++) {
    const candidate = streams[pool.cursor++ % streams.length]!;
    if (!candidate.exclusive) {
      state.shared++;
      return candidate;
    }
  }
  return undefined;
}

/** Creates a stream and takes it out of the idle list at once. */
function takeCreated(pool: ContextStreamPool): PooledStream {
  const entry = createStream(pool);
  pool.idle.splice(pool.idle.indexOf(entry), 1);
  return entry;
}

/**
 * A CaptureError whose message says only `message` (a CudaError's reads "<call> failed: <status>
 * (<code>): ...", but here nothing failed); its class and code stay CaptureError's.
 */
function leftOpenError(message: string): CaptureError {
  const error = new CaptureError('StreamCapture.endLeftOpen', message);
  const header = error.message;
  error.message = message;
  if (error.stack?.includes(header)) error.stack = error.stack.replace(header, message);
  return error;
}

/**
 * Ends a stream capture left open on `entry`'s stream when the stream began it
 * (`StreamCapture.endLeftOpen`: a `StreamCapture.begin` never ended), discarding what it
 * recorded, so that work issued to the stream afterwards runs instead of going into an
 * orphaned graph; returns a CaptureError that says so (naming `who` gave the stream back), or
 * undefined when the stream was not capturing (one driver query). A capture the stream only
 * joined (another stream began it) is left to its owner and the stream is retired, destroyed
 * once it has left that capture, without an error; one begun through the ffi layer (which
 * stream began it cannot be told) likewise, with a CaptureError that says so. A capture that
 * cannot be ended marks the stream `broken`: its release retires it instead of handing it out
 * again.
 */
export function endLeftOpenCapture(
  entry: PooledStream,
  who: string | { toString(): string },
): CaptureError | undefined {
  const stream = entry.stream;
  let ended: ReturnType<typeof StreamCapture.endLeftOpen>;
  try {
    ended = StreamCapture.endLeftOpen(stream);
  } catch (error) {
    entry.broken = true;
    const reason = error instanceof Error ? error.message : String(error);
    return leftOpenError(
      `${stream} was still capturing a graph when ${who} gave it back (a capture begun without end() or abort()), and the capture could not be ended (${reason}); the stream was retired from the pool`,
    );
  }
  if (ended === null) return undefined;
  if (ended === 'joined' || ended === 'foreign') {
    entry.broken = true;
    entry.inForeignCapture = true;
    if (ended === 'joined') return undefined;
    return leftOpenError(
      `${stream} was in a graph capture begun through the ffi layer when ${who} gave it back; only the stream that began a capture may end it, and which one did cannot be told, so the capture was left open and the stream retired from the pool (destroyed once the capture ends)`,
    );
  }
  return leftOpenError(
    `${stream} was still capturing a graph when ${who} gave it back (a capture begun without end() or abort()); the capture was ended and what it recorded discarded: the work issued to the stream since the capture began never ran`,
  );
}

/**
 * Gives a task's stream back. When its last holder lets go, a stream capture left open on it
 * is ended (see `endLeftOpenCapture`), the release listeners run (handle caches unbind from
 * it), each in its own try, and the stream goes back to the idle list whatever they throw: on
 * top (handed out next), or with `busy` (its work may still run for long: a cancelled task's)
 * at the bottom, handed out last. Beyond the idle bound, or when its capture could not be
 * ended, it is destroyed instead once its work is done (never blocking the event loop).
 * Throws what the listeners threw and the CaptureError of a capture left open (an
 * AggregateError for several), after all of that is done. `captureEnded`: the caller has
 * just ended any capture left open itself (no second driver query).
 */
export function releaseStream(entry: PooledStream, busy = false, captureEnded = false): void {
  if (--entry.holders > 0) return;
  entry.exclusive = false;
  entry.epoch++;
  let errors: unknown[] | undefined;
  if (!captureEnded) {
    const leftOpen = endLeftOpenCapture(entry, 'code that held it');
    if (leftOpen !== undefined) errors = [leftOpen];
  }
  const listeners = state.releasedListeners;
  if (listeners.size !== 0) {
    for (const listener of listeners) {
      try {
        listener(entry.stream);
      } catch (error) {
        (errors ??= []).push(error);
      }
    }
  }
  const pool = entry.pool;
  const settings = state.settings;
  if (
    !entry.broken &&
    pool.idle.length < settings.maxIdle &&
    pool.streams.length <= settings.maxStreams
  ) {
    entry.idleSince = performance.now();
    entry.trimmed = false;
    if (busy) pool.idle.unshift(entry);
    else pool.idle.push(entry);
    scheduleTrim();
  } else {
    retire(entry);
  }
  if (errors === undefined) return;
  if (errors.length === 1) throw errors[0];
  if (errors.length > 1) {
    throw new AggregateError(
      errors,
      `releasing ${entry.stream} to the pool: ${errors.length} failures`,
    );
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
  const idleIndex = pool.idle.indexOf(entry);
  if (idleIndex >= 0) pool.idle.splice(idleIndex, 1);
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
      // Still in a capture another stream began: querying or destroying it would break it.
      if (entry.inForeignCapture === true && StreamCapture.isCapturing(stream)) continue;
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

/** Arms the idle trim (an unreferenced timer) unless it is armed or disabled. */
function scheduleTrim(): void {
  const after = state.settings.trimIdleAfterMs;
  if (state.trimTimer !== undefined || !Number.isFinite(after)) return;
  state.trimTimer = setTimeout(trimIdle, after);
  state.trimTimer.unref?.();
}

/**
 * Gives back the cached memory blocks of pool streams idle for `trimIdleAfterMs` (each free
 * ordered on its stream; nothing waits), and re-arms for the streams idle for less.
 */
function trimIdle(): void {
  state.trimTimer = undefined;
  const now = performance.now();
  const after = state.settings.trimIdleAfterMs;
  let pending = false;
  for (const byPriority of state.pools.values()) {
    for (const pool of byPriority.values()) {
      for (const entry of pool.idle) {
        if (entry.trimmed) continue;
        if (now - entry.idleSince < after) {
          pending = true;
          continue;
        }
        entry.trimmed = true;
        try {
          releaseStreamCache(entry.stream);
        } catch {
          // A broken context: its memory is gone with it.
        }
      }
    }
  }
  if (pending) scheduleTrim();
}

/** @internal The pool's record of `stream`, or undefined for a stream that is not the pool's. */
export function pooledStream(stream: Stream): PooledStream | undefined {
  return state.byStream.get(stream);
}

/** The options `configureStreams` takes. */
const POOL_OPTION_NAMES: readonly string[] = Object.freeze([
  'prewarm',
  'maxStreams',
  'maxIdle',
  'spare',
  'trimIdleAfterMs',
]);

/** Options of `configureStreams`; each is per (context, priority). */
export interface StreamPoolOptions {
  /**
   * Streams created when the pool is first used, or by `prewarmStreams()`, or at once by
   * `configureStreams` for a pool already in use (default: `maxStreams`; environment
   * `CUDA_TASKS_PREWARM_STREAMS`). Creating streams during a burst can stall the event loop
   * for as long as a kernel runs; on an idle GPU it is cheap (see docs/performance.md).
   */
  prewarm?: number;
  /**
   * The most streams the pool creates (default 128; environment `CUDA_TASKS_MAX_STREAMS`).
   * Tasks beyond it share streams, round-robin: their work is ordered on the shared stream,
   * and each one's `synchronize()` also waits for the other's work issued before it.
   */
  maxStreams?: number;
  /**
   * Idle streams kept (default: `maxStreams`). A stream released beyond it is destroyed once
   * its work is done, which also gives its cached memory blocks back.
   */
  maxIdle?: number;
  /**
   * Idle streams the pool keeps ahead of need while below `maxStreams` (default 2): when
   * fewer are idle, it creates one more per event-loop turn, outside any task's call.
   */
  spare?: number;
  /**
   * Milliseconds after which an idle stream's cached memory blocks go back to the memory pool
   * (default 1000; `Infinity`: never).
   */
  trimIdleAfterMs?: number;
}

function checkCount(name: string, value: number | undefined, minimum: number): void {
  if (value !== undefined && (!Number.isSafeInteger(value) || value < minimum)) {
    throw new CudaArgumentError(
      `configureStreams: ${name} must be an integer >= ${minimum}, got ${String(value)}`,
    );
  }
}

/**
 * Configures the task streams' pools (every context and priority), at any time. Checks every
 * option before changing anything. A lower `maxIdle` or `maxStreams` destroys idle streams
 * beyond it at once (each after its work is done); a higher `prewarm` creates the missing
 * streams of the pools in use now (call it outside a burst), and a higher `maxStreams` lets
 * them grow ahead of need between event-loop turns.
 * @example configureStreams({ prewarm: 16, maxStreams: 16 });
 */
export function configureStreams(options: StreamPoolOptions): void {
  if (options === undefined) {
    throw new CudaArgumentError(
      'configureStreams: options must be an object (e.g. { maxStreams: 64 }), got undefined',
    );
  }
  assertOptions('configureStreams', options, POOL_OPTION_NAMES);
  checkCount('prewarm', options.prewarm, 0);
  checkCount('maxStreams', options.maxStreams, 1);
  checkCount('maxIdle', options.maxIdle, 0);
  checkCount('spare', options.spare, 0);
  const trim = options.trimIdleAfterMs;
  if (trim !== undefined && !(trim >= 0)) {
    throw new CudaArgumentError(
      `configureStreams: trimIdleAfterMs must be >= 0 (or Infinity), got ${String(trim)}`,
    );
  }
  const settings = state.settings;
  const maxIdleFollows = settings.maxIdle === settings.maxStreams;
  if (options.maxStreams !== undefined) {
    settings.maxStreams = options.maxStreams;
    if (options.maxIdle === undefined && maxIdleFollows) settings.maxIdle = options.maxStreams;
  }
  if (options.maxIdle !== undefined) settings.maxIdle = options.maxIdle;
  if (options.prewarm !== undefined) settings.prewarm = options.prewarm;
  settings.prewarm = Math.min(settings.prewarm, settings.maxStreams);
  if (options.spare !== undefined) settings.spare = options.spare;
  if (trim !== undefined) {
    settings.trimIdleAfterMs = trim;
    if (state.trimTimer !== undefined) clearTimeout(state.trimTimer);
    state.trimTimer = undefined;
    scheduleTrim();
  }
  for (const byPriority of state.pools.values()) {
    for (const pool of byPriority.values()) {
      const bound = Math.min(settings.maxIdle, settings.maxStreams);
      // The oldest idle streams go first; then idle ones while the pool is over maxStreams.
      while (pool.idle.length > bound) retire(pool.idle[0]!);
      while (pool.streams.length > settings.maxStreams && pool.idle.length > 0) {
        retire(pool.idle[0]!);
      }
      if (!pool.prewarmed) continue;
      // A pool in use takes a higher prewarm now (created here, not inside a later burst)
      // and a higher maxStreams through its growth ahead of need.
      prewarmPool(pool);
      growAhead(pool);
    }
  }
}

/**
 * @internal Creates the pool of (context, priority) up to its `prewarm` streams now; returns
 * how many streams it has.
 */
export function prewarmPoolOf(context: Context, priority = 0): number {
  const pool = poolOf(context, priority);
  prewarmPool(pool);
  return pool.streams.length;
}

/**
 * Registers a callback that runs when a task's stream goes back to the pool (free
 * per-stream resources there). Returns a function that unregisters it.
 */
export function onStreamReleased(listener: (stream: Stream) => void): () => void {
  state.releasedListeners.add(listener);
  return () => state.releasedListeners.delete(listener);
}

/** What `streamPoolStatistics` reports. */
export interface StreamPoolStatistics {
  /** Streams the pools have created (process-wide, since start). */
  created: number;
  /** Streams destroyed beyond the idle bound (process-wide, since start). */
  destroyed: number;
  /** Times a task was given a stream that another task held (past `maxStreams`, or while the pool grew). */
  shared: number;
  /** Streams the pools hold now, idle or in use. */
  streams: number;
  /** Idle streams now. */
  idle: number;
}

/**
 * Statistics of the stream pools: counters since start, and the streams now, in every
 * context or in `device`'s (an ordinal or a Device) only.
 */
export function streamPoolStatistics(device?: Device | number): StreamPoolStatistics {
  let idle = 0;
  let streams = 0;
  const context =
    device === undefined
      ? undefined
      : (typeof device === 'number' ? Device.get(device) : device).primaryContext();
  for (const [owner, byPriority] of state.pools) {
    if (context !== undefined && owner !== context) continue;
    for (const pool of byPriority.values()) {
      idle += pool.idle.length;
      streams += pool.streams.length;
    }
  }
  return {
    created: state.created,
    destroyed: state.destroyed,
    shared: state.shared,
    streams,
    idle,
  };
}
