import { CudaArgumentError, DeviceArray } from '@cuda-tasks/cudadrv';
import {
  describeGpu,
  diagonallyDominant,
  luReconstruct,
  multiply,
  Rng,
  randomMatrix,
  relativeError,
  relativeResidual,
  transpose,
} from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { download, SOLVER_DTYPES, TOLERANCE, upload } from '../test/device.js';
import { CusolverError, lu, luSolve, SingularMatrixError, solve } from './index.js';

describeGpu('LU: lu, luSolve, solve (getrf/getrs)', () => {
  for (const dtype of SOLVER_DTYPES) {
    const tolerance = TOLERANCE[dtype];

    describe(dtype, () => {
      it('factors square, tall and wide matrices: P L U = A, without touching A', async () => {
        const rng = new Rng(101);
        for (const [m, n] of [
          [128, 128],
          [96, 64],
          [64, 96],
        ] as const) {
          const { array: a, host } = upload(dtype, randomMatrix(rng, m, n), [m, n]);
          const { lu: factors, pivots } = await lu(a);
          expect(factors.shape).toEqual([m, n]);
          expect(factors.dtype).toBe(dtype);
          expect(pivots.dtype).toBe('int32');
          expect(pivots.shape).toEqual([Math.min(m, n)]);
          const p = await pivots.toHost();
          // LAPACK ipiv: 1-based, and row i is only swapped with a row at or below it.
          p.forEach((row, i) => {
            expect(row).toBeGreaterThanOrEqual(i + 1);
            expect(row).toBeLessThanOrEqual(m);
          });
          const rebuilt = luReconstruct(await download(factors), p, m, n);
          expect(relativeError(rebuilt, host)).toBeLessThan(tolerance.reconstruction);
          expect(await download(a)).toEqual(host);
          a.dispose();
          factors.dispose();
          pivots.dispose();
        }
      });

      it('solve: small residual for n = 64 and 256, matrix and vector right-hand sides', async () => {
        const rng = new Rng(202);
        for (const [n, k] of [
          [64, 1],
          [256, 3],
        ] as const) {
          const { array: a, host: hostA } = upload(dtype, diagonallyDominant(rng, n), [n, n]);
          const { array: b, host: hostB } = upload(dtype, randomMatrix(rng, n, k), [n, k]);
          const vector = upload(dtype, randomMatrix(rng, n, 1), [n]);
          const x = await solve(a, b);
          expect(x.shape).toEqual([n, k]);
          const residual = relativeResidual(hostA, await download(x), hostB, n, k);
          expect(residual).toBeLessThan(tolerance.residual);
          const xv = await solve(a, vector.array);
          expect(xv.shape).toEqual([n]);
          expect(relativeResidual(hostA, await download(xv), vector.host, n, 1)).toBeLessThan(
            tolerance.residual,
          );
          // Neither input was overwritten.
          expect(await download(a)).toEqual(hostA);
          expect(await download(b)).toEqual(hostB);
          for (const array of [a, b, vector.array, x, xv]) array.dispose();
        }
      });

      it('solve with overwriteA / overwriteB works in its inputs where they are apart and contiguous', async () => {
        const rng = new Rng(212);
        const n = 128;
        const k = 2;
        const { array: a, host: hostA } = upload(dtype, diagonallyDominant(rng, n), [n, n]);
        const { array: b, host: hostB } = upload(dtype, randomMatrix(rng, n, k), [n, k]);
        const x = await solve(a, b, { overwriteA: true, overwriteB: true });
        expect(x).toBe(b); // the solution is written over b
        expect(relativeResidual(hostA, await download(x), hostB, n, k)).toBeLessThan(
          tolerance.residual,
        );
        // a holds the factors now: P L U = A.
        expect(await download(a)).not.toEqual(hostA);
        a.dispose();
        b.dispose();

        // b a column of a (shared memory): neither is worked in, and the answer is right.
        const { array: both, host: hostBoth } = upload(
          dtype,
          (() => {
            const m = diagonallyDominant(rng, n);
            const out = new Float64Array(n * (n + 1));
            out.set(m);
            out.set(randomMatrix(rng, n, 1), n * n);
            return out;
          })(),
          [n, n + 1],
        );
        const square = both.block(0, 0, n, n);
        const column = both.block(0, n, n, 1);
        const y = await solve(square, column, { overwriteA: true, overwriteB: true });
        expect(y).not.toBe(column);
        expect(
          relativeResidual(
            hostBoth.subarray(0, n * n),
            await download(y),
            hostBoth.subarray(n * n),
            n,
            1,
          ),
        ).toBeLessThan(tolerance.residual);
        expect(await download(both)).toEqual(hostBoth);
        both.dispose();
        y.dispose();
      });

      it('luSolve reuses one factorization, also for A^T X = B', async () => {
        const rng = new Rng(303);
        const n = 128;
        const { array: a, host: hostA } = upload(dtype, diagonallyDominant(rng, n), [n, n]);
        const { array: b, host: hostB } = upload(dtype, randomMatrix(rng, n, 4), [n, 4]);
        const factorization = await lu(a);
        const x = luSolve(factorization, b);
        const xt = luSolve(factorization, b, { transpose: true });
        expect(relativeResidual(hostA, await download(x), hostB, n, 4)).toBeLessThan(
          tolerance.residual,
        );
        expect(
          relativeResidual(transpose(hostA, n, n), await download(xt), hostB, n, 4),
        ).toBeLessThan(tolerance.residual);
        for (const array of [a, b, x, xt, factorization.lu, factorization.pivots]) array.dispose();
      });

      it('takes column-major views of larger matrices (leading dimension > rows)', async () => {
        const rng = new Rng(404);
        const n = 64;
        const big = 100;
        const parentHost = randomMatrix(rng, big, big);
        for (let i = 0; i < n; i++) parentHost[10 + i + (20 + i) * big]! += n; // dominant block
        const { array: parent, host: hostParent } = upload(dtype, parentHost, [big, big]);
        const view = parent.block(10, 20, n, n);
        expect(view.leadingDimension).toBe(big);
        const hostA = new Float64Array(n * n);
        for (let j = 0; j < n; j++)
          for (let i = 0; i < n; i++) hostA[i + j * n] = hostParent[10 + i + (20 + j) * big]!;
        const { array: bParent, host: hostBParent } = upload(dtype, randomMatrix(rng, big, 2), [
          big,
          2,
        ]);
        const b = bParent.block(5, 0, n, 2);
        const hostB = new Float64Array(n * 2);
        for (let j = 0; j < 2; j++)
          for (let i = 0; i < n; i++) hostB[i + j * n] = hostBParent[5 + i + j * big]!;
        const x = await solve(view, b);
        expect(x.shape).toEqual([n, 2]);
        expect(relativeResidual(hostA, await download(x), hostB, n, 2)).toBeLessThan(
          tolerance.residual,
        );
        // The factorization of the view is the factorization of its elements.
        const factorization = await lu(view);
        const x2 = luSolve(factorization, b);
        expect(relativeResidual(hostA, await download(x2), hostB, n, 2)).toBeLessThan(
          tolerance.residual,
        );
        for (const array of [parent, bParent, x, x2, factorization.lu, factorization.pivots])
          array.dispose();
      });

      it('rejects a singular matrix with SingularMatrixError (info = first zero pivot)', async () => {
        const rng = new Rng(505);
        const n = 32;
        const singular = randomMatrix(rng, n, n);
        for (let i = 0; i < n; i++) singular[i + 3 * n] = 0; // column 4 (1-based) is zero
        const { array: a } = upload(dtype, singular, [n, n]);
        const { array: b } = upload(dtype, randomMatrix(rng, n, 1), [n, 1]);
        for (const attempt of [() => lu(a), () => solve(a, b)]) {
          const error = await attempt().then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(error).toBeInstanceOf(SingularMatrixError);
          expect(error).toBeInstanceOf(CusolverError);
          expect((error as SingularMatrixError).info).toBe(4);
          expect((error as SingularMatrixError).call).toMatch(/^cusolverDn[SD]getrf$/);
        }
        a.dispose();
        b.dispose();
      });
    });
  }

  it('rejects bad input with CudaArgumentError before any native call', async () => {
    const square = DeviceArray.zeros('float64', [8, 8]);
    const wide = DeviceArray.zeros('float64', [8, 9]);
    const single = DeviceArray.zeros('float32', [8, 1]);
    const integers = DeviceArray.zeros('int32', [8, 8]);
    const short = DeviceArray.zeros('float64', [7]);
    await expect(solve(wide, short)).rejects.toThrow(CudaArgumentError);
    await expect(solve(square, short)).rejects.toThrow(/b has 7 rows but a is 8 x 8/);
    await expect(solve(square, single as never)).rejects.toThrow(/same dtype/);
    await expect(lu(integers as never)).rejects.toThrow(/float32 or float64/);
    const disposed = DeviceArray.zeros('float64', [8, 8]);
    disposed.dispose();
    await expect(lu(disposed)).rejects.toThrow(CudaArgumentError);
    for (const array of [square, wide, single, integers, short]) array.dispose();
  });

  it('matches a CPU solve for a small well-known system', async () => {
    // [4 1; 2 3] x = [1; 2] -> x = [0.1; 0.6]
    const a = DeviceArray.fromHost<'float64'>(new Float64Array([4, 2, 1, 3]), [2, 2]);
    const b = DeviceArray.fromHost<'float64'>(new Float64Array([1, 2]));
    const solution = await solve(a, b);
    const x = await download(solution);
    expect(x[0]).toBeCloseTo(0.1, 14);
    expect(x[1]).toBeCloseTo(0.6, 14);
    expect(Array.from(multiply([4, 2, 1, 3], 2, 2, x, 1))).toEqual([
      expect.closeTo(1, 14),
      expect.closeTo(2, 14),
    ]);
    for (const array of [a, b, solution]) array.dispose();
  });
});
