/**
 * An operand as the BLAS-style libraries see it: a column-major matrix (rows, columns, a
 * leading dimension) or a vector (a length and an increment), whether it fits the buffer it
 * views, and the bytes a routine touches of it (a Footprint, for the overlap check). Each
 * library builds its own rules from these (cuBLAS's 32-bit limits and leading dimensions per
 * routine, cuSOLVER's non-empty matrices). Pure; every function writes into an object the
 * caller passes and reuses, so a check allocates nothing.
 */
import { dtypeBytes } from '../dtype.js';
import { CudaArgumentError } from '../errors.js';
import type { Operand } from './array-checks.js';
import { type Footprint, matrixFootprint, vectorFootprint } from './operands.js';

/** A matrix as the libraries take it: rows x columns, column-major with a leading dimension. */
export interface MatrixLayout {
  /** Rows (the first dimension). */
  rows: number;
  /** Columns (1 for a vector standing for one column). */
  columns: number;
  /** Elements between the starts of two columns (`lda`). */
  leadingDimension: number;
}

/** A vector as the libraries take it: `length` elements, `increment` elements apart. */
export interface VectorLayout {
  /** Elements. */
  length: number;
  /** Elements between the starts of two consecutive elements (incx); at least 1. */
  increment: number;
}

/** An empty layout for `readMatrixLayout` to fill (reuse it). */
export function newMatrixLayout(): MatrixLayout {
  return { rows: 0, columns: 0, leadingDimension: 0 };
}

/** An empty layout for `readVectorLayout` to fill (reuse it). */
export function newVectorLayout(): VectorLayout {
  return { length: 0, increment: 0 };
}

/**
 * Reads the first two dimensions of `shape` (a 1-D array is one column) as a column-major
 * matrix into `out`: rows = shape[0], columns = shape[1], leading dimension = strides[1];
 * where the column stride is never used to step (one column or none, or no rows) the leading
 * dimension is max(1, rows). Checks nothing: the caller requires `strides[0] === 1` (rows
 * adjacent) and a leading dimension of at least max(1, rows) (columns apart), as its
 * library words it.
 */
export function readMatrixLayout(
  shape: readonly number[],
  strides: readonly number[],
  out: MatrixLayout,
): MatrixLayout {
  const rows = shape[0]!;
  const columns = shape.length > 1 ? shape[1]! : 1;
  out.rows = rows;
  out.columns = columns;
  out.leadingDimension =
    shape.length === 1 || columns <= 1 || rows === 0 ? Math.max(1, rows) : strides[1]!;
  return out;
}

/**
 * Reads a vector into `out`: a 1-D array, or a 2-D one with one column (increment
 * strides[0]) or one row (increment strides[1]). Returns false, leaving `out` as it was, for
 * any other shape. The increment of a vector of fewer than two elements is never used to
 * step: it reads as at least 1.
 */
export function readVectorLayout(
  shape: readonly number[],
  strides: readonly number[],
  out: VectorLayout,
): boolean {
  let length: number;
  let increment: number;
  if (shape.length === 1 || (shape.length === 2 && shape[1] === 1)) {
    length = shape[0]!;
    increment = strides[0]!;
  } else if (shape.length === 2 && shape[0] === 1) {
    length = shape[1]!;
    increment = strides[1]!;
  } else {
    return false;
  }
  out.length = length;
  out.increment = length <= 1 ? Math.max(1, increment) : increment;
  return true;
}

/** One past the last element a matrix touches, from its first (0 for an empty one). */
export function matrixExtent(layout: MatrixLayout): number {
  if (layout.rows === 0 || layout.columns === 0) return 0;
  return (layout.columns - 1) * layout.leadingDimension + layout.rows;
}

/** One past the last element a vector touches, from its first (0 for an empty one). */
export function vectorExtent(layout: VectorLayout): number {
  return layout.length === 0 ? 0 : (layout.length - 1) * layout.increment + 1;
}

/** Elements from the operand's first element to the end of its buffer. */
export function elementCapacity(operand: Operand): number {
  return Math.floor(operand.buffer.byteLength / dtypeBytes(operand.dtype)) - operand.offset;
}

/**
 * Throws a CudaArgumentError unless the elements a routine touches lie inside the operand's
 * buffer: `extent` is one past the largest element index touched, relative to the first
 * element (`matrixExtent`, `vectorExtent`, or a batch's).
 */
export function assertFits(call: string, name: string, operand: Operand, extent: number): void {
  // An operand touching no element (extent 0) fits wherever it starts.
  if (extent <= 0 || extent <= elementCapacity(operand)) return;
  throw new CudaArgumentError(
    `${call}: ${name} would reach element ${extent - 1} past its first, beyond the ${elementCapacity(operand)} elements its buffer holds from there`,
  );
}

/**
 * Fills `out` with the bytes a routine touches of a matrix operand (`blocks` matrices
 * `blockStride` elements apart), for `assertApart`.
 */
export function operandMatrixFootprint(
  out: Footprint,
  operand: Operand,
  layout: MatrixLayout,
  blocks = 1,
  blockStride = 0,
): Footprint {
  return matrixFootprint(
    out,
    operand.buffer,
    operand.offset,
    dtypeBytes(operand.dtype),
    layout.rows,
    layout.columns,
    layout.leadingDimension,
    blocks,
    blockStride,
  );
}

/** Fills `out` with the bytes a routine touches of a vector operand, for `assertApart`. */
export function operandVectorFootprint(
  out: Footprint,
  operand: Operand,
  layout: VectorLayout,
): Footprint {
  return vectorFootprint(
    out,
    operand.buffer,
    operand.offset,
    dtypeBytes(operand.dtype),
    layout.length,
    layout.increment,
  );
}
