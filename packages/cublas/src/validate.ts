/**
 * Pure argument checks for the cuBLAS wrappers: dtypes, shapes, leading dimensions, vector
 * increments and batch strides. Nothing here touches native code, so every rule is unit
 * tested on plain objects; the wrappers call these before any native call.
 *
 * An output must not share memory with an input (cuBLAS leaves such a call undefined): each
 * check compares the bytes the routine writes with the bytes it reads, exactly (interleaved
 * views of one allocation that touch different elements pass). C read with beta and written
 * (gemm), y in axpy and gemv, and x in scal are in place by definition and allowed.
 *
 * Each check writes what it finds into the object passed last and returns it: a wrapper
 * passes one it reuses on every call, so checking allocates nothing (messages are built only
 * on failure). Without that argument the check fills a new object.
 */
import { CudaArgumentError, type DType, type FloatDType } from '@cuda-tasks/cudadrv';
import {
  assertApart,
  assertFits,
  assertOperand,
  describeValue,
  type Footprint,
  isFloatDType,
  type MatrixLayout,
  matrixExtent,
  newFootprint,
  newMatrixLayout,
  newVectorLayout,
  type Operand,
  operandMatrixFootprint,
  operandVectorFootprint,
  readMatrixLayout,
  readVectorLayout,
  sharedDType,
  type VectorLayout,
  vectorExtent,
} from '@cuda-tasks/cudadrv/internal';

export type { MatrixLayout, VectorLayout };

/** What the checks read from an operand (a DeviceArray has all of it). */
export type OperandLike = Operand;

/**
 * The dtypes the S/D routines take.
 * @deprecated The same type as `FloatDType` of `@cuda-tasks/cudadrv`, the one name for it;
 * this alias goes in the next minor release.
 */
export type BlasDType = FloatDType;

/** The dtypes `gemmEx` takes for A and B. */
export type GemmExInputDType = 'float16' | 'bfloat16' | 'float32';

const INT32_MAX = 2 ** 31 - 1;

function fail(call: string, message: string): never {
  throw new CudaArgumentError(`${call}: ${message}`);
}

/**
 * Throws unless `value` fits a C `int` (cuBLAS's m, n, k, ld, inc, batchCount). The message
 * names `${name}${what}`, joined only on failure (the checks run on every call).
 */
function assertInt32(call: string, name: string, what: string, value: number): void {
  if (value > INT32_MAX) {
    fail(call, `${name}${what} = ${value} exceeds cuBLAS's 32-bit int limit (${INT32_MAX})`);
  }
}

/**
 * Checks a routine's operands (`names` holds their one-letter names in order, e.g. 'abc'):
 * each a usable array, all float32 or all float64; returns that dtype, or fails naming each
 * operand's dtype.
 */
function floatOperands(
  call: string,
  names: string,
  first: unknown,
  second?: unknown,
  third?: unknown,
): FloatDType {
  assertOperand(call, names[0]!, first);
  if (names.length > 1) assertOperand(call, names[1]!, second);
  if (names.length > 2) assertOperand(call, names[2]!, third);
  const dtype = sharedDType(first, second as Operand | undefined, third as Operand | undefined);
  if (dtype !== undefined && isFloatDType(dtype)) return dtype;
  const operands = [first, second, third] as Operand[];
  const got = [...names].map((name, i) => `${name}: ${operands[i]!.dtype}`).join(', ');
  fail(call, `operands must all be float32 or float64 and of one dtype, got ${got}`);
}

/**
 * The matrix layout of a 1-D (a column) or 2-D operand, or of the first two dimensions of a
 * 3-D one (`dimensions: 3`). Rejects views whose rows are not contiguous (strides[0] !== 1)
 * and leading dimensions below the row count.
 */
export function matrixLayout(
  call: string,
  name: string,
  operand: Operand,
  dimensions: 2 | 3 = 2,
  out: MatrixLayout = newMatrixLayout(),
): MatrixLayout {
  const shape = operand.shape;
  const allowed = dimensions === 2 ? shape.length === 1 || shape.length === 2 : shape.length === 3;
  if (!allowed) {
    fail(
      call,
      dimensions === 2
        ? `${name} must be a 1-D or 2-D array, got shape ${JSON.stringify(shape)}${shape.length === 3 ? ' (use gemmStridedBatched for batches)' : ''}`
        : `${name} must be a 3-D array [rows, columns, batch], got shape ${JSON.stringify(shape)}`,
    );
  }
  if (operand.strides[0] !== 1) {
    fail(
      call,
      `${name} has a row stride of ${operand.strides[0]}; cuBLAS needs contiguous columns (strides[0] === 1), copy() the view first`,
    );
  }
  const { rows, columns, leadingDimension } = readMatrixLayout(shape, operand.strides, out);
  if (!Number.isSafeInteger(leadingDimension) || leadingDimension < Math.max(1, rows)) {
    fail(
      call,
      `${name} has leading dimension ${leadingDimension}, less than its ${rows} rows (columns overlap)`,
    );
  }
  assertInt32(call, name, ' rows', rows);
  assertInt32(call, name, ' columns', columns);
  assertInt32(call, name, ' leading dimension', leadingDimension);
  if (dimensions === 2) assertFits(call, name, operand, matrixExtent(out));
  return out;
}

/**
 * The vector layout of a 1-D array (increment = strides[0]) or of a 2-D array with one
 * column (increment = strides[0]) or one row (increment = strides[1], the leading dimension).
 */
export function vectorLayout(
  call: string,
  name: string,
  operand: Operand,
  out: VectorLayout = newVectorLayout(),
): VectorLayout {
  if (!readVectorLayout(operand.shape, operand.strides, out)) {
    fail(
      call,
      `${name} must be a vector (1-D, or 2-D with one row or one column), got shape ${JSON.stringify(operand.shape)}`,
    );
  }
  const { length, increment } = out;
  if (!Number.isSafeInteger(increment) || increment < 1) {
    fail(call, `${name} has element stride ${increment}; cuBLAS needs a positive increment`);
  }
  assertInt32(call, name, ' length', length);
  assertInt32(call, name, ' increment', increment);
  assertFits(call, name, operand, vectorExtent(out));
  return out;
}

/** Checks that `value` is a number (alpha, beta). */
export function assertScalar(call: string, name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number')
    fail(call, `${name} must be a number, got ${describeValue(value)}`);
}

// Options default when undefined only (as destructuring defaults do): null stays an error.

/** A transpose flag: true, false, or undefined (false). */
function flagOption(call: string, name: string, value: unknown): boolean {
  if (value === undefined) return false;
  if (typeof value !== 'boolean') {
    fail(call, `${name} must be true or false, got ${JSON.stringify(value)}`);
  }
  return value;
}

/**
 * A transpose flag that has a deprecated spelling too (gemv's `trans` for `transA`): either
 * is taken, and both given must say the same.
 */
function renamedFlagOption(
  call: string,
  name: string,
  value: unknown,
  oldName: string,
  oldValue: unknown,
): boolean {
  const flag = flagOption(call, name, value);
  if (oldValue === undefined) return flag;
  const old = flagOption(call, oldName, oldValue);
  if (value !== undefined && old !== flag) {
    fail(
      call,
      `${name} is ${flag} but ${oldName} (its deprecated spelling) is ${old}: pass ${name} only`,
    );
  }
  return old;
}

/** A scalar (alpha, beta): a number, or undefined (`fallback`). */
function scalarOption(call: string, name: string, value: unknown, fallback: number): number {
  if (value === undefined) return fallback;
  assertScalar(call, name, value);
  return value;
}

function assertOptionsObject(call: string, options: unknown): asserts options is object {
  if (typeof options !== 'object' || options === null) {
    fail(call, `options must be an object, got ${describeValue(options)}`);
  }
}

/** m, n, k and the leading dimensions of a gemm: C (m x n) = op(A) (m x k) op(B) (k x n). */
export interface GemmShape {
  m: number;
  n: number;
  k: number;
  lda: number;
  ldb: number;
  ldc: number;
}

/** The m, n and k of a product op(A) op(B). */
interface ProductShape {
  m: number;
  n: number;
  k: number;
}

function opName(name: string, transpose: boolean): string {
  return transpose ? `${name}^T` : name;
}

/** The m, n and k of `op(a) * op(b)`, checking that the inner dimensions agree. */
function productShape<T extends ProductShape>(
  call: string,
  a: MatrixLayout,
  b: MatrixLayout,
  transA: boolean,
  transB: boolean,
  out: T,
): T {
  const m = transA ? a.columns : a.rows;
  const k = transA ? a.rows : a.columns;
  const kb = transB ? b.columns : b.rows;
  const n = transB ? b.rows : b.columns;
  if (k !== kb) {
    fail(
      call,
      `inner dimensions differ: ${opName('a', transA)} is ${m} x ${k}, ${opName('b', transB)} is ${kb} x ${n}`,
    );
  }
  out.m = m;
  out.n = n;
  out.k = k;
  return out;
}

// Scratch layouts of the checks (one call at a time: the event loop's thread).
const layoutA = newMatrixLayout();
const layoutB = newMatrixLayout();
const layoutC = newMatrixLayout();
const layoutX = newVectorLayout();
const layoutY = newVectorLayout();
const written: Footprint = newFootprint();
const read: Footprint = newFootprint();

/** Fails when output matrix C (of `c`) shares a byte with input matrix `layout` of `operand`. */
function assertMatrixApart(
  call: string,
  c: Operand,
  lc: MatrixLayout,
  name: string,
  operand: Operand,
  layout: MatrixLayout,
): void {
  if (c.buffer !== operand.buffer) return;
  assertApart(
    call,
    'c',
    operandMatrixFootprint(written, c, lc),
    name,
    operandMatrixFootprint(read, operand, layout),
  );
}

/**
 * C = alpha op(A) op(B) + beta C: the cuBLAS dimensions of `a`, `b`, `c` (1-D or 2-D with
 * contiguous columns), written into `out`; dtypes are checked by the caller.
 */
function gemmShape<T extends GemmShape>(
  call: string,
  a: Operand,
  b: Operand,
  c: Operand,
  transA: boolean,
  transB: boolean,
  out: T,
): T {
  const la = matrixLayout(call, 'a', a, 2, layoutA);
  const lb = matrixLayout(call, 'b', b, 2, layoutB);
  const lc = matrixLayout(call, 'c', c, 2, layoutC);
  const { m, n } = productShape(call, la, lb, transA, transB, out);
  if (lc.rows !== m || lc.columns !== n) {
    fail(
      call,
      `c is ${lc.rows} x ${lc.columns}, but ${opName('a', transA)} * ${opName('b', transB)} is ${m} x ${n}`,
    );
  }
  assertMatrixApart(call, c, lc, 'a', a, la);
  assertMatrixApart(call, c, lc, 'b', b, lb);
  out.lda = la.leadingDimension;
  out.ldb = lb.leadingDimension;
  out.ldc = lc.leadingDimension;
  return out;
}

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
  const { m, n } = productShape(call, la, lb, transA, transB, out);
  if (lc.rows !== m || lc.columns !== n) {
    fail(
      call,
      `c's matrices are ${lc.rows} x ${lc.columns}, but ${opName('a', transA)} * ${opName('b', transB)} is ${m} x ${n}`,
    );
  }
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

  out.lda = la.leadingDimension;
  out.ldb = lb.leadingDimension;
  out.ldc = lc.leadingDimension;
  return out;
}

/** The cudaDataType_t of each dtype `gemmEx` accepts (library_types.h). */
const GEMM_EX_DATA_TYPES: Readonly<Partial<Record<DType, number>>> = {
  float32: 0, // CUDA_R_32F
  float16: 2, // CUDA_R_16F
  bfloat16: 14, // CUDA_R_16BF
};

/** The cudaDataType_t of gemmEx's operands. */
interface GemmExTypes {
  aType: number;
  bType: number;
  cType: number;
}

/**
 * Validates the dtypes of `gemmEx`: A and B both float16, both bfloat16 or both float32; C
 * float32 or the inputs' dtype (cuBLAS's CUBLAS_COMPUTE_32F combinations).
 */
function gemmExTypes<T extends GemmExTypes>(
  call: string,
  a: Operand,
  b: Operand,
  c: Operand,
  out: T,
): T {
  const input = a.dtype;
  if (b.dtype !== input || (input !== 'float16' && input !== 'bfloat16' && input !== 'float32')) {
    fail(
      call,
      `a and b must both be float16, both bfloat16 or both float32, got a: ${input}, b: ${b.dtype}`,
    );
  }
  if (c.dtype !== 'float32' && c.dtype !== input) {
    fail(call, `c must be float32 or ${input} (like a and b), got ${c.dtype}`);
  }
  out.aType = GEMM_EX_DATA_TYPES[input]!;
  out.bType = GEMM_EX_DATA_TYPES[input]!;
  out.cType = GEMM_EX_DATA_TYPES[c.dtype]!;
  return out;
}

/** Options every gemm-like call takes (scalars and transposes). */
export interface ProductOptions {
  /** Use A^T instead of A (default false). */
  transA?: boolean;
  /** Use B^T instead of B (default false). */
  transB?: boolean;
  /** Scales the product (default 1). */
  alpha?: number;
  /** Scales C before adding (default 0: C is only written). */
  beta?: number;
}

/** A product's transposes and scalars, as checked from its options. */
interface ProductScalars {
  transA: boolean;
  transB: boolean;
  alpha: number;
  beta: number;
}

/** A product's transposes and scalars from its options, with their defaults. */
function productScalars<T extends ProductScalars>(
  call: string,
  options: ProductOptions,
  out: T,
): T {
  assertOptionsObject(call, options);
  out.transA = flagOption(call, 'transA', options.transA);
  out.transB = flagOption(call, 'transB', options.transB);
  out.alpha = scalarOption(call, 'alpha', options.alpha, 1);
  out.beta = scalarOption(call, 'beta', options.beta, 0);
  return out;
}

/** A product's scalars and shape before a check fills them in. */
const DEFAULT_SCALARS: Readonly<ProductScalars> = {
  transA: false,
  transB: false,
  alpha: 1,
  beta: 0,
};
const NO_SHAPE: Readonly<GemmShape> = { m: 0, n: 0, k: 0, lda: 0, ldb: 0, ldc: 0 };

/** Options passed as none (a shared object: a call allocates nothing). */
const NO_OPTIONS: ProductOptions & BatchOptions & GemvOptions = Object.freeze({});

/** A validated gemm: its dtype, dimensions and scalars. */
export interface CheckedGemm extends GemmShape, ProductScalars {
  dtype: FloatDType;
}

/** A new object for `checkGemm` to fill. */
export function newCheckedGemm(): CheckedGemm {
  return { dtype: 'float32', ...DEFAULT_SCALARS, ...NO_SHAPE };
}

/** Everything `gemm` checks before its native call, in order: arrays, dtypes, options, shapes. */
export function checkGemm(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions = NO_OPTIONS,
  out: CheckedGemm = newCheckedGemm(),
): CheckedGemm {
  out.dtype = floatOperands(call, 'abc', a, b, c);
  productScalars(call, options, out);
  return gemmShape(call, a as Operand, b as Operand, c as Operand, out.transA, out.transB, out);
}

/** What `matmul` allocates: the result's dtype and shape. */
export interface CheckedMatmul {
  dtype: FloatDType;
  m: number;
  n: number;
}

// Scratch of checkMatmul, whose result has no room for them.
const matmulScalars: ProductScalars = { ...DEFAULT_SCALARS };
const matmulShape: ProductShape = { m: 0, n: 0, k: 0 };

/** What `matmul` checks before allocating its result; returns the result's dtype and shape. */
export function checkMatmul(
  call: string,
  a: unknown,
  b: unknown,
  options: ProductOptions = NO_OPTIONS,
  out: CheckedMatmul = { dtype: 'float32', m: 0, n: 0 },
): CheckedMatmul {
  out.dtype = floatOperands(call, 'ab', a, b);
  const { transA, transB } = productScalars(call, options, matmulScalars);
  const la = matrixLayout(call, 'a', a as Operand, 2, layoutA);
  const lb = matrixLayout(call, 'b', b as Operand, 2, layoutB);
  const { m, n } = productShape(call, la, lb, transA, transB, matmulShape);
  out.m = m;
  out.n = n;
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
  out.dtype = floatOperands(call, 'abc', a, b, c);
  productScalars(call, options, out);
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

/** A validated gemmEx: cudaDataType_t of each operand, dimensions and scalars. */
export interface CheckedGemmEx extends GemmShape, GemmExTypes, ProductScalars {}

/** A new object for `checkGemmEx` to fill. */
export function newCheckedGemmEx(): CheckedGemmEx {
  return { aType: 0, bType: 0, cType: 0, ...DEFAULT_SCALARS, ...NO_SHAPE };
}

/** Everything `gemmEx` checks before its native call. */
export function checkGemmEx(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions = NO_OPTIONS,
  out: CheckedGemmEx = newCheckedGemmEx(),
): CheckedGemmEx {
  assertOperand(call, 'a', a);
  assertOperand(call, 'b', b);
  assertOperand(call, 'c', c);
  gemmExTypes(call, a, b, c, out);
  productScalars(call, options, out);
  return gemmShape(call, a, b, c, out.transA, out.transB, out);
}

/** Options of `gemv`. */
export interface GemvOptions {
  /** Use A^T instead of A (default false). */
  transA?: boolean;
  /**
   * Use A^T instead of A.
   * @deprecated Spelled `transA` across the libraries; `trans` is still taken (given with
   * `transA`, both must agree) and goes in the next minor release.
   */
  trans?: boolean;
  /** Scales A x (default 1). */
  alpha?: number;
  /** Scales y before adding (default 0). */
  beta?: number;
}

/** A validated gemv: A is m x n as stored, x and y are vectors. */
export interface CheckedGemv {
  dtype: FloatDType;
  trans: boolean;
  alpha: number;
  beta: number;
  m: number;
  n: number;
  lda: number;
  incx: number;
  incy: number;
}

/** A new object for `checkGemv` to fill. */
export function newCheckedGemv(): CheckedGemv {
  return {
    dtype: 'float32',
    trans: false,
    alpha: 1,
    beta: 0,
    m: 0,
    n: 0,
    lda: 0,
    incx: 0,
    incy: 0,
  };
}

/** Everything `gemv` checks before its native call: y = alpha op(A) x + beta y. */
export function checkGemv(
  call: string,
  a: unknown,
  x: unknown,
  y: unknown,
  options: GemvOptions = NO_OPTIONS,
  out: CheckedGemv = newCheckedGemv(),
): CheckedGemv {
  out.dtype = floatOperands(call, 'axy', a, x, y);
  return gemvShape(call, a as Operand, x as Operand, y as Operand, options, out);
}

/** gemv's options, shapes and overlap, once its operands passed. */
function gemvShape(
  call: string,
  a: Operand,
  x: Operand,
  y: Operand,
  options: GemvOptions,
  out: CheckedGemv,
): CheckedGemv {
  assertOptionsObject(call, options);
  const trans = renamedFlagOption(call, 'transA', options.transA, 'trans', options.trans);
  out.alpha = scalarOption(call, 'alpha', options.alpha, 1);
  out.beta = scalarOption(call, 'beta', options.beta, 0);
  const la = matrixLayout(call, 'a', a, 2, layoutA);
  const vx = vectorLayout(call, 'x', x, layoutX);
  const vy = vectorLayout(call, 'y', y, layoutY);
  const rows = trans ? la.columns : la.rows;
  const columns = trans ? la.rows : la.columns;
  if (vx.length !== columns) {
    fail(call, `x has ${vx.length} elements, ${opName('a', trans)} has ${columns} columns`);
  }
  if (vy.length !== rows) {
    fail(call, `y has ${vy.length} elements, ${opName('a', trans)} has ${rows} rows`);
  }
  if (y.buffer === a.buffer || y.buffer === x.buffer) {
    operandVectorFootprint(written, y, vy);
    if (y.buffer === a.buffer)
      assertApart(call, 'y', written, 'a', operandMatrixFootprint(read, a, la));
    if (y.buffer === x.buffer)
      assertApart(call, 'y', written, 'x', operandVectorFootprint(read, x, vx));
  }
  out.trans = trans;
  out.m = la.rows;
  out.n = la.columns;
  out.lda = la.leadingDimension;
  out.incx = vx.increment;
  out.incy = vy.increment;
  return out;
}

/** A validated one-vector routine (nrm2, asum, iamax, scal). */
export interface CheckedVector {
  dtype: FloatDType;
  n: number;
  incx: number;
}

/** Everything a one-vector routine (nrm2, asum, iamax, scal) checks. */
export function checkVector(
  call: string,
  x: unknown,
  out: CheckedVector = { dtype: 'float32', n: 0, incx: 0 },
): CheckedVector {
  out.dtype = floatOperands(call, 'x', x);
  const vx = vectorLayout(call, 'x', x as Operand, layoutX);
  out.n = vx.length;
  out.incx = vx.increment;
  return out;
}

/** A validated two-vector routine (axpy, dot). */
export interface CheckedVectorPair extends CheckedVector {
  incy: number;
}

/**
 * Everything a two-vector routine (axpy, dot) checks: two vectors of one length and dtype;
 * with `writesY` (axpy), that y shares no byte with x.
 */
export function checkVectorPair(
  call: string,
  x: unknown,
  y: unknown,
  out: CheckedVectorPair = { dtype: 'float32', n: 0, incx: 0, incy: 0 },
  writesY = false,
): CheckedVectorPair {
  out.dtype = floatOperands(call, 'xy', x, y);
  const vx = vectorLayout(call, 'x', x as Operand, layoutX);
  const vy = vectorLayout(call, 'y', y as Operand, layoutY);
  if (vx.length !== vy.length) {
    fail(call, `x has ${vx.length} elements, y has ${vy.length}`);
  }
  if (writesY && (x as Operand).buffer === (y as Operand).buffer) {
    operandVectorFootprint(written, y as Operand, vy);
    assertApart(call, 'y', written, 'x', operandVectorFootprint(read, x as Operand, vx));
  }
  out.n = vx.length;
  out.incx = vx.increment;
  out.incy = vy.increment;
  return out;
}
