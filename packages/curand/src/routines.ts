/**
 * The cuRAND generation routines, one table entry per distribution: the output dtype picks
 * the entry point (`curandGenerateNormal` for float32, `curandGenerateNormalDouble` for
 * float64), as CUDA.jl generates its wrappers from a `(fname, elty)` table, so a generation
 * has one call site. Each entry also says what the operation observer records, which
 * dtypes the distribution fills and which parameters follow the count.
 */
import type { DType } from '@cuda-tasks/cudadrv';
import type { CurandBindings } from './ffi/curand.js';

/** One distribution that cuRAND generates. */
export interface Generation {
  /** What the operation observer (traces, NVTX ranges) records and messages name. */
  readonly operation: string;
  /** The entry point (curand.h) for each dtype the distribution fills. */
  readonly routines: Readonly<Partial<Record<DType, keyof CurandBindings>>>;
  /** The dtypes it fills, in the order messages list them. */
  readonly dtypes: readonly DType[];
  /** The parameters after the count: none, one (lambda) or two (mean, stddev). */
  readonly parameters: 0 | 1 | 2;
  /** Whether cuRAND generates pairs, so that a count must be even (Box-Muller). */
  readonly pairs: boolean;
}

function generation(
  operation: string,
  parameters: 0 | 1 | 2,
  routines: Readonly<Partial<Record<DType, keyof CurandBindings>>>,
): Generation {
  return Object.freeze({
    operation,
    routines,
    dtypes: Object.freeze(Object.keys(routines) as DType[]),
    parameters,
    // The two-parameter distributions, normal and log-normal, come from Box-Muller pairs.
    pairs: parameters === 2,
  });
}

/** Uniform values in (0, 1]. */
export const UNIFORM = generation('curand.uniform', 0, {
  float32: 'curandGenerateUniform',
  float64: 'curandGenerateUniformDouble',
});
/** Normal values of a mean and standard deviation. */
export const NORMAL = generation('curand.normal', 2, {
  float32: 'curandGenerateNormal',
  float64: 'curandGenerateNormalDouble',
});
/** exp of normal values of a mean and standard deviation. */
export const LOG_NORMAL = generation('curand.logNormal', 2, {
  float32: 'curandGenerateLogNormal',
  float64: 'curandGenerateLogNormalDouble',
});
/** Poisson counts of a rate lambda. */
export const POISSON = generation('curand.poisson', 1, { uint32: 'curandGeneratePoisson' });
/** The generator's raw 32-bit output. */
export const BITS = generation('curand.generate', 0, { uint32: 'curandGenerate' });
