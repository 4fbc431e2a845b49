import type { Stream } from '@cuda-tasks/cudadrv';
import { afterAll, describe, expect, it, vi } from 'vitest';

// One process default device for cudadrv and the task runtime, against the driver double
// (testing/fake-driver.ts, whose provider slot and default device are as cudadrv keeps them).
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

const [device0, device1] = fake.devices as [
  (typeof fake.devices)[number],
  (typeof fake.devices)[number],
];
/** cudadrv's `currentDevice()`: the installed provider's answer. */
const currentDevice = () => fake.module.currentDevice();
const contextOf = (s: Stream) => (s as unknown as { context: unknown }).context;

/** The runtime, imported by the first test (importing it installs its providers). */
let runtime: typeof import('./index.js');

afterAll(() => {
  fake.state.defaultDevice = 0;
});

describe('setDefaultDevice: one process-wide default device', () => {
  it('set through cudadrv before the runtime is installed: code outside tasks and new tasks use it', async () => {
    expect(fake.state.deviceProvider).toBeUndefined();
    fake.module.setDefaultDevice(1);
    expect(currentDevice()).toBe(device1);
    runtime = await import('./index.js');
    expect(fake.state.deviceProvider).toBeDefined(); // the runtime's provider answers now
    expect(currentDevice()).toBe(device1);
    expect(runtime.device()).toBe(device1);
    expect(runtime.stream()).toBe(device1.context.defaultStream);
    const inTask = await runtime.task(() => ({
      device: currentDevice(),
      context: contextOf(runtime.stream()),
    }));
    expect(inTask.device).toBe(device1);
    expect(inTask.context).toBe(device1.context);
  });

  it('the runtime exports cudadrv’s setDefaultDevice itself, and setting it after installation works', async () => {
    expect(runtime.setDefaultDevice).toBe(fake.module.setDefaultDevice);
    runtime.setDefaultDevice(0);
    expect(currentDevice()).toBe(device0);
    expect(runtime.device()).toBe(device0);
    expect(runtime.stream()).toBe(device0.context.defaultStream);
    fake.module.setDefaultDevice(device1); // a Device, through cudadrv's export
    expect(currentDevice()).toBe(device1);
    const inTask = await runtime.task(() => contextOf(runtime.stream()));
    expect(inTask).toBe(device1.context);
    runtime.setDefaultDevice(0);
  });

  it('a running task keeps its device; tasks started afterwards, and code outside tasks, use the new one', async () => {
    runtime.setDefaultDevice(0);
    let resume!: () => void;
    const paused = new Promise<void>((resolve) => {
      resume = resolve;
    });
    const running = runtime.task(async () => {
      const before = runtime.stream();
      await paused; // the default changes here
      const after = runtime.stream();
      const child = await runtime.task(() => ({
        device: currentDevice(),
        context: contextOf(runtime.stream()),
      }));
      return { before, after, device: currentDevice(), child };
    });
    runtime.setDefaultDevice(1);
    const started = await runtime.task(() => ({
      device: currentDevice(),
      context: contextOf(runtime.stream()),
    }));
    resume();
    const seen = await running;
    expect(seen.before).toBe(seen.after);
    expect(contextOf(seen.before)).toBe(device0.context);
    expect(seen.device).toBe(device0);
    // A nested task inherits its parent's device.
    expect(seen.child).toEqual({ device: device0, context: device0.context });
    expect(started).toEqual({ device: device1, context: device1.context });
    expect(currentDevice()).toBe(device1);
    expect(runtime.stream()).toBe(device1.context.defaultStream);
    // withDevice still wins over the default, inside and outside tasks.
    expect(runtime.withDevice(0, () => currentDevice())).toBe(device0);
    expect(await runtime.task(() => runtime.withDevice(0, () => currentDevice()))).toBe(device0);
    runtime.setDefaultDevice(0);
  });

  it('refuses what is not a device with a CudaArgumentError, and keeps the default', () => {
    runtime.setDefaultDevice(1);
    for (const bad of [2, -1, 1.5, '1', null, undefined, { ordinal: 0 }]) {
      expect(() => runtime.setDefaultDevice(bad as never), String(bad)).toThrow(
        fake.module.CudaArgumentError,
      );
    }
    expect(currentDevice()).toBe(device1);
    runtime.setDefaultDevice(0);
  });
});
