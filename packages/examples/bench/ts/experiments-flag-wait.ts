/**
 * How fast can JavaScript learn that a stream's work is done? Launch + wait round trips with
 * bare koffi calls, one waiting method per row, interleaved batch by batch:
 *   - cuStreamSynchronize (blocks the thread),
 *   - a spin on cuStreamQuery (what `synchronize()` does first),
 *   - cuEventRecord + a spin on cuEventQuery,
 *   - cuStreamWriteValue32 of a counter into pinned host memory + a spin reading that memory
 *     from JavaScript with Atomics.load (no driver call per poll),
 *   - ours: launch() + await synchronize(),
 * and C's launch + cuStreamSynchronize loop (libinproc.so, when its path is given), and the
 * issue cost of cuStreamWriteValue32 alone. Prints one JSON line per row (median of the
 * batches' us per round trip).
 *
 * Usage: tsx --conditions=@cuda-tasks/source bench/ts/experiments-flag-wait.ts [libinproc.so]
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { driver, launch, Module } from '@cuda-tasks/cudadrv';
import { stream, synchronize, task } from '@cuda-tasks/task-runtime';
import koffi from 'koffi';
import { median, nowUs } from './harness.js';

const ptxPath = fileURLToPath(new URL('../../src/kernels/kernels.ptx', import.meta.url));
const ROUND_TRIPS = 1000;
const BATCHES = 15;

function ok(status: number, what: string): void {
  if (status !== 0) throw new Error(`${what} failed with CUresult ${status}`);
}

await task(async () => {
  const s = stream();
  const api = driver();
  const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
  const empty = module.kernel('empty_kernel', []);
  const config = { grid: 1, block: 1 };
  const cuda = koffi.load('libcuda.so.1');
  const writeValue = cuda.func(
    'int cuStreamWriteValue32_v2(uint64_t stream, uint64_t addr, uint32_t value, unsigned int flags)',
  );
  const devicePointer = cuda.func(
    'int cuMemHostGetDevicePointer_v2(_Out_ uint64_t *pdptr, uint64_t p, unsigned int flags)',
  );
  const eventCreate = cuda.func('int cuEventCreate(_Out_ void **phEvent, unsigned int flags)');
  const eventRecord = cuda.func('int cuEventRecord(uint64_t hEvent, uint64_t hStream)');
  const eventQuery = cuda.func('int cuEventQuery(uint64_t hEvent)');

  // Pinned, device-mapped host memory for the counter (CU_MEMHOSTALLOC_PORTABLE | DEVICEMAP).
  const hostOut: (bigint | null)[] = [null];
  ok(api.cuMemHostAlloc(hostOut, 4096, 0x01 | 0x02), 'cuMemHostAlloc');
  const host = hostOut[0] as bigint;
  const mapped = [0n];
  ok(devicePointer(mapped, host, 0), 'cuMemHostGetDevicePointer_v2');
  const flag = new Uint32Array(koffi.view(host, 4096));
  flag[0] = 0;
  const eventOut: (bigint | null)[] = [null];
  ok(eventCreate(eventOut, 0x2), 'cuEventCreate'); // CU_EVENT_DISABLE_TIMING
  const event = eventOut[0] as bigint;

  const f = empty.ffiHandle;
  const params = empty.ffiArgumentArray;
  const sh = s.ffiHandle;
  const bareLaunch = () =>
    ok(api.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, sh, params, 0), 'cuLaunchKernel');
  let counter = 0;
  const mappedAddress = Number(mapped[0]);
  const rows: Record<string, () => number | Promise<number>> = {
    cuStreamSynchronize: () => {
      const t0 = nowUs();
      for (let i = 0; i < ROUND_TRIPS; i++) {
        bareLaunch();
        ok(api.cuStreamSynchronize(sh), 'cuStreamSynchronize');
      }
      return (nowUs() - t0) / ROUND_TRIPS;
    },
    'spin cuStreamQuery': () => {
      const t0 = nowUs();
      for (let i = 0; i < ROUND_TRIPS; i++) {
        bareLaunch();
        while (api.cuStreamQuery(sh) !== 0);
      }
      return (nowUs() - t0) / ROUND_TRIPS;
    },
    'cuEventRecord + spin cuEventQuery': () => {
      const t0 = nowUs();
      for (let i = 0; i < ROUND_TRIPS; i++) {
        bareLaunch();
        ok(eventRecord(event, sh), 'cuEventRecord');
        while (eventQuery(event) !== 0);
      }
      return (nowUs() - t0) / ROUND_TRIPS;
    },
    'cuStreamWriteValue32 + spin on host memory': () => {
      const t0 = nowUs();
      for (let i = 0; i < ROUND_TRIPS; i++) {
        bareLaunch();
        const value = (counter = (counter + 1) >>> 0);
        ok(writeValue(sh, mappedAddress, value, 0), 'cuStreamWriteValue32_v2');
        while (Atomics.load(flag, 0) !== value);
      }
      return (nowUs() - t0) / ROUND_TRIPS;
    },
    'ours: launch() + await synchronize()': async () => {
      const t0 = nowUs();
      for (let i = 0; i < ROUND_TRIPS; i++) {
        launch(empty, config);
        await synchronize();
      }
      return (nowUs() - t0) / ROUND_TRIPS;
    },
    'cuStreamWriteValue32 issue alone (per call)': () => {
      const t0 = nowUs();
      for (let i = 0; i < ROUND_TRIPS; i++) {
        counter = (counter + 1) >>> 0;
        ok(writeValue(sh, mappedAddress, counter, 0), 'cuStreamWriteValue32_v2');
      }
      const t = (nowUs() - t0) / ROUND_TRIPS;
      while (Atomics.load(flag, 0) !== counter);
      return t;
    },
    'cuEventRecord issue alone (per call)': () => {
      const t0 = nowUs();
      for (let i = 0; i < ROUND_TRIPS; i++) ok(eventRecord(event, sh), 'cuEventRecord');
      const t = (nowUs() - t0) / ROUND_TRIPS;
      ok(api.cuStreamSynchronize(sh), 'cuStreamSynchronize');
      return t;
    },
  };
  const libraryPath = process.argv[2];
  if (libraryPath !== undefined) {
    const inproc = koffi.load(libraryPath);
    const launchSync = inproc.func('double inproc_launch_sync(uint64_t f, uint64_t s, int n)');
    rows['C: cuLaunchKernel + cuStreamSynchronize'] = () => launchSync(f, sh, ROUND_TRIPS);
  }

  const samples = new Map<string, number[]>(Object.keys(rows).map((name) => [name, []]));
  for (let batch = 0; batch < BATCHES + 2; batch++) {
    for (const [name, row] of Object.entries(rows)) {
      const value = await row();
      if (batch >= 2) samples.get(name)!.push(value);
    }
  }
  for (const [name, values] of samples) {
    console.log(JSON.stringify({ name, us: Number(median(values).toFixed(3)), batches: BATCHES }));
  }
  api.cuMemFreeHost(host);
});
