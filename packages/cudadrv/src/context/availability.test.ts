import { beforeEach, describe, expect, it, vi } from 'vitest';

// A stand-in for libcuda whose load, cuInit result, version and device count each test sets.
const fake = vi.hoisted(() => {
  const names: Record<number, [string, string]> = {
    100: ['CUDA_ERROR_NO_DEVICE', 'no CUDA-capable device is detected'],
    700: ['CUDA_ERROR_ILLEGAL_ADDRESS', 'an illegal memory access was encountered'],
  };
  const api = {
    cuInitResult: 0,
    version: 13000,
    devices: 2,
    cuInit: () => api.cuInitResult,
    cuDriverGetVersion(out: number[]) {
      out[0] = api.version;
      return 0;
    },
    cuDeviceGetCount(out: number[]) {
      out[0] = api.devices;
      return 0;
    },
    cuGetErrorName(result: number, out: (string | null)[]) {
      out[0] = names[result]?.[0] ?? null;
      return 0;
    },
    cuGetErrorString(result: number, out: (string | null)[]) {
      out[0] = names[result]?.[1] ?? null;
      return 0;
    },
  };
  return { api, loadError: undefined as Error | undefined };
});

vi.mock('../ffi/cuda.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../ffi/cuda.js')>();
  return {
    ...original,
    cuda: () => {
      if (fake.loadError !== undefined) throw fake.loadError;
      return fake.api;
    },
  };
});

const { availability, isAvailable } = await import('./availability.js');
const { deviceCount, Device } = await import('./device.js');
const { cudaError } = await import('../driver.js');
const { CudaUnavailableError } = await import('../errors.js');
const { cudadrvState } = await import('../process-state.js');
// The index's import order: contexts need their stream and pool parts.
await import('../index.js');

const driverState = cudadrvState('driver', () => {
  throw new Error('driver.ts should have created its state');
}) as { initialized: boolean; stickyError: string | undefined };

const NO_LIBCUDA = new CudaUnavailableError(
  'The NVIDIA CUDA driver (libcuda) is not available: could not load libcuda.so.1 or libcuda.so.',
  'The NVIDIA CUDA driver (libcuda)',
);

beforeEach(() => {
  fake.loadError = undefined;
  fake.api.cuInitResult = 0;
  fake.api.version = 13000;
  fake.api.devices = 2;
  driverState.stickyError = undefined;
});

// The driver's bindings are kept once cuInit succeeds, so the cases where it fails come first.
describe('where the driver cannot be used', () => {
  it('no libcuda: not available, 0 devices, no version, the load error as the reason', () => {
    fake.loadError = NO_LIBCUDA;
    expect(availability()).toEqual({
      available: false,
      deviceCount: 0,
      reason: NO_LIBCUDA.message,
    });
    expect(isAvailable()).toBe(false);
    expect(deviceCount()).toBe(0);
    expect(Device.all()).toEqual([]);
    // Device.get still says what is missing.
    expect(() => Device.get(0)).toThrow(CudaUnavailableError);
  });

  it('cuInit finds no GPU: not available, 0 devices, the version known', () => {
    fake.api.cuInitResult = 100;
    const found = availability();
    expect(found.available).toBe(false);
    expect(found.deviceCount).toBe(0);
    expect(found.driverVersion).toBe(13000);
    expect(found.reason).toContain('reports no CUDA-capable GPU (cuInit: CUDA_ERROR_NO_DEVICE)');
    expect(deviceCount()).toBe(0);
    expect(driverState.initialized).toBe(false);
  });

  it('a driver older than CUDA 12.0 is not available and says which version it has', () => {
    fake.api.version = 11080;
    expect(availability()).toEqual({
      available: false,
      deviceCount: 0,
      driverVersion: 11080,
      reason:
        'The NVIDIA driver supports CUDA 11.8; cuda-tasks needs a driver for CUDA 12.0 or newer (version 525 or newer; 580 or newer for CUDA 13). Update the NVIDIA GPU driver.',
    });
    expect(isAvailable()).toBe(false);
  });
});

describe('where the driver answers', () => {
  it('available with the device count and version; isAvailable agrees', () => {
    expect(availability()).toEqual({ available: true, deviceCount: 2, driverVersion: 13000 });
    expect(isAvailable()).toBe(true);
    expect(deviceCount()).toBe(2);
    fake.api.version = 12000;
    expect(availability()).toEqual({ available: true, deviceCount: 2, driverVersion: 12000 });
  });

  it('a driver that sees no device is not available', () => {
    fake.api.devices = 0;
    const found = availability();
    expect(found).toMatchObject({ available: false, deviceCount: 0, driverVersion: 13000 });
    expect(found.reason).toContain('reports no device');
  });

  it('after a sticky error: not available, the devices still counted, the error named', () => {
    cudaError(700, 'cuStreamSynchronize');
    expect(availability()).toEqual({
      available: false,
      deviceCount: 2,
      driverVersion: 13000,
      reason:
        'The CUDA context is unusable since CUDA_ERROR_ILLEGAL_ADDRESS in cuStreamSynchronize; restart the process to use the GPU again.',
    });
    expect(isAvailable()).toBe(false);
    // deviceCount is about devices, not the context's health.
    expect(deviceCount()).toBe(2);
  });

  it('never throws: an unexpected failure becomes the reason', () => {
    fake.loadError = new Error('something else broke');
    expect(availability()).toEqual({
      available: false,
      deviceCount: 0,
      reason: 'something else broke',
    });
  });
});
