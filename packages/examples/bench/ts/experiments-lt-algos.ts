/**
 * Does cuBLASLt's first heuristic answer give the fastest SGEMM? For each size, asks the
 * heuristic for up to 16 algorithms (FP32, no transposes, 32 MiB workspace allowed) and times
 * each on the GPU (events around 50 calls, median of 5 repetitions), beside cublasSgemm on
 * the same arrays. Prints one JSON line per (size, algorithm): device us per call, the host us
 * per call of the issue loop, the workspace it asks for, and the heuristic's waves count.
 *
 * With --pairs it also times, for each algorithm, two SGEMMs into two outputs on one stream
 * (serial) and on two streams (concurrent), device time between events: whether an algorithm
 * leaves room for another task's SGEMM (the seed workload's overlap).
 *
 * Usage: tsx --conditions=@cuda-tasks/source bench/ts/experiments-lt-algos.ts [sizes...]
 */

import { handle as cublasHandle } from '@cuda-tasks/cublas';
import { cublas, cublasLt, HEURISTIC_RESULT_BYTES } from '@cuda-tasks/cublas/ffi';
import { DeviceBuffer, Event, Stream } from '@cuda-tasks/cudadrv';
import { rand } from '@cuda-tasks/curand';
import { stream, synchronizeSync, task } from '@cuda-tasks/task-runtime';
import koffiModule from 'koffi';
import { median, nowUs } from './harness.js';

const koffi = () => koffiModule;

const pairsMode = process.argv.includes('--pairs');
const sizes = process.argv
  .slice(2)
  .filter((argument) => argument !== '--pairs')
  .map(Number);
if (sizes.length === 0) sizes.push(1024, 8, 256, 2048);
const CALLS = 50;
const REPS = 5;
const MAX_ALGOS = 16;
const CUDA_R_32F = 0;
const CUBLAS_COMPUTE_32F = 68;
const WORKSPACE = 32 * 1024 * 1024;

function ok(status: number, what: string): void {
  if (status !== 0) throw new Error(`${what} failed with status ${status}`);
}

await task(async () => {
  const s = stream();
  const k = koffi();
  const lt = cublasLt();
  const out: (bigint | null)[] = [null];
  ok(lt.cublasLtCreate(out), 'cublasLtCreate');
  const ltHandle = out[0] as bigint;
  const workspace = DeviceBuffer.allocate(WORKSPACE);
  const scalars = k.alloc('float', 2) as bigint;
  new Float32Array(k.view(scalars, 8)).set([1, 0]);
  const alpha = scalars;
  const beta = scalars + 4n;
  const scratch = k.alloc('uint8_t', 16) as bigint;
  const scratchView = k.view(scratch, 16);
  const start = Event.create({ timing: true });
  const end = Event.create({ timing: true });

  // Device us per call and host us per call of `issue` run CALLS times (median of REPS).
  const time = (issue: () => void) => {
    issue();
    synchronizeSync();
    const device: number[] = [];
    const host: number[] = [];
    for (let r = 0; r < REPS; r++) {
      start.record(s);
      const t0 = nowUs();
      for (let i = 0; i < CALLS; i++) issue();
      host.push((nowUs() - t0) / CALLS);
      end.record(s);
      end.synchronize();
      device.push((Event.elapsedTime(start, end) * 1000) / CALLS);
    }
    return { device_us: median(device), host_us: median(host) };
  };

  // Two SGEMMs (issue(first, second) issues one on each given stream): device us of the pair
  // on one stream and on two, between events (median of REPS pairs), and their ratio.
  const other = Stream.create({ name: 'second' });
  const workspace2 = DeviceBuffer.allocate(WORKSPACE);
  const pairTimes = (issue: (first: Stream, second: Stream) => void) => {
    const once = (concurrent: boolean) => {
      start.record(s);
      if (concurrent) other.waitEvent(start);
      issue(s, concurrent ? other : s);
      if (concurrent) s.waitFor(other);
      end.record(s);
      end.synchronize();
      return Event.elapsedTime(start, end) * 1000;
    };
    once(false);
    once(true);
    const serial: number[] = [];
    const concurrent: number[] = [];
    for (let r = 0; r < REPS * 2; r++) {
      serial.push(once(false));
      concurrent.push(once(true));
    }
    const serialUs = median(serial);
    const concurrentUs = median(concurrent);
    return { serial_us: serialUs, concurrent_us: concurrentUs, ratio: concurrentUs / serialUs };
  };

  for (const n of sizes) {
    const a = rand('float32', [n, n]);
    const b = rand('float32', [n, n]);
    const c = rand('float32', [n, n]);
    synchronizeSync();
    const pa = a.useOn(s);
    const pb = b.useOn(s);
    const pc = c.useOn(s);
    const c2 = rand('float32', [n, n]);
    synchronizeSync();
    const pc2 = c2.useOn(s);

    const h = cublasHandle();
    const sgemm = time(() =>
      ok(
        cublas().cublasSgemm_v2(h, 0, 0, n, n, n, alpha, pa, n, pb, n, beta, pc, n),
        'cublasSgemm_v2',
      ),
    );
    console.log(JSON.stringify({ n, name: 'cublasSgemm_v2', ...sgemm }));
    if (pairsMode) {
      // One handle per stream, as C's seed baseline has.
      const created: (bigint | null)[] = [null];
      ok(cublas().cublasCreate_v2(created), 'cublasCreate_v2');
      const h2 = created[0] as bigint;
      const sgemmOn = (handle: bigint | number, output: bigint, on: Stream) => {
        ok(cublas().cublasSetStream_v2(handle, on.handle), 'cublasSetStream_v2');
        ok(
          cublas().cublasSgemm_v2(handle, 0, 0, n, n, n, alpha, pa, n, pb, n, beta, output, n),
          'cublasSgemm_v2',
        );
      };
      console.log(
        JSON.stringify({
          n,
          name: 'cublasSgemm_v2 pair',
          ...pairTimes((on1, on2) => {
            sgemmOn(h, pc, on1);
            sgemmOn(h2, pc2, on2);
          }),
        }),
      );
      ok(cublas().cublasSetStream_v2(h, s.handle), 'cublasSetStream_v2');
      cublas().cublasDestroy_v2(h2);
    }

    ok(lt.cublasLtMatmulDescCreate(out, CUBLAS_COMPUTE_32F, CUDA_R_32F), 'DescCreate');
    const desc = out[0] as bigint;
    ok(lt.cublasLtMatrixLayoutCreate(out, CUDA_R_32F, n, n, n), 'LayoutCreate');
    const layout = out[0] as bigint;
    ok(lt.cublasLtMatmulPreferenceCreate(out), 'PreferenceCreate');
    const preference = out[0] as bigint;
    new BigUint64Array(scratchView)[0] = BigInt(WORKSPACE);
    ok(lt.cublasLtMatmulPreferenceSetAttribute(preference, 1, scratch, 8), 'SetAttribute');
    const results = k.alloc('uint8_t', HEURISTIC_RESULT_BYTES * MAX_ALGOS) as bigint;
    const count = [0];
    ok(
      lt.cublasLtMatmulAlgoGetHeuristic(
        ltHandle,
        desc,
        layout,
        layout,
        layout,
        layout,
        preference,
        MAX_ALGOS,
        results,
        count,
      ),
      'AlgoGetHeuristic',
    );
    const view = new DataView(k.view(results, HEURISTIC_RESULT_BYTES * MAX_ALGOS));
    for (let i = 0; i < count[0]!; i++) {
      const base = i * HEURISTIC_RESULT_BYTES;
      const needed = Number(view.getBigUint64(base + 64, true));
      const state = view.getInt32(base + 72, true);
      const waves = view.getFloat32(base + 76, true);
      if (state !== 0) {
        console.log(JSON.stringify({ n, name: `lt algo ${i}`, state }));
        continue;
      }
      const algo = results + BigInt(base);
      const timed = time(() =>
        ok(
          lt.cublasLtMatmul(
            ltHandle,
            desc,
            alpha,
            pa,
            layout,
            pb,
            layout,
            beta,
            pc,
            layout,
            pc,
            layout,
            algo,
            needed > 0 ? workspace.pointer : 0n,
            needed > 0 ? WORKSPACE : 0,
            s.handle,
          ),
          'cublasLtMatmul',
        ),
      );
      console.log(JSON.stringify({ n, name: `lt algo ${i}`, ...timed, workspace: needed, waves }));
      if (pairsMode) {
        const matmul = (output: bigint, on: Stream, space: bigint) =>
          ok(
            lt.cublasLtMatmul(
              ltHandle,
              desc,
              alpha,
              pa,
              layout,
              pb,
              layout,
              beta,
              output,
              layout,
              output,
              layout,
              algo,
              needed > 0 ? space : 0n,
              needed > 0 ? WORKSPACE : 0,
              on.handle,
            ),
            'cublasLtMatmul',
          );
        console.log(
          JSON.stringify({
            n,
            name: `lt algo ${i} pair`,
            ...pairTimes((on1, on2) => {
              matmul(pc, on1, workspace.pointer);
              matmul(pc2, on2, on1 === on2 ? workspace.pointer : workspace2.pointer);
            }),
          }),
        );
      }
    }
    koffi().free(results);
    lt.cublasLtMatmulPreferenceDestroy(preference);
    lt.cublasLtMatrixLayoutDestroy(layout);
    lt.cublasLtMatmulDescDestroy(desc);
    for (const array of [a, b, c, c2]) array.dispose();
  }
  start.dispose();
  end.dispose();
  workspace.dispose();
  workspace2.dispose();
  other.dispose();
  lt.cublasLtDestroy(ltHandle);
});
