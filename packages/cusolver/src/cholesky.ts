import {
  assertOptions,
  assertSameContext,
  booleanOption,
  CudaArgumentError,
  DeviceArray,
  resolveStream,
  type SameDType,
  type StreamOption,
  streamOption,
} from '@cuda-tasks/cudadrv';
import { checkInfo, disposeAll, type StatusOption, solveIntoCopy, statusTarget } from './info.js';
import { zeroTriangle } from './kernels.js';
import { POTRF, potrf, potrs } from './routines.js';
import {
  assertSquare,
  type FloatDType,
  matrixLayout,
  NO_OPTIONS,
  rightHandSideLayout,
} from './validate.js';

/** Options for `cholesky`. */
export interface CholeskyOptions extends StreamOption {
  /**
   * Compute the upper factor U with A = U^T U, reading A's upper triangle, instead of the
   * lower factor L with A = L L^T, reading A's lower triangle (default false).
   */
  upper?: boolean;
}

/**
 * What `cholesky` resolves to: the triangular factor and which triangle it is. The triangle
 * travels with the value, so a copy (`{ ...f, factor: f.factor.copy() }`) or one rebuilt from
 * saved parts solves the same way. Dispose `factor` when done.
 */
export interface CholeskyFactorization<D extends FloatDType = FloatDType> {
  /** The n x n factor, L or U as `upper` says; its other triangle is zero. */
  readonly factor: DeviceArray<D>;
  /** true: `factor` is U with A = U^T U; false: L with A = L L^T. */
  readonly upper: boolean;
}

/** Options for `choleskySolve`. */
export interface CholeskySolveOptions extends StreamOption {
  /**
   * Which triangle of the factor to use (true: U with A = U^T U, false: L with A = L L^T).
   * Required when the factor is given as a bare DeviceArray; with a `CholeskyFactorization`
   * it may be left out, and must agree with the factorization's `upper` when given.
   */
  upper?: boolean;
}

/**
 * Cholesky factorization of a symmetric positive definite float32/float64 matrix
 * (cusolverDn potrf) on a copy: `a` is not modified, and only its lower triangle (or upper,
 * with `upper: true`) is read. Resolves to `{ factor, upper }`: the triangular factor as a new
 * n x n array whose other triangle is zero, L with A = L L^T (or U with A = U^T U), and which
 * of the two it is. Rejects with `NotPositiveDefiniteError` (`info` = the order of the first
 * leading minor that is not positive definite) when A is not positive definite. With
 * `{ info }` the status goes to that int32 array instead and nothing waits: the form for a
 * graph capture (else a CaptureError).
 * @example
 * const factorization = await cholesky(a, { upper: true });
 * const x = choleskySolve(factorization, b); // solves with U
 */
export async function cholesky<D extends FloatDType>(
  a: DeviceArray<D>,
  options: CholeskyOptions & StatusOption = NO_OPTIONS,
): Promise<CholeskyFactorization<D>> {
  const layout = matrixLayout('cholesky', 'a', a);
  assertSquare('cholesky', 'a', layout);
  assertOptions('cholesky', options, ['stream', 'upper', 'info']);
  const upper = booleanOption('cholesky', 'upper', options.upper);
  const n = layout.rows;
  const stream = resolveStream(streamOption('cholesky', options.stream));
  assertSameContext('cholesky', 'a', a, stream);
  const dtype = a.dtype;
  const status = statusTarget(options, stream, 'cholesky', POTRF[dtype]);
  if (status !== undefined) assertSameContext('cholesky', 'info', status, stream);
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
    return { factor, upper };
  } catch (error) {
    disposeAll(factor, info === status ? undefined : info);
    throw error;
  }
}

/**
 * The factor array and its triangle from `choleskySolve`'s first argument and options: a
 * `CholeskyFactorization` says its triangle (an `upper` option must agree); a bare array needs
 * the `upper` option, never a guess.
 */
function factorAndTriangle(
  factorization: unknown,
  options: CholeskySolveOptions,
): { factor: unknown; upper: boolean } {
  const stated = options.upper;
  // Checked only when given: a bare factor array needs it, a factorization says it already.
  if (stated !== undefined) booleanOption('choleskySolve', 'upper', stated);
  if (DeviceArray.isInstance(factorization)) {
    if (stated === undefined) {
      throw new CudaArgumentError(
        'choleskySolve: a bare factor array does not say which triangle holds the factor: pass { upper: true } (U, A = U^T U) or { upper: false } (L, A = L L^T), or the { factor, upper } that cholesky() returns',
      );
    }
    return { factor: factorization, upper: stated };
  }
  if (typeof factorization !== 'object' || factorization === null) {
    throw new CudaArgumentError(
      'choleskySolve: the first argument must be the { factor, upper } that cholesky() returns, or a factor DeviceArray with { upper } in the options',
    );
  }
  const { factor, upper } = factorization as Partial<CholeskyFactorization>;
  if (typeof upper !== 'boolean') {
    throw new CudaArgumentError(
      `choleskySolve: factorization.upper must be a boolean (true: the factor is U, false: L), got ${typeof upper}`,
    );
  }
  if (stated !== undefined && stated !== upper) {
    throw new CudaArgumentError(
      `choleskySolve: option upper (${stated}) contradicts the factorization, whose factor is ${upper ? 'upper (U)' : 'lower (L)'}`,
    );
  }
  return { factor, upper };
}

/**
 * Solves A X = B from the Cholesky factor of A (cusolverDn potrs): `cholesky`'s
 * `{ factor, upper }`, or a factor array with `{ upper }` saying which triangle it is (a
 * CudaArgumentError without it). `b` is an n x k matrix or a length-n vector and is not
 * modified; the solution is a new array of b's shape. The solve is only queued on the stream:
 * nothing waits for the GPU.
 * @example
 * const factorization = await cholesky(a, { upper: true });
 * const x = choleskySolve(factorization, b); // uses U, as computed
 * const y = choleskySolve(factorization.factor, b, { upper: true }); // the same, stated
 */
export function choleskySolve<D extends FloatDType, B extends FloatDType>(
  factorization: CholeskyFactorization<D>,
  b: DeviceArray<B> & SameDType<D, B>,
  options?: CholeskySolveOptions,
): DeviceArray<D>;
export function choleskySolve<D extends FloatDType, B extends FloatDType>(
  factor: DeviceArray<D>,
  b: DeviceArray<B> & SameDType<D, B>,
  options: CholeskySolveOptions & { upper: boolean },
): DeviceArray<D>;
export function choleskySolve<D extends FloatDType>(
  factorization: CholeskyFactorization<D> | DeviceArray<D>,
  b: DeviceArray<D>,
  options: CholeskySolveOptions = NO_OPTIONS,
): DeviceArray<D> {
  assertOptions('choleskySolve', options, ['stream', 'upper']);
  const { factor, upper } = factorAndTriangle(factorization, options);
  const layout = matrixLayout('choleskySolve', 'factor', factor);
  assertSquare('choleskySolve', 'factor', layout);
  const n = layout.rows;
  const right = rightHandSideLayout('choleskySolve', b, factor as DeviceArray, n, 'factor');
  const stream = resolveStream(streamOption('choleskySolve', options.stream));
  assertSameContext('choleskySolve', 'factor', factor as DeviceArray, stream);
  assertSameContext('choleskySolve', 'b', b, stream);
  const matrix = factor as DeviceArray<D>;
  return solveIntoCopy(b, stream, (x, info) =>
    potrs(
      stream,
      b.dtype,
      upper,
      n,
      right.columns,
      matrix.useOn(stream, 'read'),
      layout.leadingDimension,
      x.useOn(stream),
      n,
      info.useOn(stream),
    ),
  );
}
