/**
 * `@cuda-tasks/cusolver/ffi` imports by package name (package.json's `./ffi` export), as a
 * user would, and loads nothing native on import: the bindings are a lazy getter.
 */
import * as cusolverFfi from '@cuda-tasks/cusolver/ffi';
import { describe, expect, it } from 'vitest';
import * as localFfi from './ffi/index.js';

describe("'@cuda-tasks/cusolver/ffi' by package name", () => {
  it('resolves to the same module as the relative import', () => {
    expect(cusolverFfi.cusolver).toBe(localFfi.cusolver);
    expect(cusolverFfi.libcusolverSpec).toBe(localFfi.libcusolverSpec);
  });

  it('exports the binding getter and the cusolverDn.h / cublas_api.h constants', () => {
    expect(typeof cusolverFfi.cusolver).toBe('function');
    expect(cusolverFfi.CUSOLVER_STATUS_SUCCESS).toBe(0);
    expect(cusolverFfi.CUSOLVER_STATUS_INVALID_VALUE).toBe(3);
    expect(cusolverFfi.cusolverStatus[0]).toBe('CUSOLVER_STATUS_SUCCESS');
    expect(cusolverFfi.CUBLAS_FILL_MODE_LOWER).toBe(0);
    expect(cusolverFfi.CUBLAS_FILL_MODE_UPPER).toBe(1);
    expect(cusolverFfi.CUSOLVER_EIG_MODE_VECTOR).toBe(1);
    expect(cusolverFfi.libcusolverSpec.environmentVariable).toBe('CUDA_TASKS_LIBCUSOLVER');
    expect(cusolverFfi.libcusolverSpec.candidates).toContain('libcusolver.so.11');
  });
});
