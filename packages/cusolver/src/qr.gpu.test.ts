import {
  describeGpu,
  multiply,
  orthogonalityError,
  Rng,
  randomMatrix,
  relativeError,
} from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { download, SOLVER_DTYPES, TOLERANCE, upload } from '../test/device.js';
import { qr } from './index.js';

describeGpu('QR: qr (geqrf + orgqr)', () => {
  for (const dtype of SOLVER_DTYPES) {
    const tolerance = TOLERANCE[dtype];

    describe(dtype, () => {
      it('tall, square and wide: Q^T Q = I, R upper triangular, Q R = A', async () => {
        const rng = new Rng(21);
        for (const [m, n] of [
          [160, 64],
          [128, 128],
          [48, 96],
        ] as const) {
          const k = Math.min(m, n);
          const { array: a, host } = upload(dtype, randomMatrix(rng, m, n), [m, n]);
          const { q, r } = qr(a);
          expect(q.shape).toEqual([m, k]);
          expect(r.shape).toEqual([k, n]);
          expect(q.dtype).toBe(dtype);
          const hostQ = await download(q);
          const hostR = await download(r);
          for (let j = 0; j < n; j++)
            for (let i = j + 1; i < k; i++) expect(hostR[i + j * k]).toBe(0);
          expect(orthogonalityError(hostQ, m, k)).toBeLessThan(tolerance.orthogonality);
          expect(relativeError(multiply(hostQ, m, k, hostR, n), host)).toBeLessThan(
            tolerance.reconstruction,
          );
          expect(await download(a)).toEqual(host);
          for (const array of [a, q, r]) array.dispose();
        }
      });

      it('factors a column-major view of a larger matrix', async () => {
        const rng = new Rng(22);
        const { array: parent, host: hostParent } = upload(
          dtype,
          randomMatrix(rng, 80, 50),
          [80, 50],
        );
        const [m, n] = [60, 30];
        const view = parent.block(7, 11, m, n);
        const host = new Float64Array(m * n);
        for (let j = 0; j < n; j++)
          for (let i = 0; i < m; i++) host[i + j * m] = hostParent[7 + i + (11 + j) * 80]!;
        const { q, r } = qr(view);
        const hostQ = await download(q);
        expect(orthogonalityError(hostQ, m, n)).toBeLessThan(tolerance.orthogonality);
        expect(relativeError(multiply(hostQ, m, n, await download(r), n), host)).toBeLessThan(
          tolerance.reconstruction,
        );
        for (const array of [parent, q, r]) array.dispose();
      });
    });
  }
});
