import { resolveStream, type Stream } from '@cuda-tasks/cudadrv';
import { HandleCache } from '@cuda-tasks/task-runtime';
import { GeneratorCore } from './core.js';
import { nextSeed, seedEpoch } from './seeds.js';

interface CacheState {
  cache: HandleCache<GeneratorCore> | undefined;
}

const CACHE_KEY = Symbol.for('@cuda-tasks/curand/handle-cache@2');
// Process-wide, shared by every loaded copy of this package; created on first use so that
// importing the package touches no native code.
const state: CacheState = ((globalThis as any)[CACHE_KEY] ??= { cache: undefined });

/**
 * The tasks' default generators, through the task runtime's library kit (HandleCache): one
 * Philox generator per task and context, at most 16 per context (tasks beyond share them; a
 * shared generator's draws interleave, in issue order), leased from an idle pool (creating a
 * generator allocates device state, so they are reused across tasks), seeded from the
 * process's seed sequence (`setDefaultSeed`). `ordered`: a generator's state advances with
 * every draw, so work moved to another stream waits for its work on the previous one.
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
    setStream(core, stream) {
      core.setNativeStream(stream);
    },
    ordered: true,
  }));
}

// Created at import (nothing native happens until a task draws), so that the runtime's
// prewarm() finds it.
generatorCache();

/**
 * @internal The current task's default generator for `stream`'s context, bound to `stream`
 * (lazily: curandSetStream only when the stream changed) and reseeded when `setDefaultSeed`
 * was called since it was seeded. Allocates nothing in steady state.
 */
export function defaultCore(stream: Stream): GeneratorCore {
  const core = generatorCache().get(stream);
  const epoch = seedEpoch();
  if (core.epoch !== epoch) {
    core.setSeed(nextSeed());
    core.epoch = epoch;
  }
  // Set up ahead of the generation where possible: inside a capture cuRAND could not.
  core.prepareOn(stream);
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
export function handle(stream?: Stream): bigint {
  return defaultCore(resolveStream(stream)).handle;
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
