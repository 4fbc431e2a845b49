/**
 * `@cuda-tasks/curand/ffi` imports by package name (package.json's `./ffi` export), as a user
 * would, and loads nothing native on import: the bindings are a lazy getter.
 */
import * as curandFfi from '@cuda-tasks/curand/ffi';
import { describe, expect, it } from 'vitest';
import * as localFfi from './ffi/index.js';

describe("'@cuda-tasks/curand/ffi' by package name", () => {
  it('resolves to the same module as the relative import', () => {
    expect(curandFfi.curand).toBe(localFfi.curand);
    expect(curandFfi.curandStatus).toBe(localFfi.curandStatus);
  });

  it('exports the binding getter and the curand.h constants', () => {
    expect(typeof curandFfi.curand).toBe('function');
    expect(curandFfi.curandStatus.CURAND_STATUS_SUCCESS).toBe(0);
    expect(curandFfi.curandStatus.CURAND_STATUS_TYPE_ERROR).toBe(103);
    expect(curandFfi.curandRngType.CURAND_RNG_PSEUDO_PHILOX4_32_10).toBe(161);
    expect(curandFfi.curandRngType.CURAND_RNG_PSEUDO_XORWOW).toBe(101);
    expect(curandFfi.curandOrdering.CURAND_ORDERING_PSEUDO_DEFAULT).toBe(101);
    expect(curandFfi.libcurandSpec.environmentVariable).toBe('CUDA_TASKS_LIBCURAND');
    expect(curandFfi.libcurandSpec.candidates[0]).toBe('libcurand.so.10');
  });
});
