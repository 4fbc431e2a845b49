import { createRequire } from 'node:module';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { thrown } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// Host views against a driver double: the ArrayBuffer and its address are real (koffi reads
// it), the driver records what it is asked to register, map, copy and unregister, and carries
// copies out between the view's host memory and a made-up device memory (a host array).
const fake = vi.hoisted(() => {
  const DEVICE_BASE = 0x9000_0000;
  const device = new Uint8Array(1 << 20);
  const state = {
    nextHandle: 100,
    nextAddress: DEVICE_BASE,
    calls: [] as string[],
    registered: new Map<bigint, { bytes: number; flags: number }>(),
    /** What cuStreamQuery answers (0: idle, 600: not ready). */
    query: 0,
    /** Makes the next cuMemHostRegister fail with CUDA_ERROR_OUT_OF_MEMORY. */
    failRegister: false,
  };
  let koffi: any;
  const hostBytes = (address: bigint, bytes: number): Uint8Array => {
    koffi ??= (globalThis as any).__koffiForTest;
    return new Uint8Array(koffi.view(address, bytes));
  };
  const at = (address: bigint | number) => Number(address) - DEVICE_BASE;
  const special: Record<string, (...args: any[]) => number> = {
    cuStreamCreateWithPriority(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    cuEventCreate(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    cuMemHostRegister(address: bigint, bytes: number, flags: number) {
      if (state.failRegister) {
        state.failRegister = false;
        return 2;
      }
      state.registered.set(BigInt(address), { bytes, flags });
      return 0;
    },
    cuMemHostUnregister(address: bigint) {
      return state.registered.delete(BigInt(address)) ? 0 : 1;
    },
    cuMemHostGetDevicePointer(out: bigint[], address: bigint) {
      // As under unified addressing: the device alias is the host address.
      out[0] = BigInt(address);
      return 0;
    },
    cuMemcpyHtoDAsync_v2(to: number, from: bigint, bytes: number) {
      device.set(hostBytes(from, bytes), at(to));
      return 0;
    },
    cuMemcpyDtoHAsync_v2(to: bigint, from: number, bytes: number) {
      hostBytes(to, bytes).set(device.subarray(at(from), at(from) + bytes));
      return 0;
    },
    cuMemcpy2DAsync_v2(d: Record<string, any>) {
      const rows: Uint8Array[] = [];
      for (let r = 0; r < d.Height; r++) {
        const start = at(d.srcDevice) + r * d.srcPitch;
        rows.push(device.slice(start, start + d.WidthInBytes));
      }
      for (let r = 0; r < d.Height; r++) device.set(rows[r]!, at(d.dstDevice) + r * d.dstPitch);
      return 0;
    },
    cuStreamQuery() {
      return state.query;
    },
  };
  const api = new Proxy(special, {
    get(target, name: string) {
      return (...args: unknown[]) => {
        state.calls.push(name);
        const own = target[name];
        return own === undefined ? 0 : own(...args);
      };
    },
  });
  return { state, api, device, at };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  const { CudaError } = await import('../errors.js');
  return {
    ...original,
    driver: () => fake.api,
    check: (result: number, call: string) => {
      if (result !== 0) throw new CudaError(result, `CUresult ${result}`, call, 'failed');
    },
  };
});
vi.mock('../context/provider.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../context/provider.js')>();
  return { ...original, currentContext: () => stream.context };
});

import { Context, type Device } from '../context/device.js';
import { CaptureError, CudaArgumentError, CudaError, DisposedError } from '../errors.js';
import { Stream } from '../stream/stream.js';
import { DeviceArray } from './array.js';
import { DLDeviceType, toDLPack } from './dlpack.js';
import { HostView } from './host-view.js';

const koffi = createRequire(import.meta.url)('koffi');
(globalThis as any).__koffiForTest = koffi;
const PAGE = process.arch === 'arm64' ? 65536 : 4096;

function fakeContext(ordinal: number, handle: bigint): Stream {
  const context = new Context({ ordinal } as unknown as Device, handle);
  Object.defineProperty(context, 'memoryPool', {
    value: { allocate: (bytes: number) => (fake.state.nextAddress += Math.max(256, bytes) + 256) },
  });
  const s = Stream.create({ context, name: `s${ordinal}` });
  Object.defineProperty(context, 'defaultStream', { value: s });
  return s;
}

const stream = fakeContext(0, 77n);
const other = Stream.create({ context: stream.context, name: 'other' });

beforeEach(() => {
  fake.state.calls.length = 0;
  fake.state.query = 0;
  fake.state.nextAddress = 0x9000_0000;
});

describe('HostView: pinned memory as a typed array', () => {
  it('registers a page-aligned range of its own, and detaches and unregisters at dispose', () => {
    const view = HostView.allocate('float32', 1000);
    const pointer = view.pointer;
    expect(pointer % BigInt(PAGE)).toBe(0n);
    expect(fake.state.registered.get(pointer)).toEqual({ bytes: PAGE, flags: 1 });
    const array = view.array;
    expect(array).toBeInstanceOf(Float32Array);
    expect(array.length).toBe(1000);
    array[7] = 2.5;
    // The typed array is the registered memory itself: the native side sees the write.
    expect(new Float32Array(koffi.view(pointer, 4000))[7]).toBe(2.5);
    const bytes = view.bytes;
    const sub = array.subarray(10, 20);
    view.dispose();
    expect(fake.state.registered.has(pointer)).toBe(false);
    expect([array.length, bytes.length, sub.length, array.buffer.byteLength]).toEqual([0, 0, 0, 0]);
    expect(array[7]).toBeUndefined();
    expect(thrown(() => view.array)).toBeInstanceOf(DisposedError);
    expect(thrown(() => view.pointer)).toBeInstanceOf(DisposedError);
    view.dispose();
    expect(fake.state.calls.filter((c) => c === 'cuMemHostUnregister')).toHaveLength(1);
  });

  it('half precision views are their raw bits; mapped views ask for the device mapping', () => {
    const view = HostView.allocate('bfloat16', 3, { mapped: true });
    expect(view.array).toBeInstanceOf(Uint16Array);
    expect(fake.state.registered.get(view.pointer)?.flags).toBe(3);
    view.dispose();
  });

  it('an empty view makes no native call', () => {
    const view = HostView.allocate('float64', 0);
    expect(view.array.length).toBe(0);
    view.dispose();
    expect(fake.state.calls).toEqual([]);
  });

  it('an empty mapped view gives empty device arrays without a native call', () => {
    const view = HostView.allocate('float32', 0, { mapped: true });
    const onDevice = view.deviceArray(undefined, { stream });
    expect(onDevice.length).toBe(0);
    expect(view.deviceArray([0, 3], { stream }).shape).toEqual([0, 3]);
    view.dispose();
    expect(fake.state.calls).toEqual([]);
  });

  it('refuses bad arguments before any native call', () => {
    for (const run of [
      () => HostView.allocate('float33' as 'float32', 4),
      () => HostView.allocate('float32', -1),
      () => HostView.allocate('float32', 1.5),
      () => HostView.allocate('float32', 4, { mapped: 'yes' as unknown as boolean }),
      () => HostView.allocate('float64', 2 ** 52),
    ]) {
      expect(thrown(run)).toBeInstanceOf(CudaArgumentError);
    }
    expect(fake.state.calls).toEqual([]);
  });

  it('random lengths and dtypes: host to device to host through the same pinned memory', () => {
    fc.assert(
      fc.property(
        fc.constantFrom('float32', 'float64', 'int32', 'uint8', 'int8', 'uint32', 'float16'),
        fc.integer({ min: 1, max: 3000 }),
        fc.integer({ min: 0, max: 3000 }),
        (dtype, length, used) => {
          const count = Math.min(used, length);
          const view = HostView.allocate(dtype, length);
          const array = view.array as unknown as { [i: number]: number; length: number };
          for (let i = 0; i < length; i++) array[i] = (i * 7 + 3) % 100;
          const expected = Array.from({ length: count }, (_, i) => array[i]);
          const onDevice = count === 0 ? undefined : view.toDevice(count, { stream });
          for (let i = 0; i < length; i++) array[i] = 0;
          if (onDevice !== undefined) view.copyFrom(onDevice, { stream });
          expect(Array.from({ length: count }, (_, i) => array[i])).toEqual(expected);
          onDevice?.dispose();
          view.dispose();
        },
      ),
      { seed: 381, numRuns: 60 },
    );
  });

  it('random views of a device matrix (blocks, columns, slices at offsets): copyFrom and copyTo move the view’s elements in column-major order', () => {
    // Addresses no earlier test handed out: the per-stream block cache keeps their blocks, and
    // the double's pool restarts at its base for each test.
    fake.state.nextAddress = 0x9000_0000 + (1 << 19);
    const memory = new DataView(fake.device.buffer);
    const kinds = {
      float32: [
        4,
        (at: number, v: number) => memory.setFloat32(at, v, true),
        (at: number) => memory.getFloat32(at, true),
      ],
      float64: [
        8,
        (at: number, v: number) => memory.setFloat64(at, v, true),
        (at: number) => memory.getFloat64(at, true),
      ],
      int8: [
        1,
        (at: number, v: number) => memory.setInt8(at, v),
        (at: number) => memory.getInt8(at),
      ],
    } as const;
    fc.assert(
      fc.property(
        fc.constantFrom('float32', 'float64', 'int8') as fc.Arbitrary<keyof typeof kinds>,
        fc.integer({ min: 1, max: 7 }),
        fc.integer({ min: 1, max: 6 }),
        fc.tuple(fc.nat(), fc.nat(), fc.nat(), fc.nat()),
        fc.constantFrom('block', 'column', 'slice'),
        fc.tuple(fc.nat(), fc.nat()),
        (dtype, rows, columns, [r, c, h, w], kind, [start, count]) => {
          const [bytes, set, get] = kinds[dtype];
          const matrix = DeviceArray.empty(dtype, [rows, columns], { stream });
          const base = fake.at(matrix.pointer);
          // Element (i, j) of the matrix holds 1 + i + j * rows (column-major, as the model).
          const put = (i: number, j: number, v: number) => set(base + (i + j * rows) * bytes, v);
          const read = (i: number, j: number) => get(base + (i + j * rows) * bytes);
          const r0 = r % rows;
          const c0 = c % columns;
          const h0 = 1 + (h % (rows - r0));
          const w0 = 1 + (w % (columns - c0));
          // The view's elements as matrix positions, in the view's column-major order.
          let view: DeviceArray;
          let cells: [number, number][] = [];
          if (kind === 'block') {
            view = matrix.block(r0, c0, h0, w0);
            for (let j = 0; j < w0; j++) for (let i = 0; i < h0; i++) cells.push([r0 + i, c0 + j]);
          } else {
            view = matrix.column(c0);
            for (let i = 0; i < rows; i++) cells.push([i, c0]);
            if (kind === 'slice') {
              const s0 = start % (rows + 1);
              const n0 = count % (rows - s0 + 1);
              view = view.slice(s0, n0);
              cells = cells.slice(s0, s0 + n0);
            }
          }
          const host = HostView.allocate(dtype, cells.length + 2);
          const values = host.array as unknown as { [i: number]: number; length: number };
          for (let j = 0; j < columns; j++)
            for (let i = 0; i < rows; i++) put(i, j, 1 + i + j * rows);
          for (let k = 0; k < values.length; k++) values[k] = -1;
          host.copyFrom(view as never, { stream });
          for (let k = 0; k < cells.length; k++) {
            expect(values[k]).toBe(1 + cells[k]![0] + cells[k]![1] * rows);
          }
          // The elements past the source are left alone.
          expect([values[cells.length], values[cells.length + 1]]).toEqual([-1, -1]);
          for (let j = 0; j < columns; j++) for (let i = 0; i < rows; i++) put(i, j, 0);
          for (let k = 0; k < values.length; k++) values[k] = 100 - k;
          host.copyTo(view as never, { stream });
          const inView = new Map(cells.map(([i, j], k) => [`${i},${j}`, 100 - k]));
          for (let j = 0; j < columns; j++) {
            for (let i = 0; i < rows; i++) expect(read(i, j)).toBe(inView.get(`${i},${j}`) ?? 0);
          }
          host.dispose();
          matrix.dispose();
        },
      ),
      { seed: 382, numRuns: 150 },
    );
  });

  it('copies declare their uses: upload reads the view, download writes it; a strided array goes through a temporary', () => {
    const view = HostView.allocate('float32', 12);
    view.array.set(Array.from({ length: 12 }, (_, i) => i + 1));
    const matrix = DeviceArray.zeros('float32', [4, 3], { stream });
    view.copyTo(matrix, { stream });
    expect(fake.state.calls).toContain('cuMemcpyHtoDAsync_v2');
    const block = matrix.block(1, 0, 2, 3);
    view.array.fill(0);
    view.copyFrom(block, { stream });
    // Rows 1..2 of each column, column-major: 2,3, 6,7, 10,11.
    expect(Array.from(view.array.subarray(0, 6))).toEqual([2, 3, 6, 7, 10, 11]);
    matrix.dispose();
    view.dispose();
  });

  it('refuses operands of another dtype, larger arrays, disposed arrays, and capturing streams', () => {
    const view = HostView.allocate('float32', 4);
    const wrongType = DeviceArray.empty('float64', 4, { stream });
    const larger = DeviceArray.empty('float32', 5, { stream });
    const calls = fake.state.calls.length;
    expect(thrown(() => view.copyFrom(wrongType as never, { stream })).message).toMatch(
      /dtypes differ/,
    );
    expect(thrown(() => view.copyTo(larger, { stream })).message).toMatch(/holds 5 elements/);
    larger.dispose();
    expect(thrown(() => view.copyTo(larger, { stream }))).toBeInstanceOf(CudaArgumentError);
    const small = DeviceArray.empty('float32', 2, { stream });
    (other as { capture: unknown }).capture = {};
    try {
      expect(thrown(() => view.copyFrom(small, { stream: other }))).toBeInstanceOf(CaptureError);
    } finally {
      (other as { capture: unknown }).capture = null;
    }
    expect(fake.state.calls.slice(calls).filter((c) => c.startsWith('cuMemcpy'))).toEqual([]);
    view.dispose();
    expect(thrown(() => view.copyFrom(small, { stream }))).toBeInstanceOf(DisposedError);
    small.dispose();
    wrongType.dispose();
  });

  it('toDevice refuses a shape larger than the view before allocating anything', () => {
    const view = HostView.allocate('float32', 4);
    const calls = fake.state.calls.length;
    for (const shape of [[5], [2, 3], 5]) {
      const error = thrown(() => view.toDevice(shape, { stream }));
      expect(error).toBeInstanceOf(CudaArgumentError);
      expect(error.message).toMatch(/^HostView\.toDevice: .*holds \d+ elements, the view 4/);
    }
    expect(fake.state.calls.slice(calls)).toEqual([]);
    view.dispose();
  });

  it('ready() waits for the streams that copied; dispose waits too (synchronize) before unregistering', async () => {
    const view = HostView.allocate('float32', 4);
    const a = DeviceArray.zeros('float32', 4, { stream: other });
    view.copyFrom(a, { stream: other });
    fake.state.calls.length = 0;
    await view.ready();
    expect(fake.state.calls).toContain('cuStreamQuery');
    // Known complete now: nothing to wait for.
    fake.state.calls.length = 0;
    await view.ready();
    expect(fake.state.calls).toEqual([]);
    view.copyFrom(a, { stream: other });
    fake.state.calls.length = 0;
    view.dispose();
    const order = fake.state.calls.filter((c) =>
      ['cuStreamSynchronize', 'cuMemHostUnregister'].includes(c),
    );
    expect(order).toEqual(['cuStreamSynchronize', 'cuMemHostUnregister']);
    a.dispose();
  });
});

it('a view the garbage collector takes is unpinned; typed arrays still held keep ordinary memory', async () => {
  let pointer = 0n;
  const held = (() => {
    const view = HostView.allocate('float64', 512);
    pointer = view.pointer;
    view.array[3] = 4.5;
    return view.array;
  })();
  expect(fake.state.registered.has(pointer)).toBe(true);
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  for (let i = 0; i < 50 && fake.state.registered.has(pointer); i++) {
    gc();
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  expect(fake.state.registered.has(pointer)).toBe(false);
  expect([held.length, held[3]]).toEqual([512, 4.5]);
});

describe('HostView: the mapped device alias', () => {
  it('deviceArray views the same memory from the device; it ends with the view', () => {
    const view = HostView.allocate('int32', 8, { mapped: true });
    const onDevice = view.deviceArray([4, 2], { stream });
    expect(onDevice.shape).toEqual([4, 2]);
    expect(onDevice.pointer).toBe(view.pointer);
    expect(onDevice.owner).toBe(false);
    // One alias per context: a second array shares it.
    expect(view.deviceArray(undefined, { stream }).buffer).toBe(onDevice.buffer);
    const pointer = view.pointer;
    view.dispose();
    expect(fake.state.registered.has(pointer)).toBe(false);
    const error = thrown(() => onDevice.useOn(stream));
    expect(error).toBeInstanceOf(DisposedError);
    expect(error.message).toMatch(/HostView/);
  });

  it('refuses an unmapped view and shapes that do not fit, before any native call', () => {
    const plain = HostView.allocate('float32', 4);
    const mapped = HostView.allocate('float32', 4, { mapped: true });
    const calls = fake.state.calls.length;
    expect(thrown(() => plain.deviceArray()).message).toMatch(/mapped: true/);
    expect(thrown(() => mapped.deviceArray([5], { stream })).message).toMatch(/holds 5 elements/);
    for (const bad of [[], [-1], [1.5], 'x']) {
      expect(thrown(() => mapped.deviceArray(bad as number[], { stream }))).toBeInstanceOf(
        CudaArgumentError,
      );
    }
    expect(fake.state.calls.length).toBe(calls);
    plain.dispose();
    mapped.dispose();
  });

  it('exported through DLPack as pinned host memory (kDLCUDAHost) at the host address', () => {
    const view = HostView.allocate('float32', 6, { mapped: true });
    const address = toDLPack(view.deviceArray([3, 2], { stream }), { stream });
    const header = new DataView(koffi.view(address, 80));
    expect(header.getInt32(40, true)).toBe(DLDeviceType.kDLCUDAHost);
    expect(header.getBigUint64(32, true)).toBe(view.pointer);
    koffi.call(header.getBigUint64(16, true), koffi.proto('void D(void *)'), address);
    view.dispose();
  });

  it('dispose while a DLPack export is pending: unusable here at once, unpinned and detached only at the deleter', () => {
    const view = HostView.allocate('float64', 8, { mapped: true });
    const held = view.array;
    held.fill(2.5);
    const pointer = view.pointer;
    const onDevice = view.deviceArray([4, 2], { stream });
    const first = toDLPack(onDevice, { stream });
    const second = toDLPack(onDevice.block(1, 0, 2, 2), { stream, readOnly: true });
    view.dispose();
    expect(view.disposed).toBe(true);
    expect(thrown(() => view.array)).toBeInstanceOf(DisposedError);
    expect(thrown(() => onDevice.useOn(stream))).toBeInstanceOf(DisposedError);
    // The consumer still reads the memory through its tensors: pinned, not detached.
    expect(fake.state.registered.has(pointer)).toBe(true);
    expect([held.length, held[7]]).toEqual([8, 2.5]);
    const proto = koffi.proto('void D2(void *)');
    const deleter = (address: bigint) =>
      koffi.call(new DataView(koffi.view(address, 80)).getBigUint64(16, true), proto, address);
    deleter(second);
    expect(fake.state.registered.has(pointer)).toBe(true);
    deleter(first);
    expect(fake.state.registered.has(pointer)).toBe(false);
    expect(held.length).toBe(0);
    view.dispose();
  });
});

it('a failed registration is the driver’s CudaError, and the view is never made', () => {
  const registered = fake.state.registered.size;
  fake.state.failRegister = true;
  const error = thrown(() => HostView.allocate('float32', 100));
  expect(error).toBeInstanceOf(CudaError);
  expect((error as CudaError).call).toBe('cuMemHostRegister');
  expect(fake.state.registered.size).toBe(registered);
});
