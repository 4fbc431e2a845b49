import type { DeviceArray, FloatDType } from '@cuda-tasks/cudadrv';
import { describe, expectTypeOf, it } from 'vitest';
import { choleskySolve, luSolve, solve } from './index.js';

// Mixed float32 / float64 operands are a compile error where the dtypes are known statically
// (the typecheck of this package runs this file: each @ts-expect-error must meet an error),
// and an array whose dtype is one of several (`DeviceArray<FloatDType>`) still compiles: the
// runtime check covers it. Nothing here runs on a device: the calls sit in a function that is
// only typechecked.
declare const f32: DeviceArray<'float32'>;
declare const f64: DeviceArray<'float64'>;
declare const loose: DeviceArray<FloatDType>;
declare const pivots: DeviceArray<'int32'>;

function typecheckedOnly(): void {
  // @ts-expect-error b is float64, a float32
  solve(f32, f64);
  // @ts-expect-error b is float32, a float64
  solve(f64, f32);
  // @ts-expect-error b is float64, lu float32
  luSolve({ lu: f32, pivots }, f64);
  // @ts-expect-error b is float32, the factor float64
  choleskySolve({ factor: f64, upper: false }, f32);
  // @ts-expect-error b is float64, the factor float32
  choleskySolve(f32, f64, { upper: true });
  solve(f64, f64);
  luSolve({ lu: f32, pivots }, f32);
  choleskySolve({ factor: f64, upper: true }, f64);
  choleskySolve(f32, f32, { upper: false });
  solve(f64, loose);
  solve(loose, f32);
  luSolve({ lu: loose, pivots }, f64);
  choleskySolve(loose, f32, { upper: true });
}

describe('one dtype per solve, at compile time', () => {
  it('keeps the result types: the solution has the dtype of the matrix', () => {
    expectTypeOf(typecheckedOnly).toBeFunction();
    expectTypeOf(solve<'float64', 'float64'>).returns.toEqualTypeOf<
      Promise<DeviceArray<'float64'>>
    >();
    expectTypeOf(luSolve<'float32', 'float32'>).returns.toEqualTypeOf<DeviceArray<'float32'>>();
  });
});
