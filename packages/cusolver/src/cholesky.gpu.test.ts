import {
  describeGpu,
  identity,
  multiply,
  Rng,
  randomMatrix,
  relativeError,
  relativeResidual,
  symmetricPositiveDefinite,
  transpose,
} from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { download, SOLVER_DTYPES, TOLERANCE, upload } from '../test/device.js';
import { CusolverError, cholesky, choleskySolve, NotPositiveDefiniteError } from './index.js';

/** Largest |element| strictly above (part 'upper') or below ('lower') the diagonal. */
function strictTriangleMax(a: Float64Array, n: number, part: 'upper' | 'lower'): number {
  let max = 0;
  for (let j = 0; j < n; j++)
    for (let i = 0; i < n; i++)
      if (part === 'upper' ? i < j : i > j) max = Math.max(max, Math.abs(a[i + j * n]!));
  return max;
}

describeGpu('Cholesky: cholesky, choleskySolve (potrf/potrs)', () => {
  for (const dtype of SOLVER_DTYPES) {
    const tolerance = TOLERANCE[dtype];

    describe(dtype, () => {
      it('factors SPD matrices (M M^T + n I, n = 64 and 200): L L^T = A, solves', async () => {
        const rng = new Rng(11);
        for (const n of [64, 200]) {
          const { array: a, host } = upload(dtype, symmetricPositiveDefinite(rng, n), [n, n]);
          const { array: b, host: hostB } = upload(dtype, randomMatrix(rng, n, 3), [n, 3]);
          const factorization = await cholesky(a);
          expect(factorization.upper).toBe(false);
          const factor = factorization.factor;
          expect(factor.shape).toEqual([n, n]);
          const l = await download(factor);
          expect(strictTriangleMax(l, n, 'upper')).toBe(0);
          for (let i = 0; i < n; i++) expect(l[i + i * n]).toBeGreaterThan(0);
          const llt = multiply(l, n, n, transpose(l, n, n), n);
          expect(relativeError(llt, host)).toBeLessThan(tolerance.reconstruction);
          const x = choleskySolve(factorization, b);
          expect(x.shape).toEqual([n, 3]);
          expect(relativeResidual(host, await download(x), hostB, n, 3)).toBeLessThan(
            tolerance.residual,
          );
          expect(await download(a)).toEqual(host);
          expect(await download(b)).toEqual(hostB);
          for (const array of [a, b, factor, x]) array.dispose();
        }
      });

      it('upper: reads only the upper triangle; U^T U = A; choleskySolve follows the factor', async () => {
        const rng = new Rng(12);
        const n = 96;
        const spd = symmetricPositiveDefinite(rng, n);
        // Garbage below the diagonal: upper-triangle routines must never read it.
        const lopsided = Float64Array.from(spd);
        for (let j = 0; j < n; j++) for (let i = j + 1; i < n; i++) lopsided[i + j * n] = 1e6;
        const { array: a } = upload(dtype, lopsided, [n, n]);
        const { host } = upload(dtype, spd, [n, n]);
        const { array: b, host: hostB } = upload(dtype, randomMatrix(rng, n, 1), [n]);
        const factorization = await cholesky(a, { upper: true });
        expect(factorization.upper).toBe(true);
        const factor = factorization.factor;
        const u = await download(factor);
        expect(strictTriangleMax(u, n, 'lower')).toBe(0);
        const utu = multiply(transpose(u, n, n), n, n, u, n);
        expect(relativeError(utu, host)).toBeLessThan(tolerance.reconstruction);
        const x = choleskySolve(factorization, b); // the factorization says: upper
        expect(relativeResidual(host, await download(x), hostB, n, 1)).toBeLessThan(
          tolerance.residual,
        );
        const explicit = choleskySolve(factor, b, { upper: true });
        expect(relativeResidual(host, await download(explicit), hostB, n, 1)).toBeLessThan(
          tolerance.residual,
        );
        for (const array of [a, b, factor, x, explicit]) array.dispose();
      });

      it('a copy of an upper factorization solves with U (float64 CPU residual)', async () => {
        const rng = new Rng(13);
        const n = 80;
        const { array: a, host } = upload(dtype, symmetricPositiveDefinite(rng, n), [n, n]);
        const { array: b, host: hostB } = upload(dtype, randomMatrix(rng, n, 2), [n, 2]);
        const factorization = await cholesky(a, { upper: true });
        const copied = { ...factorization, factor: factorization.factor.copy() };
        const x = choleskySolve(copied, b);
        const residual = relativeResidual(host, await download(x), hostB, n, 2);
        // Solved with the lower triangle instead, the residual would be of order 1.
        const wrong = choleskySolve(copied.factor, b, { upper: false });
        const wrongResidual = relativeResidual(host, await download(wrong), hostB, n, 2);
        console.log(
          `cholesky ${dtype} n=${n}: copy of an upper factorization, residual ${residual.toExponential(2)} (with the wrong triangle: ${wrongResidual.toExponential(2)})`,
        );
        expect(residual).toBeLessThan(tolerance.residual);
        expect(wrongResidual).toBeGreaterThan(1e-3);
        for (const array of [a, b, factorization.factor, copied.factor, x, wrong]) array.dispose();
      });

      it('rejects a matrix that is not positive definite with NotPositiveDefiniteError', async () => {
        const n = 16;
        const indefinite = identity(n);
        indefinite[5 + 5 * n] = -1; // the leading minor of order 6 is negative
        const { array: a } = upload(dtype, indefinite, [n, n]);
        for (const upper of [false, true]) {
          const error = await cholesky(a, { upper }).then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(error).toBeInstanceOf(NotPositiveDefiniteError);
          expect(error).toBeInstanceOf(CusolverError);
          expect((error as NotPositiveDefiniteError).info).toBe(6);
          expect((error as NotPositiveDefiniteError).call).toMatch(/^cusolverDn[SD]potrf$/);
        }
        a.dispose();
      });
    });
  }
});
