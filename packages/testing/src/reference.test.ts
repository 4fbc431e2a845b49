import { describe, expect, it } from 'vitest';
import {
  diagonal,
  jacobiEigen,
  luFactor,
  luReconstruct,
  multiply,
  orthogonalityError,
  Rng,
  randomMatrix,
  randomSymmetric,
  relativeError,
  relativeResidual,
  singularValues,
  symmetricPositiveDefinite,
  transpose,
} from './reference.js';

// The GPU tests trust these references: check them against hand-computed results here.
describe('CPU reference routines', () => {
  it('multiplies and transposes column-major matrices', () => {
    // A = [1 3 5; 2 4 6] (2 x 3), B = [1; 1; 1]
    const a = [1, 2, 3, 4, 5, 6];
    expect(Array.from(multiply(a, 2, 3, [1, 1, 1], 1))).toEqual([9, 12]);
    expect(Array.from(transpose(a, 2, 3))).toEqual([1, 3, 5, 2, 4, 6]);
  });

  it('factors with partial pivoting like getrf', () => {
    // A = [1 2; 3 4]: pivot row 2 first; L = [1 0; 1/3 1], U = [3 4; 0 2/3].
    const { lu, pivots, info } = luFactor([1, 3, 2, 4], 2, 2);
    expect(Array.from(pivots)).toEqual([2, 2]);
    expect(info).toBe(0);
    expect(lu[0]).toBe(3);
    expect(lu[1]).toBeCloseTo(1 / 3, 15);
    expect(lu[2]).toBe(4);
    expect(lu[3]).toBeCloseTo(2 / 3, 15);
    expect(relativeError(luReconstruct(lu, pivots, 2, 2), [1, 3, 2, 4])).toBeLessThan(1e-15);
  });

  it('reconstructs P L U for square, tall and wide matrices', () => {
    const rng = new Rng(7);
    for (const [m, n] of [
      [12, 12],
      [15, 9],
      [9, 15],
    ] as const) {
      const a = randomMatrix(rng, m, n);
      const { lu, pivots, info } = luFactor(a, m, n);
      expect(info).toBe(0);
      expect(relativeError(luReconstruct(lu, pivots, m, n), a)).toBeLessThan(1e-14);
    }
  });

  it('reports the first zero pivot, 1-based', () => {
    const rng = new Rng(3);
    const n = 8;
    const a = randomMatrix(rng, n, n);
    for (let i = 0; i < n; i++) a[i + 3 * n] = 0;
    expect(luFactor(a, n, n).info).toBe(4);
  });

  it('diagonalizes a symmetric matrix by Jacobi rotations', () => {
    const rng = new Rng(11);
    const n = 10;
    const a = randomSymmetric(rng, n);
    const { values, vectors } = jacobiEigen(a, n);
    for (let i = 1; i < n; i++) expect(values[i]).toBeGreaterThanOrEqual(values[i - 1]!);
    expect(orthogonalityError(vectors, n, n)).toBeLessThan(1e-13);
    const av = multiply(a, n, n, vectors, n);
    const vw = multiply(vectors, n, n, diagonal(values), n);
    expect(relativeError(av, vw)).toBeLessThan(1e-13);
    // Known eigenvalues: [2 1; 1 2] has 1 and 3.
    const small = jacobiEigen([2, 1, 1, 2], 2);
    expect(small.values[0]).toBeCloseTo(1, 14);
    expect(small.values[1]).toBeCloseTo(3, 14);
  });

  it('computes singular values in descending order', () => {
    // diag(3, 1) padded to 3 x 2, and its 2 x 3 transpose.
    const a = [3, 0, 0, 0, 1, 0];
    for (const s of [singularValues(a, 3, 2), singularValues(transpose(a, 3, 2), 2, 3)]) {
      expect(s[0]).toBeCloseTo(3, 14);
      expect(s[1]).toBeCloseTo(1, 14);
    }
  });

  it('builds SPD matrices whose residual measure is zero for the exact solution', () => {
    const n = 6;
    const a = symmetricPositiveDefinite(new Rng(5), n);
    const { values } = jacobiEigen(a, n);
    expect(values[0]).toBeGreaterThan(0);
    const x = [1, 2, 3, 4, 5, 6];
    expect(relativeResidual(a, x, multiply(a, n, n, x, 1), n, 1)).toBeLessThan(1e-16);
  });
});
