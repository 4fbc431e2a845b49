import {
  describeGpu,
  diagonal,
  multiply,
  orthogonalityError,
  Rng,
  randomMatrix,
  relativeError,
  singularValues,
  transpose,
} from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { download, SOLVER_DTYPES, TOLERANCE, upload } from '../test/device.js';
import { svd } from './index.js';

/** The first `rows` rows of a column-major matrix with `totalRows` rows and `columns` columns. */
function topRows(a: Float64Array, totalRows: number, columns: number, rows: number): Float64Array {
  const out = new Float64Array(rows * columns);
  for (let j = 0; j < columns; j++)
    for (let i = 0; i < rows; i++) out[i + j * rows] = a[i + j * totalRows]!;
  return out;
}

describeGpu('SVD: svd (gesvd)', () => {
  for (const dtype of SOLVER_DTYPES) {
    const tolerance = TOLERANCE[dtype];

    describe(dtype, () => {
      for (const full of [false, true]) {
        it(`${full ? 'full' : 'reduced'}: tall and wide, U diag(S) V^T = A, orthonormal, descending`, async () => {
          const rng = new Rng(full ? 31 : 32);
          for (const [m, n] of [
            [96, 64],
            [64, 96],
            [80, 80],
          ] as const) {
            const k = Math.min(m, n);
            const { array: a, host } = upload(dtype, randomMatrix(rng, m, n), [m, n]);
            const { u, s, vt } = await svd(a, { full });
            const uColumns = full ? m : k;
            const vtRows = full ? n : k;
            expect(u.shape).toEqual([m, uColumns]);
            expect(s.shape).toEqual([k]);
            expect(vt.shape).toEqual([vtRows, n]);
            const hostU = await download(u);
            const hostS = await download(s);
            const hostVt = await download(vt);
            for (let i = 0; i < k; i++) {
              expect(hostS[i]).toBeGreaterThanOrEqual(0);
              if (i > 0) expect(hostS[i]).toBeLessThanOrEqual(hostS[i - 1]!);
            }
            expect(orthogonalityError(hostU, m, uColumns)).toBeLessThan(tolerance.orthogonality);
            // V^T's rows are orthonormal: (V^T)^T = V has orthonormal columns.
            expect(orthogonalityError(transpose(hostVt, vtRows, n), n, vtRows)).toBeLessThan(
              tolerance.orthogonality,
            );
            // Rebuild from the first k columns of U and rows of V^T.
            const us = multiply(hostU.subarray(0, m * k), m, k, diagonal(hostS), k);
            const rebuilt = multiply(us, m, k, topRows(hostVt, vtRows, n, k), n);
            expect(relativeError(rebuilt, host)).toBeLessThan(tolerance.reconstruction);
            expect(await download(a)).toEqual(host);
            for (const array of [a, u, s, vt]) array.dispose();
          }
        });
      }

      it('singular values match a CPU reference for small matrices', async () => {
        const rng = new Rng(33);
        for (const [m, n] of [
          [8, 6],
          [6, 8],
        ] as const) {
          const { array: a, host } = upload(dtype, randomMatrix(rng, m, n), [m, n]);
          const expected = singularValues(host, m, n);
          const { u, s, vt } = await svd(a);
          const actual = await download(s);
          expect(actual.length).toBe(expected.length);
          for (let i = 0; i < expected.length; i++) {
            expect(Math.abs(actual[i]! - expected[i]!)).toBeLessThan(
              tolerance.values * 10 * expected[0]!,
            );
          }
          for (const array of [a, u, s, vt]) array.dispose();
        }
      });
    });
  }
});
