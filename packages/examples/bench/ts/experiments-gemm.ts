/**
 * Why a single SGEMM 1024 or kernel launch on an idle stream issues slower than in C (the
 * seed workload's first call), while hot loops run at C's rate: isolated calls after a wait,
 * bare koffi against our wrappers, blocking against awaited waits, interleaved in one loop so
 * that drift hits every variant alike. Prints one JSON line per variant (median and p10 in
 * microseconds).
 */
import { readFileSync } from 'node:fs';
import { handle as cublasHandle, gemm } from '@cuda-tasks/cublas';
import { cublas } from '@cuda-tasks/cublas/ffi';
import {
  currentStream,
  DeviceBuffer,
  driver,
  ffiValue,
  launch,
  Module,
  Stream,
} from '@cuda-tasks/cudadrv';
import { rand } from '@cuda-tasks/curand';
import { stream, synchronize, task } from '@cuda-tasks/task-runtime';
// Internals, for timing the pieces of gemm() and launch() one by one.
import { acquireFfi, workspaceFor } from '../../../cublas/src/handle.js';
import { scalars } from '../../../cublas/src/scalars.js';
import { checkGemmInto, newCheckedGemm } from '../../../cublas/src/validate.js';
import { nowUs, Steps } from './harness.js';

const now = () => nowUs();
const steps = new Steps();
const mark = (name: string, us: number) => steps.mark(name, us);

await task(async () => {
  const s = stream();
  const n = 1024;
  const a = rand('float32', [n, n]);
  const b = rand('float32', [n, n]);
  const c = rand('float32', [n, n]);
  const a8 = rand('float32', [8, 8]);
  const b8 = rand('float32', [8, 8]);
  const c8 = rand('float32', [8, 8]);
  const module = Module.fromPtx(
    readFileSync(new URL('../../src/kernels/kernels.ptx', import.meta.url), 'utf8'),
  );
  const sinKernel = module.kernel('sin_inplace', ['float32*', 'uint64']);
  const empty = module.kernel('empty_kernel', []);
  await synchronize();
  const api = cublas();
  const h = ffiValue(cublasHandle());
  const koffi = (await import('koffi')).default;
  const scalarArena = koffi.alloc('uint8_t', 16) as bigint;
  new Float32Array(koffi.view(scalarArena, 16)).set([1, 0, 0, 0]);
  const alpha = ffiValue(scalarArena);
  const beta = ffiValue(scalarArena + 4n);
  const [pa, pb, pc] = [a, b, c].map((x) => x.ffiAddressOn(s));
  const [pa8, pb8, pc8] = [a8, b8, c8].map((x) => x.ffiAddressOn(s));
  const bare = () => api.cublasSgemm_v2(h, 0, 0, n, n, n, alpha, pa!, n, pb!, n, beta, pc!, n);
  const bare8 = () => api.cublasSgemm_v2(h, 0, 0, 8, 8, 8, alpha, pa8!, 8, pb8!, 8, beta, pc8!, 8);
  const sinConfig = { grid: 4096, block: 256 };
  const emptyConfig = { grid: 1, block: 1 };
  const launchSin = () => launch(sinKernel, sinConfig, c, n * n);
  const d = driver();
  const blockingWait = () => s.synchronize();
  const awaitedWait = () => synchronize();

  const checked = newCheckedGemm();
  const other = Stream.create();
  const workspace = DeviceBuffer.allocate(32 << 20, { stream: s });
  let workspace2: DeviceBuffer | undefined;
  const addresses = () => {
    a.ffiAddressOn(s, 'read');
    b.ffiAddressOn(s, 'read');
    c.ffiAddressOn(s);
  };
  let counter = 0;
  const nothing = () => {
    counter++;
  };
  type Variant = [string, () => void | Promise<void>, () => void, (() => void)?];
  const variants: Variant[] = [
    ['sgemm 1024 bare, after blocking sync', blockingWait, bare],
    ['sgemm 1024 gemm(), after blocking sync', blockingWait, () => gemm(a, b, c)],
    ['sgemm 1024 bare, after await synchronize()', awaitedWait, bare],
    ['sgemm 1024 gemm(), after await synchronize()', awaitedWait, () => gemm(a, b, c)],
    ['sgemm 8 bare, after blocking sync', blockingWait, bare8],
    ['sgemm 8 gemm(), after blocking sync', blockingWait, () => gemm(a8, b8, c8)],
    ['launch sin, after blocking sync', blockingWait, launchSin],
    ['launch empty, after blocking sync', blockingWait, () => launch(empty, emptyConfig)],
    ['launch sin right after bare sgemm 1024', blockingWait, launchSin, bare],
    [
      'launch empty right after bare sgemm 1024',
      blockingWait,
      () => launch(empty, emptyConfig),
      bare,
    ],
    ['cuStreamQuery, after blocking sync', blockingWait, () => d.cuStreamQuery(s.ffiHandle)],
    ['sgemm 1024 bare, second in a row', blockingWait, bare, bare],
    ['piece: checkGemmInto', blockingWait, () => checkGemmInto(checked, 'gemm', a, b, c, {})],
    ['piece: currentStream()', blockingWait, () => currentStream()],
    ['piece: acquireFfi(stream)', blockingWait, () => acquireFfi(s)],
    ['piece: 3 x ffiAddressOn', blockingWait, addresses],
    ['piece: scalars().set', blockingWait, () => scalars().set('float32', 1, 0)],
    ['piece: kernel.marshal(c, n)', blockingWait, () => sinKernel.marshal([c, n * n], s)],
    ['piece: empty JS function', blockingWait, () => nothing()],
    [
      'native: cublasSetStream_v2 same stream',
      blockingWait,
      () => api.cublasSetStream_v2(h, s.ffiHandle),
    ],
    [
      'native: cublasSetStream_v2 switching back from another stream',
      blockingWait,
      () => api.cublasSetStream_v2(h, s.ffiHandle),
      () => api.cublasSetStream_v2(h, other.ffiHandle),
    ],
    [
      'native: cublasSetWorkspace_v2 same',
      blockingWait,
      () => api.cublasSetWorkspace_v2(h, workspace.address, workspace.byteLength),
    ],
    [
      'DeviceBuffer.allocate(32 MiB) after a free on the stream',
      blockingWait,
      () => {
        workspace2 = DeviceBuffer.allocate(32 << 20, { stream: s });
      },
      () => workspace2?.dispose(),
    ],
  ];
  // ROUNDS (default 400): more rounds give V8 more calls to optimize the code before the
  // last 300, which are the ones measured.
  const rounds = Number(process.env.ROUNDS ?? 400);
  for (let r = 0; r < rounds; r++) {
    for (const [name, wait, body, before] of variants) {
      await wait();
      before?.();
      const t0 = now();
      body();
      const t1 = now();
      if (r >= rounds - 300) mark(name, t1 - t0);
    }
  }
  // Hot loops for comparison: back-to-back calls, per call.
  for (let r = 0; r < 30; r++) {
    await synchronize();
    let t0 = now();
    for (let i = 0; i < 20; i++) bare();
    mark('hot: sgemm 1024 bare x20, per call', (now() - t0) / 20);
    await synchronize();
    t0 = now();
    for (let i = 0; i < 20; i++) gemm(a, b, c);
    mark('hot: sgemm 1024 gemm() x20, per call', (now() - t0) / 20);
    await synchronize();
  }
  // Restore the handle's binding as the cache knows it (stream and workspace).
  api.cublasSetStream_v2(h, s.ffiHandle);
  const own = workspaceFor(cublasHandle(), s)!;
  api.cublasSetWorkspace_v2(h, own.address, own.byteLength);
  workspace2?.dispose();
  // A fresh task per round, as in the seed workload: task start, stream(), handle(), gemm().
  for (let r = 0; r < rounds; r++) {
    await synchronize();
    const t0 = now();
    let t1 = 0;
    let t2 = 0;
    let t3 = 0;
    let t4 = 0;
    await task(async () => {
      t1 = now();
      stream();
      t2 = now();
      cublasHandle();
      t3 = now();
      gemm(a, b, c);
      t4 = now();
      await synchronize();
    });
    if (r >= rounds - 300) {
      mark('fresh task: start -> body', t1 - t0);
      mark('fresh task: stream()', t2 - t1);
      mark('fresh task: handle()', t3 - t2);
      mark('fresh task: gemm()', t4 - t3);
    }
  }
  steps.report();
  for (const x of [a, b, c, a8, b8, c8]) x.dispose();
  if (counter < 0) console.log(counter);
});
process.exit(0);
