/**
 * How each dtype appears in generated CUDA C: its storage type in memory, the type an
 * expression computes with (half types compute in float), how it is passed as a scalar
 * kernel argument, and the conversions between storage and value.
 */
import type { DType, KernelParameter } from '@cuda-tasks/cudadrv';

interface CType {
  /** The element type in device memory. */
  storage: string;
  /** The type expressions see and compute with. */
  value: string;
  /** The kernel parameter type of a scalar of this dtype (what `launch` marshals). */
  scalar: KernelParameter;
  /** Index of the dtype, for variant keys (0..7). */
  code: number;
}

/** Every dtype's C-side description. */
export const CTYPES: Readonly<Record<DType, CType>> = {
  float32: { storage: 'float', value: 'float', scalar: 'float32', code: 0 },
  float64: { storage: 'double', value: 'double', scalar: 'float64', code: 1 },
  int32: { storage: 'int', value: 'int', scalar: 'int32', code: 2 },
  uint32: { storage: 'unsigned int', value: 'unsigned int', scalar: 'uint32', code: 3 },
  int8: { storage: 'signed char', value: 'signed char', scalar: 'int8', code: 4 },
  uint8: { storage: 'unsigned char', value: 'unsigned char', scalar: 'uint8', code: 5 },
  float16: { storage: 'unsigned short', value: 'float', scalar: 'float32', code: 6 },
  bfloat16: { storage: 'unsigned short', value: 'float', scalar: 'float32', code: 7 },
};

/** The dtypes by their `code`. */
export const DTYPE_BY_CODE: readonly DType[] = [
  'float32',
  'float64',
  'int32',
  'uint32',
  'int8',
  'uint8',
  'float16',
  'bfloat16',
];

/** Whether a dtype is stored as 16 bits and computed in float. */
export function isHalf(dtype: DType): dtype is 'float16' | 'bfloat16' {
  return dtype === 'float16' || dtype === 'bfloat16';
}

/** Whether a dtype holds integers. */
export function isInteger(dtype: DType): boolean {
  return dtype === 'int32' || dtype === 'uint32' || dtype === 'int8' || dtype === 'uint8';
}

/** `expression` (of storage type) converted to the value type. */
export function loadValue(dtype: DType, expression: string): string {
  if (dtype === 'float16') return `ct_f16_to_f32(${expression})`;
  if (dtype === 'bfloat16') return `ct_bf16_to_f32(${expression})`;
  return expression;
}

/** `expression` (of value type) converted to the storage type. */
export function storeValue(dtype: DType, expression: string): string {
  if (dtype === 'float16') return `ct_f32_to_f16(${expression})`;
  if (dtype === 'bfloat16') return `ct_f32_to_bf16(${expression})`;
  return expression;
}

/**
 * Device functions for the half types, without cuda_fp16.h (NVRTC has no include path of its
 * own): PTX conversions for float16; bfloat16 is the top half of a float32, rounded to nearest
 * even as cudadrv's `float32ToBfloat16Bits` does on the host.
 */
export const HALF_PRELUDE = `__device__ __forceinline__ float ct_f16_to_f32(unsigned short ct_h) {
  float ct_f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(ct_f) : "h"(ct_h));
  return ct_f;
}
__device__ __forceinline__ unsigned short ct_f32_to_f16(float ct_f) {
  unsigned short ct_h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(ct_h) : "f"(ct_f));
  return ct_h;
}
__device__ __forceinline__ float ct_bf16_to_f32(unsigned short ct_h) {
  return __uint_as_float(((unsigned int)ct_h) << 16);
}
__device__ __forceinline__ unsigned short ct_f32_to_bf16(float ct_f) {
  unsigned int ct_bits = __float_as_uint(ct_f);
  if ((ct_bits & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((ct_bits >> 16) | 0x40u);
  return (unsigned short)((ct_bits + 0x7fffu + ((ct_bits >> 16) & 1u)) >> 16);
}
`;
