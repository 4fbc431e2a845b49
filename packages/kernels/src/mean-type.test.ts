import type { DeviceArray } from '@cuda-tasks/cudadrv';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { type MeanDType, mean, reductionOutput } from './reductions.js';

// mean's result dtype is in its type: int32's mean is float64, a float's its own, as the
// runtime picks it (reductionOutput). The typecheck of this package checks the type lines.
declare const int32: DeviceArray<'int32'>;
declare const float32: DeviceArray<'float32'>;
declare const float64Out: DeviceArray<'float64'>;
declare const int32Out: DeviceArray<'int32'>;

function typecheckedOnly(): void {
  expectTypeOf(mean(int32)).toEqualTypeOf<DeviceArray<'float64'>>();
  expectTypeOf(mean(float32)).toEqualTypeOf<DeviceArray<'float32'>>();
  mean(int32, { out: float64Out });
  // @ts-expect-error the mean of int32 is float64: an int32 out does not fit
  mean(int32, { out: int32Out });
}

describe('mean is typed by its input', () => {
  it('int32 -> float64, floats -> themselves, in the types as at runtime', () => {
    expectTypeOf(typecheckedOnly).toBeFunction();
    const cases: readonly [DType3, MeanDType<DType3>][] = [
      ['int32', 'float64'],
      ['float32', 'float32'],
      ['float64', 'float64'],
    ];
    for (const [input, output] of cases) expect(reductionOutput('mean', input)).toBe(output);
  });
});

type DType3 = 'int32' | 'float32' | 'float64';
