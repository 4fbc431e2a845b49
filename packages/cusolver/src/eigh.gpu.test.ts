import {
  describeGpu,
  diagonal,
  frobenius,
  jacobiEigen,
  multiply,
  orthogonalityError,
  Rng,
  randomSymmetric,
  subtract,
} from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { download, SOLVER_DTYPES, TOLERANCE, upload } from '../test/device.js';
import { eigh } from './index.js';

describeGpu('symmetric eigenproblem: eigh (syevd)', () => {
  for (const dtype of SOLVER_DTYPES) {
    const tolerance = TOLERANCE[dtype];

    describe(dtype, () => {
      it('A V = V diag(w), V orthogonal, w ascending (n = 64 and 160)', async () => {
        const rng = new Rng(41);
        for (const n of [64, 160]) {
          const { array: a, host } = upload(dtype, randomSymmetric(rng, n), [n, n]);
          const { values, vectors } = await eigh(a);
          expect(values.shape).toEqual([n]);
          expect(vectors.shape).toEqual([n, n]);
          const w = await download(values);
          const v = await download(vectors);
          for (let i = 1; i < n; i++) expect(w[i]).toBeGreaterThanOrEqual(w[i - 1]!);
          expect(orthogonalityError(v, n, n)).toBeLessThan(tolerance.orthogonality);
          const av = multiply(host, n, n, v, n);
          const vw = multiply(v, n, n, diagonal(w), n);
          expect(frobenius(subtract(av, vw)) / frobenius(host)).toBeLessThan(
            tolerance.reconstruction,
          );
          expect(await download(a)).toEqual(host);
          for (const array of [a, values, vectors]) array.dispose();
        }
      });

      it('eigenvalues match a CPU Jacobi reference; upper reads only the upper triangle', async () => {
        const rng = new Rng(42);
        const n = 12;
        const symmetric = randomSymmetric(rng, n);
        const { array: a, host } = upload(dtype, symmetric, [n, n]);
        const expected = jacobiEigen(host, n).values;
        const scale = Math.max(...Array.from(expected, Math.abs));
        // The same matrix with garbage in the other triangle, for each uplo.
        const lowerOnly = Float64Array.from(host);
        const upperOnly = Float64Array.from(host);
        for (let j = 0; j < n; j++)
          for (let i = 0; i < n; i++) {
            if (i < j) lowerOnly[i + j * n] = 99;
            if (i > j) upperOnly[i + j * n] = -99;
          }
        const lower = upload(dtype, lowerOnly, [n, n]);
        const upper = upload(dtype, upperOnly, [n, n]);
        for (const [input, options] of [
          [a, {}],
          [lower.array, { upper: false }],
          [upper.array, { upper: true }],
        ] as const) {
          const { values, vectors } = await eigh(input, options);
          const w = await download(values);
          for (let i = 0; i < n; i++) {
            expect(Math.abs(w[i]! - expected[i]!)).toBeLessThan(tolerance.values * 10 * scale);
          }
          const v = await download(vectors);
          const av = multiply(host, n, n, v, n);
          const vw = multiply(v, n, n, diagonal(w), n);
          expect(frobenius(subtract(av, vw)) / frobenius(host)).toBeLessThan(
            tolerance.reconstruction,
          );
          values.dispose();
          vectors.dispose();
        }
        for (const array of [a, lower.array, upper.array]) array.dispose();
      });
    });
  }
});
