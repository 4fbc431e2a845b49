/**
 * Where the seed workload's time goes on the GPU machine: task start, each call's issue time
 * in a fresh task against a long-lived one, and what a cuBLAS stream/workspace rebind does to
 * the next SGEMM's issue time. Prints one JSON line per figure (medians, microseconds).
 */
import { handle as cublasHandle, gemm } from '@cuda-tasks/cublas';
import { cublas } from '@cuda-tasks/cublas/ffi';
import { DeviceBuffer, launch, Module, Stream } from '@cuda-tasks/cudadrv';
import { rand } from '@cuda-tasks/curand';
import { stream, synchronize, task, withStream } from '@cuda-tasks/task-runtime';
import { makeJobs } from '../../src/seed/seed.js';
import { nowUs, Steps } from './harness.js';

const steps = new Steps();
const mark = (name: string, us: number) => steps.mark(name, us);
const report = () => steps.report();
const now = () => nowUs();

// A. Starting an empty task (no GPU work).
for (let i = 0; i < 20_000; i++) {
  let tb = 0;
  const t0 = now();
  const p = task(async () => {
    tb = now();
  });
  const t1 = now();
  await p;
  if (i > 2000) {
    mark('A empty task: start -> body', tb - t0);
    mark('A empty task: task() returns', t1 - t0);
    mark('A empty task: whole await', now() - t0);
  }
}
report();

const a = rand('float32', [1024, 1024]);
const b = rand('float32', [1024, 1024]);
const jobs = makeJobs(a, b);
await synchronize();
const module = Module.fromPtx(
  (await import('node:fs')).readFileSync(
    new URL('../../src/kernels/kernels.ptx', import.meta.url),
    'utf8',
  ),
);
const sinKernel = module.kernel('sin_inplace', ['float32*', 'uint64']);
const n = 1024 * 1024;
const issue = (label: string) => {
  let t = now();
  for (let j = 0; j < jobs.length; j++) {
    const job = jobs[j]!;
    gemm(job.a, job.b, job.c);
    mark(`${label}: gemm ${j + 1}`, now() - t);
    t = now(); // after mark(): its string and map work is not the next call's
    launch(sinKernel, { grid: 4096, block: 256 }, job.c, n);
    mark(`${label}: sin ${j + 1}`, now() - t);
    t = now();
  }
};

// C. Fresh task per iteration.
for (let i = 0; i < 60; i++) {
  const t0 = now();
  await task(async () => {
    const tb = now();
    stream();
    const ts = now();
    cublasHandle();
    const th = now();
    issue('C fresh task');
    const ti = now();
    await synchronize();
    const tw = now();
    if (i >= 10) {
      mark('C fresh task: start -> body', tb - t0);
      mark('C fresh task: stream()', ts - tb);
      mark('C fresh task: handle()', th - ts);
      mark('C fresh task: await synchronize()', tw - ti);
    }
  });
}
report();

// D. One long task, one stream.
await task(async () => {
  for (let i = 0; i < 60; i++) {
    const t0 = now();
    issue('D long task');
    const ti = now();
    await synchronize();
    mark('D long task: await synchronize()', now() - ti);
    mark('D long task: total', now() - t0);
  }
});
report();

// E. One long task alternating two streams with withStream (a rebind per iteration).
const s1 = Stream.create();
const s2 = Stream.create();
await task(async () => {
  for (let i = 0; i < 60; i++) {
    const t0 = now();
    await withStream(i % 2 ? s1 : s2, async () => {
      issue('E withStream alternating');
      await synchronize();
    });
    mark('E withStream alternating: total', now() - t0);
  }
});
report();

// F. Bare cuBLAS: does a rebind make the next SGEMM's issue slow?
await task(async () => {
  const api = cublas();
  const out: (bigint | null)[] = [null];
  api.cublasCreate_v2(out);
  const h = out[0] as bigint;
  const ws1 = DeviceBuffer.allocate(32 << 20, { stream: s1 });
  const ws2 = DeviceBuffer.allocate(32 << 20, { stream: s2 });
  const koffi = (await import('koffi')).default;
  const scalars = koffi.alloc('uint8_t', 16) as bigint;
  new Float32Array(koffi.view(scalars, 16)).set([1, 0, 0, 0]);
  const [pa, pb, pc] = [jobs[0]!.a.pointer, jobs[0]!.b.pointer, jobs[0]!.c.pointer];
  const sg = () =>
    api.cublasSgemm_v2(
      h,
      0,
      0,
      1024,
      1024,
      1024,
      scalars,
      pa,
      1024,
      pb,
      1024,
      scalars + 4n,
      pc,
      1024,
    );
  const variant = async (label: string, before: (i: number) => void) => {
    for (let i = 0; i < 40; i++) {
      before(i);
      const t0 = now();
      sg();
      mark(label, now() - t0);
      s1.synchronize();
      s2.synchronize();
    }
  };
  api.cublasSetStream_v2(h, s1.handle);
  await variant('F sgemm 1024 issue, no rebind, default workspace', () => {});
  api.cublasSetWorkspace_v2(h, ws1.pointer, 32 << 20);
  await variant('F sgemm 1024 issue, no rebind, user workspace', () => {});
  await variant('F ... after setStream alternating (default ws after reset)', (i) => {
    api.cublasSetStream_v2(h, (i % 2 ? s1 : s2).handle);
  });
  await variant('F ... after setStream + setWorkspace alternating ws1/ws2', (i) => {
    api.cublasSetStream_v2(h, (i % 2 ? s1 : s2).handle);
    api.cublasSetWorkspace_v2(h, (i % 2 ? ws1 : ws2).pointer, 32 << 20);
  });
  await variant('F ... after setStream same stream + setWorkspace same ws', () => {
    api.cublasSetStream_v2(h, s1.handle);
    api.cublasSetWorkspace_v2(h, ws1.pointer, 32 << 20);
  });
  await variant('F ... after setStream same + fresh 32 MiB workspace each time', () => {
    api.cublasSetStream_v2(h, s1.handle);
    const w = DeviceBuffer.allocate(32 << 20, { stream: s1 });
    api.cublasSetWorkspace_v2(h, w.pointer, 32 << 20);
    w.dispose();
  });
  api.cublasSetStream_v2(h, 0n);
  api.cublasDestroy_v2(h);
  ws1.dispose();
  ws2.dispose();
});
report();

// H. The concurrent iteration step by step, as seed-probe.cu does it in C: host times from
// the iteration's start (after 300 untimed iterations, so V8 has optimized the code).
for (let i = 0; i < 360; i++) {
  const t: number[] = [0, 0, 0, 0, 0, 0, 0, 0];
  const t0 = now();
  await Promise.all(
    jobs.map((job, j) =>
      task(async () => {
        t[4 * j] = now() - t0;
        gemm(job.a, job.b, job.c);
        t[4 * j + 1] = now() - t0;
        launch(sinKernel, { grid: 4096, block: 256 }, job.c, n);
        t[4 * j + 2] = now() - t0;
        await synchronize();
        t[4 * j + 3] = now() - t0;
      }),
    ),
  );
  const total = now() - t0;
  if (i >= 300) {
    for (let j = 0; j < 2; j++) {
      mark(`H concurrent: task ${j + 1} body starts`, t[4 * j]!);
      mark(`H concurrent: gemm ${j + 1} issued`, t[4 * j + 1]!);
      mark(`H concurrent: sin ${j + 1} issued`, t[4 * j + 2]!);
      mark(`H concurrent: task ${j + 1} synchronized`, t[4 * j + 3]!);
    }
    mark('H concurrent: both awaited', total);
  }
}
report();

// G. 100 concurrent tasks x (launch + await): the issue phase and the wait phase.
const empty = module.kernel('empty_kernel', []);
for (let r = 0; r < 30; r++) {
  const t0 = now();
  let lastIssued = 0;
  const all = Promise.all(
    Array.from({ length: 100 }, () =>
      task(async () => {
        launch(empty, { grid: 1, block: 1 });
        lastIssued = now();
        await synchronize();
      }),
    ),
  );
  const t1 = now();
  await all;
  const t2 = now();
  if (r >= 5) {
    mark('G tasks100: issue phase (100 task() calls)', t1 - t0);
    mark('G tasks100: last launch issued', lastIssued - t0);
    mark('G tasks100: wait phase', t2 - t1);
    mark('G tasks100: total', t2 - t0);
  }
}
report();
process.exit(0);
