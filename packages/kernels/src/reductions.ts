/**
 * Ready-made reductions: `sum`, `mean`, `max`, `min`, `argmax`, `argmin`, over all elements
 * or along an axis of a matrix. float32 and float64 sum in float64; int32 sums in 64 bits and
 * wraps to int32 on the way out. Each is a `ReductionProgram` per (operation, dtype).
 */
import {
  assertOptions,
  CudaArgumentError,
  type DeviceArray,
  type DType,
} from '@cuda-tasks/cudadrv';
import { checkArray, checkDType } from './arguments.js';
import { type ReductionCallOptions, type ReductionParts, ReductionProgram } from './reduction.js';

/** The dtypes the ready-made reductions take. */
export const REDUCTION_DTYPES: readonly DType[] = ['float32', 'float64', 'int32'];

/** Options of the ready-made reductions. */
export interface ReduceOptions<O extends DType = DType> extends ReductionCallOptions {
  /** Where to write the result (its dtype and element count must fit; see each function). */
  out?: DeviceArray<O>;
}

/** The ready-made reductions. */
export type ReductionOperation = 'sum' | 'mean' | 'max' | 'min' | 'argmax' | 'argmin';

const VALUE: Partial<Record<DType, string>> = { float32: 'float', float64: 'double', int32: 'int' };
// The largest and smallest values as C expressions, without headers (NVRTC has none).
const LOWEST: Partial<Record<DType, string>> = {
  float32: '__int_as_float(0xff800000)',
  float64: '__longlong_as_double((long long)0xfff0000000000000ULL)',
  int32: '(-2147483647 - 1)',
};
const HIGHEST: Partial<Record<DType, string>> = {
  float32: '__int_as_float(0x7f800000)',
  float64: '__longlong_as_double((long long)0x7ff0000000000000ULL)',
  int32: '2147483647',
};

/** The output dtype of `operation` on `dtype`. */
export function reductionOutput(operation: ReductionOperation, dtype: DType): DType {
  if (operation === 'argmax' || operation === 'argmin') return 'int32';
  if (operation === 'mean' && dtype === 'int32') return 'float64';
  return dtype;
}

/** The reduction's parts for `operation` over `dtype` (input x, output y). */
export function reductionParts(operation: ReductionOperation, dtype: DType): ReductionParts {
  const value = VALUE[dtype]!;
  const integer = dtype === 'int32';
  switch (operation) {
    case 'sum':
    case 'mean': {
      const accumulator = integer ? 'long long' : 'double';
      const post =
        operation === 'sum'
          ? `y = (${value})a`
          : integer
            ? 'y = (double)a / (double)n'
            : `y = (${value})(a / (double)n)`;
      return { accumulator, identity: '0', map: `(${accumulator})x`, reduce: 'a + b', post };
    }
    case 'max':
    case 'min': {
      // NaN wins, as in NumPy: (a > b || a != a) keeps a NaN a; a NaN b is kept otherwise.
      const compare = operation === 'max' ? '>' : '<';
      return {
        accumulator: value,
        identity: operation === 'max' ? LOWEST[dtype]! : HIGHEST[dtype]!,
        map: 'x',
        reduce: `(a ${compare} b || a != a) ? a : b`,
        post: 'y = a',
      };
    }
    default: {
      // (value, index) pairs; index -1 is "no element"; NaN wins, then the extreme value,
      // then the smaller index: the first occurrence, as NumPy's argmax and argmin.
      const compare = operation === 'argmax' ? '>' : '<';
      return {
        accumulator: 'ct_arg',
        prelude: `struct ct_arg { ${value} ct_value; long long ct_index; };
__device__ __forceinline__ ct_arg ct_arg_make(const ${value} ct_value, const long long ct_index) {
  ct_arg ct_r;
  ct_r.ct_value = ct_value;
  ct_r.ct_index = ct_index;
  return ct_r;
}
__device__ __forceinline__ ct_arg ct_arg_pick(const ct_arg ct_a, const ct_arg ct_b) {
  if (ct_a.ct_index < 0) return ct_b;
  if (ct_b.ct_index < 0) return ct_a;
  const bool ct_an = ct_a.ct_value != ct_a.ct_value, ct_bn = ct_b.ct_value != ct_b.ct_value;
  if (ct_an || ct_bn) {
    if (ct_an && ct_bn) return ct_a.ct_index < ct_b.ct_index ? ct_a : ct_b;
    return ct_an ? ct_a : ct_b;
  }
  if (ct_a.ct_value != ct_b.ct_value) return ct_a.ct_value ${compare} ct_b.ct_value ? ct_a : ct_b;
  return ct_a.ct_index < ct_b.ct_index ? ct_a : ct_b;
}`,
        identity: `ct_arg_make(0, -1)`,
        map: 'ct_arg_make(x, (long long)i)',
        reduce: 'ct_arg_pick(a, b)',
        post: 'y = (int)a.ct_index',
      };
    }
  }
}

/** @internal The program of `operation` for `dtype` (made on first use). */
export function reductionProgram(operation: ReductionOperation, dtype: DType): ReductionProgram {
  const table = (programs[operation] ??= {});
  return (table[dtype] ??= new ReductionProgram(
    `x: ${dtype} -> y: ${reductionOutput(operation, dtype)}`,
    () => reductionParts(operation, dtype),
    { name: operation, nonEmpty: operation !== 'sum' && operation !== 'mean' },
  ));
}

/** The options `sum`, `mean`, `max`, `min`, `argmax` and `argmin` take. */
const REDUCE_OPTIONS: readonly string[] = Object.freeze(['out', 'axis', 'stream']);

const programs: Partial<Record<ReductionOperation, Partial<Record<DType, ReductionProgram>>>> = {};
const one: unknown[] = [undefined];

function reduce(operation: ReductionOperation, x: unknown, options: ReduceOptions | undefined) {
  const array = checkArray(x, operation, 'x');
  const dtype = array.dtype;
  checkDType(dtype, REDUCTION_DTYPES, operation, 'x');
  assertOptions(operation, options, REDUCE_OPTIONS);
  if ((operation === 'argmax' || operation === 'argmin') && array.length > 2 ** 31 - 1) {
    throw new CudaArgumentError(`${operation}: ${array.length} elements exceed int32 indices`);
  }
  one[0] = array;
  try {
    return reductionProgram(operation, dtype).run(one, options?.out, options);
  } finally {
    one[0] = undefined;
  }
}

/**
 * The sum of all elements (result shape [1]), or along `axis` of a matrix (0: per column, 1:
 * per row). float32 and float64 accumulate in float64; int32 in 64 bits, wrapped to int32.
 * Deterministic: the same bits every run for a given shape.
 * @example
 * const total = (await sum(x).toHost())[0];
 * const columnSums = sum(m, { axis: 0 });
 */
export function sum<D extends DType>(
  x: DeviceArray<D>,
  options?: ReduceOptions<D>,
): DeviceArray<D> {
  return reduce('sum', x, options) as DeviceArray<D>;
}

/** The dtype of the mean of `D`: int32's is float64, a float's its own. */
export type MeanDType<D extends DType> = D extends 'int32' ? 'float64' : D;

/** The mean (see `sum`); int32 gives float64. An empty input gives NaN. */
export function mean<D extends DType>(
  x: DeviceArray<D>,
  options?: ReduceOptions<MeanDType<D>>,
): DeviceArray<MeanDType<D>> {
  return reduce('mean', x, options) as DeviceArray<MeanDType<D>>;
}

/** The largest element (see `sum` for `axis`); NaN if any is NaN. Refuses an empty input. */
export function max<D extends DType>(
  x: DeviceArray<D>,
  options?: ReduceOptions<D>,
): DeviceArray<D> {
  return reduce('max', x, options) as DeviceArray<D>;
}

/** The smallest element (see `max`). */
export function min<D extends DType>(
  x: DeviceArray<D>,
  options?: ReduceOptions<D>,
): DeviceArray<D> {
  return reduce('min', x, options) as DeviceArray<D>;
}

/**
 * The int32 index of the largest element: of all elements (flat, column-major), or along
 * `axis` (the row index per column for axis 0, the column index per row for axis 1). The
 * first occurrence wins; a NaN counts as the largest. Refuses an empty input.
 */
export function argmax(x: DeviceArray, options?: ReduceOptions<'int32'>): DeviceArray<'int32'> {
  return reduce('argmax', x, options) as DeviceArray<'int32'>;
}

/** The int32 index of the smallest element (see `argmax`; a NaN counts as the smallest). */
export function argmin(x: DeviceArray, options?: ReduceOptions<'int32'>): DeviceArray<'int32'> {
  return reduce('argmin', x, options) as DeviceArray<'int32'>;
}
