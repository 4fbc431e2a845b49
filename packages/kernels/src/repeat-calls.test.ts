import {
  CudaArgumentError,
  type DeviceArray,
  DisposedError,
  type KernelArgument,
  type Stream,
} from '@cuda-tasks/cudadrv';
import { hostOnlyArray, thrown } from '@cuda-tasks/testing';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// A call with the pattern of the kernel's last call (the same dtypes, the same inputs as
// numbers, the same outputs passed, the same in-place pair) reuses that call's variant without
// binding again. Here the launch, the stream and the module loader are recorders: each test
// shows which variant a call launched with which arguments and grid, and that a call of the
// last pattern with a bad argument is still refused, with the error of a first call.
const recorded = vi.hoisted(() => ({
  launches: [] as {
    kernel: string;
    parameters: readonly string[];
    grid: number;
    block: number;
    args: unknown[];
  }[],
  modules: 0,
}));

const stream = vi.hoisted(() => ({ context: { name: 'fake context' } }));
vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => ({
  ...(await importOriginal<object>()),
  launchOn(
    kernel: { name: string; parameters: readonly string[] },
    _stream: Stream,
    grid: number,
    block: number,
    _sharedMemory: number,
    args: readonly KernelArgument[],
  ) {
    recorded.launches.push({
      kernel: kernel.name,
      parameters: kernel.parameters,
      grid,
      block,
      args: [...args],
    });
  },
  resolveStream: (given: Stream | undefined) => given ?? stream,
}));

// Occupancy: 256 threads a block, 528 blocks fill the device.
vi.mock('@cuda-tasks/task-runtime', async (importOriginal) => ({
  ...(await importOriginal<object>()),
  loadCachedModule() {
    recorded.modules++;
    return {
      kernel: (name: string, parameters: readonly string[]) => ({
        name,
        parameters,
        suggestBlockSize: () => ({ blockSize: 256, minGridSize: 528 }),
      }),
    };
  },
}));

import { elementwise } from './elementwise.js';
import { add, map } from './ops.js';

/** A stand-in array in the fake stream's context (the calls check that they match). */
const streamArray: typeof hostOnlyArray = (dtype, shape, options = {}) =>
  hostOnlyArray(dtype, shape, { context: stream.context as never, ...options });

const f32 = (length = 8) => streamArray('float32', [length]);
const f64 = (length = 8) => streamArray('float64', [length]);
const i32 = (length = 8) => streamArray('int32', [length]);

/** The launches since the last call of `launches()`. */
function launches() {
  const list = recorded.launches;
  recorded.launches = [];
  return list;
}

beforeEach(() => {
  recorded.launches = [];
});

describe('repeated calls of one kernel', () => {
  it('launch the variant of each call: in place or not, per dtype', () => {
    const double = elementwise('x: T -> y: T', 'y = 2 * x');
    const [a, b, d] = [f32(), f32(), f64()];
    double(a, a);
    double(a, a);
    double(a, b);
    double(a, a);
    double(d, d);
    double(d, f64());
    const inPlace = ['float32*', 'uint64'];
    const separate = ['const float32*', 'float32*', 'uint64'];
    expect(launches().map(({ parameters, args }) => [parameters, args])).toEqual([
      [inPlace, [a, 8]],
      [inPlace, [a, 8]],
      [separate, [a, b, 8]],
      [inPlace, [a, 8]],
      [
        ['float64*', 'uint64'],
        [d, 8],
      ],
      [
        ['const float64*', 'float64*', 'uint64'],
        [d, expect.anything(), 8],
      ],
    ]);
  });

  it('pass each call its own numbers', () => {
    const shift = elementwise('x: T, s: T -> y: T', 'y = x + s');
    const [x, y] = [i32(), i32()];
    shift(x, 3, y);
    shift(x, -7, y);
    shift(x, 2, x);
    expect(launches().map(({ args }) => args)).toEqual([
      [x, 3, y, 8],
      [x, -7, y, 8],
      [x, 2, 8],
    ]);
  });

  it("size the grid by each call's element count (four a thread, one full wave at most)", () => {
    const double = elementwise('x: float32 -> y: float32', 'y = 2 * x');
    const [small, large] = [f32(8), f32(1 << 20)];
    const medium = f32(256 * 4 * 100 + 1);
    for (const x of [small, large, large, medium, small]) double(x, x);
    expect(launches().map(({ grid, block }) => [grid, block])).toEqual([
      [1, 256],
      [528, 256],
      [528, 256],
      [101, 256],
      [1, 256],
    ]);
  });

  it('map and add: the program of each function and dtype', () => {
    const [x, d] = [f32(), f64()];
    map(x, 'sin', x);
    map(x, 'sin', x);
    map(x, 'cos', x);
    map(d, 'cos', d);
    add(x, 1, x);
    add(d, x.length, d);
    expect(launches().map(({ kernel, parameters }) => [kernel, parameters[0]])).toEqual([
      ['ct_map_sin', 'float32*'],
      ['ct_map_sin', 'float32*'],
      ['ct_map_cos', 'float32*'],
      ['ct_map_cos', 'float64*'],
      ['ct_add', 'float32*'],
      ['ct_add', 'float64*'],
    ]);
  });
});

describe("a call of the last call's pattern with a bad argument", () => {
  function refused(call: () => unknown, type: typeof CudaArgumentError, message: RegExp) {
    const error = thrown(call);
    expect(error).toBeInstanceOf(type);
    expect(error.message).toMatch(message);
  }

  it('elementwise: the errors of a first call, and nothing launched', () => {
    const scale = elementwise('x: T, a: int32 -> y: T', 'y = a * x');
    const [x, y] = [f32(), f32()];
    scale(x, 2, y);
    expect(launches()).toHaveLength(1);
    refused(
      () => scale(streamArray('float32', [8], { disposed: true }), 2, y),
      DisposedError,
      /input x/,
    );
    refused(
      () => scale(x, 2, streamArray('float32', [8], { disposed: true })),
      DisposedError,
      /output y/,
    );
    refused(
      () => scale(streamArray('float32', [4, 2], { strides: [2, 1] }), 2, f32()),
      CudaArgumentError,
      /input x is a strided view/,
    );
    refused(() => scale(x, 2, f32(9)), CudaArgumentError, /output y has shape \[9\], x has \[8\]/);
    refused(() => scale(x, 2.5, y), CudaArgumentError, /expected an integer/);
    refused(() => scale(x, 2 ** 31, y), CudaArgumentError, /expected an integer/);
    refused(
      () => scale(x, 2, f64()),
      CudaArgumentError,
      /output y is float64 but T is already float32/,
    );
    refused(() => scale(x, x as never, y), CudaArgumentError, /input a must be int32, got float32/);
    expect(launches()).toEqual([]);
    // And the pattern still works.
    scale(x, 3, y);
    expect(launches().map(({ args }) => args)).toEqual([[x, 3, y, 8]]);
  });

  it('map: the errors of a first call, and nothing launched', () => {
    const x = f32();
    map(x, 'exp', x);
    expect(launches()).toHaveLength(1);
    const disposed = streamArray('float32', [8], { disposed: true });
    refused(() => map(disposed, 'exp', disposed), DisposedError, /DeviceArray/);
    refused(() => map(x, 'exp', f32(7)), CudaArgumentError, /output y has shape \[7\]/);
    refused(() => map(x, 'exp2' as never, x), CudaArgumentError, /unknown function "exp2"/);
    refused(() => map(i32(), 'exp', i32()), CudaArgumentError, /x is int32; supported: float32/);
    refused(() => map({} as DeviceArray, 'exp'), CudaArgumentError, /must be a DeviceArray/);
    expect(launches()).toEqual([]);
  });
});
