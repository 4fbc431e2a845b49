/**
 * Pure argument checks for the FFT functions: they read only an array's description (dtype,
 * shape, layout, disposed), so every rule is unit tested without a GPU, and the functions
 * call them before any native call.
 */
import { CudaArgumentError, DisposedError, type DType } from '@cuda-tasks/cudadrv';

/** What the checks read from an array (a DeviceArray has all of it). */
export interface ArrayDescription {
  /** Element type. */
  readonly dtype: DType;
  /** Dimensions. */
  readonly shape: readonly number[];
  /** Number of elements. */
  readonly length: number;
  /** Offset of the first element in its buffer, in elements. */
  readonly offset: number;
  /** Whether the elements are one dense run in memory. */
  readonly contiguous: boolean;
  /** Whether the array was disposed. */
  readonly disposed: boolean;
}

/** Options shared by the transforms. */
export interface BatchOption {
  /**
   * Transforms in the array, stored one after another. Default: the number of columns of a
   * 2-D array (one transform per column), 1 for a 1-D array.
   */
  batch?: number;
}

const INT32_MAX = 2 ** 31 - 1;

function fail(call: string, message: string): never {
  throw new CudaArgumentError(`${call}: ${message}`);
}

function isArray(value: unknown): value is ArrayDescription {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as ArrayDescription).dtype === 'string' &&
    Array.isArray((value as ArrayDescription).shape)
  );
}

/** Throws unless `x` is a usable, contiguous float32 array. */
export function assertFloat32Array(
  x: unknown,
  call: string,
  name: string,
): asserts x is ArrayDescription {
  if (!isArray(x))
    fail(call, `${name} must be a DeviceArray, got ${x === null ? 'null' : typeof x}`);
  if (x.disposed) throw new DisposedError(`${call}: ${name}`);
  if (x.dtype !== 'float32') fail(call, `${name} must be float32, got ${x.dtype}`);
  if (!x.contiguous) {
    fail(call, `${name} must be contiguous (copy a strided view with .copy() first)`);
  }
  if (x.length > INT32_MAX) fail(call, `${name} has ${x.length} elements; at most ${INT32_MAX}`);
}

/**
 * Throws unless `x` holds interleaved complex float32 numbers (re, im, re, im, ...):
 * contiguous, an even length, and starting on a complex element (8-byte aligned).
 */
export function assertComplexArray(
  x: unknown,
  call: string,
  name: string,
): asserts x is ArrayDescription {
  assertFloat32Array(x, call, name);
  if (x.length % 2 !== 0) {
    fail(
      call,
      `${name} must hold interleaved complex numbers (re, im, ...): its length ${x.length} is odd`,
    );
  }
  if (x.offset % 2 !== 0) {
    fail(
      call,
      `${name} must start on a complex element (an even float offset), got offset ${x.offset}`,
    );
  }
}

function batchOf(
  x: ArrayDescription,
  options: BatchOption,
  call: string,
  elements: number,
  unit: string,
): number {
  const batch = options.batch ?? (x.shape.length === 2 ? x.shape[1]! : 1);
  if (!Number.isInteger(batch) || batch < 1 || batch > INT32_MAX) {
    fail(call, `batch must be a positive integer, got ${batch}`);
  }
  if (elements === 0) fail(call, 'x is empty');
  if (elements % batch !== 0) {
    fail(call, `x holds ${elements} ${unit}, not a multiple of batch = ${batch}`);
  }
  return batch;
}

function assertOptionObject(options: unknown, call: string): void {
  if (typeof options !== 'object' || options === null) {
    fail(call, `options must be an object, got ${options === null ? 'null' : typeof options}`);
  }
}

/** A checked boolean option (undefined gives `fallback`). */
export function booleanOption(
  value: unknown,
  name: string,
  call: string,
  fallback: boolean,
): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') fail(call, `${name} must be a boolean, got ${value}`);
  return value;
}

/**
 * The complex transform's length and batch for `x` (interleaved complex float32):
 * n = (length / 2) / batch.
 * @example fftLayout({ dtype: 'float32', shape: [512], length: 512, ... }, {}); // { n: 256, batch: 1 }
 */
export function fftLayout(
  x: unknown,
  options: BatchOption = {},
  call = 'fft',
): { n: number; batch: number } {
  assertComplexArray(x, call, 'x');
  assertOptionObject(options, call);
  const complexCount = x.length / 2;
  const batch = batchOf(x, options, call, complexCount, 'complex numbers');
  return { n: complexCount / batch, batch };
}

/**
 * The real-to-complex transform's length, batch and output length (floats) for `x` (real
 * float32): n = length / batch; each transform gives n / 2 + 1 complex numbers (the others
 * are their conjugates).
 */
export function rfftLayout(
  x: unknown,
  options: BatchOption = {},
  call = 'rfft',
): { n: number; batch: number; outputLength: number } {
  assertFloat32Array(x, call, 'x');
  assertOptionObject(options, call);
  const batch = batchOf(x, options, call, x.length, 'numbers');
  const n = x.length / batch;
  return { n, batch, outputLength: 2 * (Math.floor(n / 2) + 1) * batch };
}
