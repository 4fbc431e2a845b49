/**
 * The raw ffi layers import by package name (the `./ffi` subpaths of package.json's exports),
 * as a user would, and expose their bindings as lazy getters: importing loads no native
 * library, so this runs on any machine.
 */

import * as cublasFfi from '@cuda-tasks/cublas/ffi';
import * as cudaFfi from '@cuda-tasks/cudadrv/ffi';
import { describe, expect, it } from 'vitest';
import * as localFfi from './ffi/index.js';

describe("'@cuda-tasks/cublas/ffi' and '@cuda-tasks/cudadrv/ffi' by package name", () => {
  it('resolve to the same modules as the relative imports (one copy of the bindings)', () => {
    expect(cublasFfi.cublas).toBe(localFfi.cublas);
    expect(cublasFfi.cublasLt).toBe(localFfi.cublasLt);
    expect(cublasFfi.libcublasSpec).toBe(localFfi.libcublasSpec);
  });

  it('export the cuBLAS and cuBLASLt binding getters and the header constants', () => {
    expect(typeof cublasFfi.cublas).toBe('function');
    expect(typeof cublasFfi.cublasLt).toBe('function');
    expect(typeof cublasFfi.cublasIfLoaded).toBe('function');
    // cublas_api.h / library_types.h values.
    expect(cublasFfi.CUBLAS_OP_N).toBe(0);
    expect(cublasFfi.CUBLAS_OP_T).toBe(1);
    expect(cublasFfi.CUBLAS_OP_C).toBe(2);
    expect(cublasFfi.CUBLAS_COMPUTE_32F).toBe(68);
    expect(cublasFfi.CUBLAS_COMPUTE_64F).toBe(70);
    expect(cublasFfi.CUBLAS_GEMM_DEFAULT).toBe(-1);
    expect(cublasFfi.CUDA_R_32F).toBe(0);
    expect(cublasFfi.CUDA_R_64F).toBe(1);
    expect(cublasFfi.CUDA_R_16F).toBe(2);
    expect(cublasFfi.CUDA_R_16BF).toBe(14);
    expect(cublasFfi.CUBLASLT_MATMUL_DESC_TRANSA).toBe(3);
    expect(cublasFfi.CUBLASLT_MATMUL_DESC_TRANSB).toBe(4);
    expect(cublasFfi.libcublasSpec.environmentVariable).toBe('CUDA_TASKS_LIBCUBLAS');
    expect(cublasFfi.libcublasSpec.candidates).toContain('libcublas.so.12');
    expect(cublasFfi.libcublasLtSpec.candidates.length).toBeGreaterThan(0);
  });

  it('load no native library on import', () => {
    // The bindings are built on the first call of cublas(); nothing here called it.
    expect(cublasFfi.cublasIfLoaded()).toBeUndefined();
  });

  it('export the driver bindings and the shared loader from @cuda-tasks/cudadrv/ffi', () => {
    expect(typeof cudaFfi.cuda).toBe('function');
    expect(typeof cudaFfi.nvrtc).toBe('function');
    expect(typeof cudaFfi.lazyBindings).toBe('function');
    expect(typeof cudaFfi.loadLibrary).toBe('function');
    expect(typeof cudaFfi.funcFirst).toBe('function');
    expect(typeof cudaFfi.cudaLibraryCandidates).toBe('function');
    // koffi itself is a getter too: loaded on first call, not on import.
    expect(typeof cudaFfi.koffi).toBe('function');
    expect(cudaFfi.libcudaSpec.candidates[0]).toBe('libcuda.so.1');
    expect(cudaFfi.libcudaSpec.environmentVariable).toBe('CUDA_TASKS_LIBCUDA');
    expect(cudaFfi.CUresult.CUDA_SUCCESS).toBe(0);
    expect(cudaFfi.CU_STREAM_NON_BLOCKING).toBe(1);
    expect(cudaFfi.NVRTC_SUCCESS).toBe(0);
    // lazyBindings builds on first call only, once.
    let builds = 0;
    const lazy = cudaFfi.lazyBindings(() => ({ built: ++builds }));
    expect(builds).toBe(0);
    expect(lazy()).toBe(lazy());
    expect(builds).toBe(1);
  });
});
