/**
 * Library and seed benchmarks in TypeScript, the same work as c/bench.cu: SGEMM issue
 * rate and device time, a stream switch with every library's handle alive, and the seed
 * workload serial against concurrent. Prints one JSON line per benchmark; run by src/run.ts
 * beside the C baseline.
 */

import { readFileSync } from 'node:fs';
import { handle as cublasHandle, gemm, gemmPlanStatistics } from '@cuda-tasks/cublas';
import { Event, launch, Module, Stream } from '@cuda-tasks/cudadrv';
import { handle as curandHandle, rand } from '@cuda-tasks/curand';
import { handle as cusolverHandle } from '@cuda-tasks/cusolver';
import { kernelsPtxPath } from '@cuda-tasks/examples/kernels';
import { concurrentIteration, serialIteration } from '@cuda-tasks/examples/seed';
import { kernelCacheStatistics, stream, synchronize, task } from '@cuda-tasks/task-runtime';
import { seedWorkload, timedOnce, withStreamBatch } from './batches.js';
import { emit, nowUs, type Result, repeatMedian } from './harness.js';

const ptxPath = kernelsPtxPath;

/** Runs the library and seed benchmarks; returns the results (also printed as JSON lines). */
export async function runLibraries(): Promise<Result[]> {
  const results: Result[] = [];
  const out = (name: string, median_us: number, note: string) =>
    results.push(emit({ name, median_us, unit: 'us/op', note }));

  await task(
    async () => {
      const s = stream();

      // SGEMM 8x8x8: how fast calls are issued; the drain after each batch is not timed.
      {
        const calls = 10_000;
        const a = rand('float32', [8, 8]);
        const b = rand('float32', [8, 8]);
        const c = rand('float32', [8, 8]);
        out(
          'sgemm_8',
          await repeatMedian(() => {
            const t0 = nowUs();
            for (let i = 0; i < calls; i++) gemm(a, b, c);
            const t1 = nowUs();
            s.synchronize();
            return (t1 - t0) / calls;
          }),
          'gemm 8x8x8 float32, 10000 per batch, host-timed issue rate, sync excluded',
        );
        for (const array of [a, b, c]) array.dispose();
      }

      // SGEMM 1024^3: device time per call, from events around a batch of 20.
      {
        const calls = 20;
        const n = 1024;
        const a = rand('float32', [n, n]);
        const b = rand('float32', [n, n]);
        const c = rand('float32', [n, n]);
        const start = Event.create({ timing: true });
        const stop = Event.create({ timing: true });
        out(
          'sgemm_1024',
          await repeatMedian(async () => {
            start.record(s);
            for (let i = 0; i < calls; i++) gemm(a, b, c);
            stop.record(s);
            await synchronize();
            return (1000 * Event.elapsedTime(start, stop)) / calls;
          }),
          'gemm 1024x1024x1024 float32 (no TF32), device time per call from events, 20 per batch',
        );
        start.dispose();
        stop.dispose();
        for (const array of [a, b, c]) array.dispose();
      }
    },
    { name: 'bench sgemm' },
  );

  // A stream switch costs the same with cuBLAS, cuRAND and cuSOLVER handles alive in the task:
  // the handles rebind lazily, on their next call, not on the switch.
  await task(
    async () => {
      cublasHandle();
      curandHandle();
      cusolverHandle();
      const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
      const empty = module.kernel('empty_kernel', []);
      const config = { grid: 1, block: 1 };
      const launchEmpty = () => launch(empty, config);
      const launches = 10_000;
      const s1 = Stream.create({ name: 'bench-libs-1' });
      const s2 = Stream.create({ name: 'bench-libs-2' });
      out(
        'withstream_launch_libs',
        await repeatMedian(withStreamBatch(s1, s2, launchEmpty, launches)),
        'withStream(s, () => launch(empty)) alternating two streams, with cuBLAS, cuRAND and cuSOLVER handles leased by the task',
      );
      s1.dispose();
      s2.dispose();
      module.dispose();
    },
    { name: 'bench libraries' },
  );

  // The seed workload: 2 jobs of (gemm 1024^3 + map(c, 'sin', c)); C runs sin_inplace. Each batch is one
  // iteration, after seedWorkload's JIT warm-up.
  {
    const seed = await seedWorkload();
    // Where this process's kernels and GEMM plans came from: a round that compiled its kernels
    // and one that read them from the disk cache can be told apart in the notes.
    const cache = kernelCacheStatistics();
    const plans = gemmPlanStatistics();
    const origin = `; kernels compiled ${cache.compiled}, read from disk ${cache.diskHits}; GEMM plans built ${plans.built}`;
    out(
      'seed_serial',
      await repeatMedian(timedOnce(() => serialIteration(seed.jobs))),
      `2 jobs (gemm 1024^3 + map(c, 'sin', c)) one after the other in one task, host wall time from issue to await synchronize(), per iteration${origin}`,
    );
    out(
      'seed_concurrent',
      await repeatMedian(timedOnce(() => concurrentIteration(seed.jobs))),
      `2 jobs (gemm 1024^3 + map(c, 'sin', c)), one task each (own stream and cuBLAS handle), host wall time until both awaited, per iteration${origin}`,
    );
    seed.dispose();
  }
  return results;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await runLibraries();
}
