/** Matrix-vector products (BLAS level 2) over DeviceArrays. */
import {
  beginOperation,
  currentStream,
  type DeviceArray,
  endOperation,
  type StreamOption,
} from '@cuda-tasks/cudadrv';
import { check } from './errors.js';
import { CUBLAS_OP_N, CUBLAS_OP_T, cublas } from './ffi/cublas.js';
import { acquireFfi } from './handle.js';
import { scalars } from './scalars.js';
import { checkGemv, type GemvOptions as GemvScalars } from './validate.js';

/** Options of `gemv`: y = alpha op(A) x + beta y. */
export interface GemvOptions extends GemvScalars, StreamOption {}

/**
 * y = alpha op(A) x + beta y, in place on `y` (cublasSgemv_v2 / cublasDgemv_v2), ordered on
 * the stream. A is a 2-D float32 or float64 array (or a `block()` view); x and y are vectors
 * (1-D arrays, or 2-D views with one row or one column) of A's dtype, with op(A)'s column
 * and row counts. Returns `y`.
 * @example gemv(a, x, y, { trans: true }); // y = a^T x
 */
export function gemv<Y extends DeviceArray>(
  a: DeviceArray,
  x: DeviceArray,
  y: Y,
  options: GemvOptions = {},
): Y {
  const g = checkGemv('gemv', a, x, y, options);
  const stream = options.stream ?? currentStream();
  const rows = g.trans ? g.n : g.m;
  if (rows === 0) return y;
  const handle = acquireFfi(stream);
  const pa = a.ffiAddressOn(stream, 'read');
  const px = x.ffiAddressOn(stream, 'read');
  const py = y.ffiAddressOn(stream);
  const s = scalars().set(g.dtype, g.alpha, g.beta);
  const api = cublas();
  const trans = g.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (g.dtype === 'float32') {
    const token = beginOperation('cublas.sgemv', stream);
    const status = api.cublasSgemv_v2(
      handle,
      trans,
      g.m,
      g.n,
      s.alpha,
      pa,
      g.lda,
      px,
      g.incx,
      s.beta,
      py,
      g.incy,
    );
    endOperation(token);
    check(status, 'cublasSgemv_v2');
  } else {
    const token = beginOperation('cublas.dgemv', stream);
    const status = api.cublasDgemv_v2(
      handle,
      trans,
      g.m,
      g.n,
      s.alpha,
      pa,
      g.lda,
      px,
      g.incx,
      s.beta,
      py,
      g.incy,
    );
    endOperation(token);
    check(status, 'cublasDgemv_v2');
  }
  return y;
}
