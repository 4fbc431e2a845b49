import {
  assertOptions,
  CudaArgumentError,
  DeviceArray,
  DisposedError,
  resolveStream,
  type Shape,
  type Stream,
  type StreamOption,
} from '@cuda-tasks/cudadrv';
import { NO_OPTIONS } from '@cuda-tasks/cudadrv/internal';
import { type FloatDType, Generator } from './generator.js';
import { curandState } from './process.js';
import { checkNormalParameters, checkShape, FLOATING_DTYPES } from './validation.js';

// Process-wide: one task-default view for every loaded copy of a compatible version.
const defaults = curandState<{ generator: Generator | undefined }>('default-generator', () => ({
  generator: undefined,
}));

/**
 * The current task's default generator, as a `Generator`: each call on it uses the generator
 * that the calling task leases (one Philox generator per task and device, seeded from the
 * process's seed sequence, see `setDefaultSeed`), bound to the task's stream. Tasks never
 * share one at the same time, so concurrent tasks draw independent numbers without ordering
 * each other. `dispose()` on it does nothing: the task runtime owns the generators.
 * @example
 * await task(async () => {
 *   const x = DeviceArray.empty('float32', 1024);
 *   defaultGenerator().normal(x);
 * });
 */
export function defaultGenerator(): Generator {
  return (defaults.generator ??= Generator.taskDefault());
}

const RAND_OPTIONS: readonly string[] = Object.freeze(['generator', 'stream']);
const RANDN_OPTIONS: readonly string[] = Object.freeze(['generator', 'mean', 'stddev', 'stream']);

/** Options of `rand`. */
export interface RandOptions extends StreamOption {
  /** The generator to draw from (default: the current task's, `defaultGenerator()`). */
  generator?: Generator;
}

/** Options of `randn`. */
export interface RandnOptions extends RandOptions {
  /** Mean (default 0). */
  mean?: number;
  /** Standard deviation, > 0 (default 1). */
  stddev?: number;
}

function checkFloatDType(call: string, dtype: unknown): asserts dtype is FloatDType {
  if (!FLOATING_DTYPES.includes(dtype as FloatDType)) {
    throw new CudaArgumentError(
      `${call}: dtype must be ${FLOATING_DTYPES.join(' or ')}, got ${String(dtype)}`,
    );
  }
}

function checkGenerator(call: string, generator: unknown): Generator {
  if (generator === undefined) return defaultGenerator();
  if (!Generator.isInstance(generator)) {
    throw new CudaArgumentError(`${call}: options.generator must be a Generator`);
  }
  if (generator.disposed) throw new DisposedError(`${call}: options.generator`);
  return generator;
}

/** A new array allocated on `stream` and filled by `fill` (freed again if that throws). */
function filled<D extends FloatDType>(
  dtype: D,
  shape: Shape | number,
  stream: Stream,
  fill: (array: DeviceArray<D>) => void,
): DeviceArray<D> {
  const array = DeviceArray.empty(dtype, shape, { stream });
  try {
    fill(array);
  } catch (error) {
    array.dispose();
    throw error;
  }
  return array;
}

/**
 * A new array of `dtype` and `shape` filled with uniform values in (0, 1], allocated and
 * generated on the current stream with the current task's default generator.
 * @example const u = rand('float32', [1024, 1024]);
 */
export function rand<D extends FloatDType>(
  dtype: D,
  shape: Shape | number,
  options: RandOptions = NO_OPTIONS,
): DeviceArray<D> {
  checkFloatDType('rand', dtype);
  checkShape('rand', shape);
  assertOptions('rand', options, RAND_OPTIONS);
  const generator = checkGenerator('rand', options.generator);
  const stream = resolveStream(options.stream);
  return filled(dtype, shape, stream, (array) => generator.uniform(array, { stream }));
}

/**
 * A new array of `dtype` and `shape` filled with normal values (standard normal unless
 * `mean`/`stddev` are given), allocated and generated on the current stream with the current
 * task's default generator. Any size works, odd ones included.
 * @example const z = randn('float64', 1001, { mean: 2, stddev: 3 });
 */
export function randn<D extends FloatDType>(
  dtype: D,
  shape: Shape | number,
  options: RandnOptions = NO_OPTIONS,
): DeviceArray<D> {
  checkFloatDType('randn', dtype);
  checkShape('randn', shape);
  assertOptions('randn', options, RANDN_OPTIONS);
  const mean = options.mean ?? 0;
  const stddev = options.stddev ?? 1;
  checkNormalParameters('randn', mean, stddev);
  const generator = checkGenerator('randn', options.generator);
  const stream = resolveStream(options.stream);
  return filled(dtype, shape, stream, (array) => generator.normal(array, { mean, stddev, stream }));
}
