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
  beginOperation,
  currentStream,
  DeviceArray,
  type DType,
  endOperation,
  type Stream,
  type StreamOption,
} from '@cuda-tasks/cudadrv';
import { check } from './errors.js';
import { CUBLAS_POINTER_MODE_DEVICE, CUBLAS_POINTER_MODE_HOST, cublas } from './ffi/cublas.js';
import { acquireFfi } from './handle.js';
import { scalars } from './scalars.js';
import { assertScalar, checkVector, checkVectorPair } from './validate.js';

/** Options of the vector routines. */
export interface VectorOptions extends StreamOption {}

function streamOf(options: VectorOptions | undefined): Stream {
  return options?.stream ?? currentStream();
}

/**
 * y = alpha x + y, in place on `y` (cublasSaxpy_v2 / cublasDaxpy_v2). Returns `y`.
 * @example axpy(2, x, y); // y += 2 x
 */
export function axpy<Y extends DeviceArray>(
  alpha: number,
  x: DeviceArray,
  y: Y,
  options: VectorOptions = {},
): Y {
  assertScalar('axpy', 'alpha', alpha);
  const v = checkVectorPair('axpy', x, y);
  const stream = streamOf(options);
  if (v.n === 0) return y;
  const handle = acquireFfi(stream);
  const px = x.ffiAddressOn(stream, 'read');
  const py = y.ffiAddressOn(stream);
  const s = scalars().set(v.dtype, alpha);
  const api = cublas();
  if (v.dtype === 'float32') {
    const token = beginOperation('cublas.saxpy', stream);
    const status = api.cublasSaxpy_v2(handle, v.n, s.alpha, px, v.incx, py, v.incy);
    endOperation(token);
    check(status, 'cublasSaxpy_v2');
  } else {
    const token = beginOperation('cublas.daxpy', stream);
    const status = api.cublasDaxpy_v2(handle, v.n, s.alpha, px, v.incx, py, v.incy);
    endOperation(token);
    check(status, 'cublasDaxpy_v2');
  }
  return y;
}

/**
 * x = alpha x, in place (cublasSscal_v2 / cublasDscal_v2). Returns `x`.
 * @example scal(0.5, x);
 */
export function scal<X extends DeviceArray>(alpha: number, x: X, options: VectorOptions = {}): X {
  assertScalar('scal', 'alpha', alpha);
  const v = checkVector('scal', x);
  const stream = streamOf(options);
  if (v.n === 0) return x;
  const handle = acquireFfi(stream);
  const px = x.ffiAddressOn(stream);
  const s = scalars().set(v.dtype, alpha);
  const api = cublas();
  if (v.dtype === 'float32') {
    const token = beginOperation('cublas.sscal', stream);
    const status = api.cublasSscal_v2(handle, v.n, s.alpha, px, v.incx);
    endOperation(token);
    check(status, 'cublasSscal_v2');
  } else {
    const token = beginOperation('cublas.dscal', stream);
    const status = api.cublasDscal_v2(handle, v.n, s.alpha, px, v.incx);
    endOperation(token);
    check(status, 'cublasDscal_v2');
  }
  return x;
}

/**
 * Runs one reduction in device pointer mode into a fresh one-element device array and awaits
 * its value. Host pointer mode is restored before returning (also on failure), so the handle
 * is in host mode whenever no call is in progress.
 */
async function reduce(
  name: string,
  call: string,
  stream: Stream,
  resultType: DType,
  run: (handle: number | bigint, result: number | bigint) => number,
): Promise<number> {
  const result = DeviceArray.empty(resultType, [1], { stream });
  try {
    const handle = acquireFfi(stream);
    const api = cublas();
    const pointer = result.ffiAddressOn(stream);
    check(
      api.cublasSetPointerMode_v2(handle, CUBLAS_POINTER_MODE_DEVICE),
      'cublasSetPointerMode_v2',
    );
    let status: number;
    const token = beginOperation(name, stream);
    try {
      status = run(handle, pointer);
    } finally {
      endOperation(token);
      check(
        api.cublasSetPointerMode_v2(handle, CUBLAS_POINTER_MODE_HOST),
        'cublasSetPointerMode_v2',
      );
    }
    check(status, call);
    const host = await result.toHost({ stream });
    return host[0]!;
  } finally {
    result.dispose();
  }
}

/**
 * The dot product x . y (cublasSdot_v2 / cublasDdot_v2); 0 for empty vectors. The promise
 * resolves when the stream has computed it, without blocking the event loop.
 * @example const d = await dot(x, y);
 */
export async function dot(
  x: DeviceArray,
  y: DeviceArray,
  options: VectorOptions = {},
): Promise<number> {
  const v = checkVectorPair('dot', x, y);
  const stream = streamOf(options);
  if (v.n === 0) return 0;
  const px = x.ffiAddressOn(stream, 'read');
  const py = y.ffiAddressOn(stream, 'read');
  return v.dtype === 'float32'
    ? reduce('cublas.sdot', 'cublasSdot_v2', stream, 'float32', (handle, result) =>
        cublas().cublasSdot_v2(handle, v.n, px, v.incx, py, v.incy, result),
      )
    : reduce('cublas.ddot', 'cublasDdot_v2', stream, 'float64', (handle, result) =>
        cublas().cublasDdot_v2(handle, v.n, px, v.incx, py, v.incy, result),
      );
}

/**
 * The Euclidean norm ||x||_2 (cublasSnrm2_v2 / cublasDnrm2_v2); 0 for an empty vector.
 * @example const norm = await nrm2(x);
 */
export async function nrm2(x: DeviceArray, options: VectorOptions = {}): Promise<number> {
  const v = checkVector('nrm2', x);
  const stream = streamOf(options);
  if (v.n === 0) return 0;
  const px = x.ffiAddressOn(stream, 'read');
  return v.dtype === 'float32'
    ? reduce('cublas.snrm2', 'cublasSnrm2_v2', stream, 'float32', (handle, result) =>
        cublas().cublasSnrm2_v2(handle, v.n, px, v.incx, result),
      )
    : reduce('cublas.dnrm2', 'cublasDnrm2_v2', stream, 'float64', (handle, result) =>
        cublas().cublasDnrm2_v2(handle, v.n, px, v.incx, result),
      );
}

/**
 * The sum of absolute values sum |x_i| (cublasSasum_v2 / cublasDasum_v2); 0 for an empty vector.
 * @example const l1 = await asum(x);
 */
export async function asum(x: DeviceArray, options: VectorOptions = {}): Promise<number> {
  const v = checkVector('asum', x);
  const stream = streamOf(options);
  if (v.n === 0) return 0;
  const px = x.ffiAddressOn(stream, 'read');
  return v.dtype === 'float32'
    ? reduce('cublas.sasum', 'cublasSasum_v2', stream, 'float32', (handle, result) =>
        cublas().cublasSasum_v2(handle, v.n, px, v.incx, result),
      )
    : reduce('cublas.dasum', 'cublasDasum_v2', stream, 'float64', (handle, result) =>
        cublas().cublasDasum_v2(handle, v.n, px, v.incx, result),
      );
}

/**
 * The 0-based index of the element of largest absolute value (the first such one), from
 * cublasIsamax_v2 / cublasIdamax_v2 (which count from 1); -1 for an empty vector.
 * @example const i = await iamax(x);
 */
export async function iamax(x: DeviceArray, options: VectorOptions = {}): Promise<number> {
  const v = checkVector('iamax', x);
  const stream = streamOf(options);
  if (v.n === 0) return -1;
  const px = x.ffiAddressOn(stream, 'read');
  const oneBased =
    v.dtype === 'float32'
      ? await reduce('cublas.isamax', 'cublasIsamax_v2', stream, 'int32', (handle, result) =>
          cublas().cublasIsamax_v2(handle, v.n, px, v.incx, result),
        )
      : await reduce('cublas.idamax', 'cublasIdamax_v2', stream, 'int32', (handle, result) =>
          cublas().cublasIdamax_v2(handle, v.n, px, v.incx, result),
        );
  return oneBased - 1;
}
