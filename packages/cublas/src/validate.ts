/**
 * cuBLAS's rules for its operands, on top of cudadrv's shared checks: float32 or float64
 * operands of one dtype, column-major matrices and strided vectors whose sizes fit a C `int`
 * and lie in their buffers, and the stream a routine runs on. The `validate-*.ts` files build
 * each routine's check from these; the wrappers call them before any native call. Each check
 * fills the object passed last (reused by the wrapper: nothing allocated, messages built only
 * on failure) and returns it.
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

/** `a` or `a^T` in a message. */
export function opName(name: string, transpose: boolean): string {
  return transpose ? `${name}^T` : name;
}

/** Throws unless `value` fits a C `int` (m, n, k, ld, inc, batchCount), naming `${name}${what}`. */
export function assertInt32(call: string, name: string, what: string, value: number): void {
  if (value > INT32_MAX) {
    fail(call, `${name}${what} = ${value} exceeds cuBLAS's 32-bit int limit (${INT32_MAX})`);
  }
}

/**
 * Checks a routine's operands (`names`: their one-letter names in order, e.g. 'abc'): each a
 * usable array, all float32 or all float64; returns that dtype, or fails naming each dtype.
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
 * 3-D one (`dimensions: 3`, whose batch the caller fits). Rejects rows that are not contiguous
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
  if (dimensions === 2 ? shape.length !== 1 && shape.length !== 2 : shape.length !== 3) {
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

/** The vector layout of a 1-D array, or of a 2-D one with one column or one row. */
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
 * The stream a call runs on (its checked `stream` option, else the current stream), once the
 * options hold only names of `known` and each operand (`names` as `floatOperands` takes them)
 * lives in that stream's context. Allocates nothing.
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

// Scratch of the checks (one call at a time: the event loop's thread).
export const layoutA = newMatrixLayout();
export const layoutB = newMatrixLayout();
export const layoutC = newMatrixLayout();
export const layoutX = newVectorLayout();
export const layoutY = newVectorLayout();
export const written: Footprint = newFootprint();
export const read: Footprint = newFootprint();

export { NO_OPTIONS } from '@cuda-tasks/cudadrv/internal';
