/**
 * Multi-GPU (issue: tasks on two devices at once). Runs where two or more devices answer;
 * on one GPU it skips with a notice (the one-device behaviour of withDevice is tested in
 * packages/task-runtime).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { gemm, handleCache } from '@cuda-tasks/cublas';
import { DeviceArray, deviceCount, launch, Module } from '@cuda-tasks/cudadrv';
import { stream, synchronize, task, withDevice } from '@cuda-tasks/task-runtime';
import { describeGpu, gpuAvailable, randomFloat32 } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';

const devices = gpuAvailable ? deviceCount() : 0;
if (gpuAvailable && devices < 2) {
  console.log(`[cuda-tasks] multi-GPU tests skipped: this machine has ${devices} CUDA device`);
}
const ptx = readFileSync(fileURLToPath(new URL('./kernels/kernels.ptx', import.meta.url)), 'utf8');

describeGpu('tasks on two devices at once', () => {
  const modules = new Map<number, Module>();
  const sinKernel = () => {
    const ordinal = stream().context.device.ordinal;
    let module = modules.get(ordinal);
    if (module === undefined)
      modules.set(ordinal, (module = Module.fromPtx(ptx, { context: stream().context })));
    return module.kernel('sin_inplace', ['float32*', 'uint64']);
  };
  const n = 512;
  const a = randomFloat32(n * n, 1);
  const b = randomFloat32(n * n, 2);

  /** The seed workload on the current device: c = sin(a * b), returned to the host. */
  const work = async () => {
    const da = DeviceArray.fromHost(a, [n, n]);
    const db = DeviceArray.fromHost(b, [n, n]);
    const dc = DeviceArray.empty('float32', [n, n]);
    gemm(da, db, dc);
    launch(sinKernel(), { grid: 256, block: 256 }, dc, n * n);
    await synchronize();
    const out = await dc.toHost();
    for (const x of [da, db, dc]) x.dispose();
    return { out, ordinal: stream().context.device.ordinal };
  };

  it.runIf(devices >= 2)(
    'runs tasks on device 0 and 1 concurrently with the same results',
    async () => {
      const reference = (await withDevice(0, () => task(work))).out;
      const results = await Promise.all(
        Array.from({ length: 8 }, (_, i) => withDevice(i % 2, () => task(work))),
      );
      results.forEach(({ out, ordinal }, i) => {
        expect(ordinal).toBe(i % 2);
        let maxDiff = 0;
        for (let j = 0; j < out.length; j++)
          maxDiff = Math.max(maxDiff, Math.abs(out[j]! - reference[j]!));
        expect(maxDiff).toBeLessThan(1e-4);
      });
      // Handles per context stay bounded by the tasks running at once on it.
      expect(handleCache().statistics().created).toBeLessThanOrEqual(10);
    },
  );

  it.runIf(devices >= 2)(
    'hands a buffer produced on device 0 to device 1, ordered on the GPU',
    async () => {
      const host = randomFloat32(1 << 20, 3);
      const onZero = await withDevice(0, () => task(async () => DeviceArray.fromHost(host)));
      const back = await withDevice(1, () =>
        task(async () => {
          const onOne = DeviceArray.empty('float32', host.length);
          expect(onOne.buffer.context.device.ordinal).toBe(1);
          onOne.copyFrom(onZero); // cuMemcpyPeerAsync, after device 0's stream on the GPU
          const out = await onOne.toHost();
          onOne.dispose();
          return out;
        }),
      );
      expect(back).toEqual(host);
      onZero.dispose();
    },
  );

  it.runIf(devices >= 2)(
    'spreads the seed workload over two devices for close to twice the throughput',
    async () => {
      const rounds = 16;
      await Promise.all([withDevice(0, () => task(work)), withDevice(1, () => task(work))]); // warm-up
      let start = performance.now();
      await Promise.all(Array.from({ length: rounds }, () => withDevice(0, () => task(work))));
      const one = performance.now() - start;
      start = performance.now();
      await Promise.all(
        Array.from({ length: rounds }, (_, i) => withDevice(i % 2, () => task(work))),
      );
      const two = performance.now() - start;
      console.log(
        `[cuda-tasks] ${rounds} seed jobs: one device ${one.toFixed(1)} ms, two devices ${two.toFixed(1)} ms (${(one / two).toFixed(2)}x)`,
      );
      expect(one / two).toBeGreaterThan(1.4);
    },
  );

  it('withDevice with the only (or first) device works; a missing ordinal is a clear error', async () => {
    const ordinal = await withDevice(0, () => task(async () => stream().context.device.ordinal));
    expect(ordinal).toBe(0);
    expect(() => withDevice(devices, () => 0)).toThrow(`device ${devices} does not exist`);
  });
});
