import { thrown } from '@cuda-tasks/testing';
import { describe, expect, it, vi } from 'vitest';

// Module loading against a scripted driver whose JIT fails and writes a log into the buffer
// it is given, as cuModuleLoadDataEx does with CU_JIT_ERROR_LOG_BUFFER.
const fake = vi.hoisted(() => {
  const state = { log: '', result: 0 };
  return { state };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  const { koffi } = await import('../ffi/library.js');
  const { CudaError } = await import('../errors.js');
  const api = {
    cuCtxSetCurrent: () => 0,
    cuModuleLoadDataEx(
      handle: (bigint | null)[],
      _image: Uint8Array,
      _count: number,
      _options: Int32Array,
      values: BigUint64Array,
    ) {
      if (fake.state.result !== 0) {
        const bytes = new TextEncoder().encode(fake.state.log);
        new Uint8Array(koffi().view(values[0]!, Number(values[1]))).set(bytes);
        return fake.state.result;
      }
      handle[0] = 0x5000n;
      return 0;
    },
  };
  return {
    ...original,
    driver: () => api,
    check: () => undefined,
    cudaError: (result: number, call: string) =>
      new CudaError(result, 'CUDA_ERROR_INVALID_PTX', call, 'a PTX JIT compilation failed'),
  };
});

import { Context, type Device } from '../context/device.js';
import { CudaError } from '../errors.js';
import { Module, ModuleLoadError } from './module.js';

const context = new Context({ ordinal: 0 } as unknown as Device, 77n);
const JIT_LOG = "ptxas application ptx input, line 3; error   : Unknown symbol 'garbage'";

describe('a module that fails to load (issue 14)', () => {
  it('is a ModuleLoadError with the JIT log in `log` and in the message', () => {
    fake.state.result = 218; // CUDA_ERROR_INVALID_PTX
    fake.state.log = JIT_LOG;
    const error = thrown(() => Module.fromPtx('.version 8.0\ngarbage\n', { context }));
    expect(error).toBeInstanceOf(ModuleLoadError);
    expect(ModuleLoadError.isInstance(error)).toBe(true);
    expect(CudaError.isInstance(error)).toBe(true);
    const loadError = error as ModuleLoadError;
    expect(loadError.log).toBe(JIT_LOG);
    expect(loadError.code).toBe(218);
    expect(loadError.status).toBe('CUDA_ERROR_INVALID_PTX');
    expect(loadError.call).toBe('cuModuleLoadDataEx');
    expect(loadError.message).toBe(
      `cuModuleLoadDataEx failed: CUDA_ERROR_INVALID_PTX (218): module load failed:\n${JIT_LOG}`,
    );
  });

  it('a cubin that fails without a log: `log` is empty', () => {
    fake.state.result = 209; // CUDA_ERROR_NO_BINARY_FOR_GPU
    fake.state.log = '';
    const error = thrown(() => Module.fromCubin(new Uint8Array([1, 2, 3]), { context }));
    expect(ModuleLoadError.isInstance(error)).toBe(true);
    expect((error as ModuleLoadError).log).toBe('');
    expect(error.message).toMatch(/: module load failed$/);
  });

  it('a module that loads is a Module', () => {
    fake.state.result = 0;
    const module = Module.fromPtx('.version 8.0\n', { context });
    expect(module.handle).toBe(0x5000n);
    expect(module.context).toBe(context);
  });
});
