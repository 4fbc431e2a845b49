/**
 * The library kit under stress: 64 concurrent tasks, each mixing cuBLAS (gemm), cuSOLVER (an
 * LU solve), cuRAND (a generator of its own, and the task's default generator) and the cuFFT
 * user library (a forward and an inverse transform), give bit for bit the results of the same
 * 64 jobs run one after another.
 *
 * 64 tasks each get a stream of their own (up to 128 per context) and are past the handle
 * bound: 16 handles per library and context (tasks share handles, rebound at each call). A
 * workspace shared between two streams, a missing hand-off, or a shared handle used out of
 * order shows up as a difference here; under compute-sanitizer (sanitize.sh runs this file
 * with memcheck and racecheck) as a reported error.
 *
 * Sizes shrink under the sanitizer (CUDA_TASKS_SANITIZER=1), which instruments every kernel.
 */

import { gemm, handleCache } from '@cuda-tasks/cublas';
import { DeviceArray } from '@cuda-tasks/cudadrv';
import { Generator, generatorStatistics, rand } from '@cuda-tasks/curand';
import { solve, handles as solverHandles } from '@cuda-tasks/cusolver';
import { streamPoolStatistics, synchronize, task } from '@cuda-tasks/task-runtime';
import { barrier, describeGpu, rng, underSanitizer } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import { fft, ifft, planStatistics } from './user-library/index.js';

const TASKS = 64;
/** Matrix orders, one per job in turn (several problem sizes, so several plans and algorithms). */
const ORDERS = underSanitizer ? [24, 32] : [64, 96, 128];
/** Transform lengths, likewise (one plan cache each). */
const LENGTHS = underSanitizer ? [64, 100] : [256, 1000];

/** A diagonally dominant random matrix (well conditioned), a right-hand side, and a signal. */
function inputs(index: number) {
  const n = ORDERS[index % ORDERS.length]!;
  const length = LENGTHS[index % LENGTHS.length]!;
  const next = rng(index + 1);
  const a = Float64Array.from({ length: n * n }, () => next() * 2 - 1);
  for (let i = 0; i < n; i++) a[i + i * n]! += n;
  const b = Float64Array.from({ length: n * n }, () => next() * 2 - 1);
  const signal = Float32Array.from({ length: 2 * length }, () => next() * 2 - 1);
  return { n, length, a, b, signal };
}

/**
 * One job: C = A B (cuBLAS), X = A \ C (cuSOLVER; X = B up to rounding), R ~ N(0, 1) from a
 * generator seeded by the job, S = fft(signal) and T = ifft(S) (cuFFT; T = signal up to
 * rounding), and a draw from the task's default generator (not compared: default seeds depend
 * on which generator a task leases; it is there to lease one).
 */
async function job(index: number, arrive?: () => Promise<void>) {
  const { n, a, b, signal } = inputs(index);
  const da = DeviceArray.fromHost(a, [n, n]);
  const db = DeviceArray.fromHost(b, [n, n]);
  const dc = DeviceArray.empty('float64', [n, n]);
  gemm(da, db, dc);
  await arrive?.();
  const dx = await solve(da, dc);
  const generator = new Generator({ seed: 5000 + index });
  const dr = generator.normal(DeviceArray.empty('float64', 4097));
  const ds = DeviceArray.fromHost(signal);
  const spectrum = fft(ds);
  const back = ifft(spectrum);
  const du = rand('float32', [16]);
  await synchronize();
  const [c, x, r, s, t] = await Promise.all([
    dc.toHost(),
    dx.toHost(),
    dr.toHost(),
    spectrum.toHost(),
    back.toHost(),
  ]);
  for (const array of [da, db, dc, dx, dr, ds, spectrum, back, du]) array.dispose();
  generator.dispose();
  return { c, x, r, s, t };
}

describeGpu(
  '64 concurrent tasks mixing cuBLAS, cuSOLVER, cuRAND and the cuFFT user library',
  () => {
    it('give bit for bit the results of the same jobs run one after another', async () => {
      const serial = [];
      for (let i = 0; i < TASKS; i++) serial.push(await task(() => job(i)));
      const before = {
        streams: streamPoolStatistics(0).streams,
        cublas: handleCache().statistics(),
        cusolver: solverHandles.statistics(),
        curand: generatorStatistics(),
      };
      const arrive = barrier(TASKS);
      const concurrent = await Promise.all(
        Array.from({ length: TASKS }, (_, i) => task(() => job(i, arrive))),
      );
      for (let i = 0; i < TASKS; i++) {
        const { n, b, signal } = inputs(i);
        const got = concurrent[i]!;
        const want = serial[i]!;
        expect(got.c).toEqual(want.c);
        expect(got.x).toEqual(want.x);
        expect(got.r).toEqual(want.r);
        expect(got.s).toEqual(want.s);
        expect(got.t).toEqual(want.t);
        // And the work is right: X solves A X = A B, so X is B; ifft(fft(x)) is x.
        let solveError = 0;
        for (let j = 0; j < n * n; j++)
          solveError = Math.max(solveError, Math.abs(got.x[j]! - b[j]!));
        expect(solveError).toBeLessThan(1e-9);
        let fftError = 0;
        for (let j = 0; j < signal.length; j++)
          fftError = Math.max(fftError, Math.abs(got.t[j]! - signal[j]!));
        expect(fftError).toBeLessThan(1e-5);
      }
      // The bounds held: 128 streams, 16 handles per library and context, 16 plans per size.
      expect(streamPoolStatistics(0).streams).toBeLessThanOrEqual(128);
      expect(streamPoolStatistics(0).streams).toBe(before.streams);
      for (const [after, earlier] of [
        [handleCache().statistics(), before.cublas],
        [solverHandles.statistics(), before.cusolver],
        [generatorStatistics(), before.curand],
      ] as const) {
        expect(after.created - after.destroyed).toBeLessThanOrEqual(16);
        expect(after.created - earlier.created).toBeLessThanOrEqual(16);
        expect(after.leased).toBe(0);
      }
      // cuSOLVER was certainly shared: 64 tasks, each leasing one, at most 16 handles.
      expect(solverHandles.statistics().shared - before.cusolver.shared).toBeGreaterThan(0);
      for (const length of LENGTHS) {
        const plans = planStatistics('c2c', length)[0]!;
        expect(plans.created - plans.destroyed).toBeLessThanOrEqual(16);
        expect(plans.leased).toBe(0);
      }
    });
  },
);
