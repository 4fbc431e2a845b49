/**
 * Zero-copy host views on the GPU (issue 36): uploads straight from a pinned view and results
 * read back into one, a kernel that reads and writes mapped host memory through its device
 * alias (results read from the view with no copy), dispose detaching every typed array, and
 * the upload rate from a view against a pageable typed array (printed, not asserted).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describeGpu, randomFloat32 } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import {
  DeviceArray,
  DisposedError,
  HostView,
  type Kernel,
  launch,
  Module,
  Stream,
  waitForStream,
} from '../index.js';

const fixtures = fileURLToPath(new URL('../../test/fixtures/', import.meta.url));

/** y = a x + b in float64, rounded to float32 as the kernel's float arithmetic is (within 1 ulp). */
function axpbReference(x: Float32Array, a: number, b: number): Float64Array {
  return Float64Array.from(x, (v) => a * v + b);
}

function worstError(actual: ArrayLike<number>, expected: Float64Array): number {
  let worst = 0;
  for (let i = 0; i < expected.length; i++) {
    worst = Math.max(worst, Math.abs(actual[i]! - expected[i]!));
  }
  return worst;
}

describeGpu('HostView on the GPU (issue 36)', () => {
  let module: Module;
  let axpb: Kernel;
  beforeAll(() => {
    module = Module.fromPtx(readFileSync(`${fixtures}kernels.ptx`, 'utf8'));
    axpb = module.kernel('axpb_f32', ['float32*', 'float32*', 'float32', 'float32', 'uint64']);
  });
  afterAll(() => module.dispose());

  it('upload from a pinned view, compute, read the result back into a view', async () => {
    const n = 1_000_003;
    const x = randomFloat32(n, 3601);
    using input = HostView.allocate('float32', n);
    input.array.set(x);
    using output = HostView.allocate('float32', n);
    const stream = Stream.create({ name: 'host-view' });
    const dx = input.toDevice(undefined, { stream });
    const dy = DeviceArray.empty('float32', n, { stream });
    launch(axpb, { grid: 512, block: 256, stream }, dy, dx, 3, -0.25, n);
    output.copyFrom(dy, { stream });
    await output.ready();
    await input.ready();
    const worst = worstError(output.array, axpbReference(x, 3, -0.25));
    expect(worst).toBeLessThan(1e-6);
    dx.dispose();
    dy.dispose();
    stream.dispose();
    console.log(
      `[host-view] 1,000,003 float32 up from a pinned view, y = 3x - 0.25, back into a view: max |error| vs float64 ${worst.toExponential(2)}`,
    );
  });

  it('mapped: a kernel reads and writes host memory through the device alias, no copies', async () => {
    const n = 65_536;
    const x = randomFloat32(n, 3602);
    const input = HostView.allocate('float32', n, { mapped: true });
    const output = HostView.allocate('float32', n, { mapped: true });
    input.array.set(x);
    output.array.fill(Number.NaN);
    const stream = Stream.create({ name: 'mapped' });
    const dy = output.deviceArray(undefined, { stream });
    launch(
      axpb,
      { grid: 64, block: 256, stream },
      dy,
      input.deviceArray(undefined, { stream }),
      -2,
      1,
      n,
    );
    await output.ready();
    const worst = worstError(output.array, axpbReference(x, -2, 1));
    expect(worst).toBeLessThan(1e-6);
    // dispose detaches: every typed array over the memory is empty; the alias refuses use.
    const held = output.array;
    const part = held.subarray(100, 200);
    output.dispose();
    input.dispose();
    expect([held.length, part.length, held.buffer.byteLength]).toEqual([0, 0, 0]);
    expect(() => dy.useOn(stream)).toThrow(DisposedError);
    expect(() => output.array).toThrow(DisposedError);
    stream.dispose();
    console.log(
      `[host-view] mapped: kernel wrote 65,536 float32 straight into host memory, max |error| ${worst.toExponential(2)}; after dispose the held array has length ${held.length}`,
    );
  });

  it('dispose right after queued work waits for it (the memory stays pinned until the copy landed)', async () => {
    const n = 4 << 20;
    const view = HostView.allocate('float32', n);
    view.array.fill(7);
    const onDevice = DeviceArray.empty('float32', n);
    view.copyTo(onDevice);
    view.dispose();
    const values = await onDevice.toHost();
    let wrong = 0;
    for (const value of values) if (value !== 7) wrong++;
    expect(wrong).toBe(0);
    onDevice.dispose();
  });

  it('upload rate: from a pinned view against a pageable Float32Array (printed)', async () => {
    const n = 16 << 20;
    const pageable = randomFloat32(n, 3603);
    using view = HostView.allocate('float32', n);
    view.array.set(pageable);
    const stream = Stream.create({ name: 'rate' });
    const target = DeviceArray.empty('float32', n, { stream });
    const rounds = 5;
    const time = async (upload: () => void): Promise<number> => {
      upload();
      await waitForStream(stream);
      const start = performance.now();
      for (let i = 0; i < rounds; i++) upload();
      await waitForStream(stream);
      return (rounds * n * 4) / ((performance.now() - start) / 1000) / 1e9;
    };
    const pinnedRate = await time(() => view.copyTo(target, { stream }));
    const pageableRate = await time(() => target.copyFromHost(pageable, { stream }));
    const back = await target.toHost({ stream });
    expect(back[12345]).toBe(pageable[12345]);
    target.dispose();
    stream.dispose();
    console.log(
      `[host-view] 64 MiB uploads: pinned view ${pinnedRate.toFixed(1)} GB/s, pageable Float32Array ${pageableRate.toFixed(1)} GB/s`,
    );
  });
});
