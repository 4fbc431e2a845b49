import { describe, expect, it } from 'vitest';
import { CudaUnavailableError } from '../errors.js';
import {
  funcFirst,
  type LibrarySpec,
  loadLibrary,
  type NativeLibrary,
  withMissingSymbolErrors,
} from './library.js';

// An old or partial driver or toolkit lacks a function we bind: one CudaUnavailableError that
// names the function, the library file and the oldest release that has it, instead of koffi's
// "Cannot find function".

const spec: LibrarySpec = {
  displayName: 'The NVIDIA CUDA driver (libcuda)',
  environmentVariable: 'CUDA_TASKS_LIBCUDA',
  candidates: ['libcuda.so.1'],
  installHint: 'Install a newer NVIDIA driver.',
  minimumVersion: 'the driver of CUDA 12.0 or newer (version 525 or newer)',
};

/** A stand-in library that exports only `present`, failing like koffi for anything else. */
function fakeLibrary(): NativeLibrary {
  return {
    func(prototype: string) {
      const name = /(\w+)\s*\(/.exec(prototype)?.[1];
      if (name === 'present') return () => 7;
      throw new Error(`Cannot find function '${name}' in shared library`);
    },
    symbol: () => undefined,
    unload: () => undefined,
  } as unknown as NativeLibrary;
}

function thrown(fn: () => unknown): CudaUnavailableError {
  try {
    fn();
  } catch (error) {
    expect(CudaUnavailableError.isInstance(error)).toBe(true);
    return error as CudaUnavailableError;
  }
  throw new Error('expected a CudaUnavailableError');
}

describe('a function missing from a library', () => {
  it('is a CudaUnavailableError naming the function, the file and the minimum version', () => {
    const lib = withMissingSymbolErrors(fakeLibrary(), spec, '/usr/lib/libcuda.so.1');
    expect(lib.func('int present()')()).toBe(7);
    const error = thrown(() => lib.func('int cuDriverGetVersion(_Out_ int *driverVersion)'));
    expect(error.missing).toBe('cuDriverGetVersion');
    expect(error.message).toBe(
      "The NVIDIA CUDA driver (libcuda) at /usr/lib/libcuda.so.1 is too old or incomplete: it has no cuDriverGetVersion. cuda-tasks needs the driver of CUDA 12.0 or newer (version 525 or newer). Install a newer NVIDIA driver. Set CUDA_TASKS_LIBCUDA to the library's full path to use another copy.",
    );
  });

  it('names every alternative funcFirst tried', () => {
    const lib = withMissingSymbolErrors(fakeLibrary(), spec, 'libcuda.so.1');
    const error = thrown(() =>
      funcFirst(lib, ['int cuEventElapsedTime_v2(float *ms)', 'int cuEventElapsedTime(float *ms)']),
    );
    expect(error.message).toContain(
      'libcuda.so.1 is too old or incomplete: it has none of cuEventElapsedTime_v2, cuEventElapsedTime.',
    );
    expect(funcFirst(lib, ['int absent()', 'int present()'])()).toBe(7);
  });

  it('passes other errors through unchanged', () => {
    const broken = {
      func() {
        throw new TypeError('Invalid type specifier');
      },
    } as unknown as NativeLibrary;
    const lib = withMissingSymbolErrors(broken, spec, 'libcuda.so.1');
    expect(() => lib.func('int x(badtype y)')).toThrow(TypeError);
  });

  it('in a real shared library loaded through loadLibrary (libc stands for an old driver)', () => {
    const libc = loadLibrary({
      ...spec,
      environmentVariable: 'CUDA_TASKS_TEST_UNSET_LIBRARY',
      candidates: ['libc.so.6'],
    });
    // What libc has still binds and runs.
    expect(libc.func('int abs(int x)')(-5)).toBe(5);
    const error = thrown(() => libc.func('int cuLaunchKernelEx(void *config, void *f)'));
    expect(error.missing).toBe('cuLaunchKernelEx');
    expect(error.message).toMatch(
      /at libc\.so\.6 is too old or incomplete: it has no cuLaunchKernelEx\./,
    );
    expect(error.message).toContain('CUDA 12.0 or newer');
  });
});
