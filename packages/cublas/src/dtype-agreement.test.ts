import type { DeviceArray } from '@cuda-tasks/cudadrv';
import { describe, expectTypeOf, it } from 'vitest';
import { axpy, dot, gemm, gemmStridedBatched, gemv, matmul } from './index.js';

// Mixed float32 / float64 operands are a compile error where the dtypes are known statically
// (the typecheck of this package runs this file: each @ts-expect-error must meet an error),
// and a plain DeviceArray (dtype not known) still compiles: the runtime check covers it.
// Nothing here runs on a device: the calls sit in functions that are only typechecked.
declare const f32: DeviceArray<'float32'>;
declare const f64: DeviceArray<'float64'>;
declare const loose: DeviceArray;

function typecheckedOnly(): void {
  // @ts-expect-error b is float64, a float32
  gemm(f32, f64, f32);
  // @ts-expect-error c is float64, a and b float32
  gemm(f32, f32, f64);
  // @ts-expect-error b is float32, a float64
  gemmStridedBatched(f64, f32, f64);
  // @ts-expect-error b is float64, a float32
  matmul(f32, f64);
  // @ts-expect-error x is float64, a float32
  gemv(f32, f64, f32);
  // @ts-expect-error y is float32, a and x float64
  gemv(f64, f64, f32);
  gemm(f64, f64, loose);
  gemm(loose, f32, f32);
  gemv(loose, loose, loose);
  // @ts-expect-error y is float64, x float32
  axpy(2, f32, f64);
  // @ts-expect-error y is float32, x float64
  dot(f64, f32);
  axpy(2, f64, f64);
  dot(f32, f32);
  axpy(2, loose, f32);
  dot(f64, loose);
}

describe('one dtype per call, at compile time', () => {
  it('keeps the result types: gemm returns c, matmul an array of a dtype', () => {
    expectTypeOf(typecheckedOnly).toBeFunction();
    expectTypeOf(gemm<'float32', 'float32', DeviceArray<'float32'>>).returns.toEqualTypeOf<
      DeviceArray<'float32'>
    >();
    expectTypeOf(matmul<'float64', 'float64'>).returns.toEqualTypeOf<DeviceArray<'float64'>>();
    expectTypeOf(gemv<'float32', 'float32', DeviceArray>).returns.toEqualTypeOf<DeviceArray>();
    expectTypeOf(axpy<'float64', DeviceArray<'float64'>>).returns.toEqualTypeOf<
      DeviceArray<'float64'>
    >();
    expectTypeOf(dot<'float32', 'float32'>).returns.toEqualTypeOf<Promise<number>>();
  });
});
