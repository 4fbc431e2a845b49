import { thrown } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import type { DType } from '../dtype.js';
import { CudaArgumentError, DisposedError } from '../errors.js';
import type { Stream } from '../stream/stream.js';
import { DeviceArray } from './array.js';
import type { DeviceBuffer } from './memory.js';

// Views need no native call: a DeviceArray over a fake DeviceBuffer exercises shapes,
// strides and pointer offsets. Without libcuda any native call would throw
// CudaUnavailableError, so getting a CudaArgumentError proves validation comes first.

interface FakeBuffer {
  byteLength: number;
  pointer: bigint;
  address: number;
  disposed: boolean;
  context: object;
  disposeCalls: number;
  usedOn: unknown[];
  dispose(): void;
  useOn(stream: unknown): bigint;
  ffiAddressOn(stream: unknown): number;
}

const BASE = 0x1000n;

function fakeBuffer(byteLength = 4096): FakeBuffer {
  const buffer: FakeBuffer = {
    byteLength,
    pointer: BASE,
    address: Number(BASE),
    disposed: false,
    context: {},
    disposeCalls: 0,
    usedOn: [],
    dispose() {
      buffer.disposeCalls++;
      buffer.disposed = true;
    },
    useOn(stream) {
      buffer.usedOn.push(stream);
      return BASE;
    },
    ffiAddressOn(stream) {
      buffer.usedOn.push(stream);
      return Number(BASE);
    },
  };
  return buffer;
}

/** A column-major `rows x columns` array owning a fake buffer. */
function matrix<D extends DType>(dtype: D, rows: number, columns: number, buffer = fakeBuffer()) {
  const array = new DeviceArray(
    buffer as unknown as DeviceBuffer,
    dtype,
    [rows, columns],
    [1, rows],
    0,
    true,
  );
  return { array, buffer };
}

function vector<D extends DType>(dtype: D, length: number, buffer = fakeBuffer()) {
  const array = new DeviceArray(buffer as unknown as DeviceBuffer, dtype, [length], [1], 0, true);
  return { array, buffer };
}

describe('DeviceArray validation before any native call', () => {
  it('an unknown dtype is a CudaArgumentError', () => {
    const error = thrown(() => DeviceArray.empty('float33' as DType, [2]));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toMatch(/^unknown dtype "float33"/);
    expect(thrown(() => DeviceArray.zeros('float33' as DType, 2))).toBeInstanceOf(
      CudaArgumentError,
    );
  });

  it.each([
    [[-1]],
    [[1.5]],
    [[]],
    [[2, -3]],
    [[Number.NaN]],
    [[Infinity]],
    [[2 ** 53]],
    [-1],
    [2.5],
  ])('shape %j is a CudaArgumentError', (shape) => {
    const error = thrown(() => DeviceArray.empty('float32', shape as number[]));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toMatch(/^shape must/);
  });

  it('fromHost checks the host type and the shape first', () => {
    expect(thrown(() => DeviceArray.fromHost(new Float32Array(4), [3]))).toBeInstanceOf(
      CudaArgumentError,
    );
    expect(thrown(() => DeviceArray.fromHost(new Float32Array(4), [3])).message).toBe(
      'fromHost: shape [3] holds 3 elements, the data has 4',
    );
    expect(
      thrown(() => DeviceArray.fromHost(new Float64Array(2), undefined, { dtype: 'float32' }))
        .message,
    ).toBe('fromHost: dtype float32 needs a Float32Array, got Float64Array');
    expect(
      thrown(() => DeviceArray.fromHost(new Int16Array(2) as unknown as Float32Array)),
    ).toBeInstanceOf(CudaArgumentError);
    expect(thrown(() => DeviceArray.fromHost(new Float32Array(4), [2, 1.5]))).toBeInstanceOf(
      CudaArgumentError,
    );
  });
});

describe('DeviceArray geometry', () => {
  it('a fresh 2-D array: shape, strides, rows, columns, leading dimension, pointer', () => {
    const { array } = matrix('float32', 4, 6);
    expect(array.shape).toEqual([4, 6]);
    expect(array.strides).toEqual([1, 4]);
    expect(array.length).toBe(24);
    expect(array.rows).toBe(4);
    expect(array.columns).toBe(6);
    expect(array.leadingDimension).toBe(4);
    expect(array.contiguous).toBe(true);
    expect(array.pointer).toBe(BASE);
    expect(array.elementBytes).toBe(4);
    expect(array.owner).toBe(true);
    expect(String(array)).toBe('DeviceArray<float32>[4x6]');
    expect(DeviceArray.isInstance(array)).toBe(true);
    expect(DeviceArray.isInstance({})).toBe(false);
  });

  it('a vector has one column and a leading dimension of max(1, length)', () => {
    expect(vector('float64', 7).array.columns).toBe(1);
    expect(vector('float64', 7).array.leadingDimension).toBe(7);
    expect(vector('float64', 0, fakeBuffer(0)).array.leadingDimension).toBe(1);
  });

  it('block: shape, parent leading dimension, offset and pointer', () => {
    const { array } = matrix('float32', 4, 6);
    const block = array.block(1, 2, 2, 3);
    expect(block.shape).toEqual([2, 3]);
    expect(block.strides).toEqual([1, 4]);
    expect(block.leadingDimension).toBe(4);
    expect(block.offset).toBe(1 + 2 * 4);
    expect(block.pointer).toBe(BASE + 9n * 4n);
    expect(block.contiguous).toBe(false);
    expect(block.owner).toBe(false);
    expect(block.length).toBe(6);
    expect(block.buffer).toBe(array.buffer);
  });

  it('block of whole columns is contiguous; a single-column block is too', () => {
    const { array } = matrix('float64', 4, 6);
    const columns = array.block(0, 2, 4, 3);
    expect(columns.contiguous).toBe(true);
    expect(columns.pointer).toBe(BASE + 8n * 8n);
    expect(array.block(1, 3, 2, 1).contiguous).toBe(true);
  });

  it('a block of a block adds offsets and keeps the original leading dimension', () => {
    const { array } = matrix('float32', 10, 8);
    const inner = array.block(2, 1, 6, 5).block(1, 2, 3, 2);
    expect(inner.offset).toBe(2 + 1 * 10 + 1 + 2 * 10);
    expect(inner.pointer).toBe(BASE + BigInt((3 + 3 * 10) * 4));
    expect(inner.leadingDimension).toBe(10);
    expect(inner.shape).toEqual([3, 2]);
  });

  it('column(j) is a contiguous vector starting at row 0 of column j', () => {
    const { array } = matrix('float32', 4, 6);
    const column = array.column(3);
    expect(column.shape).toEqual([4]);
    expect(column.strides).toEqual([1]);
    expect(column.offset).toBe(12);
    expect(column.pointer).toBe(BASE + 48n);
    expect(column.contiguous).toBe(true);
    expect(column.owner).toBe(false);
    const ofBlock = array.block(1, 1, 2, 3).column(1);
    expect(ofBlock.shape).toEqual([2]);
    expect(ofBlock.offset).toBe(1 + 1 * 4 + 1 * 4);
    expect(ofBlock.pointer).toBe(BASE + 9n * 4n);
  });

  it('slice: offset, length and pointer; slices of slices add up', () => {
    const { array } = vector('float64', 10);
    const slice = array.slice(3, 4);
    expect(slice.shape).toEqual([4]);
    expect(slice.length).toBe(4);
    expect(slice.offset).toBe(3);
    expect(slice.pointer).toBe(BASE + 24n);
    expect(slice.owner).toBe(false);
    const inner = slice.slice(1, 2);
    expect(inner.offset).toBe(4);
    expect(inner.pointer).toBe(BASE + 32n);
    expect(array.slice(10, 0).length).toBe(0);
  });

  it('pointer offsets use the dtype size', () => {
    for (const [dtype, bytes] of [
      ['uint8', 1n],
      ['float16', 2n],
      ['bfloat16', 2n],
      ['int32', 4n],
      ['float64', 8n],
    ] as const) {
      expect(vector(dtype, 100).array.slice(5, 10).pointer).toBe(BASE + 5n * bytes);
    }
  });

  it('reshape of a contiguous array keeps the offset and gets column-major strides', () => {
    const { array } = matrix('float32', 4, 6);
    const flat = array.reshape([24]);
    expect(flat.shape).toEqual([24]);
    expect(flat.strides).toEqual([1]);
    expect(flat.pointer).toBe(BASE);
    const cube = array.reshape([2, 3, 4]);
    expect(cube.strides).toEqual([1, 2, 6]);
    expect(cube.owner).toBe(false);
    const columns = array.block(0, 2, 4, 2).reshape([2, 4]);
    expect(columns.strides).toEqual([1, 2]);
    expect(columns.leadingDimension).toBe(2);
    expect(columns.pointer).toBe(BASE + 32n);
  });

  it('contiguous ignores strides of dimensions of size 1', () => {
    const array = new DeviceArray(
      fakeBuffer() as unknown as DeviceBuffer,
      'float32',
      [1, 5],
      [1, 1],
      0,
      false,
    );
    expect(array.contiguous).toBe(true);
    const strided = new DeviceArray(
      fakeBuffer() as unknown as DeviceBuffer,
      'float32',
      [5],
      [2],
      0,
      false,
    );
    expect(strided.contiguous).toBe(false);
  });

  it('useOn hands the buffer to the stream and returns the view address', () => {
    const { array, buffer } = matrix('float32', 4, 6);
    const stream = { name: 's' } as unknown as Stream;
    expect(array.block(1, 1, 2, 2).useOn(stream)).toBe(BASE + 5n * 4n);
    expect(buffer.usedOn).toEqual([stream]);
    const empty = vector('float32', 0, fakeBuffer(0));
    expect(empty.array.useOn(stream)).toBe(0n);
    expect(empty.buffer.usedOn).toEqual([]);
  });
});

describe('DeviceArray view errors', () => {
  const { array } = matrix('float32', 4, 6);

  it.each([
    [[3, 0, 2, 1], "block: rows 3..5 x columns 0..1 exceed the array's 4 x 6"],
    [[0, 5, 1, 2], "block: rows 0..1 x columns 5..7 exceed the array's 4 x 6"],
    [[-1, 0, 1, 1], 'block: indices must be non-negative integers'],
    [[0, 0, 1.5, 1], 'block: indices must be non-negative integers'],
  ])('block(%j) is rejected', (indices, message) => {
    const [row, column, rows, columns] = indices as [number, number, number, number];
    const error = thrown(() => array.block(row, column, rows, columns));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toBe(message);
  });

  it('block needs a 2-D array; slice needs a 1-D array', () => {
    expect(thrown(() => vector('float32', 8).array.block(0, 0, 1, 1)).message).toBe(
      'block: needs a 2-D array, got shape [8]',
    );
    expect(thrown(() => array.slice(0, 1)).message).toBe('slice: needs a 1-D array');
  });

  it('column out of range is rejected', () => {
    expect(thrown(() => array.column(6))).toBeInstanceOf(CudaArgumentError);
    expect(thrown(() => array.column(-1))).toBeInstanceOf(CudaArgumentError);
  });

  it('slice out of range is rejected', () => {
    const v = vector('float32', 10).array;
    expect(thrown(() => v.slice(8, 3)).message).toBe('slice: 8..11 is outside 0..10');
    expect(thrown(() => v.slice(-1, 2))).toBeInstanceOf(CudaArgumentError);
    expect(thrown(() => v.slice(0.5, 2))).toBeInstanceOf(CudaArgumentError);
  });

  it('reshape of a strided view and reshape to another size are rejected', () => {
    expect(thrown(() => array.block(1, 1, 2, 2).reshape([4])).message).toBe(
      'reshape: the array is a strided view; copy() it first',
    );
    expect(thrown(() => array.reshape([5, 5])).message).toBe(
      'reshape: [5,5] holds 25 elements, the array has 24',
    );
    expect(thrown(() => array.reshape([]))).toBeInstanceOf(CudaArgumentError);
  });

  it('copyFrom and copyFromHost check dtype, shape and host type before the stream', () => {
    const a = matrix('float32', 2, 3).array;
    const b = matrix('float64', 2, 3).array as unknown as DeviceArray<'float32'>;
    expect(thrown(() => a.copyFrom(b)).message).toBe('copyFrom: dtype float64 into float32');
    expect(thrown(() => a.copyFrom(matrix('float32', 3, 2).array)).message).toBe(
      'copyFrom: shape [3,2] into [2,3]',
    );
    expect(thrown(() => a.copyFromHost(new Float32Array(5))).message).toBe(
      'copyFromHost: 5 elements into an array of 6',
    );
    expect(thrown(() => a.copyFromHost(new Int32Array(6))).message).toBe(
      'copyFromHost: dtype float32 needs a Float32Array, got Int32Array',
    );
  });
});

describe('DeviceArray ownership and disposal', () => {
  it('disposing a view leaves the buffer; disposing the owner frees it', () => {
    const { array, buffer } = matrix('float32', 4, 6);
    const view = array.block(0, 0, 2, 2);
    view.dispose();
    array.reshape([24]).dispose();
    expect(buffer.disposeCalls).toBe(0);
    array.dispose();
    expect(buffer.disposeCalls).toBe(1);
    expect(array.disposed).toBe(true);
    expect(view.disposed).toBe(true);
  });

  it('after the buffer is freed, pointer, views and assertUsable throw DisposedError', () => {
    const { array, buffer } = matrix('float32', 4, 6);
    const view = array.column(1);
    buffer.disposed = true;
    expect(thrown(() => array.pointer)).toBeInstanceOf(DisposedError);
    expect(thrown(() => view.pointer)).toBeInstanceOf(DisposedError);
    expect(thrown(() => array.block(0, 0, 1, 1))).toBeInstanceOf(DisposedError);
    expect(thrown(() => array.reshape([24]))).toBeInstanceOf(DisposedError);
    expect(thrown(() => array.assertUsable('matrix A')).message).toBe(
      'matrix A has been disposed and cannot be used',
    );
  });
});
