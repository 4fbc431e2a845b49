import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import { describe, expect, it } from 'vitest';
import { manyTasks } from './scene.js';
import { checkRunOperands, compare, type OperandLike } from './seed.js';

const matrix = (overrides: Partial<OperandLike> = {}): OperandLike => ({
  dtype: 'float32',
  shape: [4, 4],
  contiguous: true,
  ...overrides,
});

describe('checkRunOperands', () => {
  it('accepts float32 matrices with a contiguous output', () => {
    expect(() => checkRunOperands(matrix(), matrix(), matrix())).not.toThrow();
    // Inputs may be views (gemm passes their leading dimension).
    expect(() => checkRunOperands(matrix({ contiguous: false }), matrix(), matrix())).not.toThrow();
  });

  it('rejects other dtypes, vectors and a strided output before any native call', () => {
    expect(() => checkRunOperands(matrix({ dtype: 'float64' }), matrix(), matrix())).toThrow(
      /a must be float32, got float64/,
    );
    expect(() => checkRunOperands(matrix(), matrix({ shape: [16] }), matrix())).toThrow(
      /b must be a matrix/,
    );
    expect(() => checkRunOperands(matrix(), matrix(), matrix({ contiguous: false }))).toThrow(
      CudaArgumentError,
    );
  });
});

describe('compare', () => {
  it('is exact', () => {
    const x = new Float32Array([1, 2, Number.NaN]);
    expect(compare(x, new Float32Array([1, 2, Number.NaN]))).toEqual({
      equal: true,
      mismatches: 0,
      maxAbsDifference: 0,
    });
    const y = new Float32Array([1, 2.5, Number.NaN]);
    expect(compare(x, y)).toEqual({ equal: false, mismatches: 1, maxAbsDifference: 0.5 });
    expect(compare(x, new Float32Array(2)).equal).toBe(false);
  });
});

describe('manyTasks (the demo scene)', () => {
  it('rejects bad options before any native call', async () => {
    await expect(manyTasks({ tasks: 0 })).rejects.toThrow(/tasks must be an integer >= 1, got 0/);
    await expect(manyTasks({ rounds: 1.5 })).rejects.toThrow(CudaArgumentError);
    await expect(manyTasks({ n: -4 })).rejects.toThrow(/n must be an integer >= 1/);
    await expect(manyTasks({ warmups: -1 })).rejects.toThrow(/warmups must be an integer >= 0/);
  });
});
