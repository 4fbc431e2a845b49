import {
  assertOptions,
  assertSameContext,
  booleanOption,
  DeviceArray,
  resolveStream,
  type StreamOption,
  streamOption,
} from '@cuda-tasks/cudadrv';
import { checkInfo, disposeAll, statusInCapture } from './info.js';
import { transpose } from './kernels.js';
import { GESVD, gesvd } from './routines.js';
import { type FloatDType, matrixLayout, NO_OPTIONS } from './validate.js';

/** Options for `svd`. */
export interface SvdOptions extends StreamOption {
  /**
   * Full SVD: U is m x m and V^T is n x n. Default false, the reduced (economic) SVD: with
   * k = min(m, n), U is m x k and V^T is k x n.
   */
  full?: boolean;
}

/** A singular value decomposition A = U diag(S) V^T. */
export interface SvdResult<D extends FloatDType = FloatDType> {
  /** Left singular vectors, one per column: m x k (m x m with `full`). */
  u: DeviceArray<D>;
  /** The k = min(m, n) singular values, non-negative, in descending order. */
  s: DeviceArray<D>;
  /** Right singular vectors transposed, one per row: k x n (n x n with `full`). */
  vt: DeviceArray<D>;
}

/**
 * Singular value decomposition A = U diag(S) V^T of an m x n float32/float64 matrix
 * (cusolverDn gesvd) on a copy: `a` is not modified. gesvd needs m >= n; a wide matrix
 * (m < n) is decomposed through its transpose (A^T = U' S V'^T gives U = V', V^T = U'^T),
 * transposed on the device. Rejects with a `CusolverError` (status NO_CONVERGENCE, `info` > 0)
 * if the bidiagonal QR iteration fails to converge.
 * Not inside a graph capture: it reads its status back (a CaptureError before any work).
 * @example
 * const { u, s, vt } = await svd(a);           // reduced
 * const full = await svd(a, { full: true });   // U m x m, V^T n x n
 */
export async function svd<D extends FloatDType>(
  a: DeviceArray<D>,
  options: SvdOptions = NO_OPTIONS,
): Promise<SvdResult<D>> {
  const { rows: m, columns: n } = matrixLayout('svd', 'a', a);
  assertOptions('svd', options, ['stream', 'full']);
  const full = booleanOption('svd', 'full', options.full);
  const stream = resolveStream(streamOption('svd', options.stream));
  assertSameContext('svd', 'a', a, stream);
  const dtype = a.dtype;
  if (stream.capturing) {
    throw statusInCapture('svd', stream, [GESVD[dtype]], 'use it outside the capture');
  }
  const tall = m >= n;
  // gesvd's problem: rows x columns with rows >= columns (A itself, or A^T when A is wide).
  const rows = tall ? m : n;
  const columns = tall ? n : m;
  let work: DeviceArray<D> | undefined;
  let s: DeviceArray<D> | undefined;
  let left: DeviceArray<D> | undefined;
  let rightT: DeviceArray<D> | undefined;
  let info: DeviceArray<'int32'> | undefined;
  let u: DeviceArray<D> | undefined;
  let vt: DeviceArray<D> | undefined;
  try {
    work = tall ? a.copy({ stream }) : transpose(a, stream);
    s = DeviceArray.empty(dtype, columns, { stream });
    left = DeviceArray.empty(dtype, [rows, full ? rows : columns], { stream });
    rightT = DeviceArray.empty(dtype, [columns, columns], { stream });
    info = DeviceArray.empty('int32', 1, { stream });
    gesvd(
      stream,
      dtype,
      full,
      rows,
      columns,
      work.useOn(stream),
      rows,
      s.useOn(stream),
      left.useOn(stream),
      rows,
      rightT.useOn(stream),
      columns,
      info.useOn(stream),
    );
    work.dispose();
    work = undefined;
    if (tall) {
      u = left;
      vt = rightT;
    } else {
      // A = (A^T)^T = (U' S V'^T)^T = V' S U'^T.
      u = transpose(rightT, stream);
      vt = transpose(left, stream);
      disposeAll(left, rightT);
    }
    left = rightT = undefined;
    const pending = info;
    info = undefined;
    await checkInfo(pending, stream, 'noConvergence', GESVD[dtype]);
    return { u, s, vt };
  } catch (error) {
    disposeAll(work, s, left, rightT, info, u, vt);
    throw error;
  }
}
