import { currentStream, type Stream } from '@cuda-tasks/cudadrv';
import { HandleCache } from '@cuda-tasks/task-runtime';
import { GeneratorCore } from './core.js';
import { nextSeed, seedEpoch } from './seeds.js';

interface CacheState {
  cache: HandleCache<GeneratorCore> | undefined;
}

const CACHE_KEY = Symbol.for('@cuda-tasks/curand/handle-cache');
// Process-wide, shared by every loaded copy of this package; created on first use so that
// importing the package touches no native code.
const state: CacheState = ((globalThis as any)[CACHE_KEY] ??= { cache: undefined });

/**
 * The tasks' default generators: one Philox generator per task and context, leased from an
 * idle pool (creating a generator allocates device state, so they are reused across tasks),
 * seeded from the process's seed sequence (`setDefaultSeed`).
 */
function generatorCache(): HandleCache<GeneratorCore> {
  return (state.cache ??= new HandleCache<GeneratorCore>({
    name: 'curand',
    create(context) {
      const core = GeneratorCore.create(context, 'philox', nextSeed(), 0n, undefined);
      core.epoch = seedEpoch();
      return core;
    },
    destroy(core) {
      core.destroy();
    },
    bindStream(core, stream) {
      core.bind(stream);
    },
    unbindStream(core, stream) {
      core.release(stream);
    },
  }));
}

/**
 * @internal The current task's default generator for `stream`'s context, bound to `stream`
 * (lazily: curandSetStream only when the stream changed) and reseeded when `setDefaultSeed`
 * was called since it was seeded. Allocates nothing in steady state.
 */
export function defaultCore(stream: Stream): GeneratorCore {
  const core = generatorCache().get(stream);
  // The cache binds lazily; this is one comparison when it already has.
  core.bind(stream);
  const epoch = seedEpoch();
  if (core.epoch !== epoch) {
    core.setSeed(nextSeed());
    core.epoch = epoch;
  }
  return core;
}

/**
 * The raw `curandGenerator_t` of the current task's default generator, bound to `stream`
 * (default: the current stream), for calling cuRAND routines this package does not wrap
 * through `@cuda-tasks/curand/ffi`. Valid until the task settles; do not call
 * curandSetStream on it yourself (ask `handle(otherStream)` instead, which keeps the
 * generator's stream ordering).
 * @example
 * import { curand } from '@cuda-tasks/curand/ffi';
 * const s = stream();
 * curand().curandGenerate(handle(s), array.useOn(s), array.length);
 */
export function handle(stream: Stream = currentStream()): bigint {
  return defaultCore(stream).handle;
}

/** Default generators created, destroyed, idle and leased (the handle cache's statistics). */
export function generatorStatistics(): {
  created: number;
  destroyed: number;
  idle: number;
  leased: number;
} {
  return generatorCache().statistics();
}

/** Destroys the idle default generators (frees their device state); returns how many. */
export function destroyIdleGenerators(): number {
  return generatorCache().destroyIdle();
}
