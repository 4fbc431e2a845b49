/**
 * Argument checks shared by every kernel of this package. They run before anything native
 * (no current-stream lookup, no compile, no allocation), so bad input is a CudaArgumentError
 * (or DisposedError) however early the program is.
 */
import {
  bfloat16BitsToFloat32,
  CudaArgumentError,
  DeviceArray,
  DisposedError,
  type DType,
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { assertSameContext } from '@cuda-tasks/cudadrv/internal';

/** The options every kernel call takes last. */
export interface CallOptions {
  /** The stream to run on (default: the current task's stream). */
  stream?: Stream;
}

/** Whether `value` is a trailing options object rather than an array or a number. */
export function isOptions(value: unknown): value is CallOptions {
  return typeof value === 'object' && value !== null && !DeviceArray.isInstance(value);
}

/** Checks that `value` is a usable, contiguous DeviceArray; returns it. */
export function checkArray(value: unknown, what: string, label: string): DeviceArray {
  if (!DeviceArray.isInstance(value)) {
    throw new CudaArgumentError(`${what}: ${label} must be a DeviceArray, got ${describe(value)}`);
  }
  if (value.disposed) throw new DisposedError(`${what}: ${label} (${value})`);
  if (!value.contiguous) {
    throw new CudaArgumentError(
      `${what}: ${label} is a strided view (${value}); pass a contiguous array (copy() it first)`,
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
  what: string,
  label: string,
  referenceLabel: string,
): void {
  if (!sameShape(array, reference)) {
    throw new CudaArgumentError(
      `${what}: ${label} has shape [${array.shape.join(', ')}], ${referenceLabel} has [${reference.shape.join(', ')}] (no broadcasting: pass a number for a scalar)`,
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
export function scalarValue(value: unknown, dtype: DType, what: string, label: string): number {
  if (typeof value !== 'number') {
    throw new CudaArgumentError(
      `${what}: ${label} must be a DeviceArray or a number, got ${describe(value)}`,
    );
  }
  if (!scalarFits(value, dtype)) {
    const range = INTEGER_RANGES[dtype]!;
    throw new CudaArgumentError(
      `${what}: ${label} is ${dtype}: expected an integer in [${range[0]}, ${range[1]}], got ${value}`,
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

/** A short description of a value for messages. */
export function describe(value: unknown): string {
  if (DeviceArray.isInstance(value)) return String(value);
  if (value === null) return 'null';
  if (typeof value === 'object') return value.constructor?.name ?? 'an object';
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return JSON.stringify(value);
  return String(value);
}

/** Throws unless `dtype` is one of `allowed`. */
export function checkDType(
  dtype: DType,
  allowed: readonly DType[],
  what: string,
  label: string,
): void {
  if (!allowed.includes(dtype)) {
    throw new CudaArgumentError(`${what}: ${label} is ${dtype}; supported: ${allowed.join(', ')}`);
  }
}

/**
 * Throws a CudaArgumentError unless `array` lives in the context of `stream` (the check every
 * library shares): a kernel of one context given memory of another faults on the device.
 */
export function checkOnStream(
  what: string,
  label: string,
  array: DeviceArray,
  stream: Stream,
): void {
  assertSameContext(what, label, array, stream);
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
  what: string,
  outputLabel: string,
  output: DeviceArray,
  inputLabel: string,
  input: DeviceArray,
  inPlace: boolean,
): void {
  if (output.buffer !== input.buffer || output.length === 0 || input.length === 0) return;
  const outputBytes = output.elementBytes;
  const inputBytes = input.elementBytes;
  const outputStart = output.offset * outputBytes;
  const inputStart = input.offset * inputBytes;
  const outputEnd = outputStart + output.length * outputBytes;
  const inputEnd = inputStart + input.length * inputBytes;
  if (outputEnd <= inputStart || inputEnd <= outputStart) return;
  if (
    inPlace &&
    outputStart === inputStart &&
    outputBytes === inputBytes &&
    output.length === input.length
  ) {
    return;
  }
  throw new CudaArgumentError(
    `${what}: ${outputLabel} overlaps ${inputLabel} in memory (elements ${output.offset}..${output.offset + output.length - 1} and ${input.offset}..${input.offset + input.length - 1} of one buffer)${inPlace ? '; in place is allowed only over exactly the same elements' : ''}: pass an output apart from the inputs`,
  );
}

/**
 * The checks of one call's arrays against the stream and each other, after the stream is
 * resolved and before anything native: every array lives in the stream's context; no output
 * overlaps another output; no output overlaps an input (but see `checkOutputApart`'s
 * `inPlace`). `labels[j]` names parameter j (inputs, then outputs); the outputs are
 * `outputs[outputStart..outputEnd)`, undefined ones (to be allocated) skipped; numbers among
 * the inputs are skipped. Allocates nothing.
 */
export function checkOperands(
  what: string,
  labels: readonly string[],
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
    if (DeviceArray.isInstance(input)) checkOnStream(what, labels[j]!, input, stream);
  }
  for (let j = outputStart; j < outputEnd; j++) {
    const output = outputs[j];
    if (!DeviceArray.isInstance(output)) continue;
    const label = labels[inputCount + j - outputStart]!;
    checkOnStream(what, label, output, stream);
    for (let k = 0; k < inputCount; k++) {
      const input = inputs[k];
      if (DeviceArray.isInstance(input)) {
        checkOutputApart(what, label, output, labels[k]!, input, inPlace);
      }
    }
    for (let k = outputStart; k < j; k++) {
      const other = outputs[k];
      if (DeviceArray.isInstance(other)) {
        checkOutputApart(what, label, output, labels[inputCount + k - outputStart]!, other, false);
      }
    }
  }
}
