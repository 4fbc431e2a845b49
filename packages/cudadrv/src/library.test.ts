import { thrown } from '@cuda-tasks/testing';
import { afterEach, describe, expect, it } from 'vitest';
import { CudaUnavailableError } from './errors.js';
import {
  cudaLibraryCandidates,
  funcFirst,
  koffi,
  lazyBindings,
  loadLibrary,
  type NativeLibrary,
} from './ffi/library.js';

const spec = {
  displayName: 'libexample',
  environmentVariable: 'CUDA_TASKS_TEST_LIBEXAMPLE',
  candidates: ['libexample-missing.so.2', 'libexample-missing.so'],
  installHint: 'Install the example toolkit.',
};

const savedHome = { CUDA_HOME: process.env.CUDA_HOME, CUDA_PATH: process.env.CUDA_PATH };
afterEach(() => {
  delete process.env.CUDA_TASKS_TEST_LIBEXAMPLE;
  for (const [key, value] of Object.entries(savedHome)) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
});

describe('loadLibrary', () => {
  it('tries every candidate and reports each failure with the install hint', () => {
    const error = thrown(() => loadLibrary(spec)) as CudaUnavailableError;
    expect(error).toBeInstanceOf(CudaUnavailableError);
    expect(error.missing).toBe('libexample');
    const [first, ...reasons] = error.message.split('\n');
    expect(first).toBe(
      "libexample is not available: could not load libexample-missing.so.2 or libexample-missing.so. Install the example toolkit. Set CUDA_TASKS_TEST_LIBEXAMPLE to the library's full path if it is installed elsewhere.",
    );
    expect(reasons).toHaveLength(2);
    expect(reasons[0]).toMatch(/^ {2}libexample-missing\.so\.2: \S/);
    expect(reasons[1]).toMatch(/^ {2}libexample-missing\.so: \S/);
  });

  it('the environment variable replaces the candidates', () => {
    process.env.CUDA_TASKS_TEST_LIBEXAMPLE = '/opt/nowhere/libexample.so';
    const error = thrown(() => loadLibrary(spec));
    expect(error.message).toContain(
      'could not load /opt/nowhere/libexample.so (from CUDA_TASKS_TEST_LIBEXAMPLE).',
    );
    expect(error.message).not.toContain('libexample-missing');
  });

  it('loads a library that exists (the C library, through the environment variable)', () => {
    process.env.CUDA_TASKS_TEST_LIBEXAMPLE = 'libc.so.6';
    const lib = loadLibrary(spec);
    const strlen = lib.func('size_t strlen(const char *s)');
    expect(Number(strlen('cuda-tasks'))).toBe(10);
  });
});

describe('lazyBindings', () => {
  it('builds on first use, caches a success and retries after a failure', () => {
    let builds = 0;
    let fail = true;
    const bindings = lazyBindings(() => {
      builds++;
      if (fail) throw new Error('not yet');
      return { value: builds };
    });
    expect(builds).toBe(0);
    expect(() => bindings()).toThrow('not yet');
    expect(() => bindings()).toThrow('not yet');
    expect(builds).toBe(2);
    fail = false;
    const first = bindings();
    expect(first).toEqual({ value: 3 });
    expect(bindings()).toBe(first);
    expect(builds).toBe(3);
  });
});

describe('funcFirst', () => {
  it('binds the first prototype the library exports', () => {
    const tried: string[] = [];
    const lib = {
      func(prototype: string) {
        tried.push(prototype);
        if (prototype.includes('_v3')) throw new Error(`no ${prototype}`);
        return prototype;
      },
    } as unknown as NativeLibrary;
    expect(funcFirst(lib, ['int f_v3(int)', 'int f_v2(int)', 'int f(int)'])).toBe('int f_v2(int)');
    expect(tried).toEqual(['int f_v3(int)', 'int f_v2(int)']);
  });

  it('throws the last error when none is exported', () => {
    const lib = {
      func(prototype: string) {
        throw new Error(`missing ${prototype}`);
      },
    } as unknown as NativeLibrary;
    expect(() => funcFirst(lib, ['int a_v3(void)', 'int a_v2(void)'])).toThrow(
      'missing int a_v2(void)',
    );
  });

  it('works against a real library', () => {
    const libc = koffi().load('libc.so.6');
    const abs = funcFirst(libc, ['int abs_missing_v9(int)', 'int abs(int)']);
    expect(abs(-7)).toBe(7);
  });
});

describe('cudaLibraryCandidates', () => {
  it('lists sonames per major, the bare name, then $CUDA_HOME/lib64', () => {
    process.env.CUDA_HOME = '/opt/cuda-x';
    delete process.env.CUDA_PATH;
    expect(cudaLibraryCandidates('libcublas.so', ['13', '12'])).toEqual([
      'libcublas.so.13',
      'libcublas.so.12',
      'libcublas.so',
      '/opt/cuda-x/lib64/libcublas.so.13',
      '/opt/cuda-x/lib64/libcublas.so.12',
    ]);
  });

  it('falls back to CUDA_PATH, then /usr/local/cuda', () => {
    delete process.env.CUDA_HOME;
    process.env.CUDA_PATH = '/opt/cuda-path';
    expect(cudaLibraryCandidates('libnvrtc.so', ['12']).at(-1)).toBe(
      '/opt/cuda-path/lib64/libnvrtc.so.12',
    );
    delete process.env.CUDA_PATH;
    expect(cudaLibraryCandidates('libnvrtc.so', ['12']).at(-1)).toBe(
      '/usr/local/cuda/lib64/libnvrtc.so.12',
    );
  });
});
