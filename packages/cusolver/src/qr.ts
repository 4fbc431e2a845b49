import {
  assertOptions,
  assertSameContext,
  DeviceArray,
  DeviceBuffer,
  resolveStream,
  type StreamOption,
  streamOption,
} from '@cuda-tasks/cudadrv';
import { disposeAll } from './info.js';
import { zeroTriangle } from './kernels.js';
import { geqrf, orgqr } from './routines.js';
import { type FloatDType, matrixLayout, NO_OPTIONS } from './validate.js';

/** The reduced QR factorization A = Q R of an m x n matrix, k = min(m, n). */
export interface QrFactorization<D extends FloatDType = FloatDType> {
  /** m x k with orthonormal columns (Q^T Q = I). */
  q: DeviceArray<D>;
  /** k x n upper triangular (zero below the diagonal) or trapezoidal when m < n. */
  r: DeviceArray<D>;
}

/**
 * Reduced (economic) QR factorization A = Q R of an m x n float32/float64 matrix by Householder
 * reflections (cusolverDn geqrf, then orgqr to form Q), on a copy: `a` is not modified. With
 * k = min(m, n), Q is m x k and R is k x n, both new contiguous arrays; R's strictly lower
 * part is zero (cleared on the device). QR cannot fail on valid input, so nothing is read
 * back: the work is only queued on the stream.
 * @example
 * const { q, r } = qr(a); // a: 100 x 20 -> q: 100 x 20, r: 20 x 20
 */
export function qr<D extends FloatDType>(
  a: DeviceArray<D>,
  options: StreamOption = NO_OPTIONS,
): QrFactorization<D> {
  const { rows: m, columns: n } = matrixLayout('qr', 'a', a);
  assertOptions('qr', options, ['stream']);
  const stream = resolveStream(streamOption('qr', options.stream));
  assertSameContext('qr', 'a', a, stream);
  const dtype = a.dtype;
  const k = Math.min(m, n);
  let work: DeviceArray<D> | undefined;
  let tau: DeviceArray<D> | undefined;
  let info: DeviceBuffer | undefined;
  let q: DeviceArray<D> | undefined;
  let r: DeviceArray<D> | undefined;
  try {
    work = a.copy({ stream });
    tau = DeviceArray.empty(dtype, k, { stream });
    // geqrf and orgqr report only illegal arguments in devInfo, which the checks rule out.
    info = DeviceBuffer.allocate(4, { stream });
    const infoPointer = info.useOn(stream);
    geqrf(stream, dtype, m, n, work.useOn(stream), m, tau.useOn(stream), infoPointer);
    // R: the upper triangle (trapezoid) of the first k rows.
    r = DeviceArray.empty(dtype, [k, n], { stream });
    r.copyFrom(k === m ? work : work.block(0, 0, k, n), { stream });
    zeroTriangle(r, 'lower', stream);
    // Q: orgqr forms k columns in place from the reflectors in the first k columns.
    if (k === n) {
      q = work;
    } else {
      q = work.block(0, 0, m, k).copy({ stream });
      work.dispose();
    }
    work = undefined;
    orgqr(stream, dtype, m, k, k, q.useOn(stream), m, tau.useOn(stream), infoPointer);
    disposeAll(tau, info);
    return { q, r };
  } catch (error) {
    disposeAll(work, tau, info, q, r);
    throw error;
  }
}
