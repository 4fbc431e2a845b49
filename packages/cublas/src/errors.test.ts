import { readFileSync } from 'node:fs';
import { CudaError } from '@cuda-tasks/cudadrv';
import { findCudaHeader } from '@cuda-tasks/testing';
import { describe, expect, it, vi } from 'vitest';
import { CublasError, check, cublasError, statusMessage, statusName } from './errors.js';
import {
  CUBLAS_COMPUTE_32F,
  CUBLAS_COMPUTE_32F_FAST_TF32,
  CUBLAS_COMPUTE_32F_PEDANTIC,
  CUBLAS_COMPUTE_64F,
  CUBLAS_DEFAULT_MATH,
  CUBLAS_GEMM_DEFAULT,
  CUBLAS_OP_C,
  CUBLAS_OP_N,
  CUBLAS_OP_T,
  CUBLAS_PEDANTIC_MATH,
  CUBLAS_POINTER_MODE_DEVICE,
  CUBLAS_POINTER_MODE_HOST,
  CUBLAS_TF32_TENSOR_OP_MATH,
  CUDA_R_16BF,
  CUDA_R_16F,
  CUDA_R_32F,
  CUDA_R_64F,
  cublasStatus,
} from './ffi/cublas.js';

describe('CublasError', () => {
  it('is a CudaError with the status name, code and call', () => {
    const error = new CublasError(7, 'CUBLAS_STATUS_INVALID_VALUE', 'cublasSgemm_v2', 'bad');
    expect(error).toBeInstanceOf(CudaError);
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe('CublasError');
    expect(error.code).toBe(7);
    expect(error.status).toBe('CUBLAS_STATUS_INVALID_VALUE');
    expect(error.call).toBe('cublasSgemm_v2');
    expect(error.message).toBe('cublasSgemm_v2 failed: CUBLAS_STATUS_INVALID_VALUE (7): bad');
    expect(CublasError.isInstance(error)).toBe(true);
    expect(CudaError.isInstance(error)).toBe(true);
    expect(CublasError.isInstance(new CudaError(1, 'X', 'y', 'z'))).toBe(false);
    expect(CublasError.isInstance(null)).toBe(false);
  });
});

describe('status names without the library', () => {
  it('names every cublasStatus_t from the table', () => {
    expect(statusName(0)).toBe('CUBLAS_STATUS_SUCCESS');
    expect(statusName(1)).toBe('CUBLAS_STATUS_NOT_INITIALIZED');
    expect(statusName(3)).toBe('CUBLAS_STATUS_ALLOC_FAILED');
    expect(statusName(7)).toBe('CUBLAS_STATUS_INVALID_VALUE');
    expect(statusName(8)).toBe('CUBLAS_STATUS_ARCH_MISMATCH');
    expect(statusName(11)).toBe('CUBLAS_STATUS_MAPPING_ERROR');
    expect(statusName(13)).toBe('CUBLAS_STATUS_EXECUTION_FAILED');
    expect(statusName(14)).toBe('CUBLAS_STATUS_INTERNAL_ERROR');
    expect(statusName(15)).toBe('CUBLAS_STATUS_NOT_SUPPORTED');
    expect(statusName(16)).toBe('CUBLAS_STATUS_LICENSE_ERROR');
  });

  it('names unknown statuses by number', () => {
    expect(statusName(99)).toBe('CUBLAS_STATUS_UNKNOWN_99');
    expect(statusMessage(99)).toBe('unknown cuBLAS status');
  });

  it('describes known statuses', () => {
    expect(statusMessage(7)).toMatch(/invalid/);
    expect(statusMessage(3)).toMatch(/allocation/);
  });
});

describe('check', () => {
  it('passes CUBLAS_STATUS_SUCCESS', () => {
    expect(() => check(0, 'cublasCreate_v2')).not.toThrow();
  });

  it('throws a CublasError for any other status', () => {
    let thrown: unknown;
    try {
      check(13, 'cublasDgemm_v2');
    } catch (error) {
      thrown = error;
    }
    expect(CublasError.isInstance(thrown)).toBe(true);
    expect(thrown).toMatchObject({
      code: 13,
      status: 'CUBLAS_STATUS_EXECUTION_FAILED',
      call: 'cublasDgemm_v2',
    });
    expect(cublasError(15, 'cublasGemmEx').status).toBe('CUBLAS_STATUS_NOT_SUPPORTED');
  });
});

describe('the error module without the library loaded', () => {
  it('names and describes every status of the table, in the message check throws', () => {
    for (const [name, code] of Object.entries(cublasStatus)) {
      if (code === 0) continue;
      expect(statusName(code)).toBe(name);
      const message = statusMessage(code);
      expect(message).not.toBe('unknown cuBLAS status');
      expect(() => check(code, 'cublasCall')).toThrow(
        new CublasError(code, name, 'cublasCall', message),
      );
      expect(cublasError(code, 'cublasCall').message).toBe(
        `cublasCall failed: ${name} (${code}): ${message}`,
      );
    }
  });

  it('CublasError of a second loaded copy of this package is recognized both ways', async () => {
    vi.resetModules();
    const second = await import('./errors.js');
    expect(second.CublasError).not.toBe(CublasError);
    const theirs = second.cublasError(13, 'cublasDgemm_v2');
    const ours = cublasError(13, 'cublasDgemm_v2');
    expect(theirs).not.toBeInstanceOf(CublasError);
    expect(CublasError.isInstance(theirs)).toBe(true);
    expect(second.CublasError.isInstance(ours)).toBe(true);
    expect(CudaError.isInstance(theirs)).toBe(true);
    expect(theirs.name).toBe('CublasError');
    expect(second.CublasError.name).toBe('CublasError');
  });
});

// The enum values in ffi/cublas.ts, checked against the headers where they are present.
const headerDirectory = findCudaHeader('cublas_api.h');

describe.runIf(headerDirectory !== undefined)('enum values match the CUDA headers', () => {
  const cublasApi = () => readFileSync(`${headerDirectory}/cublas_api.h`, 'utf8');
  const libraryTypes = () => readFileSync(`${headerDirectory}/library_types.h`, 'utf8');

  function enumValue(source: string, name: string): number {
    const match = new RegExp(`\\b${name}\\s*=\\s*(-?\\d+)`).exec(source);
    if (match === null) throw new Error(`${name} not found`);
    return Number(match[1]);
  }

  it('cublas_api.h', () => {
    const source = cublasApi();
    for (const [name, value] of Object.entries(cublasStatus)) {
      expect(enumValue(source, name), name).toBe(value);
    }
    const values = {
      CUBLAS_OP_N,
      CUBLAS_OP_T,
      CUBLAS_OP_C,
      CUBLAS_POINTER_MODE_HOST,
      CUBLAS_POINTER_MODE_DEVICE,
      CUBLAS_DEFAULT_MATH,
      CUBLAS_PEDANTIC_MATH,
      CUBLAS_TF32_TENSOR_OP_MATH,
      CUBLAS_COMPUTE_32F,
      CUBLAS_COMPUTE_32F_PEDANTIC,
      CUBLAS_COMPUTE_32F_FAST_TF32,
      CUBLAS_COMPUTE_64F,
      CUBLAS_GEMM_DEFAULT,
    };
    for (const [name, value] of Object.entries(values)) {
      expect(enumValue(source, name), name).toBe(value);
    }
  });

  it('library_types.h', () => {
    const source = libraryTypes();
    const values = { CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F, CUDA_R_64F };
    for (const [name, value] of Object.entries(values)) {
      expect(enumValue(source, name), name).toBe(value);
    }
  });
});
