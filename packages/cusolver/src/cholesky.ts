import { DeviceArray, resolveStream, type StreamOption } from '@cuda-tasks/cudadrv';
import { checkInfo, disposeAll, type StatusOption, solveIntoCopy, statusTarget } from './info.js';
import { zeroTriangle } from './kernels.js';
import { POTRF, potrf, potrs } from './routines.js';
import {
  assertOptions,
  assertSquare,
  booleanOption,
  matrixLayout,
  rightHandSideLayout,
  type SolverDType,
} from './validate.js';

/** Options for `cholesky` and `choleskySolve`. */
export interface CholeskyOptions extends StreamOption {
  /**
   * `cholesky`: compute the upper factor U with A = U^T U, reading A's upper triangle, instead
   * of the lower factor L with A = L L^T, reading A's lower triangle (default false).
   * `choleskySolve`: which triangle of the factor to use; defaults to the triangle `cholesky`
   * computed the factor with (lower for a factor it did not compute).
   */
  upper?: boolean;
}

/** Which triangle each factor returned by `cholesky` holds (true: upper). */
const factorTriangles = new WeakMap<object, boolean>();

/**
 * Cholesky factorization of a symmetric positive definite float32/float64 matrix
 * (cusolverDn potrf) on a copy: `a` is not modified, and only its lower triangle (or upper,
 * with `upper: true`) is read. Resolves to the triangular factor as a new n x n array whose
 * other triangle is zero: L with A = L L^T (or U with A = U^T U). Rejects with
 * `NotPositiveDefiniteError` (`info` = the order of the first leading minor that is not
 * positive definite) when A is not positive definite. With `{ info }` the status goes to that
 * int32 array instead and nothing waits: the form for a graph capture (else a CaptureError).
 * @example
 * const factor = await cholesky(a);
 * const x = choleskySolve(factor, b);
 */
export async function cholesky<D extends SolverDType>(
  a: DeviceArray<D>,
  options: CholeskyOptions & StatusOption = {},
): Promise<DeviceArray<D>> {
  const layout = matrixLayout(a, 'a', 'cholesky');
  assertSquare(layout, 'a', 'cholesky');
  assertOptions(options, 'cholesky');
  const upper = booleanOption(options, 'upper', 'cholesky');
  const n = layout.rows;
  const stream = resolveStream(options.stream);
  const dtype = a.dtype;
  const status = statusTarget(options, stream, 'cholesky', POTRF[dtype]);
  let factor: DeviceArray<D> | undefined;
  let info: DeviceArray<'int32'> | undefined;
  try {
    factor = a.copy({ stream });
    info = status ?? DeviceArray.empty('int32', 1, { stream });
    potrf(stream, dtype, upper, n, factor.useOn(stream), n, info.useOn(stream));
    // potrf leaves the other triangle as it was (A's values): clear it so the factor is exact.
    zeroTriangle(factor, upper ? 'lower' : 'upper', stream);
    const pending = info;
    info = undefined;
    if (status === undefined) {
      await checkInfo(pending, stream, 'notPositiveDefinite', POTRF[dtype]);
    }
    factorTriangles.set(factor, upper);
    return factor;
  } catch (error) {
    disposeAll(factor, info === status ? undefined : info);
    throw error;
  }
}

/**
 * Solves A X = B from the Cholesky factor of A (cusolverDn potrs). `b` is an n x k matrix or
 * a length-n vector and is not modified; the solution is a new array of b's shape. The solve
 * is only queued on the stream: nothing waits for the GPU.
 * @example
 * const upperFactor = await cholesky(a, { upper: true });
 * const x = choleskySolve(upperFactor, b); // uses the upper triangle, as computed
 */
export function choleskySolve<D extends SolverDType>(
  factor: DeviceArray<D>,
  b: DeviceArray<D>,
  options: CholeskyOptions = {},
): DeviceArray<D> {
  const layout = matrixLayout(factor, 'factor', 'choleskySolve');
  assertSquare(layout, 'factor', 'choleskySolve');
  const n = layout.rows;
  const right = rightHandSideLayout(b, factor, n, 'choleskySolve', 'factor');
  assertOptions(options, 'choleskySolve');
  const upper =
    options.upper === undefined
      ? (factorTriangles.get(factor) ?? false)
      : booleanOption(options, 'upper', 'choleskySolve');
  const stream = resolveStream(options.stream);
  return solveIntoCopy(b, stream, (x, info) =>
    potrs(
      stream,
      b.dtype,
      upper,
      n,
      right.columns,
      factor.useOn(stream, 'read'),
      layout.leadingDimension,
      x.useOn(stream),
      n,
      info.useOn(stream),
    ),
  );
}
