/**
 * Pure argument checks for the FFT functions: they read only an array's description (dtype,
 * shape, layout, disposed), so every rule is unit tested without a GPU, and the functions
 * call them before any native call. What every library checks of an operand (an array, not
 * disposed, of an accepted dtype) comes from `@cuda-tasks/cudadrv`'s operand checks, and its
 * option checks (`assertOptions`, `booleanOption`, `streamOption`) read the options; what is
 * cuFFT's own (interleaved complex numbers, batches) is here.
 */
import {
  assertDType,
  assertOperand,
  assertOptions,
  CudaArgumentError,
  type Operand,
} from '@cuda-tasks/cudadrv';

/** What the checks read from an array (a DeviceArray has all of it). */
export interface ArrayDescription extends Operand {
  /** Number of elements. */
  readonly length: number;
  /** Whether the elements are one dense run in memory. */
  readonly contiguous: boolean;
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

const FLOAT32 = ['float32'] as const;

/** Throws unless `x` is a usable, contiguous float32 array. */
export function assertFloat32Array(
  x: unknown,
  call: string,
  name: string,
): asserts x is ArrayDescription {
  assertOperand(call, name, x);
  assertDType(call, name, x, FLOAT32);
  if (!(x as ArrayDescription).contiguous) {
    fail(call, `${name} must be contiguous (copy a strided view with .copy() first)`);
  }
  const length = (x as ArrayDescription).length;
  if (length > INT32_MAX) fail(call, `${name} has ${length} elements; at most ${INT32_MAX}`);
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
  assertOptions(call, options);
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
  assertOptions(call, options);
  const batch = batchOf(x, options, call, x.length, 'numbers');
  const n = x.length / batch;
  return { n, batch, outputLength: 2 * (Math.floor(n / 2) + 1) * batch };
}
