/**
 * Pure argument checks for the cuBLAS wrappers: dtypes, shapes, leading dimensions, vector
 * increments and batch strides. Nothing here touches native code, so every rule is unit
 * tested on plain objects; the wrappers call these before any native call.
 */
import { CudaArgumentError, DisposedError, type DType } from '@cuda-tasks/cudadrv';

/** What the checks read from an operand (a DeviceArray has all of it). */
export interface OperandLike {
  readonly dtype: DType;
  readonly shape: readonly number[];
  /** Element strides per dimension. */
  readonly strides: readonly number[];
  /** Offset of the first element in the buffer, in elements. */
  readonly offset: number;
  readonly disposed: boolean;
  readonly buffer: { readonly byteLength: number };
}

/** The dtypes the S/D routines take. */
export type BlasDType = 'float32' | 'float64';

/** The dtypes `gemmEx` takes for A and B. */
export type GemmExInputDType = 'float16' | 'bfloat16' | 'float32';

const BLAS_DTYPES: readonly DType[] = ['float32', 'float64'];
const BYTES: Readonly<Record<DType, number>> = {
  float32: 4,
  float64: 8,
  int32: 4,
  uint32: 4,
  int8: 1,
  uint8: 1,
  float16: 2,
  bfloat16: 2,
};

const INT32_MAX = 2 ** 31 - 1;

/** A matrix as cuBLAS sees it: rows x columns, column-major with a leading dimension. */
export interface MatrixLayout {
  rows: number;
  columns: number;
  /** Elements between the starts of two columns (lda); at least max(1, rows). */
  leadingDimension: number;
}

/** A vector as cuBLAS sees it: n elements, `increment` elements apart. */
export interface VectorLayout {
  length: number;
  increment: number;
}

function fail(call: string, message: string): never {
  throw new CudaArgumentError(`${call}: ${message}`);
}

function isOperand(value: unknown): value is OperandLike {
  return (
    typeof value === 'object' &&
    value !== null &&
    Array.isArray((value as OperandLike).shape) &&
    Array.isArray((value as OperandLike).strides) &&
    typeof (value as OperandLike).dtype === 'string'
  );
}

/**
 * Throws unless `value` is a usable array: a DisposedError for a freed one, a
 * CudaArgumentError for anything that is not an array.
 */
export function assertOperand(
  call: string,
  name: string,
  value: unknown,
): asserts value is OperandLike {
  if (!isOperand(value)) fail(call, `${name} must be a DeviceArray, got ${describe(value)}`);
  if (value.disposed) throw new DisposedError(`${call}: ${name}`);
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (typeof value !== 'object') return typeof value;
  return value.constructor?.name ?? 'object';
}

/** Throws unless `value` fits a C `int` (cuBLAS's m, n, k, ld, inc, batchCount). */
export function assertInt32(call: string, name: string, value: number): void {
  if (value > INT32_MAX) {
    fail(call, `${name} = ${value} exceeds cuBLAS's 32-bit int limit (${INT32_MAX})`);
  }
}

/** Throws unless every operand has the same dtype, one of `allowed`. Returns that dtype. */
export function commonDType(
  call: string,
  operands: Readonly<Record<string, OperandLike>>,
  allowed: readonly DType[] = BLAS_DTYPES,
): DType {
  const entries = Object.entries(operands);
  const dtype = entries[0]![1].dtype;
  const mismatch = entries.some(([, operand]) => operand.dtype !== dtype);
  if (mismatch || !allowed.includes(dtype)) {
    const got = entries.map(([name, operand]) => `${name}: ${operand.dtype}`).join(', ');
    fail(call, `operands must all be ${allowed.join(' or ')} and of one dtype, got ${got}`);
  }
  return dtype;
}

/** Elements from the array's first element to the end of its buffer. */
function capacity(operand: OperandLike): number {
  return Math.floor(operand.buffer.byteLength / BYTES[operand.dtype]) - operand.offset;
}

/**
 * Throws unless the elements a routine touches lie inside the operand's buffer: `extent` is
 * one past the largest element index touched, relative to the first element.
 */
function assertFits(call: string, name: string, operand: OperandLike, extent: number): void {
  if (extent > capacity(operand)) {
    fail(
      call,
      `${name} would reach element ${extent - 1} past its first, beyond the ${capacity(operand)} elements its buffer holds from there`,
    );
  }
}

/**
 * The matrix layout of a 1-D (a column) or 2-D operand, or of the first two dimensions of a
 * 3-D one (`dimensions: 3`). Rejects views whose rows are not contiguous (strides[0] !== 1)
 * and leading dimensions below the row count.
 */
export function matrixLayout(
  call: string,
  name: string,
  operand: OperandLike,
  dimensions: 2 | 3 = 2,
): MatrixLayout {
  return layoutInto(emptyLayout(), call, name, operand, dimensions);
}

function emptyLayout(): MatrixLayout {
  return { rows: 0, columns: 0, leadingDimension: 0 };
}

/** `matrixLayout`, written into `out` (the gemm hot path reuses its layouts: no allocation). */
function layoutInto(
  out: MatrixLayout,
  call: string,
  name: string,
  operand: OperandLike,
  dimensions: 2 | 3 = 2,
): MatrixLayout {
  const shape = operand.shape;
  const strides = operand.strides;
  const allowed = dimensions === 2 ? shape.length === 1 || shape.length === 2 : shape.length === 3;
  if (!allowed) {
    fail(
      call,
      dimensions === 2
        ? `${name} must be a 1-D or 2-D array, got shape ${JSON.stringify(shape)}${shape.length === 3 ? ' (use gemmStridedBatched for batches)' : ''}`
        : `${name} must be a 3-D array [rows, columns, batch], got shape ${JSON.stringify(shape)}`,
    );
  }
  const rows = shape[0]!;
  const columns = shape.length > 1 ? shape[1]! : 1;
  if (strides[0] !== 1) {
    fail(
      call,
      `${name} has a row stride of ${strides[0]}; cuBLAS needs contiguous columns (strides[0] === 1), copy() the view first`,
    );
  }
  // With one column (or none), or no rows, the column stride is never used.
  const leadingDimension =
    shape.length === 1 || columns <= 1 || rows === 0 ? Math.max(1, rows) : strides[1]!;
  if (!Number.isSafeInteger(leadingDimension) || leadingDimension < Math.max(1, rows)) {
    fail(
      call,
      `${name} has leading dimension ${leadingDimension}, less than its ${rows} rows (columns overlap)`,
    );
  }
  // Messages are built only on failure: this runs on every call (a hot path).
  if (rows > INT32_MAX || columns > INT32_MAX || leadingDimension > INT32_MAX) {
    assertInt32(call, `${name} rows`, rows);
    assertInt32(call, `${name} columns`, columns);
    assertInt32(call, `${name} leading dimension`, leadingDimension);
  }
  out.rows = rows;
  out.columns = columns;
  out.leadingDimension = leadingDimension;
  if (dimensions === 2) assertFits(call, name, operand, matrixExtent(out));
  return out;
}

/** One past the last element a matrix touches (0 for an empty one). */
function matrixExtent(layout: MatrixLayout): number {
  if (layout.rows === 0 || layout.columns === 0) return 0;
  return (layout.columns - 1) * layout.leadingDimension + layout.rows;
}

/**
 * The vector layout of a 1-D array (increment = strides[0]) or of a 2-D array with one
 * column (increment = strides[0]) or one row (increment = strides[1], the leading dimension).
 */
export function vectorLayout(call: string, name: string, operand: OperandLike): VectorLayout {
  const { shape, strides } = operand;
  let length: number;
  let increment: number;
  if (shape.length === 1) {
    length = shape[0]!;
    increment = strides[0]!;
  } else if (shape.length === 2 && shape[1] === 1) {
    length = shape[0]!;
    increment = strides[0]!;
  } else if (shape.length === 2 && shape[0] === 1) {
    length = shape[1]!;
    increment = strides[1]!;
  } else {
    fail(
      call,
      `${name} must be a vector (1-D, or 2-D with one row or one column), got shape ${JSON.stringify(shape)}`,
    );
  }
  if (length <= 1) increment = Math.max(1, increment);
  if (!Number.isSafeInteger(increment) || increment < 1) {
    fail(call, `${name} has element stride ${increment}; cuBLAS needs a positive increment`);
  }
  assertInt32(call, `${name} length`, length);
  assertInt32(call, `${name} increment`, increment);
  assertFits(call, name, operand, length === 0 ? 0 : (length - 1) * increment + 1);
  return { length, increment };
}

/** Checks that `value` is a number (alpha, beta). */
export function assertScalar(call: string, name: string, value: unknown): asserts value is number {
  if (typeof value !== 'number') fail(call, `${name} must be a number, got ${describe(value)}`);
}

/** Checks that a transpose flag is a boolean or undefined. */
export function assertFlag(call: string, name: string, value: unknown): void {
  if (value !== undefined && typeof value !== 'boolean') {
    fail(call, `${name} must be true or false, got ${JSON.stringify(value)}`);
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

/** op(X)'s rows and columns. */
function opShape(layout: MatrixLayout, transpose: boolean): [number, number] {
  return transpose ? [layout.columns, layout.rows] : [layout.rows, layout.columns];
}

function opName(name: string, transpose: boolean): string {
  return transpose ? `${name}^T` : name;
}

/**
 * The m and n of `op(a) * op(b)` (checking that the inner dimensions agree), for
 * allocating the result of `matmul`.
 */
export function productShape(
  call: string,
  a: MatrixLayout,
  b: MatrixLayout,
  transA: boolean,
  transB: boolean,
): { m: number; n: number; k: number } {
  return productShapeInto({ m: 0, n: 0, k: 0 }, call, a, b, transA, transB);
}

/** `productShape`, written into `out` (gemm's hot path: no allocation). */
function productShapeInto<T extends { m: number; n: number; k: number }>(
  out: T,
  call: string,
  a: MatrixLayout,
  b: MatrixLayout,
  transA: boolean,
  transB: boolean,
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

/**
 * Validates C = alpha op(A) op(B) + beta C and returns the cuBLAS dimensions. `a`, `b`, `c`
 * must be 1-D or 2-D with contiguous columns; dtypes are checked by the caller.
 */
export function gemmShape(
  call: string,
  a: OperandLike,
  b: OperandLike,
  c: OperandLike,
  transA: boolean,
  transB: boolean,
): GemmShape {
  return gemmShapeInto({ m: 0, n: 0, k: 0, lda: 0, ldb: 0, ldc: 0 }, call, a, b, c, transA, transB);
}

// Scratch layouts of the gemm hot path (one call at a time: the event loop's thread).
const layoutA = emptyLayout();
const layoutB = emptyLayout();
const layoutC = emptyLayout();

/** `gemmShape`, written into `out`, allocating nothing. */
function gemmShapeInto<T extends GemmShape>(
  out: T,
  call: string,
  a: OperandLike,
  b: OperandLike,
  c: OperandLike,
  transA: boolean,
  transB: boolean,
): T {
  const la = layoutInto(layoutA, call, 'a', a);
  const lb = layoutInto(layoutB, call, 'b', b);
  const lc = layoutInto(layoutC, call, 'c', c);
  const { m, n } = productShapeInto(out, call, la, lb, transA, transB);
  if (lc.rows !== m || lc.columns !== n) {
    fail(
      call,
      `c is ${lc.rows} x ${lc.columns}, but ${opName('a', transA)} * ${opName('b', transB)} is ${m} x ${n}`,
    );
  }
  out.lda = la.leadingDimension;
  out.ldb = lb.leadingDimension;
  out.ldc = lc.leadingDimension;
  return out;
}

/** The dimensions cublas<t>gemv takes: A is m x n as stored, x and y are vectors. */
export interface GemvShape {
  m: number;
  n: number;
  lda: number;
  incx: number;
  incy: number;
}

/** Validates y = alpha op(A) x + beta y. */
export function gemvShape(
  call: string,
  a: OperandLike,
  x: OperandLike,
  y: OperandLike,
  trans: boolean,
): GemvShape {
  const la = matrixLayout(call, 'a', a);
  const vx = vectorLayout(call, 'x', x);
  const vy = vectorLayout(call, 'y', y);
  const [rows, columns] = opShape(la, trans);
  if (vx.length !== columns) {
    fail(call, `x has ${vx.length} elements, ${opName('a', trans)} has ${columns} columns`);
  }
  if (vy.length !== rows) {
    fail(call, `y has ${vy.length} elements, ${opName('a', trans)} has ${rows} rows`);
  }
  return {
    m: la.rows,
    n: la.columns,
    lda: la.leadingDimension,
    incx: vx.increment,
    incy: vy.increment,
  };
}

/** Validates two vectors of equal length (axpy, dot); returns n and both increments. */
export function vectorPairShape(
  call: string,
  x: OperandLike,
  y: OperandLike,
): { n: number; incx: number; incy: number } {
  const vx = vectorLayout(call, 'x', x);
  const vy = vectorLayout(call, 'y', y);
  if (vx.length !== vy.length) {
    fail(call, `x has ${vx.length} elements, y has ${vy.length}`);
  }
  return { n: vx.length, incx: vx.increment, incy: vy.increment };
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
function batchedLayout(call: string, name: string, operand: OperandLike): MatrixLayout {
  if (operand.shape.length === 3) return matrixLayout(call, name, operand, 3);
  if (operand.shape.length === 2) return matrixLayout(call, name, operand, 2);
  fail(
    call,
    `${name} must be a 3-D array [rows, columns, batch] (or 2-D with an explicit stride), got shape ${JSON.stringify(operand.shape)}`,
  );
}

/**
 * Validates a strided batched gemm: C_i = alpha op(A_i) op(B_i) + beta C_i for i < batch,
 * where X_i starts `strideX * i` elements after X's first. Operands are 3-D [rows, columns,
 * batch] by default (stride = strides[2]); a 2-D A or B is reused for every product (stride
 * 0) unless a stride is given. Every matrix must lie inside its buffer, and the C matrices
 * must not overlap (they are written concurrently).
 */
export function stridedBatchedShape(
  call: string,
  a: OperandLike,
  b: OperandLike,
  c: OperandLike,
  transA: boolean,
  transB: boolean,
  options: BatchOptions,
): StridedBatchedShape {
  const operands = { a, b, c } as const;
  const layouts = {
    a: batchedLayout(call, 'a', a),
    b: batchedLayout(call, 'b', b),
    c: batchedLayout(call, 'c', c),
  };
  const { m, n, k } = productShape(call, layouts.a, layouts.b, transA, transB);
  if (layouts.c.rows !== m || layouts.c.columns !== n) {
    fail(
      call,
      `c's matrices are ${layouts.c.rows} x ${layouts.c.columns}, but ${opName('a', transA)} * ${opName('b', transB)} is ${m} x ${n}`,
    );
  }

  const explicit = {
    a: options.strideA,
    b: options.strideB,
    c: options.strideC,
  };
  for (const name of ['a', 'b', 'c'] as const) {
    if (explicit[name] !== undefined)
      assertCount(call, `stride${name.toUpperCase()}`, explicit[name]);
  }

  // The batch count: given, or the third dimension the 3-D operands agree on.
  let batch: number;
  if (options.batch !== undefined) {
    assertCount(call, 'batch', options.batch);
    batch = options.batch;
    for (const name of ['a', 'b', 'c'] as const) {
      const operand = operands[name];
      if (operand.shape.length === 3 && explicit[name] === undefined && operand.shape[2]! < batch) {
        fail(call, `batch is ${batch}, but ${name} holds ${operand.shape[2]} matrices`);
      }
    }
  } else {
    const counts = (['a', 'b', 'c'] as const)
      .filter((name) => operands[name].shape.length === 3)
      .map((name) => [name, operands[name].shape[2]!] as const);
    if (counts.length === 0) fail(call, 'batch is required when no operand is 3-D');
    batch = counts[0]![1];
    const differ = counts.find(([, count]) => count !== batch);
    if (differ !== undefined) {
      fail(
        call,
        `the operands hold different numbers of matrices (${counts.map(([name, count]) => `${name}: ${count}`).join(', ')}); pass batch to use the first ones`,
      );
    }
  }
  assertInt32(call, 'batch', batch);

  const strides = { a: 0, b: 0, c: 0 };
  for (const name of ['a', 'b', 'c'] as const) {
    const operand = operands[name];
    const given = explicit[name];
    if (given !== undefined) strides[name] = given;
    else if (operand.shape.length === 3) strides[name] = operand.strides[2]!;
    else if (name === 'c' && batch > 1) {
      fail(call, 'c is 2-D: pass strideC (the results of a batch cannot share one matrix)');
    } else strides[name] = 0;
  }

  // Every matrix of every batch must lie in its buffer.
  if (batch > 0) {
    for (const name of ['a', 'b', 'c'] as const) {
      const extent = matrixExtent(layouts[name]);
      if (extent > 0) assertFits(call, name, operands[name], (batch - 1) * strides[name] + extent);
    }
  }

  // The C matrices are written concurrently: they must not overlap.
  const lc = layouts.c;
  if (batch > 1 && matrixExtent(lc) > 0) {
    const stride = strides.c;
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

  return {
    m,
    n,
    k,
    lda: layouts.a.leadingDimension,
    ldb: layouts.b.leadingDimension,
    ldc: layouts.c.leadingDimension,
    batch,
    strideA: strides.a,
    strideB: strides.b,
    strideC: strides.c,
  };
}

/** The cudaDataType_t of each dtype `gemmEx` accepts (library_types.h). */
export const GEMM_EX_DATA_TYPES: Readonly<Partial<Record<DType, number>>> = {
  float32: 0, // CUDA_R_32F
  float16: 2, // CUDA_R_16F
  bfloat16: 14, // CUDA_R_16BF
};

/**
 * Validates the dtypes of `gemmEx`: A and B both float16, both bfloat16 or both float32; C
 * float32 or the inputs' dtype (cuBLAS's CUBLAS_COMPUTE_32F combinations).
 */
export function gemmExTypes(
  call: string,
  a: OperandLike,
  b: OperandLike,
  c: OperandLike,
): { aType: number; bType: number; cType: number } {
  const inputs: readonly DType[] = ['float16', 'bfloat16', 'float32'];
  if (a.dtype !== b.dtype || !inputs.includes(a.dtype)) {
    fail(
      call,
      `a and b must both be float16, both bfloat16 or both float32, got a: ${a.dtype}, b: ${b.dtype}`,
    );
  }
  if (c.dtype !== 'float32' && c.dtype !== a.dtype) {
    fail(call, `c must be float32 or ${a.dtype} (like a and b), got ${c.dtype}`);
  }
  return {
    aType: GEMM_EX_DATA_TYPES[a.dtype]!,
    bType: GEMM_EX_DATA_TYPES[b.dtype]!,
    cType: GEMM_EX_DATA_TYPES[c.dtype]!,
  };
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

/** A validated gemm: its dtype, dimensions and scalars. */
export interface CheckedGemm extends GemmShape {
  dtype: DType;
  transA: boolean;
  transB: boolean;
  alpha: number;
  beta: number;
}

/** A product's transposes and scalars, as checked from its options. */
interface ProductScalars {
  transA: boolean;
  transB: boolean;
  alpha: number;
  beta: number;
}

function productScalars(call: string, options: ProductOptions): ProductScalars {
  return productScalarsInto({ transA: false, transB: false, alpha: 1, beta: 0 }, call, options);
}

/** `productScalars`, written into `out` (gemm's hot path: no allocation). */
function productScalarsInto<T extends ProductScalars>(
  out: T,
  call: string,
  options: ProductOptions,
): T {
  if (typeof options !== 'object' || options === null) {
    fail(call, `options must be an object, got ${describe(options)}`);
  }
  // Defaults for undefined only (as destructuring gives them): null stays an error.
  const transA = options.transA === undefined ? false : options.transA;
  const transB = options.transB === undefined ? false : options.transB;
  const alpha = options.alpha === undefined ? 1 : options.alpha;
  const beta = options.beta === undefined ? 0 : options.beta;
  assertFlag(call, 'transA', transA);
  assertFlag(call, 'transB', transB);
  assertScalar(call, 'alpha', alpha);
  assertScalar(call, 'beta', beta);
  out.transA = transA;
  out.transB = transB;
  out.alpha = alpha;
  out.beta = beta;
  return out;
}

/** Everything `gemm` checks before its native call, in order: arrays, dtypes, options, shapes. */
export function checkGemm(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions = {},
): CheckedGemm {
  return checkGemmInto(newCheckedGemm(), call, a, b, c, options);
}

/** @internal An object for `checkGemmInto` to fill. */
export function newCheckedGemm(): CheckedGemm {
  return {
    dtype: 'float32',
    transA: false,
    transB: false,
    alpha: 1,
    beta: 0,
    m: 0,
    n: 0,
    k: 0,
    lda: 0,
    ldb: 0,
    ldc: 0,
  };
}

/**
 * @internal `checkGemm`, written into `out`: the same checks and messages, allocating
 * nothing (gemm's hot path passes a reused object).
 */
export function checkGemmInto(
  out: CheckedGemm,
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions,
): CheckedGemm {
  assertOperand(call, 'a', a);
  assertOperand(call, 'b', b);
  assertOperand(call, 'c', c);
  // The common case without allocating; commonDType builds the message otherwise.
  const dtype =
    a.dtype === b.dtype && a.dtype === c.dtype && (a.dtype === 'float32' || a.dtype === 'float64')
      ? a.dtype
      : commonDType(call, { a, b, c });
  productScalarsInto(out, call, options);
  out.dtype = dtype;
  return gemmShapeInto(out, call, a, b, c, out.transA, out.transB);
}

/** What `matmul` checks before allocating its result; returns the result's dtype and shape. */
export function checkMatmul(
  call: string,
  a: unknown,
  b: unknown,
  options: ProductOptions = {},
): { dtype: DType; m: number; n: number } {
  assertOperand(call, 'a', a);
  assertOperand(call, 'b', b);
  const dtype = commonDType(call, { a, b });
  const { transA, transB } = productScalars(call, options);
  const { m, n } = productShape(
    call,
    matrixLayout(call, 'a', a),
    matrixLayout(call, 'b', b),
    transA,
    transB,
  );
  return { dtype, m, n };
}

/** A validated strided batched gemm. */
export interface CheckedStridedBatched extends StridedBatchedShape {
  dtype: DType;
  transA: boolean;
  transB: boolean;
  alpha: number;
  beta: number;
}

/** Everything `gemmStridedBatched` checks before its native call. */
export function checkStridedBatched(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions & BatchOptions = {},
): CheckedStridedBatched {
  assertOperand(call, 'a', a);
  assertOperand(call, 'b', b);
  assertOperand(call, 'c', c);
  const dtype = commonDType(call, { a, b, c });
  const scalars = productScalars(call, options);
  return {
    dtype,
    ...scalars,
    ...stridedBatchedShape(call, a, b, c, scalars.transA, scalars.transB, options),
  };
}

/** A validated gemmEx: cudaDataType_t of each operand, dimensions and scalars. */
export interface CheckedGemmEx extends GemmShape {
  aType: number;
  bType: number;
  cType: number;
  transA: boolean;
  transB: boolean;
  alpha: number;
  beta: number;
}

/** Everything `gemmEx` checks before its native call. */
export function checkGemmEx(
  call: string,
  a: unknown,
  b: unknown,
  c: unknown,
  options: ProductOptions = {},
): CheckedGemmEx {
  assertOperand(call, 'a', a);
  assertOperand(call, 'b', b);
  assertOperand(call, 'c', c);
  const types = gemmExTypes(call, a, b, c);
  const scalars = productScalars(call, options);
  return { ...types, ...scalars, ...gemmShape(call, a, b, c, scalars.transA, scalars.transB) };
}

/** Options of `gemv`. */
export interface GemvOptions {
  /** Use A^T instead of A (default false). */
  trans?: boolean;
  /** Scales A x (default 1). */
  alpha?: number;
  /** Scales y before adding (default 0). */
  beta?: number;
}

/** A validated gemv. */
export interface CheckedGemv extends GemvShape {
  dtype: DType;
  trans: boolean;
  alpha: number;
  beta: number;
}

/** Everything `gemv` checks before its native call. */
export function checkGemv(
  call: string,
  a: unknown,
  x: unknown,
  y: unknown,
  options: GemvOptions = {},
): CheckedGemv {
  assertOperand(call, 'a', a);
  assertOperand(call, 'x', x);
  assertOperand(call, 'y', y);
  const dtype = commonDType(call, { a, x, y });
  if (typeof options !== 'object' || options === null) {
    fail(call, `options must be an object, got ${describe(options)}`);
  }
  const { trans = false, alpha = 1, beta = 0 } = options;
  assertFlag(call, 'trans', trans);
  assertScalar(call, 'alpha', alpha);
  assertScalar(call, 'beta', beta);
  return { dtype, trans, alpha, beta, ...gemvShape(call, a, x, y, trans) };
}

/** Everything a one-vector routine (nrm2, asum, iamax, scal) checks. */
export function checkVector(call: string, x: unknown): { dtype: DType; n: number; incx: number } {
  assertOperand(call, 'x', x);
  const dtype = commonDType(call, { x });
  const { length, increment } = vectorLayout(call, 'x', x);
  return { dtype, n: length, incx: increment };
}

/** Everything a two-vector routine (axpy, dot) checks. */
export function checkVectorPair(
  call: string,
  x: unknown,
  y: unknown,
): { dtype: DType; n: number; incx: number; incy: number } {
  assertOperand(call, 'x', x);
  assertOperand(call, 'y', y);
  const dtype = commonDType(call, { x, y });
  return { dtype, ...vectorPairShape(call, x, y) };
}
