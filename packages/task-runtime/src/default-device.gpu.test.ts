import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import * as cudadrv from '@cuda-tasks/cudadrv';
import {
  CudaArgumentError,
  currentDevice,
  Device,
  DeviceArray,
  deviceCount,
  type Kernel,
  launch,
  Module,
} from '@cuda-tasks/cudadrv';
import { describeGpu, randomFloat32 } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { setDefaultDevice, stream, task } from './index.js';

// One process default device for cudadrv and the task runtime, on the real driver: an ordinal
// the process does not see is refused, the devices it sees work, inside tasks and outside.
const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));
const N = 1 << 14;

describeGpu('setDefaultDevice on the GPU', () => {
  let count: number;
  /** axpb_f32 of each device's module. */
  const kernels = new Map<number, Kernel>();
  beforeAll(() => {
    count = deviceCount();
  });
  afterAll(() => setDefaultDevice(0));

  function kernelOn(ordinal: number): Kernel {
    let kernel = kernels.get(ordinal);
    if (kernel === undefined) {
      const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'), {
        context: Device.get(ordinal).primaryContext(),
      });
      kernel = module.kernel('axpb_f32', [
        'float32*',
        'const float32*',
        'float32',
        'float32',
        'uint64',
      ]);
      kernels.set(ordinal, kernel);
    }
    return kernel;
  }

  /** A task on the default device: y = 3 x - 2, checked against float64; its device. */
  async function axpbTask(seed: number): Promise<{ device: number; worst: number }> {
    const input = randomFloat32(N, seed);
    return task(async () => {
      const ordinal = currentDevice().ordinal;
      expect(stream().context.device.ordinal).toBe(ordinal);
      const x = DeviceArray.fromHost(input);
      const y = DeviceArray.zeros('float32', N);
      launch(kernelOn(ordinal), { grid: N / 256, block: 256 }, y, x, 3, -2, N);
      const result = await y.toHost();
      x.dispose();
      y.dispose();
      let worst = 0;
      for (let j = 0; j < N; j++) {
        const expected = 3 * input[j]! - 2;
        worst = Math.max(worst, Math.abs(result[j]! - expected) / (1 + Math.abs(expected)));
      }
      return { device: ordinal, worst };
    });
  }

  it('is one function in both packages', () => {
    expect(setDefaultDevice).toBe(cudadrv.setDefaultDevice);
  });

  it('an ordinal the process does not see is a CudaArgumentError naming the range; the default stays', () => {
    setDefaultDevice(0);
    let error: unknown;
    try {
      setDefaultDevice(count); // 1 on a one-GPU machine
    } catch (caught) {
      error = caught;
    }
    console.log(`setDefaultDevice(${count}) with ${count} device(s): ${String(error)}`);
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect((error as Error).message).toMatch(
      new RegExp(`device ${count} does not exist: this process sees ${count} CUDA device`),
    );
    expect(currentDevice().ordinal).toBe(0);
  });

  it('setDefaultDevice(0) works: outside tasks and in a task that launches and copies', async () => {
    setDefaultDevice(0);
    expect(currentDevice()).toBe(Device.get(0));
    expect(stream()).toBe(Device.get(0).primaryContext().defaultStream);
    const { device, worst } = await axpbTask(1);
    console.log(
      `setDefaultDevice(0): task ran on device ${device}, worst relative error ${worst.toExponential(2)}`,
    );
    expect(device).toBe(0);
    expect(worst).toBeLessThan(1e-6);
  });

  it('with two devices: new tasks use the new default, a running task keeps its own', async () => {
    if (count < 2) {
      console.log(`one device: the two-device case is not run (${count} device)`);
      return;
    }
    setDefaultDevice(0);
    let resume!: () => void;
    const paused = new Promise<void>((resolve) => {
      resume = resolve;
    });
    const running = task(async () => {
      await paused;
      return currentDevice().ordinal;
    });
    setDefaultDevice(1);
    const moved = await axpbTask(2);
    resume();
    const kept = await running;
    console.log(
      `two devices: new task on ${moved.device} (worst ${moved.worst.toExponential(2)}), running task kept ${kept}`,
    );
    expect(moved.device).toBe(1);
    expect(moved.worst).toBeLessThan(1e-6);
    expect(kept).toBe(0);
    setDefaultDevice(0);
  });
});
