import { fork } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { DeviceArray, Event, type Kernel, launch, Module } from '@cuda-tasks/cudadrv';
import { describeGpu, randomFloat32, underSanitizer } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { task } from './index.js';
import { readOnly, WorkerJobError, WorkerPool } from './worker-pool.js';

const JOBS = new URL('../test/fixtures/pool-gpu-jobs.ts', import.meta.url);
const LIGHT = new URL('../test/fixtures/pool-driver-jobs.ts', import.meta.url);

/** Largest relative error of `got` against a float64 reference. */
function worst(got: Float32Array, want: (i: number) => number): number {
  let max = 0;
  for (let i = 0; i < got.length; i++) {
    const w = want(i);
    const e = Math.abs(got[i]! - w) / Math.max(1, Math.abs(w));
    if (!(e <= max)) max = Number.isNaN(e) ? Infinity : Math.max(max, e);
  }
  return max;
}

describeGpu('WorkerPool on the GPU', () => {
  let pool: WorkerPool;
  let module: Module;
  let scale: Kernel;
  let spin: Kernel;
  beforeAll(async () => {
    pool = await WorkerPool.start(JOBS, { workers: 8 });
    module = Module.compile(
      `extern "C" __global__ void scale(float *x, float a, unsigned long long n) {
         unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         if (i < n) x[i] *= a;
       }
       extern "C" __global__ void spin(unsigned long long ns) {
         unsigned long long start = clock64();
         while ((unsigned long long)(clock64() - start) < ns * 2) {}
       }`,
      { name: 'pool-caller.cu' },
    );
    scale = module.kernel('scale', ['float32*', 'float32', 'uint64']);
    spin = module.kernel('spin', ['uint64']);
  }, 120_000);
  afterAll(async () => {
    await pool?.close();
    module?.dispose();
  });

  it('a lent array is the caller’s memory (no copy); a returned array becomes the caller’s', async () => {
    const n = 100_003;
    const data = randomFloat32(n, 11);
    using x = DeviceArray.fromHost(data);
    const back = await pool.run('scaleInPlace', x, 3);
    expect(back).toBe(x);
    const result = await pool.run<{ y: DeviceArray<'float32'>; length: number }>(
      'affineNew',
      readOnly(x),
      2,
      1,
    );
    using y = result.y;
    expect(result.length).toBe(n);
    expect(y.dtype).toBe('float32');
    expect(y.shape).toEqual([n]);
    const hostX = await x.toHost();
    const hostY = await y.toHost();
    expect(worst(hostX, (i) => 3 * data[i]!)).toBeLessThan(1e-6);
    expect(worst(hostY, (i) => 2 * 3 * data[i]! + 1)).toBeLessThan(1e-6);
    console.log(`[pool] lent ${n} float32 scaled in a worker, returned array read back: 0 wrong`);
  });

  it('hand-offs are ordered on the GPU, with no host wait, in both directions', async () => {
    const n = 1 << 20;
    const data = randomFloat32(n, 12);
    await task(async () => {
      using x = DeviceArray.fromHost(data);
      // The caller's write runs late (behind a 2 ms spin); the job must read after it.
      launch(spin, { grid: 1, block: 1 }, 2_000_000);
      launch(scale, { grid: Math.ceil(n / 256), block: 256 }, x, 3, n);
      const { y } = await pool.run<{ y: DeviceArray<'float32'> }>('affineNew', x, 2, 1, 2_000_000);
      // The job's read runs late (behind its own spin); the caller's next write must wait for it.
      launch(scale, { grid: Math.ceil(n / 256), block: 256 }, x, 5, n);
      const [hostX, hostY] = [await x.toHost(), await y.toHost()];
      y.dispose();
      expect(worst(hostY, (i) => 2 * 3 * data[i]! + 1)).toBeLessThan(1e-6);
      expect(worst(hostX, (i) => 15 * data[i]!)).toBeLessThan(1e-6);
    });
  });

  it('an event crosses to the job and back: recorded there, waited for here', async () => {
    using event = Event.create();
    await pool.run('spinAndRecord', 300_000_000, event); // about 0.3 s of spinning
    expect(event.query()).toBe(false);
    const t0 = performance.now();
    event.synchronize();
    const waited = performance.now() - t0;
    expect(event.query()).toBe(true);
    expect(waited).toBeGreaterThan(20);
    console.log(
      `[pool] event recorded in a worker after its spin: waited ${waited.toFixed(1)} ms here`,
    );
  });

  it(
    '64 jobs x 1,000 launches (100 under the sanitizer) through 8 workers: each stream’s order holds, no gap',
    async () => {
      const jobs = 64;
      // Under compute-sanitizer every launch is instrumented: 100 a job there, still from 8
      // threads at once, so that racecheck finishes (docs/decisions/0042).
      const launches = underSanitizer ? 100 : 1000;
      const progress = new SharedArrayBuffer(4 * jobs);
      const t0 = performance.now();
      const states = await Promise.all(
        Array.from({ length: jobs }, (_, slot) =>
          pool.run<DeviceArray<'int32'>>('sequenceBurst', launches, progress, slot),
        ),
      );
      const ms = performance.now() - t0;
      const wrong: string[] = [];
      for (const [slot, state] of states.entries()) {
        const host = await state.toHost();
        if (host[0] !== launches || host[1] !== 0) wrong.push(`${slot}: [${host[0]}, ${host[1]}]`);
        state.dispose();
      }
      expect(wrong).toEqual([]);
      expect([...new Int32Array(progress)].every((count) => count === launches)).toBe(true);
      console.log(
        `[pool] ${jobs} jobs x ${launches} sequence launches on 8 workers: 0 out of order, ${((jobs * launches) / (ms / 1000)).toFixed(0)} launches/s (${(ms / 1000).toFixed(2)} s)`,
      );
    },
    // Under compute-sanitizer (sanitize.sh sets CUDA_TASKS_SANITIZER=1): ten minutes.
    underSanitizer ? 600_000 : undefined,
  );

  it('64 x 1,000 plain jobs through the shared rings: every result right; jobs/s against postMessage', async () => {
    const batch = 64;
    const rounds = 1000;
    // Job j of a round: n = 256 + j ones, a = 1 + j % 3, b = j % 5 - 2 (sums exact in float32).
    const want = (j: number) => (256 + j) * (1 + (j % 3) + ((j % 5) - 2));
    const runRound = (round: number, options: { name?: string }) =>
      Promise.all(
        Array.from({ length: batch }, (_, j) => {
          const tag = round * batch + j;
          return pool.runWith<number>(
            'affineSum',
            [`job-${tag}`, tag, 256 + j, 1 + (j % 3), (j % 5) - 2],
            options,
          );
        }),
      );
    const check = (results: number[], wrong: string[], round: number) => {
      for (let j = 0; j < batch; j++) {
        if (results[j] !== want(j)) wrong.push(`round ${round} job ${j}: ${results[j]}`);
      }
    };
    const wrong: string[] = [];
    const plain = {};
    // A name sends the same jobs by postMessage (the path every job took before the rings).
    const posted = { name: 'posted' };
    for (let round = 0; round < 20; round++) check(await runRound(round, plain), wrong, round);
    let t0 = performance.now();
    for (let round = 0; round < rounds; round++) check(await runRound(round, plain), wrong, round);
    const ringMs = performance.now() - t0;
    const postedRounds = 200;
    t0 = performance.now();
    for (let round = 0; round < postedRounds; round++) {
      check(await runRound(round, posted), wrong, round);
    }
    const postedMs = performance.now() - t0;
    expect(wrong).toEqual([]);
    expect(pool.statistics().inFlight.every((n) => n === 0)).toBe(true);
    console.log(
      `[pool] ${batch} x ${rounds} plain jobs through the rings on 8 workers: 0 wrong, ${((batch * rounds) / (ringMs / 1000)).toFixed(0)} jobs/s; by postMessage ${((batch * postedRounds) / (postedMs / 1000)).toFixed(0)} jobs/s`,
    );
  }, 300_000);

  it('cancellation mid-burst: the job stops, nothing reaches the driver after the abort', async () => {
    const progress = new SharedArrayBuffer(4);
    const counts = new Int32Array(progress);
    using state = DeviceArray.zeros('int32', 2);
    const controller = new AbortController();
    const running = pool.runWith('sequenceBurst', [100_000, progress, 0, state], {
      signal: controller.signal,
    });
    while (Atomics.load(counts, 0) < 300) await new Promise((resolve) => setTimeout(resolve, 1));
    controller.abort(new Error('enough'));
    await expect(running).rejects.toThrow('enough');
    const issued = Atomics.load(counts, 0);
    const host = await state.toHost();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(Atomics.load(counts, 0)).toBe(issued);
    expect(issued).toBeLessThan(100_000);
    expect([...host]).toEqual([issued, 0]);
    console.log(`[pool] aborted after ${issued} launches: the GPU ran exactly those, in order`);
  });

  it('a capture inside a job while seven others issue eagerly', async () => {
    const n = 4099;
    const data = randomFloat32(n, 13);
    using x = DeviceArray.fromHost(data);
    const progress = new SharedArrayBuffer(4 * 8);
    const [isRoot, ...states] = await Promise.all([
      pool.run<boolean>('captureAndReplay', x, 5),
      ...Array.from({ length: 7 }, (_, i) =>
        pool.run<DeviceArray<'int32'>>('sequenceBurst', 500, progress, i + 1),
      ),
    ]);
    expect(isRoot).toBe(false);
    const host = await x.toHost();
    const exact = host.every((v, i) => v === Math.fround(data[i]! * 32));
    expect(exact).toBe(true);
    for (const state of states) {
      expect([...(await state.toHost())]).toEqual([500, 0]);
      state.dispose();
    }
  });

  it('a driver error in one job rejects that job alone; the pool goes on', async () => {
    const arrays = Array.from({ length: 7 }, (_, i) => DeviceArray.full('float32', 1000, i + 1));
    const results = await Promise.allSettled([
      pool.run('badLaunch'),
      ...arrays.map((a) => pool.run('scaleInPlace', a, 2)),
    ]);
    expect(results[0]!.status).toBe('rejected');
    const error = (results[0] as PromiseRejectedResult).reason as WorkerJobError;
    expect(error).toBeInstanceOf(WorkerJobError);
    expect(error.remoteName).toBe('CudaError');
    expect(error.call).toMatch(/cuLaunchKernel/);
    for (const [i, a] of arrays.entries()) {
      expect(results[i + 1]!.status).toBe('fulfilled');
      expect((await a.toHost()).every((v) => v === 2 * (i + 1))).toBe(true);
      a.dispose();
    }
    const again = Array.from({ length: 16 }, () => DeviceArray.full('float32', 10, 1));
    await Promise.all(again.map((a) => pool.run('scaleInPlace', a, 4)));
    for (const a of again) {
      expect([...(await a.toHost())]).toEqual(new Array(10).fill(4));
      a.dispose();
    }
    console.log(`[pool] driver error: ${error.message.split('\n')[0]}`);
  });

  it('bad input in a worker is a CudaArgumentError there, before any native call', async () => {
    using x = DeviceArray.full('float32', 8, 7);
    const error = await pool.run('badArgument', x).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkerJobError);
    expect((error as WorkerJobError).remoteName).toBe('CudaArgumentError');
    expect([...(await x.toHost())]).toEqual(new Array(8).fill(7));
  });

  it('30 start/stop cycles with the driver loaded in the workers; exit with jobs in flight', async () => {
    const t0 = performance.now();
    const cycles = 30;
    for (let i = 0; i < cycles; i++) {
      const small = await WorkerPool.start(LIGHT, { workers: 2 });
      const sums = await Promise.all([
        small.run<number>('fillAndSum', 1000, i),
        small.run<number>('fillAndSum', 1000, 1),
      ]);
      expect(sums).toEqual([1000 * i, 1000]);
      await small.close();
    }
    const perCycle = (performance.now() - t0) / cycles;
    const loader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const child = fork(
      fileURLToPath(new URL('../test/fixtures/pool-exit-child.ts', import.meta.url)),
      [],
      {
        execArgv: ['--conditions=@cuda-tasks/source', '--import', loader],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      },
    );
    let exitingAt = 0;
    child.on('message', (message: { exiting: number }) => {
      exitingAt = message.exiting;
    });
    const code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error('the child did not exit within 20 s of process.exit with jobs in flight'));
      }, 20_000);
      child.once('exit', (exitCode) => {
        clearTimeout(timer);
        resolve(exitCode);
      });
    });
    expect(code).toBe(0);
    expect(exitingAt).toBeGreaterThan(0);
    const exitMs = Date.now() - exitingAt;
    expect(exitMs).toBeLessThan(5000);
    console.log(
      `[pool] ${cycles} start/stop cycles of 2 driver-loading workers: 0 failed, ${perCycle.toFixed(1)} ms each; process.exit with 2 jobs in flight took ${exitMs} ms`,
    );
  }, 600_000);
});
