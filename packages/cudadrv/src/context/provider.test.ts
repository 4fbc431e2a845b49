import { describe, expect, it, vi } from 'vitest';

// The process default device against a scripted driver that sees `count` devices: one
// default for the default providers and for a provider installed over them (as the task
// runtime's answers outside tasks), set before or after the installation.
const fake = vi.hoisted(() => {
  const state = { count: 1, calls: [] as string[] };
  const api = {
    cuDeviceGetCount(out: number[]) {
      state.calls.push('cuDeviceGetCount');
      out[0] = state.count;
      return 0;
    },
    cuDeviceGet(out: number[], ordinal: number) {
      state.calls.push(`cuDeviceGet ${ordinal}`);
      out[0] = 100 + ordinal;
      return 0;
    },
  };
  return { state, api };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  return { ...original, driver: () => fake.api };
});

import { CudaArgumentError } from '../errors.js';
import type { Stream } from '../stream/stream.js';
import { Device } from './device.js';
import {
  currentDevice,
  defaultDevice,
  defaultDeviceOrdinal,
  setCurrentStreamProvider,
  setDefaultDevice,
} from './provider.js';

const noStream = (): Stream => {
  throw new Error('not used');
};

describe('setDefaultDevice', () => {
  it('on a one-GPU machine: 1 is refused with a CudaArgumentError naming the range; 0 works', () => {
    fake.state.count = 1;
    expect(() => setDefaultDevice(1)).toThrow(CudaArgumentError);
    expect(() => setDefaultDevice(1)).toThrow(
      /device 1 does not exist: this process sees 1 CUDA device \(ordinals 0\.\.0\)/,
    );
    expect(defaultDeviceOrdinal()).toBe(0);
    setDefaultDevice(0);
    expect(currentDevice()).toBe(Device.get(0));
    expect(currentDevice().ordinal).toBe(0);
  });

  it('refuses what is not a device before any driver call, and keeps the default', () => {
    fake.state.calls.length = 0;
    for (const bad of ['1', null, undefined, { ordinal: 0 }, 1n]) {
      expect(() => setDefaultDevice(bad as never), String(bad)).toThrow(CudaArgumentError);
    }
    expect(fake.state.calls).toEqual([]);
    for (const bad of [-1, 1.5, Number.NaN]) {
      expect(() => setDefaultDevice(bad), String(bad)).toThrow(CudaArgumentError);
    }
    expect(defaultDeviceOrdinal()).toBe(0);
  });

  it('without a provider installed: the default providers answer the new default', () => {
    fake.state.count = 2;
    setDefaultDevice(1);
    expect(defaultDeviceOrdinal()).toBe(1);
    expect(currentDevice()).toBe(Device.get(1));
    setDefaultDevice(Device.get(0));
    expect(currentDevice()).toBe(Device.get(0));
  });

  it('set before a provider is installed, and after: the provider reads the same default', () => {
    fake.state.count = 2;
    setDefaultDevice(1); // before
    // A provider as the task runtime's: outside any task it answers the process default.
    const previous = setCurrentStreamProvider(noStream, () => defaultDevice());
    try {
      expect(currentDevice()).toBe(Device.get(1));
      setDefaultDevice(0); // after
      expect(currentDevice()).toBe(Device.get(0));
      setDefaultDevice(Device.get(1));
      expect(currentDevice()).toBe(Device.get(1));
      expect(defaultDevice()).toBe(Device.get(1));
    } finally {
      setCurrentStreamProvider(previous.stream, previous.device, previous.signal);
      setDefaultDevice(0);
    }
    expect(currentDevice()).toBe(Device.get(0));
  });
});
