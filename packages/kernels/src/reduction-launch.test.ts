import type { DeviceArray, KernelArgument, Stream } from '@cuda-tasks/cudadrv';
import { hostOnlyArray } from '@cuda-tasks/testing';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// Which kernels a reduction launches, with which geometry and arguments: the launch, the
// stream, the scratch allocation and the module loader are recorders (a device of 132
// multiprocessors, 2048 resident threads each; the occupancy calculator's block for the other
// entries is 1024 with 264 blocks in a wave).
const recorded = vi.hoisted(() => ({
  launches: [] as { kernel: string; grid: number; block: number; args: unknown[] }[],
  scratch: [] as number[],
}));

const stream = vi.hoisted(() => ({
  context: { device: { multiprocessorCount: () => 132 } },
}));
vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => ({
  ...(await importOriginal<object>()),
  launchOn(
    kernel: { name: string },
    _stream: Stream,
    grid: number,
    block: number,
    _sharedMemory: number,
    args: readonly KernelArgument[],
  ) {
    recorded.launches.push({ kernel: kernel.name, grid, block, args: [...args] });
  },
  resolveStream: (given: Stream | undefined) => given ?? stream,
  DeviceBuffer: {
    allocate(bytes: number) {
      recorded.scratch.push(bytes);
      return { scratch: bytes, dispose() {} };
    },
  },
}));

vi.mock('@cuda-tasks/task-runtime', async (importOriginal) => ({
  ...(await importOriginal<object>()),
  loadCachedModule(_source: string, context: unknown) {
    return {
      context,
      kernel: (name: string) => ({
        name,
        suggestBlockSize: () => ({ blockSize: 1024, minGridSize: 264 }),
        maxActiveBlocksPerMultiprocessor: (block: number) => 2048 / block,
      }),
    };
  },
}));

import { reduction } from './reduction.js';
import { argmax, sum } from './reductions.js';

function launches() {
  const list = recorded.launches;
  recorded.launches = [];
  return list;
}

beforeEach(() => {
  recorded.launches = [];
  recorded.scratch = [];
});

/** A stand-in array in the fake stream's context (the calls check that they match). */
const streamArray: typeof hostOnlyArray = (dtype, shape, options = {}) =>
  hostOnlyArray(dtype, shape, { context: stream.context as never, ...options });

function out<D extends 'float32' | 'float64' | 'int32' = 'float32'>(
  dtype: D = 'float32' as D,
  n = 1,
): DeviceArray<D> {
  return streamArray(dtype, [n]);
}

describe('full reductions of one array of 4- or 8-byte elements read 16-byte vectors', () => {
  it('64 M float32: one full wave of 256-thread blocks, a partial each, then one block over them', () => {
    const x = streamArray('float32', [64 << 20]);
    const y = out();
    sum(x, { out: y });
    // 8 blocks of 256 per multiprocessor, 132 multiprocessors.
    expect(recorded.scratch).toEqual([1056 * 8]);
    const [vectors, partials] = launches() as [
      { kernel: string; grid: number; block: number; args: unknown[] },
      { kernel: string; grid: number; block: number; args: unknown[] },
    ];
    expect(vectors).toMatchObject({ kernel: 'ct_reduce_vectors', grid: 1056, block: 256 });
    expect(vectors.args).toEqual([x, y, expect.objectContaining({ scratch: 8448 }), 64 << 20, 0]);
    expect(partials).toMatchObject({ kernel: 'ct_reduce_partials', grid: 1, block: 256 });
    expect(partials.args).toEqual([expect.anything(), y, 64 << 20, 1, 1056]);
  });

  it('fewer vectors than a wave holds: fewer blocks; one block writes the output itself', () => {
    // 10 blocks' worth of vectors (256 threads, 4 each), 5 vectors more, 3 elements after them.
    sum(streamArray('float32', [4 * 256 * 4 * 10 + 4 * 5 + 3]), { out: out() });
    expect(launches().map(({ kernel, grid }) => [kernel, grid])).toEqual([
      ['ct_reduce_vectors', 11],
      ['ct_reduce_partials', 1],
    ]);
    sum(streamArray('float32', [5]), { out: out() });
    expect(launches().map(({ kernel, grid, args }) => [kernel, grid, args[2]])).toEqual([
      ['ct_reduce_vectors', 1, 0n],
    ]);
    expect(recorded.scratch).toEqual([11 * 8]);
  });

  it('a view off a 16-byte boundary: the elements before it are the head', () => {
    const base = streamArray('float32', [100]);
    for (const [start, length, head] of [
      [0, 99, 0],
      [1, 99, 3],
      [2, 98, 2],
      [3, 97, 1],
      [4, 96, 0],
      [1, 2, 2], // shorter than its head
    ] as const) {
      sum(base.slice(start, length), { out: out() });
      const [launch] = launches();
      expect([launch!.kernel, launch!.args.at(-2), launch!.args.at(-1)]).toEqual([
        'ct_reduce_vectors',
        length,
        head,
      ]);
    }
    const doubles = streamArray('float64', [10]);
    argmax(doubles.slice(1, 9), { out: out('int32') });
    expect(launches()[0]!.args.slice(-2)).toEqual([9, 1]);
  });

  it('every ready-made dtype and a user reduction of one array and a number', () => {
    for (const dtype of ['float32', 'float64', 'int32'] as const) {
      sum(streamArray(dtype, [10]), { out: out(dtype) });
    }
    const scaled = reduction('x: T, s: float32 -> y: T', {
      map: 'x * s',
      reduce: 'a + b',
      identity: '0',
    });
    scaled(streamArray('float64', [10]), 2, out('float64'));
    expect(launches().map(({ kernel }) => kernel)).toEqual(Array(4).fill('ct_reduce_vectors'));
  });
});

describe('other reductions keep their kernels', () => {
  it('two arrays, half inputs, and per-axis reductions', () => {
    const dot = reduction('x: T, w: T -> y: T', { map: 'x * w', reduce: 'a + b', identity: '0' });
    dot(streamArray('float32', [10]), streamArray('float32', [10]), out());
    const halves = reduction('x: float16 -> y: float32', {
      map: 'x',
      reduce: 'a + b',
      identity: '0',
    });
    halves(streamArray('float16', [10]), out());
    const matrix = streamArray('float32', [1300, 700]);
    sum(matrix, { axis: 0, out: out('float32', 700) });
    sum(matrix, { axis: 1, out: out('float32', 1300) });
    expect(launches().map(({ kernel }) => kernel)).toEqual([
      'ct_reduce_blocks',
      'ct_reduce_blocks',
      'ct_reduce_blocks',
      'ct_reduce_threads',
      'ct_reduce_partials', // 1300 rows of 700: each row in parts
    ]);
  });

  it('the full reduction of a matrix reads vectors too', () => {
    sum(streamArray('float32', [1300, 700]) as DeviceArray, { out: out() });
    expect(launches()[0]!.kernel).toBe('ct_reduce_vectors');
  });
});
