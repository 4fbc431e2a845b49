import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import { thrown } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { gemmBackend, setGemmBackend } from './index.js';

// The error rule of docs/conventions.md: a bad setting is a CudaArgumentError (still a
// TypeError, as it was), and changes nothing.
describe('setGemmBackend with a bad value', () => {
  it.each(['cublasLt', '', null, 1])('refuses %o with a CudaArgumentError', (backend) => {
    const before = gemmBackend();
    const error = thrown(() => setGemmBackend(backend as never));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error).toBeInstanceOf(TypeError);
    expect(error.message).toMatch(/setGemmBackend: backend must be 'cublaslt' or 'cublas'/);
    expect(gemmBackend()).toBe(before);
  });
});
