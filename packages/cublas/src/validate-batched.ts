/**
 * The checks of cuBLAS's strided batched gemm: C_i = alpha op(A_i) op(B_i) + beta C_i, each
 * matrix `stride` elements after the one before. Built from the operand rules of
 * `validate.ts` and the product's shape of `validate-gemm.ts`.
 */
import {
  assertApart,
  assertFits,
  type FloatDType,
  type MatrixLayout,
  matrixExtent,
  type Operand,
  operandMatrixFootprint,
} from '@cuda-tasks/cudadrv';
import {
  assertInt32,
  fail,
  layoutA,
  layoutB,
  layoutC,
  matrixLayout,
  NO_OPTIONS,
  read,
  written,
} from './validate.js';
import {
  floatProduct,
  type GemmShape,
  newCheckedGemm,
  type ProductOptions,
  type ProductScalars,
  productLayoutShape,
} from './validate-gemm.js';

/** Batch options of `gemmStridedBatched` (element strides between consecutive matrices). */
export interface BatchOptions {
  /** Number of products (default: the operands' third dimension). */
  batch?: number;
  /** Elements between consecutive A matrices (default: a.strides[2]; 0 for a 2-D `a`: the same A for every product). */
  strideA?: number;
  /** Elements between consecutive B matrices (default: b.strides[2]; 0 for a 2-D `b`). */
  strideB?: number;
  /** Elements between consecutive C matrices (default: c.strides[2]; a 2-D `c` needs it when batch > 1). */
  strideC?: number;
}

/** What cublas<t>gemmStridedBatched takes besides pointers and scalars. */
export interface StridedBatchedShape extends GemmShape {
  batch: number;
  strideA: number;
  strideB: number;
  strideC: number;
}

function assertCount(call: string, name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    fail(call, `${name} must be a non-negative integer, got ${JSON.stringify(value)}`);
  }
}

/** A 2-D or 3-D operand as a batch of matrices. */
function batchedLayout(
  call: string,
  name: string,
  operand: Operand,
  out: MatrixLayout,
): MatrixLayout {
  const rank = operand.shape.length;
  if (rank === 3 || rank === 2) return matrixLayout(call, name, operand, rank, out);
  fail(
    call,
    `${name} must be a 3-D array [rows, columns, batch] (or 2-D with an explicit stride), got shape ${JSON.stringify(operand.shape)}`,
  );
}

/** Fails when a 3-D operand read at its own stride holds fewer than `batch` matrices. */
function assertHolds(
  call: string,
  name: string,
  operand: Operand,
  stride: number | undefined,
  batch: number,
): void {
  if (operand.shape.length === 3 && stride === undefined && operand.shape[2]! < batch) {
    fail(call, `batch is ${batch}, but ${name} holds ${operand.shape[2]} matrices`);
  }
}

/** Whether a 3-D operand holds another number of matrices than `batch`. */
function holdsOther(operand: Operand, batch: number): boolean {
  return operand.shape.length === 3 && operand.shape[2] !== batch;
}

/** The batch count the 3-D operands agree on (batch not given). */
function impliedBatch(call: string, a: Operand, b: Operand, c: Operand): number {
  const first =
    a.shape.length === 3 ? a : b.shape.length === 3 ? b : c.shape.length === 3 ? c : undefined;
  if (first === undefined) fail(call, 'batch is required when no operand is 3-D');
  const batch = first.shape[2]!;
  if (holdsOther(a, batch) || holdsOther(b, batch) || holdsOther(c, batch)) {
    const counts = [a, b, c]
      .map((operand, i) => (operand.shape.length === 3 ? `${'abc'[i]}: ${operand.shape[2]}` : ''))
      .filter((count) => count !== '')
      .join(', ');
    fail(
      call,
      `the operands hold different numbers of matrices (${counts}); pass batch to use the first ones`,
    );
  }
  return batch;
}

/** Elements between an operand's consecutive matrices: given, its third stride, or 0. */
function batchStride(
  call: string,
  name: string,
  operand: Operand,
  given: number | undefined,
  batch: number,
): number {
  if (given !== undefined) return given;
  if (operand.shape.length === 3) return operand.strides[2]!;
  if (name === 'c' && batch > 1) {
    fail(call, 'c is 2-D: pass strideC (the results of a batch cannot share one matrix)');
  }
  return 0;
}

/** Fails unless every one of `batch` matrices, `stride` apart, lies in the operand's buffer. */
function assertBatchFits(
  call: string,
  name: string,
  operand: Operand,
  layout: MatrixLayout,
  batch: number,
  stride: number,
): void {
  const extent = matrixExtent(layout);
  if (batch > 0 && extent > 0) assertFits(call, name, operand, (batch - 1) * stride + extent);
}

/**
 * Validates a strided batched gemm: C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch,
 * where X_i starts `strideX * i` elements after X's first. Operands are 3-D [rows, columns,
 * batch] by default (stride = strides[2]); a 2-D A or B is reused for every product (stride
 * 0) unless a stride is given. Every matrix must lie inside its buffer, and the C matrices
 * must not overlap (they are written concurrently).
 */
function stridedBatchedShape<T extends StridedBatchedShape>(
  call: string,
  a: Operand,
  b: Operand,
  c: Operand,
  transA: boolean,
  transB: boolean,
  options: BatchOptions,
  out: T,
): T {
  const la = batchedLayout(call, 'a', a, layoutA);
  const lb = batchedLayout(call, 'b', b, layoutB);
  const lc = batchedLayout(call, 'c', c, layoutC);
  productLayoutShape(call, la, lb, lc, transA, transB, "c's matrices are", out);
  const { strideA, strideB, strideC } = options;
  if (strideA !== undefined) assertCount(call, 'strideA', strideA);
  if (strideB !== undefined) assertCount(call, 'strideB', strideB);
  if (strideC !== undefined) assertCount(call, 'strideC', strideC);

  // The batch count: given, or the third dimension the 3-D operands agree on.
  let batch: number;
  if (options.batch !== undefined) {
    assertCount(call, 'batch', options.batch);
    batch = options.batch;
    assertHolds(call, 'a', a, strideA, batch);
    assertHolds(call, 'b', b, strideB, batch);
    assertHolds(call, 'c', c, strideC, batch);
  } else {
    batch = impliedBatch(call, a, b, c);
  }
  assertInt32(call, 'batch', '', batch);
  out.batch = batch;
  out.strideA = batchStride(call, 'a', a, strideA, batch);
  out.strideB = batchStride(call, 'b', b, strideB, batch);
  out.strideC = batchStride(call, 'c', c, strideC, batch);

  // Every matrix of every batch must lie in its buffer.
  assertBatchFits(call, 'a', a, la, batch, out.strideA);
  assertBatchFits(call, 'b', b, lb, batch, out.strideB);
  assertBatchFits(call, 'c', c, lc, batch, out.strideC);

  // The C matrices are written concurrently: they must not overlap.
  if (batch > 1 && matrixExtent(lc) > 0) {
    const stride = out.strideC;
    const sequential = stride >= matrixExtent(lc);
    // Side by side within each column (e.g. row blocks of one tall matrix).
    const interleaved = stride >= lc.rows && (batch - 1) * stride + lc.rows <= lc.leadingDimension;
    if (!sequential && !interleaved) {
      fail(
        call,
        `strideC = ${stride} makes the ${batch} result matrices (${lc.rows} x ${lc.columns}, leading dimension ${lc.leadingDimension}) overlap`,
      );
    }
  }

  // No C matrix may share a byte with any A or B matrix.
  if (c.buffer === a.buffer || c.buffer === b.buffer) {
    operandMatrixFootprint(written, c, lc, batch, out.strideC);
    if (c.buffer === a.buffer) {
      assertApart(call, 'c', written, 'a', operandMatrixFootprint(read, a, la, batch, out.strideA));
    }
    if (c.buffer === b.buffer) {
      assertApart(call, 'c', written, 'b', operandMatrixFootprint(read, b, lb, batch, out.strideB));
    }
  }
  return out;
}

/** A validated strided batched gemm. */
export interface CheckedStridedBatched extends StridedBatchedShape, ProductScalars {
  dtype: FloatDType;
}

/** A new object for `checkStridedBatched` to fill. */
export function newCheckedStridedBatched(): CheckedStridedBatched {
  return { ...newCheckedGemm(), batch: 0, strideA: 0, strideB: 0, strideC: 0 };
}

/** Everything `gemmStridedBatched` checks before its native call. */
export function checkStridedBatched(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions & BatchOptions = NO_OPTIONS,
  out: CheckedStridedBatched = newCheckedStridedBatched(),
): CheckedStridedBatched {
  floatProduct(call, a, b, c, options, out);
  return stridedBatchedShape(
    call,
    a as Operand,
    b as Operand,
    c as Operand,
    out.transA,
    out.transB,
    options,
    out,
  );
}
