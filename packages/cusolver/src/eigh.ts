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
import { SYEVD, syevd } from './routines.js';
import { assertSquare, type FloatDType, matrixLayout, NO_OPTIONS } from './validate.js';

/** Options for `eigh`. */
export interface EighOptions extends StreamOption {
  /** Read A's upper triangle instead of its lower triangle (default false). */
  upper?: boolean;
}

/** Eigenvalues and eigenvectors of a symmetric matrix: A V = V diag(values). */
export interface EighResult<D extends FloatDType = FloatDType> {
  /** The n eigenvalues in ascending order. */
  values: DeviceArray<D>;
  /** n x n orthogonal matrix: column j is the unit eigenvector of `values[j]`. */
  vectors: DeviceArray<D>;
}

/**
 * Eigenvalues and eigenvectors of a real symmetric float32/float64 matrix by divide and
 * conquer (cusolverDn syevd, jobz = CUSOLVER_EIG_MODE_VECTOR), on a copy: `a` is not
 * modified, and only its lower triangle (or upper, with `upper: true`) is read. Rejects with
 * a `CusolverError` (status NO_CONVERGENCE, `info` > 0) if the algorithm fails to converge.
 * Not inside a graph capture: it reads its status back (a CaptureError before any work).
 * @example
 * const { values, vectors } = await eigh(a);
 */
export async function eigh<D extends FloatDType>(
  a: DeviceArray<D>,
  options: EighOptions = NO_OPTIONS,
): Promise<EighResult<D>> {
  const layout = matrixLayout('eigh', 'a', a);
  assertSquare('eigh', 'a', layout);
  assertOptions('eigh', options, ['stream', 'upper']);
  const upper = booleanOption('eigh', 'upper', options.upper);
  const n = layout.rows;
  const stream = resolveStream(streamOption('eigh', options.stream));
  assertSameContext('eigh', 'a', a, stream);
  const dtype = a.dtype;
  if (stream.capturing) {
    throw statusInCapture('eigh', stream, [SYEVD[dtype]], 'use it outside the capture');
  }
  let vectors: DeviceArray<D> | undefined;
  let values: DeviceArray<D> | undefined;
  let info: DeviceArray<'int32'> | undefined;
  try {
    vectors = a.copy({ stream });
    values = DeviceArray.empty(dtype, n, { stream });
    info = DeviceArray.empty('int32', 1, { stream });
    syevd(
      stream,
      dtype,
      upper,
      n,
      vectors.useOn(stream),
      n,
      values.useOn(stream),
      info.useOn(stream),
    );
    const pending = info;
    info = undefined;
    await checkInfo(pending, stream, 'noConvergence', SYEVD[dtype]);
    return { values, vectors };
  } catch (error) {
    disposeAll(vectors, values, info);
    throw error;
  }
}
