/**
 * @cuda-tasks/curand: cuRAND for Node.js. Pseudorandom generators (Philox, XORWOW,
 * MRG32k3a) that fill DeviceArrays with uniform, normal, log-normal and Poisson values on the
 * current task's stream; each task has its own default generator, so concurrent tasks draw
 * independent numbers without coordinating. The raw bindings are at `@cuda-tasks/curand/ffi`.
 *
 * @module @cuda-tasks/curand
 */
export { CurandError, check, curandError, statusName } from './errors.js';
export {
  type FloatDType,
  Generator,
  type GeneratorOptions,
  type NormalOptions,
} from './generator.js';
export { destroyIdleGenerators, generatorStatistics, handle } from './handle.js';
export {
  defaultGenerator,
  type RandnOptions,
  type RandOptions,
  rand,
  randn,
} from './random.js';
export { defaultSeed, setDefaultSeed } from './seeds.js';
export type { GeneratorKind, GeneratorOrdering } from './validation.js';
export { version } from './version.js';
