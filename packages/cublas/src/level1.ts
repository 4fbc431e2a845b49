/**
 * Vector routines (BLAS level 1) over DeviceArrays. Vectors are 1-D arrays, 1-D strided views,
 * or 2-D views with one row or one column; the element stride goes to cuBLAS as incx / incy.
 *
 * The reductions (dot, nrm2, asum, iamax) return promises: in host pointer mode cuBLAS would
 * block the calling thread until the result is ready, stalling the event loop. Instead each
 * one runs in device pointer mode for that call, writes its result into a one-element device
 * array, and awaits the copy back (`toHost()`), which never blocks.
 */
import {
  DeviceArray,
  type DType,
  type SameDType,
  type Stream,
  type StreamOption,
} from '@cuda-tasks/cudadrv';
import { NO_OPTIONS } from '@cuda-tasks/cudadrv/internal';
import { cublas } from './ffi/cublas.js';
import { cublasCall, type Issue, issue } from './issue.js';
import { ASUM, AXPY, DOT, IAMAX, NRM2, type Routine, SCAL } from './routines.js';
import { scalars } from './scalars.js';
import { assertScalar, operandStream, VECTOR_OPTIONS } from './validate.js';
import {
  type CheckedVector,
  type CheckedVectorPair,
  checkVector,
  checkVectorPair,
} from './validate-vectors.js';

/** Options of the vector routines. */
export interface VectorOptions extends StreamOption {}

// The checked arguments, reused by every call (one call at a time: the event loop's thread).
const checkedVector: CheckedVector = { dtype: 'float32', n: 0, incx: 0 };
const checkedPair: CheckedVectorPair = { dtype: 'float32', n: 0, incx: 0, incy: 0 };

// The native calls (`issue.ts`): operands' addresses read, read, written; alpha in the arena.
const AXPY_CALL = cublasCall<CheckedVectorPair>((routine, handle, v, x, _, y) =>
  cublas()[routine.symbol](handle, v.n, scalars().alpha, x, v.incx, y, v.incy),
);
const SCAL_CALL = cublasCall<CheckedVector>((routine, handle, v, _, __, x) =>
  cublas()[routine.symbol](handle, v.n, scalars().alpha, x, v.incx),
);
// The reductions write their result to device memory (device pointer mode).
const REDUCE_CALL = cublasCall<CheckedVector>(
  (routine, handle, v, x, _, result) => cublas()[routine.symbol](handle, v.n, x, v.incx, result),
  true,
);
const REDUCE_PAIR_CALL = cublasCall<CheckedVectorPair>(
  (routine, handle, v, x, y, result) =>
    cublas()[routine.symbol](handle, v.n, x, v.incx, y, v.incy, result),
  true,
);

/**
 * y = alpha x + y, in place on `y` (cublasSaxpy_v2 / cublasDaxpy_v2). Returns `y`. x must not
 * share memory with y (a CudaArgumentError says so).
 * @example axpy(2, x, y); // y += 2 x
 */
export function axpy<X extends DType, Y extends DeviceArray>(
  alpha: number,
  x: DeviceArray<X>,
  y: Y & SameDType<X, Y['dtype']>,
  options: VectorOptions = NO_OPTIONS,
): Y {
  assertScalar('axpy', 'alpha', alpha);
  const v = checkVectorPair('axpy', x, y, checkedPair, true);
  const stream = operandStream('axpy', options, VECTOR_OPTIONS, 'xy', x, y);
  if (v.n === 0) return y;
  const routine = AXPY[v.dtype];
  scalars().set(routine.scalar, alpha);
  issue(stream, routine, AXPY_CALL, v, x, undefined, y);
  return y;
}

/**
 * x = alpha x, in place (cublasSscal_v2 / cublasDscal_v2). Returns `x`.
 * @example scal(0.5, x);
 */
export function scal<X extends DeviceArray>(
  alpha: number,
  x: X,
  options: VectorOptions = NO_OPTIONS,
): X {
  assertScalar('scal', 'alpha', alpha);
  const v = checkVector('scal', x, checkedVector);
  const stream = operandStream('scal', options, VECTOR_OPTIONS, 'x', x);
  if (v.n === 0) return x;
  const routine = SCAL[v.dtype];
  scalars().set(routine.scalar, alpha);
  issue(stream, routine, SCAL_CALL, v, undefined, undefined, x);
  return x;
}

/**
 * Runs one reduction (`how`) of `v.n` elements of x (and y, for dot) in device pointer mode
 * into a fresh one-element device array of `resultType` and awaits its value. The call is
 * issued before the first await, so the reused `v` is still this call's. Host pointer mode is
 * restored before returning (also on failure), so the handle is in host mode whenever no call
 * is in progress.
 */
async function reduce<V extends CheckedVector>(
  routine: Routine,
  how: Issue<V>,
  v: V,
  resultType: DType,
  stream: Stream,
  x: DeviceArray,
  y: DeviceArray | undefined,
): Promise<number> {
  const result = DeviceArray.empty(resultType, [1], { stream });
  try {
    issue(stream, routine, how, v, x, y, result);
    return (await result.toHost({ stream }))[0]!;
  } finally {
    result.dispose();
  }
}

/**
 * The dot product x . y (cublasSdot_v2 / cublasDdot_v2); 0 for empty vectors. The promise
 * resolves when the stream has computed it, without blocking the event loop.
 * @example const d = await dot(x, y);
 */
export async function dot<X extends DType, Y extends DType>(
  x: DeviceArray<X>,
  y: DeviceArray<Y> & SameDType<X, Y>,
  options: VectorOptions = NO_OPTIONS,
): Promise<number> {
  const v = checkVectorPair('dot', x, y, checkedPair);
  const stream = operandStream('dot', options, VECTOR_OPTIONS, 'xy', x, y);
  if (v.n === 0) return 0;
  return reduce(DOT[v.dtype], REDUCE_PAIR_CALL, v, v.dtype, stream, x, y);
}

/**
 * The Euclidean norm ||x||_2 (cublasSnrm2_v2 / cublasDnrm2_v2); 0 for an empty vector.
 * @example const norm = await nrm2(x);
 */
export async function nrm2(x: DeviceArray, options: VectorOptions = NO_OPTIONS): Promise<number> {
  const v = checkVector('nrm2', x, checkedVector);
  const stream = operandStream('nrm2', options, VECTOR_OPTIONS, 'x', x);
  if (v.n === 0) return 0;
  return reduce(NRM2[v.dtype], REDUCE_CALL, v, v.dtype, stream, x, undefined);
}

/**
 * The sum of absolute values sum |x_i| (cublasSasum_v2 / cublasDasum_v2); 0 for an empty vector.
 * @example const l1 = await asum(x);
 */
export async function asum(x: DeviceArray, options: VectorOptions = NO_OPTIONS): Promise<number> {
  const v = checkVector('asum', x, checkedVector);
  const stream = operandStream('asum', options, VECTOR_OPTIONS, 'x', x);
  if (v.n === 0) return 0;
  return reduce(ASUM[v.dtype], REDUCE_CALL, v, v.dtype, stream, x, undefined);
}

/**
 * The 0-based index of the element of largest absolute value (the first such one), from
 * cublasIsamax_v2 / cublasIdamax_v2 (which count from 1); -1 for an empty vector.
 * @example const i = await iamax(x);
 */
export async function iamax(x: DeviceArray, options: VectorOptions = NO_OPTIONS): Promise<number> {
  const v = checkVector('iamax', x, checkedVector);
  const stream = operandStream('iamax', options, VECTOR_OPTIONS, 'x', x);
  if (v.n === 0) return -1;
  const oneBased = await reduce(IAMAX[v.dtype], REDUCE_CALL, v, 'int32', stream, x, undefined);
  return oneBased - 1;
}
