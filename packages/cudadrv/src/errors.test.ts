import { describe, expect, it, vi } from 'vitest';
import {
  CudaArgumentError,
  CudaError,
  CudaOutOfMemoryError,
  CudaUnavailableError,
  DisposedError,
  formatBytes,
  markErrorClass,
} from './errors.js';
import { CompileError } from './kernel/module.js';

describe('CudaError', () => {
  it('carries the code, status and call, and formats the message from them', () => {
    const error = new CudaError(2, 'CUDA_ERROR_OUT_OF_MEMORY', 'cuMemAlloc', 'out of memory');
    expect(error.code).toBe(2);
    expect(error.status).toBe('CUDA_ERROR_OUT_OF_MEMORY');
    expect(error.call).toBe('cuMemAlloc');
    expect(error.message).toBe('cuMemAlloc failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory');
    expect(error.name).toBe('CudaError');
    expect(error).toBeInstanceOf(Error);
  });

  it('isInstance recognizes a CudaError of another loaded copy by its brand', () => {
    const otherCopy = Object.assign(new Error('x'), {
      [Symbol.for('@cuda-tasks/CudaError')]: true,
      code: 700,
    });
    expect(otherCopy instanceof CudaError).toBe(false);
    expect(CudaError.isInstance(otherCopy)).toBe(true);
    expect(CudaError.isInstance(new CudaError(1, 'S', 'c', 'm'))).toBe(true);
  });

  it('isInstance rejects values without the brand', () => {
    expect(CudaError.isInstance(new Error('plain'))).toBe(false);
    expect(CudaError.isInstance(null)).toBe(false);
    expect(CudaError.isInstance(undefined)).toBe(false);
    expect(CudaError.isInstance('CudaError')).toBe(false);
    expect(CudaError.isInstance(new CudaArgumentError('bad'))).toBe(false);
    expect(CudaError.isInstance({ [Symbol.for('@cuda-tasks/CudaArgumentError')]: true })).toBe(
      false,
    );
  });

  it('subclasses keep the brand (library errors extend CudaError)', () => {
    class LibraryError extends CudaError {}
    const error = new LibraryError(13, 'LIB_STATUS_EXECUTION_FAILED', 'libCall', 'failed');
    expect(CudaError.isInstance(error)).toBe(true);
    expect(error.message).toBe('libCall failed: LIB_STATUS_EXECUTION_FAILED (13): failed');
  });
});

describe('CudaArgumentError and DisposedError', () => {
  it('CudaArgumentError is a TypeError with its own brand', () => {
    const error = new CudaArgumentError('shape must be positive');
    expect(error).toBeInstanceOf(TypeError);
    expect(error.name).toBe('CudaArgumentError');
    expect(error.message).toBe('shape must be positive');
    expect(CudaArgumentError.isInstance(error)).toBe(true);
    expect(
      CudaArgumentError.isInstance({ [Symbol.for('@cuda-tasks/CudaArgumentError')]: true }),
    ).toBe(true);
    expect(CudaArgumentError.isInstance(new TypeError('x'))).toBe(false);
    expect(CudaArgumentError.isInstance(null)).toBe(false);
  });

  it('DisposedError names what was disposed and is an argument error', () => {
    const error = new DisposedError('Stream "a"');
    expect(error.message).toBe('Stream "a" has been disposed and cannot be used');
    expect(error.name).toBe('DisposedError');
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(CudaArgumentError.isInstance(error)).toBe(true);
  });

  it('CudaUnavailableError keeps what is missing', () => {
    const error = new CudaUnavailableError('install it', 'cuBLAS');
    expect(error.missing).toBe('cuBLAS');
    expect(error.message).toBe('install it');
    expect(error.name).toBe('CudaUnavailableError');
    expect(CudaError.isInstance(error)).toBe(false);
  });
});

describe('formatBytes', () => {
  it.each([
    [0, '0 B'],
    [1, '1 B'],
    [1023, '1023 B'],
    [1024, '1.0 KiB'],
    [1536, '1.5 KiB'],
    [1024 * 1024 - 1, '1024.0 KiB'],
    [1024 * 1024, '1.0 MiB'],
    [5 * 1024 * 1024 + 512 * 1024, '5.5 MiB'],
    [141 * 1024 ** 3, '141.0 GiB'],
    [2 * 1024 ** 4, '2.0 TiB'],
    [3 * 1024 ** 5, '3072.0 TiB'],
  ])('%d bytes -> %s', (bytes, text) => {
    expect(formatBytes(bytes)).toBe(text);
  });
});

describe('CudaOutOfMemoryError', () => {
  it('reports the requested bytes and the pool usage, formatted', () => {
    const pool = {
      reservedBytes: 3 * 1024 ** 3,
      usedBytes: 2.5 * 1024 ** 3,
      freeDeviceBytes: 512 * 1024 ** 2,
      totalDeviceBytes: 141 * 1024 ** 3,
    };
    const error = new CudaOutOfMemoryError(2, 'CUDA_ERROR_OUT_OF_MEMORY', 1536 * 1024 ** 2, pool);
    expect(error.requestedBytes).toBe(1536 * 1024 ** 2);
    expect(error.pool).toEqual(pool);
    expect(error.code).toBe(2);
    expect(error.status).toBe('CUDA_ERROR_OUT_OF_MEMORY');
    expect(error.call).toBe('cuMemAllocAsync');
    expect(error.name).toBe('CudaOutOfMemoryError');
    expect(error.message).toBe(
      'cuMemAllocAsync failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of device memory allocating 1.5 GiB; pool reserved 3.0 GiB, in use 2.5 GiB; device free 512.0 MiB of 141.0 GiB',
    );
    expect(CudaError.isInstance(error)).toBe(true);
    expect(error).toBeInstanceOf(CudaError);
  });
});

describe('CompileError', () => {
  it('carries the log and the source, and shows the source with line numbers', async () => {
    const { CompileError } = await import('./kernel/module.js');
    const source = 'extern "C" __global__ void k(float *x) {\n  x[0] = missing;\n}\n';
    const log = 'k.cu(2): error: identifier "missing" is undefined';
    const error = new CompileError(6, 'NVRTC_ERROR_COMPILATION', log, 'k.cu', source);
    expect(error.log).toBe(log);
    expect(error.source).toBe(source);
    expect(error.call).toBe('nvrtcCompileProgram');
    expect(error.message).toContain(log);
    expect(error.message).toContain(
      'k.cu:\n1 | extern "C" __global__ void k(float *x) {\n2 |   x[0] = missing;\n3 | }',
    );
    expect(new CompileError(6, 'NVRTC_ERROR_COMPILATION', log, 'k.cu').source).toBe('');
  });
});

describe('CudaUnavailableError.isInstance', () => {
  it('recognizes one of another loaded copy by its brand, and nothing else', () => {
    const otherCopy = Object.assign(new Error('no driver'), {
      [Symbol.for('@cuda-tasks/CudaUnavailableError')]: true,
      missing: 'libcuda',
    });
    expect(otherCopy instanceof CudaUnavailableError).toBe(false);
    expect(CudaUnavailableError.isInstance(otherCopy)).toBe(true);
    expect(CudaUnavailableError.isInstance(new CudaUnavailableError('m', 'cuBLAS'))).toBe(true);
    expect(CudaUnavailableError.isInstance(new CudaError(1, 'S', 'c', 'm'))).toBe(false);
    expect(CudaUnavailableError.isInstance(new Error('CudaUnavailableError'))).toBe(false);
    expect(CudaUnavailableError.isInstance(null)).toBe(false);
  });
});

describe('markErrorClass', () => {
  const pool = { reservedBytes: 0, usedBytes: 0, freeDeviceBytes: 0, totalDeviceBytes: 0 };

  it('recognizes the errors of a second loaded copy of the package, and the copy ours', async () => {
    vi.resetModules();
    const second = await import('./errors.js');
    expect(second.CudaError).not.toBe(CudaError);
    const theirs = [
      new second.CudaError(1, 'S', 'c', 'm'),
      new second.CudaArgumentError('bad'),
      new second.DisposedError('Stream'),
      new second.CudaUnavailableError('install it', 'cuBLAS'),
      new second.CudaOutOfMemoryError(2, 'CUDA_ERROR_OUT_OF_MEMORY', 1, pool),
    ];
    const ours = [
      new CudaError(1, 'S', 'c', 'm'),
      new CudaArgumentError('bad'),
      new DisposedError('Stream'),
      new CudaUnavailableError('install it', 'cuBLAS'),
      new CudaOutOfMemoryError(2, 'CUDA_ERROR_OUT_OF_MEMORY', 1, pool),
    ];
    const classes = [
      [CudaError, second.CudaError],
      [CudaArgumentError, second.CudaArgumentError],
      [DisposedError, second.DisposedError],
      [CudaUnavailableError, second.CudaUnavailableError],
      [CudaOutOfMemoryError, second.CudaOutOfMemoryError],
    ] as const;
    // Which class each error is an instance of, by the class hierarchy (row: error, column: class).
    const expected = [
      [true, false, false, false, false],
      [false, true, false, false, false],
      [false, true, true, false, false],
      [false, false, false, true, false],
      [true, false, false, false, true],
    ];
    for (let row = 0; row < theirs.length; row++) {
      expect(theirs[row]).not.toBeInstanceOf(classes[row]![0]);
      for (let column = 0; column < classes.length; column++) {
        const [mine, copy] = classes[column]!;
        const want = expected[row]![column];
        expect(mine.isInstance(theirs[row]), `ours ${mine.name} <- theirs ${row}`).toBe(want);
        expect(copy.isInstance(ours[row]), `theirs ${copy.name} <- ours ${row}`).toBe(want);
        expect(mine.isInstance(ours[row]), `ours ${mine.name} <- ours ${row}`).toBe(want);
      }
    }
  });

  it('a marked subclass is an instance of its ancestors, not the other way round', () => {
    class LibraryError extends CudaError {
      static override readonly isInstance = markErrorClass(LibraryError, '@test/LibraryError');
    }
    class RoutineError extends LibraryError {
      static override readonly isInstance = markErrorClass(RoutineError, '@test/RoutineError');
    }
    const routine = new RoutineError(7, 'LIB_ROUTINE', 'libRoutine', 'failed');
    const library = new LibraryError(7, 'LIB_STATUS', 'libCall', 'failed');
    expect([CudaError, LibraryError, RoutineError].map((c) => c.isInstance(routine))).toEqual([
      true,
      true,
      true,
    ]);
    expect([CudaError, LibraryError, RoutineError].map((c) => c.isInstance(library))).toEqual([
      true,
      true,
      false,
    ]);
    expect(LibraryError.isInstance(new CudaError(1, 'S', 'c', 'm'))).toBe(false);
    expect(LibraryError.isInstance(new CudaArgumentError('bad'))).toBe(false);
    // The marker adds no own property: what an error carries stays its name, message and fields.
    expect(Object.getOwnPropertySymbols(routine)).toEqual([]);
    expect(routine.message).toBe('libRoutine failed: LIB_ROUTINE (7): failed');
  });

  it('the same key marks the same kind of error in any class that uses it', () => {
    // What another copy of a library does: its own class object, the same key.
    class CopyOne extends Error {
      static readonly isInstance = markErrorClass(CopyOne, '@test/SharedKeyError');
    }
    class CopyTwo extends Error {
      static readonly isInstance = markErrorClass(CopyTwo, '@test/SharedKeyError');
    }
    expect(CopyOne.isInstance(new CopyTwo())).toBe(true);
    expect(CopyTwo.isInstance(new CopyOne())).toBe(true);
    expect(new CopyTwo()).not.toBeInstanceOf(CopyOne);
    expect(CopyOne.isInstance(new Error('plain'))).toBe(false);
    expect(CopyOne.isInstance(undefined)).toBe(false);
    // isInstance needs no `this`: it can be passed around as a predicate.
    const errors: unknown[] = [new CopyOne(), new Error('plain'), new CopyTwo(), 'CopyOne'];
    expect(errors.filter(CopyOne.isInstance).length).toBe(2);
  });

  it('CompileError has its own marker below CudaError', () => {
    const error = new CompileError(6, 'NVRTC_ERROR_COMPILATION', 'log text', 'kernel.cu');
    expect(error.message).toBe(
      'nvrtcCompileProgram failed: NVRTC_ERROR_COMPILATION (6): compiling kernel.cu failed:\nlog text',
    );
    expect(CompileError.isInstance(error)).toBe(true);
    expect(CudaError.isInstance(error)).toBe(true);
    expect(CompileError.isInstance(new CudaError(6, 'S', 'c', 'm'))).toBe(false);
    expect(CompileError.isInstance({ [Symbol.for('@cuda-tasks/CompileError')]: true })).toBe(true);
  });
});
