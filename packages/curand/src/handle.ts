import { resolveStream, type Stream } from '@cuda-tasks/cudadrv';
import { HandleCache } from '@cuda-tasks/task-runtime';
import { GeneratorCore } from './core.js';
import { CounterState } from './counter.js';
import { curandState } from './process.js';
import { nextSeed, seedEpoch } from './seeds.js';

interface CacheState {
  /** The tasks' default generators (counter-based: pure JavaScript objects). */
  counters: HandleCache<CounterState> | undefined;
  /** The tasks' cuRAND generators behind `handle()`, made at its first call. */
  curand: HandleCache<GeneratorCore> | undefined;
}

// Created on first use, so that importing the package touches no native code.
const state = curandState<CacheState>('default-generators', () => ({
  counters: undefined,
  curand: undefined,
}));

/**
 * The tasks' default generators, through the task runtime's library kit (HandleCache): one
 * counter-based Philox (seed, offset) per task and context, seeded from the process's seed
 * sequence (`setDefaultSeed`). Creating one is pure JavaScript, so the kit's making them ahead
 * costs nothing. Not `ordered` and no hand-off: a call's numbers depend on the offset at issue
 * time only, and the GPU never reads the state, so a task taking a counter over from another
 * waits for nothing on the GPU.
 */
function counterCache(): HandleCache<CounterState> {
  return (state.counters ??= new HandleCache<CounterState>({
    name: 'curand',
    create() {
      const counter = new CounterState(nextSeed());
      counter.epoch = seedEpoch();
      return counter;
    },
    destroy() {},
    setStream() {},
    ordered: false,
    handOff: false,
  }));
}

/**
 * The cuRAND generators behind `handle()` (cuRAND's Philox, 'curand-philox'): creating one
 * sets its state up on the device, which waits for the GPU to drain, so the cache is made only
 * when `handle()` is first called. `ordered`: a generator's device state advances with every
 * draw, so work moved to another stream waits for its work on the previous one.
 */
function curandCache(): HandleCache<GeneratorCore> {
  return (state.curand ??= new HandleCache<GeneratorCore>({
    name: 'curand-handles',
    create(context) {
      const core = GeneratorCore.create(context, 'curand-philox', nextSeed(), 0n, undefined);
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
counterCache();

/**
 * @internal The current task's default generator state for `stream`'s context, reseeded
 * when `setDefaultSeed` was called since it was seeded. Allocates nothing in steady state.
 */
export function defaultCounter(stream: Stream): CounterState {
  const counter = counterCache().get(stream);
  const epoch = seedEpoch();
  if (counter.epoch !== epoch) {
    counter.setSeed(nextSeed());
    counter.epoch = epoch;
  }
  return counter;
}

/**
 * @internal The current task's cuRAND generator for `stream`'s context, bound to `stream`
 * (lazily: curandSetStream only when the stream changed) and reseeded when `setDefaultSeed`
 * was called since it was seeded.
 */
export function defaultCore(stream: Stream): GeneratorCore {
  const core = curandCache().get(stream);
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
 * The raw `curandGenerator_t` of the current task's cuRAND generator (cuRAND's Philox,
 * seeded from the process's seed sequence), bound to `stream` (default: the current stream),
 * for calling cuRAND routines this package does not wrap through `@cuda-tasks/curand/ffi`.
 * It is not the task's default generator (`rand`, `randn`), which has no native object: its
 * numbers differ. The first call creates the cuRAND generators, and cuRAND's state setup waits
 * for the whole GPU to drain (milliseconds while other work runs): call it once before a
 * burst of tasks. Valid until the task settles; do not call curandSetStream on it yourself
 * (ask `handle(otherStream)` instead, which keeps the generator's stream ordering).
 * @example
 * import { curand } from '@cuda-tasks/curand/ffi';
 * const s = stream();
 * curand().curandGenerate(handle(s), array.useOn(s), array.length);
 */
export function handle(stream?: Stream): bigint {
  return defaultCore(resolveStream(stream)).handle;
}

/**
 * The tasks' default generators created, destroyed, idle and leased (the handle cache's
 * statistics). They are (seed, offset) pairs on the host: creating one makes no native call.
 */
export function generatorStatistics(): {
  created: number;
  destroyed: number;
  idle: number;
  leased: number;
} {
  return counterCache().statistics();
}

/**
 * Destroys the idle generators of the task caches (the default generators, and the cuRAND
 * generators behind `handle()`, whose device state this frees); returns how many.
 */
export function destroyIdleGenerators(): number {
  return counterCache().destroyIdle() + (state.curand?.destroyIdle() ?? 0);
}
