import { CudaArgumentError } from './errors.js';

/** Element types a DeviceArray can hold. */
export type DType =
  | 'float32'
  | 'float64'
  | 'int32'
  | 'uint32'
  | 'int8'
  | 'uint8'
  | 'float16'
  | 'bfloat16';

/**
 * The floating-point dtypes the libraries compute in (cuBLAS, cuSOLVER, cuRAND's uniform and
 * normal draws): the one name for this union across the packages.
 */
export type FloatDType = 'float32' | 'float64';

/** The host typed array for each dtype (half-precision types travel as Float32Array). */
export interface HostArrayOf {
  /** float32 travels as Float32Array. */
  float32: Float32Array;
  /** float64 travels as Float64Array. */
  float64: Float64Array;
  /** int32 travels as Int32Array. */
  int32: Int32Array;
  /** uint32 travels as Uint32Array. */
  uint32: Uint32Array;
  /** int8 travels as Int8Array. */
  int8: Int8Array;
  /** uint8 travels as Uint8Array. */
  uint8: Uint8Array;
  /** float16 travels as Float32Array (converted on the way to and from the device). */
  float16: Float32Array;
  /** bfloat16 travels as Float32Array (converted on the way to and from the device). */
  bfloat16: Float32Array;
}

/** A host typed array accepted by `DeviceArray.fromHost`. */
export type HostArray = HostArrayOf[DType];

interface DTypeInfo {
  bytes: number;
  host: { new (length: number): HostArray; name: string };
}

/** Size and host type of each dtype. */
export const DTYPES: Readonly<Record<DType, DTypeInfo>> = {
  float32: { bytes: 4, host: Float32Array },
  float64: { bytes: 8, host: Float64Array },
  int32: { bytes: 4, host: Int32Array },
  uint32: { bytes: 4, host: Uint32Array },
  int8: { bytes: 1, host: Int8Array },
  uint8: { bytes: 1, host: Uint8Array },
  float16: { bytes: 2, host: Float32Array },
  bfloat16: { bytes: 2, host: Float32Array },
};

/** Bytes per element of `dtype`. */
export function dtypeBytes(dtype: DType): number {
  return DTYPES[dtype].bytes;
}

/** Throws a CudaArgumentError unless `dtype` is one of the supported names. */
export function assertDType(dtype: unknown): asserts dtype is DType {
  if (typeof dtype !== 'string' || !Object.hasOwn(DTYPES, dtype)) {
    throw new CudaArgumentError(
      `unknown dtype ${JSON.stringify(dtype)}; expected one of ${Object.keys(DTYPES).join(', ')}`,
    );
  }
}

/** The dtype that a host typed array stands for (Float32Array -> float32, ...). */
export function dtypeOfHost(data: ArrayBufferView): DType {
  if (data instanceof Float32Array) return 'float32';
  if (data instanceof Float64Array) return 'float64';
  if (data instanceof Int32Array) return 'int32';
  if (data instanceof Uint32Array) return 'uint32';
  if (data instanceof Int8Array) return 'int8';
  if (data instanceof Uint8Array) return 'uint8';
  throw new CudaArgumentError(
    `unsupported host array ${data.constructor.name}; use Float32Array, Float64Array, Int32Array, Uint32Array, Int8Array or Uint8Array`,
  );
}

const conversion = new DataView(new ArrayBuffer(4));

/** IEEE binary16 bits of a float32 value, rounded to nearest even (a wider double is first rounded to float32). */
export function float32ToFloat16Bits(value: number): number {
  conversion.setFloat32(0, value);
  const x = conversion.getUint32(0);
  const sign = (x >>> 16) & 0x8000;
  const exponent = (x >>> 23) & 0xff;
  let mantissa = x & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa ? 0x200 : 0); // inf / NaN
  const e = exponent - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow to inf
  if (e <= 0) {
    if (e < -10) return sign; // underflow to zero
    mantissa |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    let result = mantissa >>> shift;
    const rest = mantissa & ((1 << shift) - 1);
    if (rest > half || (rest === half && (result & 1) === 1)) result++;
    return sign | result;
  }
  let result = (e << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (result & 1) === 1)) result++;
  return sign | result; // a carry into the exponent is correct rounding (may give inf)
}

/** The number that IEEE binary16 bits stand for. */
export function float16BitsToFloat32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

/** bfloat16 bits of a number (the top half of its float32), rounded to nearest even. */
export function float32ToBfloat16Bits(value: number): number {
  conversion.setFloat32(0, value);
  const x = conversion.getUint32(0);
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0) return (x >>> 16) | 0x40; // NaN stays NaN
  const rounded = x + 0x7fff + ((x >>> 16) & 1);
  return (rounded >>> 16) & 0xffff;
}

/** The number that bfloat16 bits stand for. */
export function bfloat16BitsToFloat32(bits: number): number {
  conversion.setUint32(0, (bits & 0xffff) << 16);
  return conversion.getFloat32(0);
}

/** Encodes float32 values into 16-bit storage for `float16` or `bfloat16`. */
export function encodeHalf(dtype: 'float16' | 'bfloat16', values: ArrayLike<number>): Uint16Array {
  const out = new Uint16Array(values.length);
  const encode = dtype === 'float16' ? float32ToFloat16Bits : float32ToBfloat16Bits;
  for (let i = 0; i < values.length; i++) out[i] = encode(values[i]!);
  return out;
}

/** Decodes 16-bit `float16` or `bfloat16` storage into float32 values. */
export function decodeHalf(dtype: 'float16' | 'bfloat16', bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  const decode = dtype === 'float16' ? float16BitsToFloat32 : bfloat16BitsToFloat32;
  for (let i = 0; i < bits.length; i++) out[i] = decode(bits[i]!);
  return out;
}
