/** Matrix-vector products (BLAS level 2) over DeviceArrays. */
import type { DeviceArray, DType, SameDType, StreamOption } from '@cuda-tasks/cudadrv';
import { NO_OPTIONS } from '@cuda-tasks/cudadrv/internal';
import { CUBLAS_OP_N, CUBLAS_OP_T, cublas } from './ffi/cublas.js';
import { cublasCall, issue } from './issue.js';
import { GEMV } from './routines.js';
import { scalars } from './scalars.js';
import { GEMV_OPTIONS, operandStream } from './validate.js';
import {
  type CheckedGemv,
  checkGemv,
  type GemvOptions as GemvScalars,
  newCheckedGemv,
} from './validate-vectors.js';

/** Options of `gemv`: y = alpha op(A) x + beta y. */
export interface GemvOptions extends GemvScalars, StreamOption {}

/** gemv's checked arguments, reused by every call (one call at a time: the event loop's thread). */
const checkedGemv = newCheckedGemv();

/** gemv's native call (`issue.ts`): alpha and beta in the arena. */
const GEMV_CALL = cublasCall<CheckedGemv>((routine, handle, g, a, x, y) => {
  const s = scalars();
  const trans = g.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  return cublas()[routine.symbol](
    handle,
    trans,
    g.m,
    g.n,
    s.alpha,
    a,
    g.lda,
    x,
    g.incx,
    s.beta,
    y,
    g.incy,
  );
});

/**
 * y = alpha op(A) x + beta y, in place on `y` (cublasSgemv_v2 / cublasDgemv_v2), ordered on
 * the stream. A is a 2-D float32 or float64 array (or a `block()` view); x and y are vectors
 * (1-D arrays, or 2-D views with one row or one column) of A's dtype, with op(A)'s column
 * and row counts; y must not share memory with A or x (a CudaArgumentError says so; views of
 * one allocation that touch different elements are fine). Returns `y`.
 * @example gemv(a, x, y, { transA: true }); // y = a^T x
 */
export function gemv<A extends DType, X extends DType, Y extends DeviceArray>(
  a: DeviceArray<A>,
  x: DeviceArray<X> & SameDType<A, X>,
  y: Y & SameDType<A, Y['dtype']>,
  options: GemvOptions = NO_OPTIONS,
): Y {
  const g = checkGemv('gemv', a, x, y, options, checkedGemv);
  const stream = operandStream('gemv', options, GEMV_OPTIONS, 'axy', a, x, y);
  const rows = g.trans ? g.n : g.m;
  if (rows === 0) return y;
  const routine = GEMV[g.dtype];
  scalars().set(routine.scalar, g.alpha, g.beta);
  issue(stream, routine, GEMV_CALL, g, a, x, y);
  return y;
}
