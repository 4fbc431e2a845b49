import { CudaUnavailableError } from '@cuda-tasks/cudadrv';
import { afterEach, describe, expect, it } from 'vitest';
import { curand, curandOrdering, curandRngType, libcurandSpec } from './ffi/index.js';

describe('libcurand bindings', () => {
  const saved = process.env.CUDA_TASKS_LIBCURAND;
  afterEach(() => {
    if (saved === undefined) delete process.env.CUDA_TASKS_LIBCURAND;
    else process.env.CUDA_TASKS_LIBCURAND = saved;
  });

  it('has the enum values of curand.h', () => {
    expect(curandRngType.CURAND_RNG_PSEUDO_PHILOX4_32_10).toBe(161);
    expect(curandRngType.CURAND_RNG_PSEUDO_XORWOW).toBe(101);
    expect(curandRngType.CURAND_RNG_PSEUDO_MRG32K3A).toBe(121);
    expect(curandOrdering.CURAND_ORDERING_PSEUDO_DEFAULT).toBe(101);
    expect(curandOrdering.CURAND_ORDERING_PSEUDO_LEGACY).toBe(103);
  });

  it('looks for libcurand.so.10 and honours CUDA_TASKS_LIBCURAND', () => {
    expect(libcurandSpec.candidates[0]).toBe('libcurand.so.10');
    expect(libcurandSpec.environmentVariable).toBe('CUDA_TASKS_LIBCURAND');
    process.env.CUDA_TASKS_LIBCURAND = '/nonexistent/libcurand.so.10';
    expect(() => curand()).toThrow(CudaUnavailableError);
    expect(() => curand()).toThrow(/cuRAND is not available.*\/nonexistent\/libcurand\.so\.10/s);
  });
});
