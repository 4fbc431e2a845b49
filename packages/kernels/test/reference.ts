/**
 * What the GPU tests of @cuda-tasks/kernels share: host data of each dtype, the values a
 * dtype stores (the float64 references are computed from those), and tolerance checks.
 */
import {
  bfloat16BitsToFloat32,
  DeviceArray,
  type DType,
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
} from '@cuda-tasks/cudadrv';
import { rng } from '@cuda-tasks/testing';

/** `value` as `dtype` stores it (float32 rounds, half types round to nearest even, int32 wraps). */
export function roundTo(dtype: DType, value: number): number {
  switch (dtype) {
    case 'float32':
      return Math.fround(value);
    case 'float16':
      return float16BitsToFloat32(float32ToFloat16Bits(value));
    case 'bfloat16':
      return bfloat16BitsToFloat32(float32ToBfloat16Bits(value));
    case 'int32':
      return value | 0;
    default:
      return value;
  }
}

/** Units in the last place, relative, per dtype (for tolerances). */
export const EPSILON: Partial<Record<DType, number>> = {
  float64: 2 ** -52,
  float32: 2 ** -23,
  float16: 2 ** -10,
  bfloat16: 2 ** -7,
};

/**
 * `n` values of `dtype` uniform in [low, high) (integers for int32), seeded, as the host
 * array the dtype travels in, and as float64 copies of the stored values.
 */
export function hostData(
  dtype: DType,
  n: number,
  seed: number,
  low = -1,
  high = 1,
): { host: Float32Array | Float64Array | Int32Array; values: Float64Array } {
  const next = rng(seed);
  const values = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const x = low + (high - low) * next();
    values[i] = roundTo(dtype, dtype === 'int32' ? Math.floor(x) : x);
  }
  const host =
    dtype === 'float64'
      ? Float64Array.from(values)
      : dtype === 'int32'
        ? Int32Array.from(values)
        : Float32Array.from(values);
  return { host, values };
}

/** A device array of `dtype` holding `values` (already representable). */
export function deviceArray(
  dtype: DType,
  values: ArrayLike<number>,
  shape?: number[],
): DeviceArray {
  const host =
    dtype === 'float64'
      ? Float64Array.from(values)
      : dtype === 'int32'
        ? Int32Array.from(values)
        : Float32Array.from(values);
  return DeviceArray.fromHost(host as Float32Array, shape ?? [values.length], { dtype });
}

/** Random data of `dtype` on the device, with its values in float64. */
export function randomArray(
  dtype: DType,
  shape: number[],
  seed: number,
  low = -1,
  high = 1,
): { array: DeviceArray; values: Float64Array } {
  const n = shape.reduce((a, b) => a * b, 1);
  const { values } = hostData(dtype, n, seed, low, high);
  return { array: deviceArray(dtype, values, shape), values };
}

/**
 * The first index where `got` differs from `expected` by more than `ulps` units of `dtype`
 * relative to the expected value (or to `scale[i]` when given: the size of the terms a result
 * came from), plus `absolute`; -1 when there is none. NaN must meet NaN.
 */
export function firstMismatch(
  got: ArrayLike<number>,
  expected: ArrayLike<number>,
  dtype: DType,
  ulps: number,
  absolute = 0,
  scale?: ArrayLike<number>,
): number {
  if (got.length !== expected.length) return Math.min(got.length, expected.length);
  const epsilon = EPSILON[dtype] ?? 0;
  for (let i = 0; i < expected.length; i++) {
    const want = expected[i]!;
    const have = got[i]!;
    if (Number.isNaN(want) || Number.isNaN(have)) {
      if (Number.isNaN(want) !== Number.isNaN(have)) return i;
      continue;
    }
    if (want === have) continue;
    const size = scale === undefined ? Math.abs(want) : scale[i]!;
    if (!(Math.abs(have - want) <= ulps * epsilon * size + absolute)) return i;
  }
  return -1;
}

/** A readable report of a mismatch at `index` (or 'ok' when there is none). */
export function mismatchReport(
  index: number,
  got: ArrayLike<number>,
  expected: ArrayLike<number>,
  inputs: Record<string, ArrayLike<number>> = {},
): string {
  if (index < 0) return 'ok';
  const shown = Object.entries(inputs)
    .map(([name, values]) => `${name} = ${values[index]}`)
    .join(', ');
  return `at ${index}: got ${got[index]}, expected ${expected[index]}${shown ? ` (${shown})` : ''}`;
}
