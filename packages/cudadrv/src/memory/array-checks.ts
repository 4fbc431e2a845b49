/**
 * The checks of one operand every library runs before its native calls: that a value is a
 * usable array (not something else, not disposed), of an accepted dtype, and of the dtype of
 * the call's other operands. Pure (no driver call), and they allocate nothing when the
 * operands pass: messages are built only on failure. Each message starts with the call and
 * names the operand (`gemm: b must be a DeviceArray, got null`).
 */
import type { DType, FloatDType } from '../dtype.js';
import { CudaArgumentError, DisposedError, describeValue } from '../errors.js';

export { describeValue };

import { DeviceArray } from './array.js';

/**
 * What the operand checks read of an array (a DeviceArray has all of it): a plain object of
 * this shape stands for one in unit tests.
 */
export interface Operand {
  /** Element type. */
  readonly dtype: DType;
  /** Dimensions. */
  readonly shape: readonly number[];
  /** Element strides per dimension. */
  readonly strides: readonly number[];
  /** Offset of the first element in the buffer, in elements. */
  readonly offset: number;
  /** Whether the array was disposed. */
  readonly disposed: boolean;
  /** The memory the array views (views of one allocation share it). */
  readonly buffer: { readonly byteLength: number };
}

/** `true` when `T` is a union of several dtypes (the dtype is not known statically), else `false`. */
type IsUnion<T, All = T> = T extends unknown ? ([All] extends [T] ? false : true) : never;

/**
 * What a signature adds to an operand of dtype `B` beside the call's first operand of dtype
 * `A`: nothing where they agree or either is not known statically (a plain `DeviceArray`, or
 * one of several dtypes such as `DeviceArray<FloatDType>`), a property no array has where
 * they differ, so that mixing float32 and float64 operands is a compile error that names both
 * dtypes. The runtime check stays for callers whose dtypes are not known.
 * @example
 * function dot<X extends DType, Y extends DType>(
 *   x: DeviceArray<X>,
 *   y: DeviceArray<Y> & SameDType<X, Y>,
 * ): Promise<number>;
 * dot(f32, f64); // error: 'operands must share one dtype': ['float32', 'float64']
 */
export type SameDType<A extends DType, B extends DType> =
  true extends IsUnion<A>
    ? unknown
    : true extends IsUnion<B>
      ? unknown
      : [A] extends [B]
        ? [B] extends [A]
          ? unknown
          : { 'operands must share one dtype': [A, B] }
        : { 'operands must share one dtype': [A, B] };

/** Whether `value` has an operand's shape (a DeviceArray, or a plain object that stands for one). */
export function isOperand(value: unknown): value is Operand {
  return (
    typeof value === 'object' &&
    value !== null &&
    Array.isArray((value as Operand).shape) &&
    Array.isArray((value as Operand).strides) &&
    typeof (value as Operand).dtype === 'string'
  );
}

/**
 * Throws unless `value` is a usable operand: a CudaArgumentError for anything that is not an
 * array, a DisposedError for a disposed one.
 * @example assertOperand('gemm', 'a', a); // gemm: a must be a DeviceArray, got null
 */
export function assertOperand(
  call: string,
  name: string,
  value: unknown,
): asserts value is Operand {
  if (!isOperand(value)) {
    throw new CudaArgumentError(
      `${call}: ${name} must be a DeviceArray, got ${describeValue(value)}`,
    );
  }
  if (value.disposed) throw new DisposedError(`${call}: ${name}`);
}

/**
 * Throws unless `value` is a usable DeviceArray (of this or another loaded copy of the
 * package): as `assertOperand`, for calls that go on to use the array itself.
 */
export function assertArray(
  call: string,
  name: string,
  value: unknown,
): asserts value is DeviceArray {
  if (!DeviceArray.isInstance(value)) {
    throw new CudaArgumentError(
      `${call}: ${name} must be a DeviceArray, got ${describeValue(value)}`,
    );
  }
  if (value.disposed) throw new DisposedError(`${call}: ${name}`);
}

/** Whether `dtype` is float32 or float64. */
export function isFloatDType(dtype: DType): dtype is FloatDType {
  return dtype === 'float32' || dtype === 'float64';
}

/**
 * Throws unless the operand's dtype is one of `allowed`.
 * @example assertDType('lu', 'pivots', pivots, ['int32']); // lu: pivots must be int32, got uint32
 */
export function assertDType(
  call: string,
  name: string,
  operand: { readonly dtype: DType },
  allowed: readonly DType[],
): void {
  if (allowed.includes(operand.dtype)) return;
  throw new CudaArgumentError(
    `${call}: ${name} must be ${allowed.join(' or ')}, got ${operand.dtype}`,
  );
}

/**
 * The dtype the given operands share, or undefined where two differ (an operand passed as
 * undefined is left out).
 */
export function sharedDType(
  first: { readonly dtype: DType },
  second?: { readonly dtype: DType },
  third?: { readonly dtype: DType },
): DType | undefined {
  const dtype = first.dtype;
  if (second !== undefined && second.dtype !== dtype) return undefined;
  if (third !== undefined && third.dtype !== dtype) return undefined;
  return dtype;
}

/**
 * Throws unless `operand` has the dtype of `reference` (operands of one call share one dtype).
 * @example assertSameDType('solve', 'b', b, 'a', a); // solve: b is float32 but a is float64; ...
 */
export function assertSameDType(
  call: string,
  name: string,
  operand: { readonly dtype: DType },
  referenceName: string,
  reference: { readonly dtype: DType },
): void {
  if (operand.dtype === reference.dtype) return;
  throw new CudaArgumentError(
    `${call}: ${name} is ${operand.dtype} but ${referenceName} is ${reference.dtype}; both must have the same dtype`,
  );
}
