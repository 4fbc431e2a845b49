/**
 * Argument checks shared by every kernel of this package, built from cudadrv's operand checks
 * (a usable array, overlapping byte ranges; the kernel families call `assertSameContext`
 * and `describeValue` of `@cuda-tasks/cudadrv` themselves). They
 * run before anything native (no current-stream lookup, no compile, no allocation), so bad
 * input is a CudaArgumentError (or DisposedError) however early the program is.
 */
import {
  assertArray,
  assertSameContext,
  bfloat16BitsToFloat32,
  byteRangesOverlap,
  CudaArgumentError,
  DeviceArray,
  DisposedError,
  type DType,
  describeValue,
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
  type Stream,
} from '@cuda-tasks/cudadrv';

/** The options every kernel call takes last. */
export interface CallOptions {
  /** The stream to run on (default: the current task's stream). */
  stream?: Stream;
}

/** The options of a call that takes only `{ stream }` (see cudadrv's `assertOptions`). */
export const STREAM_OPTIONS: readonly string[] = Object.freeze(['stream']);

/** Whether `value` is a trailing options object rather than an array or a number. */
export function isOptions(value: unknown): value is CallOptions {
  return typeof value === 'object' && value !== null && !DeviceArray.isInstance(value);
}

/** Checks that `value` is a usable, contiguous DeviceArray; returns it. */
export function checkArray(value: unknown, call: string, name: string): DeviceArray {
  // The disposed array is named in full here (its dtype and shape tell which one it was).
  if (DeviceArray.isInstance(value) && value.disposed) {
    throw new DisposedError(`${call}: ${name} (${value})`);
  }
  assertArray(call, name, value);
  if (!value.contiguous) {
    throw new CudaArgumentError(
      `${call}: ${name} is a strided view (${value}); pass a contiguous array (copy() it first)`,
    );
  }
  return value;
}

/** Whether two arrays have the same shape. */
export function sameShape(a: DeviceArray, b: DeviceArray): boolean {
  const x = a.shape;
  const y = b.shape;
  if (x.length !== y.length) return false;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}

/** Throws unless `array` has `reference`'s shape. */
export function checkSameShape(
  array: DeviceArray,
  reference: DeviceArray,
  call: string,
  name: string,
  referenceName: string,
): void {
  if (!sameShape(array, reference)) {
    throw new CudaArgumentError(
      `${call}: ${name} has shape [${array.shape.join(', ')}], ${referenceName} has [${reference.shape.join(', ')}] (no broadcasting: pass a number for a scalar)`,
    );
  }
}

const INTEGER_RANGES: Partial<Record<DType, [number, number]>> = {
  int32: [-2147483648, 2147483647],
  uint32: [0, 4294967295],
  int8: [-128, 127],
  uint8: [0, 255],
};

/**
 * The number a scalar of `dtype` is passed as: integers must be in range; half types are
 * rounded to the type (then passed as float). Throws CudaArgumentError otherwise.
 */
export function scalarValue(value: unknown, dtype: DType, call: string, name: string): number {
  if (typeof value !== 'number') {
    throw new CudaArgumentError(
      `${call}: ${name} must be a DeviceArray or a number, got ${describeValue(value)}`,
    );
  }
  if (!scalarFits(value, dtype)) {
    const range = INTEGER_RANGES[dtype]!;
    throw new CudaArgumentError(
      `${call}: ${name} is ${dtype}: expected an integer in [${range[0]}, ${range[1]}], got ${value}`,
    );
  }
  if (dtype === 'float16') return float16BitsToFloat32(float32ToFloat16Bits(value));
  if (dtype === 'bfloat16') return bfloat16BitsToFloat32(float32ToBfloat16Bits(value));
  return value;
}

/**
 * Sets every element of a reused list to `value`. A loop: `Array.prototype.fill` is a call
 * into the runtime that costs tens of nanoseconds on every kernel call.
 */
export function clearList(list: unknown[], value: unknown): void {
  for (let i = 0; i < list.length; i++) list[i] = value;
}

/** Whether `value` can be passed as a scalar of `dtype` (integers must be in range). */
export function scalarFits(value: number, dtype: DType): boolean {
  const range = INTEGER_RANGES[dtype];
  return range === undefined || (Number.isInteger(value) && value >= range[0] && value <= range[1]);
}

/** Throws unless `dtype` is one of `allowed`. */
export function checkDType(
  dtype: DType,
  allowed: readonly DType[],
  call: string,
  name: string,
): void {
  if (!allowed.includes(dtype)) {
    throw new CudaArgumentError(`${call}: ${name} is ${dtype}; supported: ${allowed.join(', ')}`);
  }
}

/**
 * Throws a CudaArgumentError when contiguous `output` shares a byte with contiguous `input`,
 * except, with `inPlace`, when both hold exactly the same elements (same first byte, element
 * size and length): an element-wise kernel reads each element before it writes that
 * element's result, so in place is defined; any other overlap reads results the call itself
 * wrote (a wrong answer without an error). Pass `inPlace` false for kernels whose outputs
 * depend on many inputs (reductions, top-k): any overlap is refused there.
 */
export function checkOutputApart(
  call: string,
  outputName: string,
  output: DeviceArray,
  inputName: string,
  input: DeviceArray,
  inPlace: boolean,
): void {
  if (output.buffer !== input.buffer) return;
  const outputBytes = output.elementBytes;
  const inputBytes = input.elementBytes;
  const outputStart = output.offset * outputBytes;
  const inputStart = input.offset * inputBytes;
  const outputLength = output.length * outputBytes;
  if (!byteRangesOverlap(outputStart, outputLength, inputStart, input.length * inputBytes)) return;
  if (
    inPlace &&
    outputStart === inputStart &&
    outputBytes === inputBytes &&
    output.length === input.length
  ) {
    return;
  }
  throw new CudaArgumentError(
    `${call}: ${outputName} overlaps ${inputName} in memory (elements ${output.offset}..${output.offset + output.length - 1} and ${input.offset}..${input.offset + input.length - 1} of one buffer)${inPlace ? '; in place is allowed only over exactly the same elements' : ''}: pass an output apart from the inputs`,
  );
}

/**
 * The checks of one call's arrays against the stream and each other, after the stream is
 * resolved and before anything native: every array lives in the stream's context; no output
 * overlaps another output; no output overlaps an input (but see `checkOutputApart`'s
 * `inPlace`). `names[j]` names parameter j (inputs, then outputs); the outputs are
 * `outputs[outputStart..outputEnd)`, undefined ones (to be allocated) skipped; numbers among
 * the inputs are skipped. Allocates nothing.
 */
export function checkOperands(
  call: string,
  names: readonly string[],
  inputs: ArrayLike<unknown>,
  inputCount: number,
  outputs: ArrayLike<unknown>,
  outputStart: number,
  outputEnd: number,
  stream: Stream,
  inPlace: boolean,
): void {
  for (let j = 0; j < inputCount; j++) {
    const input = inputs[j];
    if (DeviceArray.isInstance(input)) assertSameContext(call, names[j]!, input, stream);
  }
  for (let j = outputStart; j < outputEnd; j++) {
    const output = outputs[j];
    if (!DeviceArray.isInstance(output)) continue;
    const name = names[inputCount + j - outputStart]!;
    assertSameContext(call, name, output, stream);
    for (let k = 0; k < inputCount; k++) {
      const input = inputs[k];
      if (DeviceArray.isInstance(input)) {
        checkOutputApart(call, name, output, names[k]!, input, inPlace);
      }
    }
    for (let k = outputStart; k < j; k++) {
      const other = outputs[k];
      if (DeviceArray.isInstance(other)) {
        checkOutputApart(call, name, output, names[inputCount + k - outputStart]!, other, false);
      }
    }
  }
}
