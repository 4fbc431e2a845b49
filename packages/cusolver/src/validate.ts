/**
 * Argument checks, run before any native call (and before the current stream is looked up),
 * so that bad input is a CudaArgumentError or DisposedError with no side effect. Pure
 * functions of an array's dtype, shape, strides and disposed state, built from the operand
 * checks every library shares (`@cuda-tasks/cudadrv`); the options are read with cudadrv's
 * option checks (`assertOptions`, `booleanOption`, `streamOption`, ...), and once the stream
 * is resolved each routine compares its arrays' context with the stream's
 * (`assertSameContext`).
 *
 * No routine here can be given an output that aliases an input: every result is a new array,
 * and the inputs are copied (on the stream, before any routine writes) where cuSOLVER would
 * overwrite them. Inputs may share memory with each other (a b that is a column of a).
 */
import {
  assertArray,
  assertDType,
  assertSameDType,
  CudaArgumentError,
  type DeviceArray,
  type FloatDType,
  type MatrixLayout,
  readMatrixLayout,
} from '@cuda-tasks/cudadrv';

/**
 * The element types the cuSOLVER API here supports.
 * @deprecated The same type as `FloatDType` of `@cuda-tasks/cudadrv`, the one name for it;
 * this alias goes in the next minor release.
 */
export type SolverDType = FloatDType;

export type { FloatDType, MatrixLayout };

/** Largest value of a C `int` (cuSOLVER's dimensions and leading dimensions). */
export const INT_MAX = 2147483647;

const FLOAT_DTYPES: readonly FloatDType[] = ['float32', 'float64'];
const PIVOT_DTYPES = ['int32'] as const;

/**
 * Checks a float32/float64 matrix argument (a 2-D array, or a 1-D vector where `vector` is
 * allowed, standing for one column): usable, non-empty, column-major (contiguous, or a 2-D
 * view whose rows are adjacent, e.g. from `block()`), dimensions within C `int`. Returns the
 * layout to pass to cuSOLVER.
 */
export function matrixLayout(
  call: string,
  name: string,
  value: unknown,
  vector = false,
): MatrixLayout {
  assertArray(call, name, value);
  assertDType(call, name, value, FLOAT_DTYPES);
  const shape = value.shape;
  if (shape.length !== 2 && !(vector && shape.length === 1)) {
    throw new CudaArgumentError(
      `${call}: ${name} must be a ${vector ? '1-D or 2-D' : '2-D'} array (a matrix), got shape ${JSON.stringify(shape)}`,
    );
  }
  if (shape[0] === 0 || (shape.length === 2 && shape[1] === 0)) {
    throw new CudaArgumentError(
      `${call}: ${name} must not be empty, got shape ${JSON.stringify(shape)}`,
    );
  }
  if (!value.contiguous && (shape.length !== 2 || value.strides[0] !== 1)) {
    throw new CudaArgumentError(
      `${call}: ${name} must be contiguous or a column-major 2-D view (strides[0] === 1), got strides ${JSON.stringify(value.strides)}; copy() it first`,
    );
  }
  // A new object: the layout is kept by the caller (the routines run once per call, not in a loop).
  const layout = readMatrixLayout(shape, value.strides, {
    rows: 0,
    columns: 0,
    leadingDimension: 0,
  });
  const { rows, columns, leadingDimension } = layout;
  if (leadingDimension < rows) {
    throw new CudaArgumentError(
      `${call}: ${name} has a leading dimension of ${leadingDimension}, less than its ${rows} rows`,
    );
  }
  if (rows > INT_MAX || columns > INT_MAX || leadingDimension > INT_MAX) {
    throw new CudaArgumentError(
      `${call}: ${name} is ${rows} x ${columns} with leading dimension ${leadingDimension}; cuSOLVER takes dimensions up to ${INT_MAX}`,
    );
  }
  return layout;
}

/** Throws unless the layout is square. */
export function assertSquare(call: string, name: string, layout: MatrixLayout): void {
  if (layout.rows !== layout.columns) {
    throw new CudaArgumentError(
      `${call}: ${name} must be square, got ${layout.rows} x ${layout.columns}`,
    );
  }
}

/**
 * Checks a right-hand side `b` (n x k matrix or length-n vector) against a square
 * coefficient matrix `a` of order `n`: same dtype, `n` rows.
 */
export function rightHandSideLayout(
  call: string,
  b: unknown,
  a: DeviceArray,
  n: number,
  nameA = 'a',
): MatrixLayout {
  const layout = matrixLayout(call, 'b', b, true);
  assertSameDType(call, 'b', b as DeviceArray, nameA, a);
  if (layout.rows !== n) {
    throw new CudaArgumentError(
      `${call}: b has ${layout.rows} rows but ${nameA} is ${n} x ${n}; they must match`,
    );
  }
  return layout;
}

/** Checks LAPACK pivots: a usable contiguous 1-D int32 array of `length` elements. */
export function assertPivots(call: string, value: unknown, length: number): void {
  assertArray(call, 'pivots', value);
  assertDType(call, 'pivots', value, PIVOT_DTYPES);
  if (value.shape.length !== 1 || value.length !== length || !value.contiguous) {
    throw new CudaArgumentError(
      `${call}: pivots must be a contiguous 1-D array of ${length} elements, got shape ${JSON.stringify(value.shape)}`,
    );
  }
}

export { NO_OPTIONS } from '@cuda-tasks/cudadrv/internal';
