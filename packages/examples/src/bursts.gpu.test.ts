/**
 * Bursts of tasks as users write them (issue 32), on the GPU, in one process:
 *
 * - 50 and 128 tasks, each launching one single-block kernel of 200 ms and awaiting it: each
 *   task has a stream of its own (128 per context by default), so a burst takes about one
 *   kernel's time, creates no stream and keeps the event loop turning.
 * - 64 tasks, each seeding its own Philox generator, filling A, B and b, multiplying
 *   (cuBLAS) and solving (cuSOLVER), then reading x back: faster than the same 64 jobs one
 *   after another, with no library handle created inside the burst and the event loop never
 *   held for long; the burst's answers equal the sequential ones bit for bit, and x solves
 *   (A B) x = b against a float64 CPU residual.
 *
 * Each test logs its figures. The event loop is watched by a 1 ms interval timer: the largest
 * gap between two ticks is how long the loop was held.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { handleCache, matmul } from '@cuda-tasks/cublas';
import { DeviceArray, type Kernel, launch, Module } from '@cuda-tasks/cudadrv';
import { Generator } from '@cuda-tasks/curand';
import { solve, handles as solverHandles } from '@cuda-tasks/cusolver';
import { streamPoolStatistics, synchronize, synchronizeSync, task } from '@cuda-tasks/task-runtime';
import { describeGpu, watchEventLoop } from '@cuda-tasks/testing';
import { beforeAll, expect, it } from 'vitest';

const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));

/** Runs `body` while a 1 ms interval watches the event loop; the largest gap between ticks. */
async function watched<T>(
  body: () => Promise<T>,
): Promise<{ value: T; gapMs: number; wallMs: number }> {
  // A fresh turn, and the ticker running, before the measured code starts.
  await new Promise((resolve) => setTimeout(resolve, 5));
  const watch = watchEventLoop();
  await new Promise((resolve) => setTimeout(resolve, 3));
  const start = performance.now();
  const value = await body();
  const wallMs = performance.now() - start;
  const gapMs = watch.stop();
  return { value, gapMs, wallMs };
}

const KERNEL_MS = 200;

describeGpu('bursts of tasks as users write them', () => {
  let spin: Kernel;
  beforeAll(() => {
    spin = Module.fromPtx(readFileSync(ptxPath, 'utf8')).kernel('spin_ns', ['uint64']);
    launch(spin, { grid: 1, block: 1 }, 1000); // the module loaded outside the measurement
    synchronizeSync();
  });

  it('50 and 128 single-block kernels, one task each: about one kernel’s time, no stream created, the loop turning', async () => {
    const kernelBurst = (count: number) =>
      watched(() =>
        Promise.all(
          Array.from({ length: count }, () =>
            task(async () => {
              launch(spin, { grid: 1, block: 1 }, KERNEL_MS * 1e6);
              await synchronize();
            }),
          ),
        ),
      );
    const first = await kernelBurst(50); // the pool's first use: its 128 streams are made here
    const created = streamPoolStatistics(0).created;
    const fifty = await kernelBurst(50);
    const all = await kernelBurst(128);
    const line = (name: string, r: { gapMs: number; wallMs: number }) =>
      `${name} ${r.wallMs.toFixed(1)} ms (${(r.wallMs / KERNEL_MS).toFixed(3)}x one kernel), largest loop gap ${r.gapMs.toFixed(1)} ms`;
    console.log(
      `[bursts] ${KERNEL_MS} ms single-block kernels: ${line('first 50 (pool made)', first)}; ${line('50', fifty)}; ${line('128', all)}; streams created after the first burst ${streamPoolStatistics(0).created - created}, shared ${streamPoolStatistics(0).shared}`,
    );
    expect(streamPoolStatistics(0).created).toBe(created);
    expect(fifty.wallMs).toBeGreaterThanOrEqual(KERNEL_MS - 1);
    expect(fifty.wallMs).toBeLessThanOrEqual(1.1 * KERNEL_MS);
    expect(all.wallMs).toBeLessThanOrEqual(1.2 * KERNEL_MS);
    expect(fifty.gapMs).toBeLessThanOrEqual(10);
    expect(all.gapMs).toBeLessThanOrEqual(10);
  });

  it('64 tasks that each seed a generator, multiply and solve: faster than one after another, no handle made inside, the loop never held long', async () => {
    const n = 256;
    const job = async (seed: number) => {
      const g = new Generator({ kind: 'philox', seed });
      const a = DeviceArray.empty('float64', [n, n]);
      const b = DeviceArray.empty('float64', [n, n]);
      const rhs = DeviceArray.empty('float64', [n, 1]);
      g.uniform(a);
      g.uniform(b);
      g.uniform(rhs);
      g.dispose();
      const c = matmul(a, b);
      const x = await solve(c, rhs);
      const values = await x.toHost();
      for (const array of [a, b, rhs, c, x]) array.dispose();
      return values;
    };
    // First use of the libraries in this process (loading them is a one-time cost, logged).
    const firstUse = await watched(() => task(() => job(1)));
    const handlesBefore = [handleCache().statistics().created, solverHandles.statistics().created];
    const seeds = Array.from({ length: 64 }, (_, i) => 7000 + i);
    const cold = await watched(() => Promise.all(seeds.map((seed) => task(() => job(seed)))));
    const sequential = await watched(async () => {
      const out: Float64Array[] = [];
      for (const seed of seeds) out.push(await task(() => job(seed)));
      return out;
    });
    const warm = await watched(() => Promise.all(seeds.map((seed) => task(() => job(seed)))));
    const handlesAfter = [handleCache().statistics().created, solverHandles.statistics().created];
    console.log(
      `[bursts] 64 x (own Philox generator, 3 uniform fills, matmul + solve n = ${n}, toHost): first use of the libraries ${firstUse.wallMs.toFixed(1)} ms (loop held ${firstUse.gapMs.toFixed(1)} ms); first burst ${cold.wallMs.toFixed(1)} ms (loop gap ${cold.gapMs.toFixed(1)} ms), one after another ${sequential.wallMs.toFixed(1)} ms (gap ${sequential.gapMs.toFixed(1)} ms), burst again ${warm.wallMs.toFixed(1)} ms (gap ${warm.gapMs.toFixed(1)} ms); cuBLAS and cuSOLVER handles created during them ${handlesAfter[0]! - handlesBefore[0]!} and ${handlesAfter[1]! - handlesBefore[1]!}`,
    );
    // Same seeds, same numbers: the bursts' answers are the sequential ones, bit for bit.
    for (let i = 0; i < seeds.length; i++) {
      expect(cold.value[i]).toEqual(sequential.value[i]);
      expect(warm.value[i]).toEqual(sequential.value[i]);
    }
    expect(handlesAfter).toEqual(handlesBefore);
    expect(cold.wallMs).toBeLessThan(sequential.wallMs);
    expect(warm.wallMs).toBeLessThan(sequential.wallMs);
    expect(cold.gapMs).toBeLessThanOrEqual(10);
    expect(warm.gapMs).toBeLessThanOrEqual(10);
    // And the answer is right: regenerate job 0's system on the host side through the GPU
    // (same seed), and check the residual of (A B) x = b in float64 on the CPU.
    const seed = seeds[0]!;
    const g = new Generator({ kind: 'philox', seed });
    const [a, b, rhs] = [
      [n, n],
      [n, n],
      [n, 1],
    ].map((shape) => DeviceArray.empty('float64', shape));
    g.uniform(a!);
    g.uniform(b!);
    g.uniform(rhs!);
    const [hostA, hostB, hostRhs] = await Promise.all([a!.toHost(), b!.toHost(), rhs!.toHost()]);
    const x = sequential.value[0]!;
    // Column-major: C = A B, then r = C x - b.
    const ax = new Float64Array(n);
    const bx = new Float64Array(n);
    for (let k = 0; k < n; k++) for (let i = 0; i < n; i++) bx[i]! += hostB[k * n + i]! * x[k]!;
    for (let k = 0; k < n; k++) for (let i = 0; i < n; i++) ax[i]! += hostA[k * n + i]! * bx[k]!;
    let residual = 0;
    let scale = 0;
    for (let i = 0; i < n; i++) {
      residual = Math.max(residual, Math.abs(ax[i]! - hostRhs[i]!));
      scale = Math.max(scale, Math.abs(hostRhs[i]!));
    }
    console.log(
      `[bursts] job ${seed}: max |A B x - b| = ${residual.toExponential(2)} (max |b| ${scale.toFixed(3)})`,
    );
    expect(residual / scale).toBeLessThan(1e-6);
    g.dispose();
    for (const array of [a, b, rhs]) array!.dispose();
  });
});
