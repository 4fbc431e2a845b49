import { createRequire } from 'node:module';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { thrown } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { afterAll, beforeEach, describe, expect, it, vi } from 'vitest';

// DLPack structs are host memory: koffi (real) writes and reads them here, while the driver
// is a double whose calls all succeed and whose pool hands out made-up addresses (nothing
// dereferences device memory in these tests). A "producer" is a struct written by hand with a
// koffi callback as its deleter, which counts its calls.
const fake = vi.hoisted(() => {
  const state = { nextHandle: 100, nextAddress: 0x7000_0000, calls: [] as string[] };
  const api = new Proxy({} as Record<string, (...args: any[]) => number>, {
    get(_target, name: string) {
      return (...args: any[]) => {
        if (name === 'cuStreamCreateWithPriority' || name === 'cuEventCreate') {
          args[0][0] = BigInt(state.nextHandle++);
        }
        state.calls.push(name);
        return 0;
      };
    },
  });
  return { state, api };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  return { ...original, driver: () => fake.api, check: () => undefined };
});

import { buildDLPackLibrary } from '../../test/dlpack-library.js';
import { Context, type Device } from '../context/device.js';
import type { DType } from '../dtype.js';
import { CudaArgumentError } from '../errors.js';
import { Stream } from '../stream/stream.js';
import { DeviceArray } from './array.js';
import {
  DLDeviceType,
  DLPACK_FLAG_BITMASK_READ_ONLY,
  fromDLPack,
  pendingDLPackExports,
  toDLPack,
} from './dlpack.js';

const koffi = createRequire(import.meta.url)('koffi');

function fakeContext(ordinal: number, handle: bigint): Stream {
  const context = new Context({ ordinal } as unknown as Device, handle);
  Object.defineProperty(context, 'memoryPool', {
    value: { allocate: (bytes: number) => (fake.state.nextAddress += Math.max(256, bytes) + 256) },
  });
  const stream = Stream.create({ context, name: `s${ordinal}` });
  Object.defineProperty(context, 'defaultStream', { value: stream });
  return stream;
}

const stream = fakeContext(0, 77n);
const otherDevice = fakeContext(1, 78n);

const DTYPES: readonly DType[] = [
  'float32',
  'float64',
  'int32',
  'uint32',
  'int8',
  'uint8',
  'float16',
  'bfloat16',
];
const CODES: Record<DType, [number, number]> = {
  int8: [0, 8],
  int32: [0, 32],
  uint8: [1, 8],
  uint32: [1, 32],
  float16: [2, 16],
  float32: [2, 32],
  float64: [2, 64],
  bfloat16: [4, 16],
};

/** The producer's deleter: a koffi callback that counts calls per struct address. */
const deleted = new Map<bigint, number>();
const deleterProto = koffi.proto('void TestDeleter(void *self)');
const deleterCallback = koffi.register((self: bigint) => {
  deleted.set(self, (deleted.get(self) ?? 0) + 1);
}, koffi.pointer(deleterProto));
const DELETER = koffi.address(deleterCallback) as bigint;
afterAll(() => koffi.unregister(deleterCallback));

interface TensorSpec {
  major?: number;
  minor?: number;
  deleter?: bigint;
  flags?: bigint;
  data?: bigint;
  deviceType?: number;
  deviceId?: number;
  code?: number;
  bits?: number;
  lanes?: number;
  shape: readonly (number | bigint)[];
  strides?: readonly (number | bigint)[] | null;
  byteOffset?: bigint;
  ndim?: number;
  nullShape?: boolean;
}

const keep: unknown[] = [];

/** Writes a DLManagedTensorVersioned as a producer would; returns its address. */
function producerTensor(spec: TensorSpec): bigint {
  const ndim = spec.ndim ?? spec.shape.length;
  const size = 80 + 16 * Math.max(ndim, spec.shape.length);
  const memory = koffi.alloc('uint8_t', size);
  keep.push(memory);
  const address = koffi.address(memory) as bigint;
  const view = new DataView(koffi.view(memory, size));
  view.setUint32(0, spec.major ?? 1, true);
  view.setUint32(4, spec.minor ?? 0, true);
  view.setBigUint64(16, spec.deleter ?? DELETER, true);
  view.setBigUint64(24, spec.flags ?? 0n, true);
  view.setBigUint64(32, spec.data ?? 0x5000_0000n, true);
  view.setInt32(40, spec.deviceType ?? DLDeviceType.kDLCUDA, true);
  view.setInt32(44, spec.deviceId ?? 0, true);
  view.setInt32(48, ndim, true);
  view.setUint8(52, spec.code ?? 2);
  view.setUint8(53, spec.bits ?? 32);
  view.setUint16(54, spec.lanes ?? 1, true);
  view.setBigUint64(56, spec.nullShape ? 0n : address + 80n, true);
  const strides = spec.strides === undefined ? rowMajor(spec.shape.map(Number)) : spec.strides;
  view.setBigUint64(
    64,
    strides === null ? 0n : address + 80n + 8n * BigInt(spec.shape.length),
    true,
  );
  view.setBigUint64(72, spec.byteOffset ?? 0n, true);
  for (let i = 0; i < spec.shape.length; i++) {
    view.setBigInt64(80 + 8 * i, BigInt(spec.shape[i]!), true);
    if (strides !== null)
      view.setBigInt64(80 + 8 * (spec.shape.length + i), BigInt(strides[i]!), true);
  }
  return address;
}

function rowMajor(shape: readonly number[]): number[] {
  const strides = new Array<number>(shape.length);
  let stride = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = stride;
    stride *= shape[i]!;
  }
  return strides;
}

function columnMajor(shape: readonly number[]): number[] {
  const strides: number[] = [];
  let stride = 1;
  for (const extent of shape) {
    strides.push(stride);
    stride *= extent;
  }
  return strides;
}

/** Reads back what toDLPack wrote, field by field. */
function readExport(address: bigint) {
  const header = new DataView(koffi.view(address, 80));
  const ndim = header.getInt32(48, true);
  const int64s = (at: number) =>
    ndim === 0
      ? []
      : Array.from(new BigInt64Array(koffi.view(header.getBigUint64(at, true), 8 * ndim)), Number);
  return {
    version: [header.getUint32(0, true), header.getUint32(4, true)],
    deleter: header.getBigUint64(16, true),
    flags: header.getBigUint64(24, true),
    data: header.getBigUint64(32, true),
    device: [header.getInt32(40, true), header.getInt32(44, true)],
    dtype: [header.getUint8(52), header.getUint8(53), header.getUint16(54, true)],
    shape: int64s(56),
    strides: int64s(64),
    byteOffset: header.getBigUint64(72, true),
  };
}

/** Calls an exported tensor's deleter as a consumer would. */
function consumerDeletes(address: bigint): void {
  const deleter = readExport(address).deleter;
  koffi.call(deleter, deleterProto, address);
}

beforeEach(() => {
  deleted.clear();
});

describe('toDLPack', () => {
  it('writes DLPack 1.1 with the array’s dtype, shape, strides and offset, kept until the deleter', () => {
    const matrix = DeviceArray.empty('float32', [6, 5], { stream });
    const block = matrix.block(1, 2, 3, 2);
    const address = toDLPack(block, { stream });
    const fields = readExport(address);
    expect(fields.version).toEqual([1, 1]);
    expect(fields.device).toEqual([DLDeviceType.kDLCUDA, 0]);
    expect(fields.dtype).toEqual([2, 32, 1]);
    expect(fields.shape).toEqual([3, 2]);
    expect(fields.strides).toEqual([1, 6]);
    expect(fields.data).toBe(matrix.buffer.pointer);
    expect(fields.byteOffset).toBe(BigInt((1 + 2 * 6) * 4));
    expect(fields.flags).toBe(0n);
    expect(pendingDLPackExports()).toBe(1);
    consumerDeletes(address);
    expect(pendingDLPackExports()).toBe(0);
    matrix.dispose();
  });

  it('readOnly sets the flag; reverseDimensions reverses the dimensions (a C-order view of the transpose)', () => {
    const array = DeviceArray.empty('float64', [4, 3, 2], { stream });
    const address = toDLPack(array, { stream, readOnly: true, reverseDimensions: true });
    const fields = readExport(address);
    expect(fields.flags).toBe(DLPACK_FLAG_BITMASK_READ_ONLY);
    expect(fields.shape).toEqual([2, 3, 4]);
    expect(fields.strides).toEqual([12, 4, 1]);
    consumerDeletes(address);
    array.dispose();
  });

  it('dispose before the deleter: the array is unusable at once, its memory freed at the deleter', () => {
    const array = DeviceArray.empty('float64', 1 << 16, { stream });
    const view = array.slice(8, 100);
    const address = toDLPack(view, { stream });
    fake.state.calls.length = 0;
    array.dispose();
    expect(array.disposed).toBe(true);
    expect(thrown(() => view.useOn(stream)).name).toBe('DisposedError');
    expect(fake.state.calls).not.toContain('cuMemFreeAsync');
    const deleter = readExport(address).deleter;
    consumerDeletes(address);
    expect(fake.state.calls.filter((call) => call === 'cuMemFreeAsync')).toHaveLength(1);
    // A second call (a consumer's bug) finds the struct gone and changes nothing. (The struct's
    // memory is freed: only the deleter read before is called, nothing is read from it.)
    koffi.call(deleter, deleterProto, address);
    expect(fake.state.calls.filter((call) => call === 'cuMemFreeAsync')).toHaveLength(1);
  });

  it('two exports of one buffer: the memory waits for both deleters', () => {
    const array = DeviceArray.empty('float32', 1 << 16, { stream });
    const first = toDLPack(array, { stream });
    const second = toDLPack(array.slice(0, 10), { stream, readOnly: true });
    array.dispose();
    fake.state.calls.length = 0;
    consumerDeletes(second);
    expect(fake.state.calls).not.toContain('cuMemFreeAsync');
    consumerDeletes(first);
    expect(fake.state.calls.filter((call) => call === 'cuMemFreeAsync')).toHaveLength(1);
    expect(pendingDLPackExports()).toBe(0);
  });

  it('a deleter without dispose frees nothing: the array stays the user’s', () => {
    const array = DeviceArray.empty('float32', 1 << 16, { stream });
    consumerDeletes(toDLPack(array, { stream }));
    fake.state.calls.length = 0;
    expect(array.disposed).toBe(false);
    array.dispose();
    expect(fake.state.calls.filter((call) => call === 'cuMemFreeAsync')).toHaveLength(1);
  });

  it('refuses what is not a usable DeviceArray of the stream’s context before writing anything', () => {
    expect(thrown(() => toDLPack({} as DeviceArray))).toBeInstanceOf(CudaArgumentError);
    const array = DeviceArray.empty('float32', 4, { stream });
    const error = thrown(() => toDLPack(array, { stream: otherDevice }));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toMatch(/^toDLPack: .* lives in/);
    array.dispose();
    expect(thrown(() => toDLPack(array, { stream })).name).toBe('DisposedError');
    expect(pendingDLPackExports()).toBe(0);
  });
});

/** Every multi-index of `shape`, first index fastest. */
function* indices(shape: readonly number[]): Generator<number[]> {
  if (shape.some((extent) => extent === 0)) return;
  const index = shape.map(() => 0);
  for (;;) {
    yield [...index];
    let d = 0;
    while (d < shape.length && ++index[d]! === shape[d]) index[d++] = 0;
    if (d === shape.length) return;
  }
}

describe('toDLPack: the elements a consumer addresses', () => {
  // A view made from a parent by the view methods, with its element -> parent element map
  // computed here from the methods' definitions (not from the view's strides).
  const views = fc.oneof(
    fc.record({
      kind: fc.constant('compact' as const),
      shape: fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 1, maxLength: 4 }),
      reshape: fc.boolean(),
    }),
    fc.record({
      kind: fc.constant('matrix' as const),
      rows: fc.integer({ min: 1, max: 7 }),
      columns: fc.integer({ min: 1, max: 6 }),
      blocks: fc.array(fc.tuple(fc.nat(), fc.nat(), fc.nat(), fc.nat()), { maxLength: 3 }),
      column: fc.option(fc.nat()),
      slice: fc.option(fc.tuple(fc.nat(), fc.nat())),
    }),
  );

  it('random views, dtypes and reverseDimensions: data + byte_offset + strides address the view’s elements; an import addresses them again', () => {
    fc.assert(
      fc.property(fc.constantFrom(...DTYPES), views, fc.boolean(), (dtype, spec, reverse) => {
        let owner: DeviceArray;
        let view: DeviceArray;
        let element: (index: number[]) => number;
        if (spec.kind === 'compact') {
          const total = spec.shape.reduce((a, b) => a * b, 1);
          owner = DeviceArray.empty(dtype, spec.reshape ? [total] : spec.shape, { stream });
          view = spec.reshape ? owner.reshape(spec.shape) : owner;
          element = (index) => {
            let linear = 0;
            let size = 1;
            for (let d = 0; d < index.length; d++) {
              linear += index[d]! * size;
              size *= spec.shape[d]!;
            }
            return linear;
          };
        } else {
          owner = DeviceArray.empty(dtype, [spec.rows, spec.columns], { stream });
          view = owner;
          let [row, column, rows, columns] = [0, 0, spec.rows, spec.columns];
          for (const [r, c, h, w] of spec.blocks) {
            const r0 = r % (rows + 1);
            const c0 = c % (columns + 1);
            const h0 = h % (rows - r0 + 1);
            const w0 = w % (columns - c0 + 1);
            view = view.block(r0, c0, h0, w0);
            [row, column, rows, columns] = [row + r0, column + c0, h0, w0];
          }
          const at = (i: number, j: number) => row + i + (column + j) * spec.rows;
          element = (index) => at(index[0]!, index[1]!);
          if (spec.column !== null && columns > 0) {
            const j = spec.column % columns;
            view = view.column(j);
            element = (index) => at(index[0]!, j);
            if (spec.slice !== null) {
              const start = spec.slice[0] % (rows + 1);
              const length = spec.slice[1] % (rows - start + 1);
              view = view.slice(start, length);
              element = (index) => at(start + index[0]!, j);
            }
          }
        }
        const bytes = view.elementBytes;
        const address = toDLPack(view, { stream, reverseDimensions: reverse });
        const fields = readExport(address);
        const viewShape = [...view.shape];
        expect(fields.shape).toEqual(reverse ? [...viewShape].reverse() : viewShape);
        expect(fields.dtype).toEqual([...CODES[dtype], 1]);
        const imported = fromDLPack(address, { stream, reverseDimensions: reverse });
        expect(imported.shape).toEqual(viewShape);
        const base = owner.pointer;
        for (const t of indices(fields.shape)) {
          const index = reverse ? [...t].reverse() : t;
          let offset = 0;
          for (let d = 0; d < t.length; d++) offset += t[d]! * fields.strides[d]!;
          const expected = base + BigInt(element(index) * bytes);
          expect(fields.data + fields.byteOffset + BigInt(offset * bytes)).toBe(expected);
          let own = 0;
          for (let d = 0; d < index.length; d++) own += index[d]! * imported.strides[d]!;
          expect(imported.pointer + BigInt(own * bytes)).toBe(expected);
        }
        // The import's dispose (an empty one's import already) called the export's deleter.
        imported.dispose();
        expect(pendingDLPackExports()).toBe(0);
        owner.dispose();
      }),
      { seed: 3838, numRuns: 300 },
    );
  });
});

describe('fromDLPack: round trips', () => {
  it('random dtypes, shapes and layouts: toDLPack then fromDLPack gives the same view; the deleter runs once at dispose', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...DTYPES),
        fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 4 }),
        fc.boolean(),
        fc.boolean(),
        fc.nat(),
        (dtype, shape, asBlock, reverseDimensions, seed) => {
          let owner = DeviceArray.empty(dtype, shape, { stream });
          let array = owner;
          if (asBlock) {
            const rows = 2 + (seed % 4);
            const columns = 2 + ((seed >> 2) % 4);
            owner = DeviceArray.empty(dtype, [rows + 3, columns + 1], { stream });
            array = owner.block(seed % 3, (seed >> 4) % 2, rows, columns);
          }
          const address = toDLPack(array, { stream, reverseDimensions });
          const imported = fromDLPack(address, { stream, reverseDimensions });
          expect(imported.dtype).toBe(dtype);
          expect(imported.shape).toEqual(array.shape);
          expect(imported.length).toBe(array.length);
          if (array.length > 0) {
            expect(imported.pointer).toBe(array.pointer);
            expect(imported.leadingDimension).toBe(array.leadingDimension);
            expect(imported.contiguous).toBe(array.contiguous);
            expect(pendingDLPackExports()).toBe(1);
            imported.dispose();
          }
          // Our own deleter: the export is released once, whatever the import did.
          expect(pendingDLPackExports()).toBe(0);
          imported.dispose();
          owner.dispose();
        },
      ),
      { seed: 38, numRuns: 200 },
    );
  });

  it('random producer layouts: an accepted tensor addresses the same elements, inside its buffer, and the compact and leading-dimension ones are accepted', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...DTYPES),
        fc.array(fc.integer({ min: 0, max: 4 }), { minLength: 0, maxLength: 4 }),
        fc.constantFrom('column', 'row', 'padded', 'random'),
        fc.array(fc.integer({ min: -2, max: 24 }), { minLength: 4, maxLength: 4 }),
        fc.integer({ min: 0, max: 5 }),
        fc.boolean(),
        (dtype, shape, layout, randomStrides, offsetElements, reverse) => {
          const bytes = CODES[dtype][1] / 8;
          const pad = 1 + (randomStrides[0]! & 3);
          let strides: number[];
          if (layout === 'column') strides = columnMajor(shape);
          else if (layout === 'row') strides = rowMajor(shape);
          else if (layout === 'padded' && shape.length === 2) {
            // A pitched matrix: column-major with a leading dimension, or row-major with a pitch.
            strides = reverse ? [shape[1]! + pad, 1] : [1, shape[0]! + pad];
          } else strides = randomStrides.slice(0, shape.length);
          const address = producerTensor({
            code: CODES[dtype][0],
            bits: CODES[dtype][1],
            shape,
            strides,
            byteOffset: BigInt(offsetElements * bytes),
          });
          let imported: DeviceArray;
          try {
            imported = fromDLPack(address, { stream, reverseDimensions: reverse });
          } catch (error) {
            expect(error).toBeInstanceOf(CudaArgumentError);
            const expectedAccepted =
              (layout === 'column' && !reverse) ||
              (layout === 'row' && reverse) ||
              (layout === 'padded' && shape.length === 2) ||
              shape.length === 0;
            expect(expectedAccepted).toBe(false);
            return;
          }
          expect(imported.dtype).toBe(dtype);
          const ownShape = reverse ? [...shape].reverse() : shape;
          expect(imported.shape).toEqual(ownShape.length === 0 ? [1] : ownShape);
          const first = 0x5000_0000n + BigInt(offsetElements * bytes);
          for (const t of indices(shape)) {
            let offset = 0;
            for (let d = 0; d < t.length; d++) offset += t[d]! * strides[d]!;
            const index = reverse ? [...t].reverse() : t;
            let own = 0;
            for (let d = 0; d < index.length; d++) own += index[d]! * imported.strides[d]!;
            expect(imported.pointer + BigInt(own * bytes)).toBe(first + BigInt(offset * bytes));
            expect(own >= 0 && (own + 1) * bytes <= imported.buffer.byteLength).toBe(true);
          }
          imported.dispose();
          expect(deleted.get(address)).toBe(1);
        },
      ),
      { seed: 3839, numRuns: 400 },
    );
  });

  it('a producer’s row-major tensor: refused with a hint, then viewed as its reverseDimensions', () => {
    const address = producerTensor({ shape: [3, 4], strides: [4, 1] });
    const error = thrown(() => fromDLPack(address, { stream }));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toMatch(/row-major .*reverseDimensions: true/);
    expect(deleted.get(address)).toBeUndefined();
    const imported = fromDLPack(address, { stream, reverseDimensions: true });
    expect(imported.shape).toEqual([4, 3]);
    expect(imported.contiguous).toBe(true);
    expect(imported.pointer).toBe(0x5000_0000n);
    imported.dispose();
    imported.dispose();
    expect(deleted.get(address)).toBe(1);
  });

  it('NULL strides mean compact row-major; ndim 0 is one element; size-1 dimensions take any stride', () => {
    const a = fromDLPack(producerTensor({ shape: [5], strides: null }), { stream });
    expect(a.shape).toEqual([5]);
    const scalar = fromDLPack(producerTensor({ shape: [] }), { stream });
    expect(scalar.shape).toEqual([1]);
    const b = fromDLPack(producerTensor({ shape: [1, 7, 1], strides: [99, 1, -3] }), { stream });
    expect(b.shape).toEqual([1, 7, 1]);
    expect(b.contiguous).toBe(true);
    for (const x of [a, scalar, b]) x.dispose();
    expect([...deleted.values()]).toEqual([1, 1, 1]);
  });

  it('a 2-D column-major tensor with a leading dimension is a strided view', () => {
    const imported = fromDLPack(producerTensor({ shape: [3, 4], strides: [1, 8] }), { stream });
    expect(imported.strides).toEqual([1, 8]);
    expect(imported.leadingDimension).toBe(8);
    // The span: the last element (2, 3) is 2 + 3 * 8 elements after the first.
    expect(imported.buffer.byteLength).toBe((2 + 3 * 8 + 1) * 4);
    imported.dispose();
  });

  it('an empty tensor goes back to its producer at once', () => {
    const address = producerTensor({ shape: [0, 3], data: 0n });
    const imported = fromDLPack(address, { stream });
    expect(imported.length).toBe(0);
    expect(deleted.get(address)).toBe(1);
    imported.dispose();
    expect(deleted.get(address)).toBe(1);
  });

  it('a read-only tensor gives an array that refuses writes and allows reads', () => {
    const address = producerTensor({ shape: [4], flags: DLPACK_FLAG_BITMASK_READ_ONLY });
    const imported = fromDLPack(address, { stream });
    expect(imported.useOn(stream, 'read')).toBe(0x5000_0000n);
    const error = thrown(() => imported.useOn(stream, 'write'));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toMatch(/read-only/);
    imported.dispose();
    expect(deleted.get(address)).toBe(1);
  });

  it('an import the garbage collector takes calls the deleter once', async () => {
    const address = producerTensor({ shape: [1024] });
    (() => {
      fromDLPack(address, { stream });
    })();
    // A buffer joins the finalizer once it survives its turn of the event loop.
    await new Promise((resolve) => setImmediate(resolve));
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    for (let i = 0; i < 50 && deleted.get(address) === undefined; i++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(deleted.get(address)).toBe(1);
  });

  it('a read-only import exports only read-only, refused before anything is made', () => {
    const address = producerTensor({ shape: [4], flags: DLPACK_FLAG_BITMASK_READ_ONLY });
    const imported = fromDLPack(address, { stream });
    expect(thrown(() => toDLPack(imported, { stream })).message).toMatch(/read-only/);
    expect(pendingDLPackExports()).toBe(0);
    const again = toDLPack(imported, { stream, readOnly: true });
    expect(readExport(again).flags).toBe(DLPACK_FLAG_BITMASK_READ_ONLY);
    imported.dispose();
    // Lent: the producer's deleter waits for our consumer's.
    expect(deleted.get(address)).toBeUndefined();
    consumerDeletes(again);
    expect(deleted.get(address)).toBe(1);
  });

  it('a NULL deleter is allowed (the producer has nothing to free)', () => {
    const imported = fromDLPack(producerTensor({ shape: [2], deleter: 0n }), { stream });
    imported.dispose();
  });
});

describe('fromDLPack: malformed tensors refused before anything is used, deleter not called', () => {
  const cases: [string, TensorSpec, RegExp][] = [
    ['major version 0', { major: 0, shape: [4] }, /DLPack 0\.0; .*major version 1/],
    ['major version 2', { major: 2, shape: [4] }, /DLPack 2\.0/],
    ['pageable host memory', { deviceType: DLDeviceType.kDLCPU, shape: [4] }, /kDLCPU/],
    ['an OpenCL device', { deviceType: 4, shape: [4] }, /device type 4/],
    ['a negative device', { deviceId: -1, shape: [4] }, /device_id -1/],
    ['another device than the stream’s', { deviceId: 1, shape: [4] }, /device 1, but/],
    ['complex64', { code: 5, bits: 64, shape: [4] }, /code 5, bits 64/],
    ['bool', { code: 6, bits: 8, shape: [4] }, /code 6/],
    ['int64', { code: 0, bits: 64, shape: [4] }, /code 0, bits 64/],
    ['float32x4 lanes', { lanes: 4, shape: [4] }, /lanes 4/],
    ['a negative ndim', { ndim: -1, shape: [] }, /ndim -1/],
    ['a huge ndim', { ndim: 1000, shape: [] }, /ndim 1000/],
    ['a NULL shape', { nullShape: true, shape: [4] }, /shape is NULL/],
    ['a negative extent', { shape: [4, -2] }, /extent outside/],
    ['an overflowing shape', { shape: [2n ** 40n, 2n ** 40n] }, /more bytes than 2\^53/],
    ['a huge extent', { shape: [2n ** 62n] }, /extent outside/],
    ['a negative stride', { shape: [4, 3], strides: [1, -4] }, /negative stride/],
    ['a broadcast (zero) stride', { shape: [4, 3], strides: [0, 1] }, /zero or negative/],
    ['a row stride (3-D row-major)', { shape: [2, 3, 4] }, /reverseDimensions: true/],
    ['a gapped vector', { shape: [4], strides: [2] }, /not a DeviceArray layout/],
    [
      '2-D with a leading dimension below the rows',
      { shape: [4, 3], strides: [1, 2] },
      /not a DeviceArray layout/,
    ],
    [
      'a misaligned byte_offset',
      { shape: [4], byteOffset: 2n },
      /not aligned to the 4-byte float32/,
    ],
    ['a misaligned data pointer', { shape: [2], data: 0x5000_0001n }, /not aligned/],
    ['NULL data with elements', { shape: [3], data: 0n }, /data is NULL for 3 elements/],
    [
      'a leading dimension whose span passes 2^53 bytes',
      { shape: [2, 2], strides: [1, 2n ** 52n] },
      /span \d+ bytes, more than 2\^53/,
    ],
    [
      'a span past the end of the address space',
      { shape: [4], data: 0xffff_ffff_ffff_fff8n },
      /past the end of the 64-bit address space/,
    ],
  ];
  for (const [name, spec, message] of cases) {
    it(name, () => {
      const address = producerTensor(spec);
      fake.state.calls.length = 0;
      const error = thrown(() => fromDLPack(address, { stream }));
      expect(error).toBeInstanceOf(CudaArgumentError);
      expect(error.message).toMatch(/^fromDLPack: /);
      expect(error.message).toMatch(message);
      expect(deleted.get(address)).toBeUndefined();
      expect(fake.state.calls).toEqual([]);
    });
  }

  it('a shape whose float product overflows but holds a zero extent is an empty tensor, not refused', () => {
    const huge = 2n ** 53n - 1n;
    const address = producerTensor({ shape: [...new Array(20).fill(huge), 0n], strides: null });
    const imported = fromDLPack(address, { stream });
    expect(imported.length).toBe(0);
    expect(deleted.get(address)).toBe(1);
    imported.dispose();
    expect(deleted.get(address)).toBe(1);
  });

  it('a pointer that is not an address', () => {
    for (const bad of [0n, -1n, 2n ** 64n, 0, 1.5, 'x', null, undefined]) {
      const error = thrown(() => fromDLPack(bad as bigint, { stream }));
      expect(error).toBeInstanceOf(CudaArgumentError);
      expect(error.message).toMatch(/^fromDLPack: expected the address/);
    }
  });

  it('random corruptions of a valid tensor are refused or imported, never half-done', () => {
    fc.assert(
      fc.property(
        fc.record({
          code: fc.integer({ min: 0, max: 8 }),
          bits: fc.constantFrom(1, 8, 16, 32, 64, 128),
          lanes: fc.constantFrom(0, 1, 2),
          shape: fc.array(fc.integer({ min: -2, max: 4 }), { maxLength: 3 }),
          strides: fc.array(fc.integer({ min: -3, max: 20 }), { maxLength: 3 }),
          byteOffset: fc.integer({ min: 0, max: 17 }),
        }),
        (spec) => {
          const strides = spec.strides.slice(0, spec.shape.length);
          while (strides.length < spec.shape.length) strides.push(1);
          const address = producerTensor({
            ...spec,
            strides,
            byteOffset: BigInt(spec.byteOffset),
          });
          let imported: DeviceArray | undefined;
          try {
            imported = fromDLPack(address, { stream });
          } catch (error) {
            expect(error).toBeInstanceOf(CudaArgumentError);
            expect(deleted.get(address)).toBeUndefined();
            return;
          }
          const empty = spec.shape.some((extent) => extent === 0);
          expect(deleted.get(address)).toBe(empty ? 1 : undefined);
          imported.dispose();
          expect(deleted.get(address)).toBe(1);
          const [code, bits] = CODES[imported.dtype];
          expect([code, bits, spec.lanes]).toEqual([spec.code, spec.bits, 1]);
          if (!empty) expect(spec.byteOffset % imported.elementBytes).toBe(0);
        },
      ),
      { seed: 380, numRuns: 400 },
    );
  });
});

it('the C-order strides helper agrees with the column-major one reversed', () => {
  expect(rowMajor([2, 3, 4])).toEqual(columnMajor([4, 3, 2]).reverse());
});

const native = buildDLPackLibrary();
if (typeof native === 'string') {
  console.log(`[cuda-tasks] DLPack C-library unit tests skipped: ${native}`);
}

describe.runIf(typeof native !== 'string')('a C library on the other side of DLPack', () => {
  const library = native as Exclude<typeof native, string>;

  /** Lets koffi's queued calls from other threads run, until `done()` or 2 s. */
  async function turnUntil(done: () => boolean): Promise<void> {
    for (let i = 0; i < 200 && !done(); i++)
      await new Promise((resolve) => setTimeout(resolve, 10));
  }

  it('reads the exported struct as dlpack.h lays it out, and its deleter releases the export', () => {
    const matrix = DeviceArray.empty('float32', [5, 4], { stream });
    const address = toDLPack(matrix.block(1, 1, 3, 2), { stream, readOnly: true });
    const fields = library.describeTensor(address);
    // major, minor, flags, device type/id, ndim, code, bits, lanes, byte_offset, data, shape, strides
    expect(fields).toEqual([
      1,
      1,
      1,
      DLDeviceType.kDLCUDA,
      0,
      2,
      2,
      32,
      1,
      (1 + 1 * 5) * 4,
      Number(matrix.buffer.pointer),
      3,
      2,
      1,
      5,
    ]);
    library.releaseNow(address);
    expect(pendingDLPackExports()).toBe(0);
    matrix.dispose();
  });

  it('a deleter called from another thread runs once, on the main thread, when the loop turns', async () => {
    const array = DeviceArray.empty('int32', 64, { stream });
    const address = toDLPack(array, { stream });
    expect(library.releaseOnThread(address)).toBe(0);
    await turnUntil(() => pendingDLPackExports() === 0);
    expect(pendingDLPackExports()).toBe(0);
    array.dispose();
  });

  it('imports the library’s row-major tensor as its transpose and calls its deleter once at dispose', () => {
    const before = library.deletedCount();
    const tensor = library.makeTensor(0x5000_0000n, DLDeviceType.kDLCUDA, 0, 3, 4, true, 0n);
    expect(thrown(() => fromDLPack(tensor, { stream })).message).toMatch(/reverseDimensions/);
    expect(library.deletedCount()).toBe(before);
    const imported = fromDLPack(tensor, { stream, reverseDimensions: true });
    expect([imported.shape, imported.contiguous, imported.pointer]).toEqual([
      [4, 3],
      true,
      0x5000_0000n,
    ]);
    imported.dispose();
    imported.dispose();
    expect(library.deletedCount()).toBe(before + 1);
  });
});
