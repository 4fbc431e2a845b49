/** The checks of cuBLAS's strided batched gemm (`checkStridedBatched` says what they are). */
import {
  assertApart,
  assertFits,
  type MatrixLayout,
  matrixExtent,
  type Operand,
  operandMatrixFootprint,
} from '@cuda-tasks/cudadrv';
import * as v from './validate.js';
import {
  type CheckedGemm,
  newCheckedGemm,
  type ProductOptions,
  productScalars,
  productShape,
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

/** A validated strided batched gemm: a gemm's dtype, shape and scalars, and the batch. */
export interface CheckedStridedBatched extends CheckedGemm {
  batch: number;
  strideA: number;
  strideB: number;
  strideC: number;
}

/** A new object for `checkStridedBatched` to fill. */
export function newCheckedStridedBatched(): CheckedStridedBatched {
  return { ...newCheckedGemm(), batch: 0, strideA: 0, strideB: 0, strideC: 0 };
}

/** Fails unless `value` (a stride or the batch, when given) is a non-negative integer. */
function assertCount(call: string, name: string, value: unknown): void {
  if (value !== undefined && !(Number.isSafeInteger(value) && (value as number) >= 0)) {
    v.fail(call, `${name} must be a non-negative integer, got ${JSON.stringify(value)}`);
  }
}

/** A 2-D or 3-D operand as a batch of matrices (a 2-D one must fit its one matrix). */
function batchedLayout(call: string, name: string, o: Operand, out: MatrixLayout): MatrixLayout {
  const rank = o.shape.length;
  if (rank === 3 || rank === 2) return v.matrixLayout(call, name, o, rank, out);
  v.fail(
    call,
    `${name} must be a 3-D array [rows, columns, batch] (or 2-D with an explicit stride), got shape ${JSON.stringify(o.shape)}`,
  );
}

/** Fails when a 3-D operand read at its own stride holds fewer than `batch` matrices. */
function assertHolds(call: string, name: string, o: Operand, stride: unknown, batch: number): void {
  if (o.shape.length === 3 && stride === undefined && o.shape[2]! < batch) {
    v.fail(call, `batch is ${batch}, but ${name} holds ${o.shape[2]} matrices`);
  }
}

/** Matrices a 3-D operand holds (-1 for a 2-D one). */
function held(o: Operand): number {
  return o.shape.length === 3 ? o.shape[2]! : -1;
}

/** Whether a 3-D operand holds another number of matrices than `batch`. */
function holdsOther(o: Operand, batch: number): boolean {
  return held(o) >= 0 && held(o) !== batch;
}

/** The batch count the 3-D operands agree on (batch not given). */
function impliedBatch(call: string, a: Operand, b: Operand, c: Operand): number {
  const batch = Math.max(held(a), held(b), held(c));
  if (batch < 0) v.fail(call, 'batch is required when no operand is 3-D');
  if (holdsOther(a, batch) || holdsOther(b, batch) || holdsOther(c, batch)) {
    const counts = [a, b, c]
      .map((o, i) => (held(o) < 0 ? '' : `${'abc'[i]}: ${held(o)}`))
      .filter((count) => count !== '')
      .join(', ');
    v.fail(
      call,
      `the operands hold different numbers of matrices (${counts}); pass batch to use the first ones`,
    );
  }
  return batch;
}

/**
 * Elements between an operand's consecutive matrices (given, its third stride, or 0: one
 * matrix for every product), once its `batch` matrices are found to lie in its buffer.
 */
function batchStride(
  call: string,
  name: string,
  o: Operand,
  layout: MatrixLayout,
  given: number | undefined,
  batch: number,
): number {
  const stride = given ?? (o.shape.length === 3 ? o.strides[2]! : 0);
  const extent = matrixExtent(layout);
  if (batch > 0 && extent > 0) assertFits(call, name, o, (batch - 1) * stride + extent);
  return stride;
}

/**
 * Everything `gemmStridedBatched` checks before its native call: C_i = alpha op(A_i) op(B_i) +
 * beta C_i for i < batch, X_i `strideX * i` elements after X's first. Operands are 3-D [rows,
 * columns, batch] (stride = strides[2]); a 2-D A or B serves every product (stride 0) unless a
 * stride is given. Every matrix lies in its buffer, the C matrices (written concurrently) lie
 * one after another or side by side within each column (any other strideC is refused, also one
 * whose matrices happen to interleave without sharing an element), and no C matrix shares a
 * byte with an A or B matrix.
 */
export function checkStridedBatched(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions & BatchOptions = v.NO_OPTIONS,
  out: CheckedStridedBatched = newCheckedStridedBatched(),
): CheckedStridedBatched {
  out.dtype = v.floatOperands(call, 'abc', a, b, c);
  productScalars(call, options, out);
  const oa = a as Operand;
  const ob = b as Operand;
  const oc = c as Operand;
  const la = batchedLayout(call, 'a', oa, v.layoutA);
  const lb = batchedLayout(call, 'b', ob, v.layoutB);
  const lc = batchedLayout(call, 'c', oc, v.layoutC);
  productShape(call, la, lb, lc, "c's matrices are", out);
  const { strideA, strideB, strideC } = options;
  assertCount(call, 'strideA', strideA);
  assertCount(call, 'strideB', strideB);
  assertCount(call, 'strideC', strideC);
  let batch = options.batch;
  if (batch !== undefined) {
    assertCount(call, 'batch', batch);
    assertHolds(call, 'a', oa, strideA, batch);
    assertHolds(call, 'b', ob, strideB, batch);
    assertHolds(call, 'c', oc, strideC, batch);
  } else {
    batch = impliedBatch(call, oa, ob, oc);
  }
  v.assertInt32(call, 'batch', '', batch);
  if (strideC === undefined && oc.shape.length === 2 && batch > 1) {
    v.fail(call, 'c is 2-D: pass strideC (the results of a batch cannot share one matrix)');
  }
  out.batch = batch;
  out.strideA = batchStride(call, 'a', oa, la, strideA, batch);
  out.strideB = batchStride(call, 'b', ob, lb, strideB, batch);
  const stride = (out.strideC = batchStride(call, 'c', oc, lc, strideC, batch));
  // The C matrices one after another, or side by side within each column (row blocks of one
  // tall matrix).
  const sequential = stride >= matrixExtent(lc);
  const interleaved = stride >= lc.rows && (batch - 1) * stride + lc.rows <= lc.leadingDimension;
  if (batch > 1 && matrixExtent(lc) > 0 && !sequential && !interleaved) {
    v.fail(
      call,
      `strideC = ${stride} makes the ${batch} result matrices (${lc.rows} x ${lc.columns}, leading dimension ${lc.leadingDimension}) overlap or interleave: pass strideC >= ${matrixExtent(lc)} (one after another), or place them side by side in each column (strideC >= ${lc.rows} and (batch - 1) * strideC + ${lc.rows} <= ${lc.leadingDimension})`,
    );
  }
  if (oc.buffer === oa.buffer || oc.buffer === ob.buffer) {
    operandMatrixFootprint(v.written, oc, lc, batch, stride);
    if (oc.buffer === oa.buffer) {
      const readA = operandMatrixFootprint(v.read, oa, la, batch, out.strideA);
      assertApart(call, 'c', v.written, 'a', readA);
    }
    if (oc.buffer === ob.buffer) {
      const readB = operandMatrixFootprint(v.read, ob, lb, batch, out.strideB);
      assertApart(call, 'c', v.written, 'b', readB);
    }
  }
  return out;
}
