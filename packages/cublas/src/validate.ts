/**
 * cuBLAS's rules for its operands, built from cudadrv's shared operand checks: float32 or
 * float64 operands of one dtype, column-major matrices and strided vectors whose dimensions,
 * leading dimensions and increments fit a C `int` and whose elements lie in their buffers,
 * and the stream each routine runs on (`operandStream`). The options themselves are read with
 * cudadrv's option checks (`booleanOption`, `numberOption`, ...). The routines' own checks
 * build on these: `validate-gemm.ts` (gemm, matmul, gemmEx), `validate-batched.ts`
 * (gemmStridedBatched), `validate-vectors.ts` (gemv and the level-1 routines). Nothing here
 * touches native code (but for the lookup of the current stream when a call names none), so
 * every rule is unit tested on plain objects; the wrappers call these before any native call.
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
import {
  assertFits,
  assertOperand,
  assertOptions,
  assertSameContext,
  type ContextOperand,
  CudaArgumentError,
  describeValue,
  type FloatDType,
  type Footprint,
  isFloatDType,
  type MatrixLayout,
  matrixExtent,
  newFootprint,
  newMatrixLayout,
  newVectorLayout,
  type Operand,
  readMatrixLayout,
  readVectorLayout,
  resolveStream,
  type Stream,
  type StreamOption,
  sharedDType,
  streamOption,
  type VectorLayout,
  vectorExtent,
} from '@cuda-tasks/cudadrv';

export type { MatrixLayout, VectorLayout };

/** What the checks read from an operand (a DeviceArray has all of it). */
export type OperandLike = Operand;

/**
 * The dtypes the S/D routines take.
 * @deprecated The same type as `FloatDType` of `@cuda-tasks/cudadrv`, the one name for it;
 * this alias goes in the next minor release.
 */
export type BlasDType = FloatDType;

const INT32_MAX = 2 ** 31 - 1;

export function fail(call: string, message: string): never {
  throw new CudaArgumentError(`${call}: ${message}`);
}

/**
 * Throws unless `value` fits a C `int` (cuBLAS's m, n, k, ld, inc, batchCount). The message
 * names `${name}${what}`, joined only on failure (the checks run on every call).
 */
export function assertInt32(call: string, name: string, what: string, value: number): void {
  if (value > INT32_MAX) {
    fail(call, `${name}${what} = ${value} exceeds cuBLAS's 32-bit int limit (${INT32_MAX})`);
  }
}

/**
 * Checks a routine's operands (`names` holds their one-letter names in order, e.g. 'abc'):
 * each a usable array, all float32 or all float64; returns that dtype, or fails naming each
 * operand's dtype.
 */
export function floatOperands(
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

/** The options each call takes (an option of another name is a CudaArgumentError). */
export const VECTOR_OPTIONS: readonly string[] = ['stream'];
export const GEMV_OPTIONS: readonly string[] = ['transA', 'trans', 'alpha', 'beta', 'stream'];
export const GEMM_OPTIONS: readonly string[] = ['transA', 'transB', 'alpha', 'beta', 'stream'];
export const MATMUL_OPTIONS: readonly string[] = ['transA', 'transB', 'alpha', 'stream'];
export const STRIDED_BATCHED_OPTIONS: readonly string[] = [
  ...GEMM_OPTIONS,
  'batch',
  'strideA',
  'strideB',
  'strideC',
];

/**
 * The stream a call runs on: its `stream` option (checked, with the options object and the
 * names it may hold, `known`), else the current stream; once each operand is found to live in
 * that stream's context (`names` holds their one-letter names in order, as `floatOperands`
 * takes them). Allocates nothing.
 */
export function operandStream(
  call: string,
  options: StreamOption | undefined,
  known: readonly string[],
  names: string,
  first: ContextOperand,
  second?: ContextOperand,
  third?: ContextOperand,
): Stream {
  assertOptions(call, options, known);
  const stream = resolveStream(streamOption(call, options?.stream));
  assertSameContext(call, names[0]!, first, stream);
  if (names.length > 1) assertSameContext(call, names[1]!, second!, stream);
  if (names.length > 2) assertSameContext(call, names[2]!, third!, stream);
  return stream;
}

// Scratch layouts of the checks (one call at a time: the event loop's thread).
export const layoutA = newMatrixLayout();
export const layoutB = newMatrixLayout();
export const layoutC = newMatrixLayout();
export const layoutX = newVectorLayout();
export const layoutY = newVectorLayout();
export const written: Footprint = newFootprint();
export const read: Footprint = newFootprint();

/** Options passed as none (a shared frozen object: a call allocates nothing). */
export const NO_OPTIONS: Readonly<Record<string, undefined>> = Object.freeze({});
