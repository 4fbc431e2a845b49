/**
 * Argument checks, run before any native call (and before the current stream is looked up),
 * so that bad input is a CudaArgumentError or DisposedError with no side effect. Pure
 * functions of an array's dtype, shape, strides and disposed state; `assertOnStream`, once the
 * stream is resolved, compares an array's context with the stream's.
 *
 * No routine here can be given an output that aliases an input: every result is a new array,
 * and the inputs are copied (on the stream, before any routine writes) where cuSOLVER would
 * overwrite them. Inputs may share memory with each other (a b that is a column of a).
 */
import {
  CudaArgumentError,
  DeviceArray,
  DisposedError,
  type FloatDType,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { assertSameContext } from '@cuda-tasks/cudadrv/internal';

/**
 * The element types the cuSOLVER API here supports.
 * @deprecated The same type as `FloatDType` of `@cuda-tasks/cudadrv`, the one name for it;
 * this alias goes in the next minor release.
 */
export type SolverDType = FloatDType;

export type { FloatDType };

/** Largest value of a C `int` (cuSOLVER's dimensions and leading dimensions). */
export const INT_MAX = 2147483647;

/** The dimensions of a matrix argument as cuSOLVER takes them. */
export interface MatrixLayout {
  rows: number;
  /** Columns (1 for a vector). */
  columns: number;
  /** Elements between the starts of two columns (`lda`), at least `rows`. */
  leadingDimension: number;
}

function describe(value: unknown): string {
  if (DeviceArray.isInstance(value)) return String(value);
  if (value === null) return 'null';
  if (typeof value === 'object') return value.constructor?.name ?? 'an object';
  return typeof value === 'bigint' ? `${value}n` : (JSON.stringify(value) ?? typeof value);
}

/** Throws unless `value` is a usable (not disposed) DeviceArray. */
export function assertArray(
  value: unknown,
  what: string,
  call: string,
): asserts value is DeviceArray {
  if (!DeviceArray.isInstance(value)) {
    throw new CudaArgumentError(`${call}: ${what} must be a DeviceArray, got ${describe(value)}`);
  }
  if (value.disposed) throw new DisposedError(`${call}: ${what}`);
}

/**
 * Checks a float32/float64 matrix argument (a 2-D array, or a 1-D vector where `vector` is
 * allowed, standing for one column): usable, non-empty, column-major (contiguous, or a 2-D
 * view whose rows are adjacent, e.g. from `block()`), dimensions within C `int`. Returns the
 * layout to pass to cuSOLVER.
 */
export function matrixLayout(
  value: unknown,
  what: string,
  call: string,
  vector = false,
): MatrixLayout {
  assertArray(value, what, call);
  if (value.dtype !== 'float32' && value.dtype !== 'float64') {
    throw new CudaArgumentError(`${call}: ${what} must be float32 or float64, got ${value.dtype}`);
  }
  const shape = value.shape;
  if (shape.length !== 2 && !(vector && shape.length === 1)) {
    throw new CudaArgumentError(
      `${call}: ${what} must be a ${vector ? '1-D or 2-D' : '2-D'} array (a matrix), got shape ${JSON.stringify(shape)}`,
    );
  }
  const rows = shape[0]!;
  const columns = shape.length === 2 ? shape[1]! : 1;
  if (rows === 0 || columns === 0) {
    throw new CudaArgumentError(
      `${call}: ${what} must not be empty, got shape ${JSON.stringify(shape)}`,
    );
  }
  let leadingDimension = rows;
  if (!value.contiguous) {
    if (shape.length !== 2 || value.strides[0] !== 1) {
      throw new CudaArgumentError(
        `${call}: ${what} must be contiguous or a column-major 2-D view (strides[0] === 1), got strides ${JSON.stringify(value.strides)}; copy() it first`,
      );
    }
  }
  // A single column's leading dimension is never used to step: rows is always valid for it.
  if (shape.length === 2 && columns > 1) leadingDimension = value.strides[1]!;
  if (leadingDimension < rows) {
    throw new CudaArgumentError(
      `${call}: ${what} has a leading dimension of ${leadingDimension}, less than its ${rows} rows`,
    );
  }
  if (rows > INT_MAX || columns > INT_MAX || leadingDimension > INT_MAX) {
    throw new CudaArgumentError(
      `${call}: ${what} is ${rows} x ${columns} with leading dimension ${leadingDimension}; cuSOLVER takes dimensions up to ${INT_MAX}`,
    );
  }
  return { rows, columns, leadingDimension };
}

/** Throws unless the layout is square. */
export function assertSquare(layout: MatrixLayout, what: string, call: string): void {
  if (layout.rows !== layout.columns) {
    throw new CudaArgumentError(
      `${call}: ${what} must be square, got ${layout.rows} x ${layout.columns}`,
    );
  }
}

/** Throws unless `b` has the dtype of `a`. */
export function assertSameDType(
  a: DeviceArray,
  b: DeviceArray,
  whatA: string,
  whatB: string,
  call: string,
): void {
  if (a.dtype !== b.dtype) {
    throw new CudaArgumentError(
      `${call}: ${whatB} is ${b.dtype} but ${whatA} is ${a.dtype}; both must have the same dtype`,
    );
  }
}

/**
 * Checks a right-hand side `b` (n x k matrix or length-n vector) against a square
 * coefficient matrix `a` of order `n`: same dtype, `n` rows.
 */
export function rightHandSideLayout(
  b: unknown,
  a: DeviceArray,
  n: number,
  call: string,
  whatA = 'a',
): MatrixLayout {
  const layout = matrixLayout(b, 'b', call, true);
  assertSameDType(a, b as DeviceArray, whatA, 'b', call);
  if (layout.rows !== n) {
    throw new CudaArgumentError(
      `${call}: b has ${layout.rows} rows but ${whatA} is ${n} x ${n}; they must match`,
    );
  }
  return layout;
}

/** Checks LAPACK pivots: a usable contiguous 1-D int32 array of `length` elements. */
export function assertPivots(value: unknown, length: number, call: string): void {
  assertArray(value, 'pivots', call);
  if (value.dtype !== 'int32') {
    throw new CudaArgumentError(`${call}: pivots must be int32, got ${value.dtype}`);
  }
  if (value.shape.length !== 1 || value.length !== length || !value.contiguous) {
    throw new CudaArgumentError(
      `${call}: pivots must be a contiguous 1-D array of ${length} elements, got shape ${JSON.stringify(value.shape)}`,
    );
  }
}

/** Throws unless `options` is undefined or an object (catches `lu(a, 'upper')`-style mistakes). */
export function assertOptions(options: unknown, call: string): void {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    throw new CudaArgumentError(`${call}: options must be an object, got ${describe(options)}`);
  }
}

/** The value of a boolean option (default false); throws when it is present but not a boolean. */
export function booleanOption(options: object, name: string, call: string): boolean {
  const value = (options as Record<string, unknown>)[name];
  if (value === undefined) return false;
  if (typeof value !== 'boolean') {
    throw new CudaArgumentError(
      `${call}: option ${name} must be a boolean, got ${describe(value)}`,
    );
  }
  return value;
}

/**
 * A boolean option that has a deprecated spelling too (luSolve's `transpose` for `transA`):
 * either is taken, and both given must say the same.
 */
export function renamedBooleanOption(
  options: object,
  name: string,
  oldName: string,
  call: string,
): boolean {
  const value = booleanOption(options, name, call);
  if ((options as Record<string, unknown>)[oldName] === undefined) return value;
  const old = booleanOption(options, oldName, call);
  if ((options as Record<string, unknown>)[name] !== undefined && old !== value) {
    throw new CudaArgumentError(
      `${call}: option ${name} is ${value} but ${oldName} (its deprecated spelling) is ${old}: pass ${name} only`,
    );
  }
  return old;
}

/**
 * Throws a CudaArgumentError unless `array` lives in `stream`'s context (the check every
 * library shares): call it right after resolving the stream, for every array argument.
 */
export function assertOnStream(
  call: string,
  what: string,
  array: DeviceArray,
  stream: Stream,
): void {
  assertSameContext(call, what, array, stream);
}
