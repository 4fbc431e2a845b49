import {
  describeGpu,
  diagonallyDominant,
  Rng,
  randomMatrix,
  relativeResidual,
  transpose,
} from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import { download, SOLVER_DTYPES, TOLERANCE, upload } from '../test/device.js';
import { lu, luSolve } from './index.js';

// luSolve's transpose is spelled transA (docs/conventions.md); the deprecated `transpose` is
// the same option: both solve A^T X = B (reference: the float64 residual against A^T on the
// host), bit for bit the same, and both given and equal change nothing.
describeGpu('luSolve transA (and its deprecated spelling transpose)', () => {
  for (const dtype of SOLVER_DTYPES) {
    it(`${dtype}: transA solves A^T X = B, the same bits as transpose`, async () => {
      const rng = new Rng(3303);
      const n = 48;
      const k = 3;
      const { array: a, host: hostA } = upload(dtype, diagonallyDominant(rng, n), [n, n]);
      const { array: b, host: hostB } = upload(dtype, randomMatrix(rng, n, k), [n, k]);
      const factorization = await lu(a);
      const viaTransA = luSolve(factorization, b, { transA: true });
      const viaOld = luSolve(factorization, b, { transpose: true });
      const viaBoth = luSolve(factorization, b, { transA: true, transpose: true });
      const plain = luSolve(factorization, b);
      const x = await download(viaTransA);
      const residual = relativeResidual(transpose(hostA, n, n), x, hostB, n, k);
      const plainResidual = relativeResidual(
        transpose(hostA, n, n),
        await download(plain),
        hostB,
        n,
        k,
      );
      console.log(
        `luSolve ${dtype} n=${n}: ||A^T X - B|| / (||A|| ||X||) = ${residual.toExponential(2)} with transA; without it ${plainResidual.toExponential(2)}`,
      );
      expect(residual).toBeLessThan(TOLERANCE[dtype].residual);
      // A is not symmetric: the plain solve is not a solution of A^T X = B.
      expect(plainResidual).toBeGreaterThan(100 * residual);
      expect(await download(viaOld)).toEqual(x);
      expect(await download(viaBoth)).toEqual(x);
      for (const array of [a, b, viaTransA, viaOld, viaBoth, plain]) array.dispose();
      factorization.lu.dispose();
      factorization.pivots.dispose();
    });
  }
});
