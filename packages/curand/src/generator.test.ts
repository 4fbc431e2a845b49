import {
  CudaArgumentError,
  CudaUnavailableError,
  DeviceArray,
  type DeviceBuffer,
  DisposedError,
  type DType,
} from '@cuda-tasks/cudadrv';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultGenerator, Generator, rand, randn } from './index.js';

// Point the loaders at nothing: any native call in these tests would throw
// CudaUnavailableError instead of the CudaArgumentError they expect.
const saved = { cuda: process.env.CUDA_TASKS_LIBCUDA, curand: process.env.CUDA_TASKS_LIBCURAND };
beforeAll(() => {
  process.env.CUDA_TASKS_LIBCUDA = '/nonexistent/libcuda.so.1';
  process.env.CUDA_TASKS_LIBCURAND = '/nonexistent/libcurand.so.10';
});
afterAll(() => {
  for (const [key, value] of [
    ['CUDA_TASKS_LIBCUDA', saved.cuda],
    ['CUDA_TASKS_LIBCURAND', saved.curand],
  ] as const) {
    if (value === undefined) delete process.env[key];
    else process.env[key] = value;
  }
});

/**
 * A DeviceArray over a stand-in buffer: enough for the checks that run before any native
 * call (the constructor reads only byteLength, address and disposed).
 */
function fakeArray<D extends DType>(
  dtype: D,
  shape: number[],
  strides: number[],
  options: { disposed?: boolean } = {},
): DeviceArray<D> {
  const buffer = {
    byteLength: 64,
    pointer: 0x1000n,
    address: 0x1000,
    disposed: options.disposed ?? false,
  };
  return new DeviceArray(buffer as unknown as DeviceBuffer, dtype, shape, strides, 0, false);
}

describe('argument checks before any native call', () => {
  const generator = defaultGenerator();

  it('rejects wrong dtypes', () => {
    expect(() => generator.uniform(fakeArray('int32', [4], [1]) as never)).toThrow(
      /Generator\.uniform: needs a float32 or float64 array, got int32/,
    );
    expect(() => generator.normal(fakeArray('uint32', [4], [1]) as never)).toThrow(
      CudaArgumentError,
    );
    expect(() => generator.logNormal(fakeArray('float16', [4], [1]) as never)).toThrow(
      CudaArgumentError,
    );
    expect(() => generator.poisson(fakeArray('float32', [4], [1]) as never, 4)).toThrow(
      /Generator\.poisson: needs a uint32 array, got float32/,
    );
    expect(() => generator.bits(fakeArray('int32', [4], [1]) as never)).toThrow(CudaArgumentError);
  });

  it('rejects bad distribution parameters', () => {
    const floats = fakeArray('float32', [4], [1]);
    const counts = fakeArray('uint32', [4], [1]);
    expect(() => generator.normal(floats, { stddev: 0 })).toThrow(
      /stddev must be a finite number > 0/,
    );
    expect(() => generator.normal(floats, { stddev: -2 })).toThrow(CudaArgumentError);
    expect(() => generator.normal(floats, { mean: Number.NaN })).toThrow(CudaArgumentError);
    expect(() => generator.logNormal(floats, { stddev: Number.POSITIVE_INFINITY })).toThrow(
      CudaArgumentError,
    );
    expect(() => generator.poisson(counts, 0)).toThrow(/lambda must be a finite number > 0/);
    expect(() => generator.poisson(counts, -3)).toThrow(CudaArgumentError);
    expect(() => generator.poisson(counts, Number.NaN)).toThrow(CudaArgumentError);
  });

  it('rejects disposed arrays, non-arrays and unsupported strided views', () => {
    expect(() => generator.uniform(fakeArray('float32', [4], [1], { disposed: true }))).toThrow(
      DisposedError,
    );
    expect(() => generator.uniform({ dtype: 'float32', length: 4 } as never)).toThrow(
      /must be a DeviceArray/,
    );
    expect(() => generator.uniform(fakeArray('float32', [4], [2]))).toThrow(/strided view/);
    expect(() => generator.normal(fakeArray('float64', [2, 2, 2], [1, 4, 16]))).toThrow(
      CudaArgumentError,
    );
  });

  it('rejects bad seeds and offsets', () => {
    expect(() => generator.setSeed(-1)).toThrow(CudaArgumentError);
    expect(() => generator.setSeed(2n ** 64n)).toThrow(CudaArgumentError);
    expect(() => generator.setOffset(0.5)).toThrow(CudaArgumentError);
  });

  it('rejects bad constructor options', () => {
    expect(() => new Generator({ kind: 'mt19937' as never })).toThrow(
      /generator kind must be one of/,
    );
    expect(() => new Generator({ seed: -1 })).toThrow(CudaArgumentError);
    expect(() => new Generator({ seed: 1.5 })).toThrow(CudaArgumentError);
    expect(() => new Generator({ offset: 2n ** 64n })).toThrow(CudaArgumentError);
    expect(() => new Generator({ ordering: 'fastest' as never })).toThrow(CudaArgumentError);
    expect(() => new Generator(null as never)).toThrow(CudaArgumentError);
  });

  it('rejects bad rand/randn arguments', () => {
    expect(() => rand('int32' as never, 4)).toThrow(/rand: dtype must be float32 or float64/);
    expect(() => randn('float16' as never, 4)).toThrow(CudaArgumentError);
    expect(() => rand('float32', [-1])).toThrow(CudaArgumentError);
    expect(() => rand('float32', [])).toThrow(CudaArgumentError);
    expect(() => randn('float64', 3.5)).toThrow(CudaArgumentError);
    expect(() => randn('float64', 4, { stddev: -1 })).toThrow(CudaArgumentError);
    expect(() => randn('float64', 4, { mean: Number.NaN })).toThrow(CudaArgumentError);
    expect(() => rand('float32', 4, { generator: {} as never })).toThrow(/must be a Generator/);
  });

  it('reaches the loader only for valid input (which then says what is missing)', () => {
    expect(() => new Generator({ kind: 'curand-philox', seed: 1 })).toThrow(CudaUnavailableError);
    expect(() => new Generator({ kind: 'xorwow' })).toThrow(CudaUnavailableError);
  });

  it('makes a counter-based philox generator without loading anything', () => {
    const generator = new Generator({ seed: 1 });
    expect(generator.kind).toBe('philox');
    expect(generator.seed).toBe(1n);
    expect(new Generator().seed).not.toBe(new Generator().seed);
  });
});

describe('the task default generator', () => {
  it('is one shared view that dispose() leaves alone', () => {
    const view = defaultGenerator();
    expect(defaultGenerator()).toBe(view);
    expect(view.isTaskDefault).toBe(true);
    expect(view.kind).toBe('philox');
    expect(Generator.isInstance(view)).toBe(true);
    expect(Generator.isInstance({})).toBe(false);
    view.dispose();
    view[Symbol.dispose]();
    expect(view.disposed).toBe(false);
    expect(String(view)).toBe('Generator(task default, philox)');
  });
});
