/**
 * The libraries together under concurrency: 32 tasks, each doing gemm -> solve -> random fill
 * with its own seed, give exactly the results of the same work run one task after another.
 * Different tasks mean different streams, cuBLAS/cuSOLVER handles and workspaces: a workspace
 * shared between two streams, or a missing hand-off, shows up as a difference here.
 */

import { gemm, handleCache } from '@cuda-tasks/cublas';
import { DeviceArray } from '@cuda-tasks/cudadrv';
import { Generator } from '@cuda-tasks/curand';
import { solve } from '@cuda-tasks/cusolver';
import { stream, synchronize, task } from '@cuda-tasks/task-runtime';
import { expect, it } from 'vitest';
import { describeGpu } from '../../../test/gpu';
import { rng } from '../../../test/random';

const n = 96;
const tasks = 32;

/** A diagonally dominant random matrix (well conditioned) and a right-hand side, column-major. */
function inputs(seed: number): { a: Float64Array; b: Float64Array } {
  const next = rng(seed);
  const a = Float64Array.from({ length: n * n }, () => next() * 2 - 1);
  for (let i = 0; i < n; i++) a[i + i * n]! += n;
  const b = Float64Array.from({ length: n * n }, () => next() * 2 - 1);
  return { a, b };
}

/** One job: C = A B (cuBLAS), X = A \ C (cuSOLVER, so X = B up to rounding), R ~ N(0, 1) (cuRAND). */
async function job(index: number) {
  const { a, b } = inputs(index + 1);
  const da = DeviceArray.fromHost(a, [n, n]);
  const db = DeviceArray.fromHost(b, [n, n]);
  const dc = DeviceArray.empty('float64', [n, n]);
  gemm(da, db, dc);
  const dx = await solve(da, dc);
  const generator = new Generator({ seed: 1000 + index });
  const dr = generator.normal(DeviceArray.empty('float64', 10_001));
  await synchronize();
  const [c, x, r] = await Promise.all([dc.toHost(), dx.toHost(), dr.toHost()]);
  for (const array of [da, db, dc, dx, dr]) array.dispose();
  generator.dispose();
  return { c, x, r, stream: stream().handle, b };
}

describeGpu('cuBLAS, cuSOLVER and cuRAND in 32 concurrent tasks', () => {
  it('give exactly the results of the same work run one task after another', async () => {
    const serial = [];
    for (let i = 0; i < tasks; i++) serial.push(await task(() => job(i)));
    const createdBefore = handleCache().statistics().created;
    const concurrent = await Promise.all(
      Array.from({ length: tasks }, (_, i) => task(() => job(i))),
    );
    expect(new Set(concurrent.map((result) => result.stream)).size).toBe(tasks);
    for (let i = 0; i < tasks; i++) {
      expect(concurrent[i]!.c).toEqual(serial[i]!.c);
      expect(concurrent[i]!.x).toEqual(serial[i]!.x);
      expect(concurrent[i]!.r).toEqual(serial[i]!.r);
      // And the work is right: X solves A X = A B, so X is B up to rounding.
      let error = 0;
      for (let j = 0; j < n * n; j++)
        error = Math.max(error, Math.abs(concurrent[i]!.x[j]! - concurrent[i]!.b[j]!));
      expect(error).toBeLessThan(1e-10);
    }
    // Handles stay bounded by the tasks running at once.
    expect(handleCache().statistics().created - createdBefore).toBeLessThanOrEqual(tasks);
    expect(handleCache().statistics().created).toBeLessThanOrEqual(tasks + 1);
  });
});
