import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import { hostOnlyArray, thrown } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { luSolve } from './index.js';

// One spelling of transpose across the libraries: `transA` (docs/conventions.md). luSolve's
// `transpose` is its deprecated spelling: both given must agree, and each is checked before
// any native call (these arrays have no device memory).
const factors = hostOnlyArray('float64', [4, 4]);
const pivots = hostOnlyArray('int32', [4]);
const b = hostOnlyArray('float64', [4]);

describe('luSolve: transA, and transpose as its deprecated spelling', () => {
  it('a transA that is not a boolean is a CudaArgumentError', () => {
    const error = thrown(() => luSolve({ lu: factors, pivots }, b, { transA: 'yes' as never }));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toMatch(/luSolve: option transA must be true or false/);
  });

  it('both given and different is a CudaArgumentError naming both', () => {
    for (const [transpose, transA] of [
      [true, false],
      [false, true],
    ]) {
      const error = thrown(() => luSolve({ lu: factors, pivots }, b, { transpose, transA }));
      expect(error).toBeInstanceOf(CudaArgumentError);
      expect(error.message).toMatch(/luSolve: .*transA.*transpose/);
    }
  });
});
