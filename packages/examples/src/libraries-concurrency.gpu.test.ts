/**
 * The libraries together under concurrency: 32 tasks, each doing gemm -> solve -> random fill
 * with its own seed, give exactly the results of the same work run one task after another.
 * Different tasks mean different streams, cuBLAS/cuSOLVER handles and workspaces: a workspace
 * shared between two streams, or a missing hand-off, shows up as a difference here.
 *
 * gemm goes through cuBLASLt by default, and an algorithm that needs no workspace leases no
 * cuBLAS handle at all; so the test runs for both gemm backends, the 'cublas' one making every
 * task lease a cuBLAS handle and a per-stream workspace.
 */

import {
  type GemmBackend,
  gemm,
  gemmBackend,
  gemmPlanStatistics,
  handleCache,
  setGemmBackend,
} from '@cuda-tasks/cublas';
import { DeviceArray } from '@cuda-tasks/cudadrv';
import { Generator, generatorStatistics, rand } from '@cuda-tasks/curand';
import { solve, handles as solverHandles } from '@cuda-tasks/cusolver';
import { stream, synchronize, task } from '@cuda-tasks/task-runtime';
import { barrier, describeGpu, rng } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';

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

/** The most cuBLAS handles leased at once, sampled right after each job's gemm. */
let peakCublasLeased = 0;

/**
 * One job: C = A B (cuBLAS), X = A \ C (cuSOLVER, so X = B up to rounding), R ~ N(0, 1)
 * (cuRAND, a generator of its own), and a draw from the task's default generator (its values
 * are not compared: the default seeds differ between runs; it is there to lease one).
 */
async function job(index: number, arrive?: () => Promise<void>) {
  const { a, b } = inputs(index + 1);
  const da = DeviceArray.fromHost(a, [n, n]);
  const db = DeviceArray.fromHost(b, [n, n]);
  const dc = DeviceArray.empty('float64', [n, n]);
  gemm(da, db, dc);
  await arrive?.();
  peakCublasLeased = Math.max(peakCublasLeased, handleCache().statistics().leased);
  const dx = await solve(da, dc);
  const generator = new Generator({ seed: 1000 + index });
  const dr = generator.normal(DeviceArray.empty('float64', 10_001));
  const du = rand('float32', [16]);
  await synchronize();
  const [c, x, r] = await Promise.all([dc.toHost(), dx.toHost(), dr.toHost()]);
  for (const array of [da, db, dc, dx, dr, du]) array.dispose();
  generator.dispose();
  return { c, x, r, stream: stream().handle, b };
}

describeGpu('cuBLAS, cuSOLVER and cuRAND in 32 concurrent tasks', () => {
  for (const backend of ['cublaslt', 'cublas'] as const satisfies readonly GemmBackend[]) {
    it(`give exactly the results of the same work run one task after another (gemm through ${backend})`, async () => {
      const previous = gemmBackend();
      setGemmBackend(backend);
      try {
        const plansBefore = gemmPlanStatistics().built;
        const serial = [];
        for (let i = 0; i < tasks; i++) serial.push(await task(() => job(i)));
        const createdBefore = handleCache().statistics().created;
        const solversBefore = solverHandles.statistics().created;
        const generatorsBefore = generatorStatistics().created;
        peakCublasLeased = 0;
        const arrive = barrier(tasks);
        const concurrent = await Promise.all(
          Array.from({ length: tasks }, (_, i) => task(() => job(i, arrive))),
        );
        expect(gemmBackend()).toBe(backend);
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
        if (backend === 'cublas') {
          // cublasDgemm: no cuBLASLt plan, and every task held a cuBLAS handle (several at once).
          expect(gemmPlanStatistics().built).toBe(plansBefore);
          expect(peakCublasLeased).toBeGreaterThanOrEqual(2);
        } else {
          expect(gemmPlanStatistics().cached).toBeGreaterThanOrEqual(1);
        }
        // Handles and default generators stay bounded by the tasks running at once.
        expect(handleCache().statistics().created - createdBefore).toBeLessThanOrEqual(tasks);
        expect(handleCache().statistics().created).toBeLessThanOrEqual(tasks + 1);
        expect(solverHandles.statistics().created - solversBefore).toBeLessThanOrEqual(tasks);
        expect(solverHandles.statistics().created).toBeGreaterThanOrEqual(1);
        expect(generatorStatistics().created - generatorsBefore).toBeLessThanOrEqual(tasks);
        expect(generatorStatistics().created).toBeGreaterThanOrEqual(1);
      } finally {
        setGemmBackend(previous);
      }
    });
  }
});
