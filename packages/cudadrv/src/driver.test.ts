import { beforeEach, describe, expect, it, vi } from 'vitest';

// A stand-in for libcuda: cuGetErrorName / cuGetErrorString fill their out-arrays the way
// koffi fills `_Out_ const char **` parameters.
const fake = vi.hoisted(() => {
  const names: Record<number, [string, string]> = {
    1: ['CUDA_ERROR_INVALID_VALUE', 'invalid argument'],
    2: ['CUDA_ERROR_OUT_OF_MEMORY', 'out of memory'],
    3: ['CUDA_ERROR_NOT_INITIALIZED', 'initialization error'],
    100: ['CUDA_ERROR_NO_DEVICE', 'no CUDA-capable device is detected'],
    700: ['CUDA_ERROR_ILLEGAL_ADDRESS', 'an illegal memory access was encountered'],
    719: ['CUDA_ERROR_LAUNCH_FAILED', 'unspecified launch failure'],
  };
  const api = {
    cuInitResult: 0,
    cuInit: (flags: number) => {
      api.cuInitCalls.push(flags);
      return api.cuInitResult;
    },
    cuInitCalls: [] as number[],
    cuGetErrorName(result: number, out: (string | null)[]) {
      const entry = names[result];
      if (entry === undefined) return 1;
      out[0] = entry[0];
      return 0;
    },
    cuGetErrorString(result: number, out: (string | null)[]) {
      const entry = names[result];
      if (entry === undefined) return 1;
      out[0] = entry[1];
      return 0;
    },
    cuDriverGetVersion(out: number[]) {
      out[0] = 13000;
      return 0;
    },
  };
  return { api, cudaCalls: 0 };
});

vi.mock('./ffi/cuda.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('./ffi/cuda.js')>();
  return {
    ...original,
    cuda: () => {
      fake.cudaCalls++;
      return fake.api;
    },
  };
});

const { check, cudaError, driver, driverVersion, stickyError } = await import('./driver.js');
const { CudaError, CudaUnavailableError } = await import('./errors.js');

const { cudadrvState } = await import('./process-state.js');

// The driver's process-wide state (the same object driver.ts holds).
const driverState = cudadrvState('driver', () => {
  throw new Error('driver.ts should have created its state');
}) as { initialized: boolean; stickyError: string | undefined };

function thrown(fn: () => void): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

beforeEach(() => {
  driverState.stickyError = undefined;
});

describe('check / cudaError', () => {
  it('check does nothing for CUDA_SUCCESS', () => {
    expect(check(0, 'cuCtxSynchronize')).toBeUndefined();
  });

  it('maps a CUresult to a CudaError with the driver name and message', () => {
    const error = thrown(() => check(1, 'cuMemcpyHtoDAsync_v2')) as InstanceType<typeof CudaError>;
    expect(error).toBeInstanceOf(CudaError);
    expect(error.code).toBe(1);
    expect(error.status).toBe('CUDA_ERROR_INVALID_VALUE');
    expect(error.call).toBe('cuMemcpyHtoDAsync_v2');
    expect(error.message).toBe(
      'cuMemcpyHtoDAsync_v2 failed: CUDA_ERROR_INVALID_VALUE (1): invalid argument',
    );
    expect(stickyError()).toBeUndefined();
  });

  it('names an unknown CUresult by number', () => {
    const error = cudaError(12345, 'cuSomething');
    expect(error.status).toBe('CUresult 12345');
    expect(error.message).toBe('cuSomething failed: CUresult 12345 (12345): unknown error');
  });

  it('a first sticky error says the context is now unusable and is remembered', () => {
    const error = cudaError(700, 'cuStreamSynchronize');
    expect(error.status).toBe('CUDA_ERROR_ILLEGAL_ADDRESS');
    expect(error.message).toBe(
      'cuStreamSynchronize failed: CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered. This error is sticky: the CUDA context is now unusable and the process must restart to use the GPU again',
    );
    expect(stickyError()).toBe('CUDA_ERROR_ILLEGAL_ADDRESS in cuStreamSynchronize');
  });

  it('later sticky errors point at the first one', () => {
    cudaError(700, 'cuStreamSynchronize');
    const later = thrown(() => check(700, 'cuMemcpyDtoHAsync_v2')) as Error;
    expect(later.message).toBe(
      'cuMemcpyDtoHAsync_v2 failed: CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered. The CUDA context is unusable since an earlier CUDA_ERROR_ILLEGAL_ADDRESS in cuStreamSynchronize; restart the process',
    );
    const other = cudaError(719, 'cuLaunchKernel(saxpy)');
    expect(other.message).toContain(
      'unusable since an earlier CUDA_ERROR_ILLEGAL_ADDRESS in cuStreamSynchronize',
    );
    // The first sticky error stays the one reported.
    expect(stickyError()).toBe('CUDA_ERROR_ILLEGAL_ADDRESS in cuStreamSynchronize');
  });

  it('a non-sticky error is not reported as sticky', () => {
    const error = cudaError(2, 'cuMemAllocAsync');
    expect(error.message).not.toContain('sticky');
    expect(error.message).not.toContain('unusable');
    expect(stickyError()).toBeUndefined();
  });
});

describe('driver()', () => {
  beforeEach(() => {
    driverState.initialized = false;
  });

  it('no device from cuInit is a CudaUnavailableError about the GPU', () => {
    fake.api.cuInitResult = 100;
    const error = thrown(() => driver()) as InstanceType<typeof CudaUnavailableError>;
    expect(error).toBeInstanceOf(CudaUnavailableError);
    expect(error.missing).toBe('GPU');
    expect(error.message).toContain('CUDA_ERROR_NO_DEVICE');
    expect(error.message).toContain('CUDA_VISIBLE_DEVICES');
    expect(driverState.initialized).toBe(false);
  });

  it('another cuInit failure names the result', () => {
    fake.api.cuInitResult = 3;
    const error = thrown(() => driver()) as InstanceType<typeof CudaUnavailableError>;
    expect(error).toBeInstanceOf(CudaUnavailableError);
    expect(error.missing).toBe('libcuda');
    expect(error.message).toContain(
      'cuInit returned CUDA_ERROR_NOT_INITIALIZED (3): initialization error',
    );
  });

  it('initializes once, then reuses the bindings', () => {
    fake.api.cuInitResult = 0;
    fake.api.cuInitCalls.length = 0;
    const api = driver();
    expect(api).toBe(fake.api);
    expect(fake.api.cuInitCalls).toEqual([0]);
    expect(driverState.initialized).toBe(true);
    const calls = fake.cudaCalls;
    expect(driver()).toBe(fake.api);
    expect(fake.api.cuInitCalls).toEqual([0]);
    expect(fake.cudaCalls).toBe(calls);
    expect(driverVersion()).toBe(13000);
  });
});
