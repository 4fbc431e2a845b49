/**
 * Where a launch's time goes: the bare koffi call against our wrapper, piece by piece, on the
 * GPU machine. Prints ns per call (median of 7 batches).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { currentStream, DeviceArray, driver, launch, Module } from '@cuda-tasks/cudadrv';
import { stream, task } from '@cuda-tasks/task-runtime';
import { timeNs as time } from './harness.js';

const ptx = readFileSync(
  fileURLToPath(new URL('../../src/kernels/kernels.ptx', import.meta.url)),
  'utf8',
);
const module = Module.fromPtx(ptx);
const empty = module.kernel('empty_kernel', []);
const api = driver();

await task(async () => {
  const s = stream();
  const sync = () => s.synchronize();
  const handle = s.handle;
  const f = empty.handle;
  const parameters = empty.marshal([], s);
  time(
    'bare driver().cuLaunchKernel',
    () => api.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, handle, parameters, 0n),
    sync,
  );
  const explicit = { grid: 1, block: 1, stream: s };
  time('launch(kernel, {stream})', () => launch(empty, explicit), sync);
  const implicit = { grid: 1, block: 1 };
  time('launch(kernel, {}) in a task', () => launch(empty, implicit), sync);
  const axpb = module.kernel('axpb_f32', [
    'float32*',
    'const float32*',
    'float32',
    'float32',
    'uint64',
  ]);
  const x = DeviceArray.zeros('float32', 16);
  const y = DeviceArray.zeros('float32', 16);
  time(
    'launch(axpb, {}, y, x, 2, 1, 0): 5 arguments',
    () => launch(axpb, implicit, y, x, 2, 1, 0),
    sync,
  );
  time(
    'kernel.marshal(5 arguments)',
    () => axpb.marshal([y, x, 2, 1, 0], s),
    () => {},
  );
  time(
    'currentStream()',
    () => currentStream(),
    () => {},
  );
  time(
    'stream.context.makeCurrent()',
    () => s.context.makeCurrent(),
    () => {},
  );
  time(
    'kernel.marshal([])',
    () => empty.marshal([], s),
    () => {},
  );
  time(
    'bare cuStreamQuery',
    () => api.cuStreamQuery(handle),
    () => {},
  );
});

// The seed workload's host-side costs: one long task vs a new task per iteration.
{
  const { makeJobs, run, timeIterations } = await import('../../src/seed/seed.js');
  const { rand } = await import('@cuda-tasks/curand');
  const { synchronize } = await import('@cuda-tasks/task-runtime');
  const a = rand('float32', [1024, 1024]);
  const b = rand('float32', [1024, 1024]);
  const jobs = makeJobs(a, b);
  const iterations = 30;
  const wall = async (name: string, body: () => Promise<void>) => {
    const us = await timeIterations(body, iterations, 5);
    console.log(JSON.stringify({ name, us: Math.round(us) }));
  };
  await task(async () => {
    await wall('seed serial, one long task (2 x gemm + sin, await synchronize)', async () => {
      for (const job of jobs) run(job.a, job.b, job.c);
      await synchronize();
    });
    await wall('seed serial, one long task, synchronizeSync', async () => {
      for (const job of jobs) run(job.a, job.b, job.c);
      stream().synchronize();
    });
  });
  await wall('seed serial, a new task per iteration', () =>
    task(async () => {
      for (const job of jobs) run(job.a, job.b, job.c);
      await synchronize();
    }),
  );
  await wall('seed concurrent, two new tasks per iteration', async () => {
    await Promise.all(
      jobs.map((job) =>
        task(async () => {
          run(job.a, job.b, job.c);
          await synchronize();
        }),
      ),
    );
  });
}

// Where a small SGEMM's time goes: the bare cuBLAS call against gemm() and its pieces.
{
  const { gemm, handle } = await import('@cuda-tasks/cublas');
  const { cublas } = await import('@cuda-tasks/cublas/ffi');
  const koffi = (await import('koffi')).default;
  await task(async () => {
    const s = stream();
    const sync = () => s.synchronize();
    const a = DeviceArray.zeros('float32', [8, 8]);
    const b = DeviceArray.zeros('float32', [8, 8]);
    const c = DeviceArray.zeros('float32', [8, 8]);
    const h = handle();
    const api = cublas();
    const slots = koffi.alloc('uint8_t', 16) as bigint;
    new Float32Array(koffi.view(slots, 16)).set([1, 0, 0, 0]);
    const alpha = slots;
    const beta = slots + 4n;
    const pa = a.pointer;
    const pb = b.pointer;
    const pc = c.pointer;
    time(
      'bare cublasSgemm_v2 8x8x8',
      () => api.cublasSgemm_v2(h, 0, 0, 8, 8, 8, alpha, pa, 8, pb, 8, beta, pc, 8),
      sync,
    );
    time('gemm(a, b, c) 8x8x8', () => gemm(a, b, c), sync);
    time(
      'handle()',
      () => handle(),
      () => {},
    );
    time(
      'a.useOn(s, read)',
      () => a.useOn(s, 'read'),
      () => {},
    );
  });
}
