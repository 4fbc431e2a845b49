import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { availability, isAvailable } from './context/availability.js';
import { Device, deviceCount } from './context/device.js';
import { driverVersion } from './driver.js';
import { CudaArgumentError, CudaUnavailableError } from './errors.js';
import { koffi } from './ffi/library.js';
import { DeviceArray } from './memory/array.js';
import { DeviceBuffer } from './memory/memory.js';
import { memset } from './memory/transfer.js';
import { Event } from './stream/event.js';
import { Stream } from './stream/stream.js';

// The real no-driver path: this file loads libcuda exactly as users do. The libcuda bindings
// are cached only once they load, so every call below retries the load and reads
// CUDA_TASKS_LIBCUDA afresh.

/** Where libcuda is installed (the GPU machine), the default-search cases cannot fail. */
const libcudaPresent = ['libcuda.so.1', 'libcuda.so'].some((name) => {
  try {
    koffi().load(name);
    return true;
  } catch {
    return false;
  }
});

const savedOverride = process.env.CUDA_TASKS_LIBCUDA;
beforeEach(() => {
  delete process.env.CUDA_TASKS_LIBCUDA;
});
afterEach(() => {
  if (savedOverride === undefined) delete process.env.CUDA_TASKS_LIBCUDA;
  else process.env.CUDA_TASKS_LIBCUDA = savedOverride;
});

function thrown(fn: () => unknown): Error {
  try {
    fn();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a throw');
}

function expectNoDriver(error: Error): void {
  expect(error).toBeInstanceOf(CudaUnavailableError);
  expect((error as CudaUnavailableError).missing).toBe('The NVIDIA CUDA driver (libcuda)');
  expect(error.message).toContain('could not load libcuda.so.1 or libcuda.so.');
  expect(error.message).toContain('Install the NVIDIA GPU driver');
  expect(error.message).toContain('Set CUDA_TASKS_LIBCUDA to the library');
  expect(error.message).not.toContain('(from CUDA_TASKS_LIBCUDA)');
}

describe.skipIf(libcudaPresent)('without libcuda', () => {
  it('Device.get(0) throws CudaUnavailableError naming libcuda.so.1 and the driver', () => {
    expectNoDriver(thrown(() => Device.get(0)));
  });

  it('DeviceArray.zeros and fromHost throw the same error', () => {
    expectNoDriver(thrown(() => DeviceArray.zeros('float32', [2])));
    expectNoDriver(thrown(() => DeviceArray.fromHost(new Float32Array([1, 2]))));
  });

  it('Stream.create, Event.create and driverVersion throw it too', () => {
    expectNoDriver(thrown(() => Stream.create()));
    expectNoDriver(thrown(() => Event.create()));
    expectNoDriver(thrown(() => driverVersion()));
  });

  it('deviceCount() is 0 and Device.all() empty, without a throw', () => {
    expect(deviceCount()).toBe(0);
    expect(Device.all()).toEqual([]);
  });

  it('isAvailable() is false and availability() gives the error a call would throw', () => {
    expect(isAvailable()).toBe(false);
    const found = availability();
    expect(found).toEqual({ available: false, deviceCount: 0, reason: found.reason });
    expect(found.reason).toBe(thrown(() => Device.get(0)).message);
    expect(found.reason).toContain('could not load libcuda.so.1 or libcuda.so.');
    expect(found.reason).toContain('Install the NVIDIA GPU driver');
  });

  it('the error lists why each candidate failed', () => {
    const message = thrown(() => Device.get(0)).message;
    const reasons = message.split('\n').slice(1);
    expect(reasons).toHaveLength(2);
    expect(reasons[0]).toMatch(/^ {2}libcuda\.so\.1: /);
    expect(reasons[1]).toMatch(/^ {2}libcuda\.so: /);
  });

  it('the load is retried on each call (a failure is not cached)', () => {
    expectNoDriver(thrown(() => Device.get(0)));
    process.env.CUDA_TASKS_LIBCUDA = '/nonexistent/libcuda.so';
    expect(thrown(() => Device.get(0)).message).toContain('/nonexistent/libcuda.so');
  });
});

describe('CUDA_TASKS_LIBCUDA pointing to a missing file', () => {
  it('the message names the path and the variable', () => {
    process.env.CUDA_TASKS_LIBCUDA = '/nonexistent/libcuda.so';
    const error = thrown(() => Device.get(0));
    expect(error).toBeInstanceOf(CudaUnavailableError);
    expect(error.message).toContain(
      'could not load /nonexistent/libcuda.so (from CUDA_TASKS_LIBCUDA)',
    );
    expect(error.message).toContain('Set CUDA_TASKS_LIBCUDA');
    expect(error.message).not.toContain('libcuda.so.1');
    expect(error.message.split('\n')[1]).toMatch(/^ {2}\/nonexistent\/libcuda\.so: /);
  });

  it('availability() names the path too, and the next call reads the variable afresh', () => {
    process.env.CUDA_TASKS_LIBCUDA = '/nonexistent/libcuda.so';
    expect(availability().reason).toContain(
      'could not load /nonexistent/libcuda.so (from CUDA_TASKS_LIBCUDA)',
    );
    expect(deviceCount()).toBe(0);
    process.env.CUDA_TASKS_LIBCUDA = '/nonexistent/other-libcuda.so';
    expect(availability().reason).toContain('/nonexistent/other-libcuda.so');
  });

  it('the same holds for array creation and streams', () => {
    process.env.CUDA_TASKS_LIBCUDA = '/nonexistent/libcuda.so';
    for (const make of [() => DeviceArray.zeros('float32', [2]), () => Stream.create()]) {
      const error = thrown(make);
      expect(error).toBeInstanceOf(CudaUnavailableError);
      expect(error.message).toContain('/nonexistent/libcuda.so (from CUDA_TASKS_LIBCUDA)');
    }
  });
});

describe('argument errors come before the driver is needed', () => {
  it('bad dtypes, shapes and sizes are CudaArgumentError, not CudaUnavailableError', () => {
    process.env.CUDA_TASKS_LIBCUDA = '/nonexistent/libcuda.so';
    expect(thrown(() => DeviceArray.empty('float33' as 'float32', [2]))).toBeInstanceOf(
      CudaArgumentError,
    );
    expect(thrown(() => DeviceArray.zeros('float32', [-1]))).toBeInstanceOf(CudaArgumentError);
    expect(thrown(() => DeviceArray.zeros('float32', [1.5]))).toBeInstanceOf(CudaArgumentError);
    expect(thrown(() => DeviceArray.zeros('float32', []))).toBeInstanceOf(CudaArgumentError);
    expect(thrown(() => DeviceBuffer.allocate(-1))).toBeInstanceOf(CudaArgumentError);
    expect(thrown(() => DeviceBuffer.allocate(0.5))).toBeInstanceOf(CudaArgumentError);
    expect(thrown(() => Device.get(-1))).toBeInstanceOf(CudaArgumentError);
    expect(thrown(() => Device.get(1.5)).message).toBe(
      'device ordinal must be a non-negative integer, got 1.5',
    );
  });

  it('memset checks its byte value before resolving the stream', () => {
    process.env.CUDA_TASKS_LIBCUDA = '/nonexistent/libcuda.so';
    const buffer = { byteLength: 16 } as unknown as DeviceBuffer;
    const error = thrown(() => memset({ buffer }, 256, 16));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toBe('memset: value must be a byte (0..255), got 256');
  });
});
