import { DeviceArray, type FloatDType } from '@cuda-tasks/cudadrv';
import { describeGpu, rng } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import { gemv } from './index.js';

// gemv's transpose is spelled transA (docs/conventions.md); the deprecated `trans` is the
// same option: both compute y = A^T x (reference: float64 on the host), bit for bit alike.
describeGpu('gemv transA (and its deprecated spelling trans)', () => {
  for (const dtype of ['float32', 'float64'] as const satisfies readonly FloatDType[]) {
    it(`${dtype}: transA gives A^T x, the same bits as trans`, async () => {
      const m = 37;
      const n = 23;
      const next = rng(dtype === 'float32' ? 71 : 72);
      const hostA = Float64Array.from({ length: m * n }, () => next() * 2 - 1);
      const hostX = Float64Array.from({ length: m }, () => next() * 2 - 1);
      const host = <T>(values: Float64Array) =>
        (dtype === 'float32' ? Float32Array.from(values) : values) as T;
      using a = DeviceArray.fromHost(host<Float32Array | Float64Array>(hostA), [m, n]);
      using x = DeviceArray.fromHost(host<Float32Array | Float64Array>(hostX));
      using yNew = DeviceArray.zeros(dtype, [n]);
      using yOld = DeviceArray.zeros(dtype, [n]);
      gemv(a, x, yNew, { transA: true });
      gemv(a, x, yOld, { trans: true });
      // Reference: y_j = sum_i A[i, j] x_i over the values the device holds, in float64.
      const heldA = Float64Array.from(host<ArrayLike<number>>(hostA));
      const heldX = Float64Array.from(host<ArrayLike<number>>(hostX));
      const want = new Float64Array(n);
      for (let j = 0; j < n; j++)
        for (let i = 0; i < m; i++) want[j]! += heldA[i + j * m]! * heldX[i]!;
      const got = Float64Array.from(await yNew.toHost());
      let worst = 0;
      for (let j = 0; j < n; j++) worst = Math.max(worst, Math.abs(got[j]! - want[j]!));
      console.log(`gemv ${dtype} ${m}x${n} transA: max |y - A^T x| = ${worst.toExponential(2)}`);
      expect(worst).toBeLessThan(dtype === 'float32' ? 1e-5 : 1e-13);
      expect(Array.from(await yOld.toHost())).toEqual(Array.from(got));
    });
  }
});
