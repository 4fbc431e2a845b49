import { thrown } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// Device-to-device copies (`copyDeviceToDevice` and `DeviceArray.copyFrom`, contiguous and
// 2-D strided) against a driver whose device memory is a host array: every copy it is asked
// for is carried out there, every call is recorded. Valid copies are compared with a copy of
// the same bytes made on the host; refused ones must leave no native call, no byte changed and
// no use declared on either buffer, whichever path they came through.
const fake = vi.hoisted(() => {
  const BASE = 0x10_0000;
  const SPACING = 0x1_0000;
  const memory = new Uint8Array(64 * SPACING);
  const state = { calls: [] as string[], nextHandle: 100, nextAddress: BASE - SPACING };
  const at = (address: bigint | number): number => Number(address) - BASE;
  /** `height` rows of `width` bytes, pitches apart, through a temporary (as a copy reads all first). */
  const copy2D = (
    to: bigint | number,
    toPitch: number,
    from: bigint | number,
    fromPitch: number,
    width: number,
    height: number,
  ): void => {
    const rows: Uint8Array[] = [];
    for (let r = 0; r < height; r++) {
      const start = at(from) + r * fromPitch;
      rows.push(memory.slice(start, start + width));
    }
    for (let r = 0; r < height; r++) memory.set(rows[r]!, at(to) + r * toPitch);
  };
  const special: Record<string, (...args: any[]) => number> = {
    cuStreamCreateWithPriority(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    cuEventCreate(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    cuMemcpyDtoDAsync_v2(to: bigint, from: bigint, bytes: number) {
      copy2D(to, 0, from, 0, bytes, 1);
      return 0;
    },
    cuMemcpyPeerAsync(to: bigint, _toContext: unknown, from: bigint, _: unknown, bytes: number) {
      copy2D(to, 0, from, 0, bytes, 1);
      return 0;
    },
    cuMemcpy2DAsync_v2(d: Record<string, any>) {
      copy2D(d.dstDevice, d.dstPitch, d.srcDevice, d.srcPitch, d.WidthInBytes, d.Height);
      return 0;
    },
  };
  const copies = new Set(['cuMemcpyDtoDAsync_v2', 'cuMemcpyPeerAsync', 'cuMemcpy2DAsync_v2']);
  const api = new Proxy(special, {
    get(target, name: string) {
      const own = target[name];
      return (...args: unknown[]) => {
        if (copies.has(name)) state.calls.push(name);
        return own === undefined ? 0 : own(...args);
      };
    },
  });
  return { state, api, memory, at, SPACING };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  return { ...original, driver: () => fake.api, check: () => undefined };
});

import { Context, type Device } from '../context/device.js';
import { CudaArgumentError, DisposedError } from '../errors.js';
import { Stream } from '../stream/stream.js';
import { DeviceArray } from './array.js';
import { DeviceBuffer } from './memory.js';
import { copyDeviceToDevice } from './transfer.js';

function fakeContext(ordinal: number, handle: bigint): { context: Context; stream: Stream } {
  const context = new Context({ ordinal } as unknown as Device, handle);
  Object.defineProperty(context, 'memoryPool', {
    value: { allocate: () => (fake.state.nextAddress += fake.SPACING) },
  });
  const stream = Stream.create({ context, name: `s${ordinal}` });
  Object.defineProperty(context, 'defaultStream', { value: stream });
  return { context, stream };
}

const { stream } = fakeContext(0, 77n);
const { stream: elsewhere } = fakeContext(1, 78n);
const other = Stream.create({ context: stream.context, name: 'other' });

/** A buffer of `bytes` filled with a pattern that differs from every other buffer's. */
function filled(bytes: number, on: Stream = stream): DeviceBuffer {
  const buffer = DeviceBuffer.allocate(bytes, { stream: on });
  const start = fake.at(buffer.pointer);
  for (let i = 0; i < bytes; i++) fake.memory[start + i] = (i * 7 + start / fake.SPACING) & 0xff;
  return buffer;
}

function bytesOf(buffer: DeviceBuffer): Uint8Array {
  const start = fake.at(buffer.pointer);
  return fake.memory.slice(start, start + buffer.byteLength);
}

/** The trace a use leaves on a buffer: the stream that last wrote it, and its readers. */
function traceOf(buffer: DeviceBuffer): unknown[] {
  return [buffer.lastStream, [...buffer.readers]];
}

/**
 * `run` is refused with `type` (message matching `message`) after no native copy, with both
 * buffers' bytes and uses as they were.
 */
function expectRefused(
  run: () => unknown,
  buffers: DeviceBuffer[],
  type: typeof CudaArgumentError,
  message: RegExp,
): void {
  const before = buffers.map((b) => [bytesOf(b), traceOf(b)]);
  fake.state.calls.length = 0;
  const error = thrown(run);
  expect(error).toBeInstanceOf(type);
  expect(error.message).toMatch(message);
  expect(fake.state.calls).toEqual([]);
  expect(buffers.map((b) => [bytesOf(b), traceOf(b)])).toEqual(before);
}

beforeEach(() => {
  fake.state.calls.length = 0;
});

describe('device-to-device copy: one implementation, one set of checks', () => {
  it('random ranges through copyDeviceToDevice: copied as the host copies, or refused untouched', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 256 }),
        fc.integer({ min: 1, max: 256 }),
        fc.boolean(),
        fc.integer({ min: -4, max: 260 }),
        fc.integer({ min: -4, max: 260 }),
        fc.oneof(fc.integer({ min: -4, max: 260 }), fc.constantFrom(0.5, Number.NaN)),
        (toBytes, fromBytes, same, toOffset, fromOffset, count) => {
          const to = filled(toBytes);
          const from = same ? to : filled(fromBytes);
          const run = () =>
            copyDeviceToDevice(
              { buffer: to, byteOffset: toOffset },
              { buffer: from, byteOffset: fromOffset },
              count,
              { stream },
            );
          const validCount = Number.isSafeInteger(count) && count >= 0;
          const fits = (offset: number, buffer: DeviceBuffer) =>
            offset >= 0 && offset + count <= buffer.byteLength;
          const overlap =
            same && count > 0 && toOffset < fromOffset + count && fromOffset < toOffset + count;
          if (!validCount || !fits(toOffset, to) || !fits(fromOffset, from) || overlap) {
            expectRefused(run, same ? [to] : [to, from], CudaArgumentError, /^copyDeviceToDevice/);
          } else {
            const expected = bytesOf(to);
            expected.set(bytesOf(from).subarray(fromOffset, fromOffset + count), toOffset);
            run();
            expect(bytesOf(to)).toEqual(expected);
            expect(fake.state.calls).toEqual(count === 0 ? [] : ['cuMemcpyDtoDAsync_v2']);
          }
          fake.state.calls.length = 0;
          to.dispose();
          if (!same) from.dispose();
        },
      ),
      { seed: 33, numRuns: 300 },
    );
  });

  it('random 2-D blocks through copyFrom (strided and contiguous): as the host copies, overlap refused', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 12 }),
        fc.integer({ min: 1, max: 12 }),
        fc.boolean(),
        fc.nat(),
        fc.nat(),
        fc.nat(),
        fc.nat(),
        fc.nat(),
        fc.nat(),
        (rows, columns, same, a, b, c, d, e, f) => {
          const whole = DeviceArray.empty('uint8', [rows, columns], { stream });
          fake.memory.set(
            Array.from({ length: rows * columns }, (_, i) => (i * 13 + 5) & 0xff),
            fake.at(whole.buffer.pointer),
          );
          const wholeFrom = same ? whole : DeviceArray.empty('uint8', [rows, columns], { stream });
          if (!same) {
            fake.memory.set(
              Array.from({ length: rows * columns }, (_, i) => (i * 3 + 1) & 0xff),
              fake.at(wholeFrom.buffer.pointer),
            );
          }
          const r = 1 + (a % rows);
          const k = 1 + (b % columns);
          const [tr, tc, sr, sc] = [c % (rows - r + 1), d % (columns - k + 1)].concat([
            e % (rows - r + 1),
            f % (columns - k + 1),
          ]) as [number, number, number, number];
          const target = whole.block(tr, tc, r, k);
          const source = wholeFrom.block(sr, sc, r, k);
          // The host reference: element (i, j) of a block is byte (row + i) + (column + j) rows.
          const before = bytesOf(whole.buffer);
          const sourceBytes = bytesOf(wholeFrom.buffer);
          const overlap =
            same && tr < sr + r && sr < tr + r && tc < sc + k && sc < tc + k && r * k > 0;
          if (overlap) {
            expectRefused(
              () => target.copyFrom(source, { stream }),
              [whole.buffer],
              CudaArgumentError,
              /^copyFrom: the destination .* overlap in one buffer/,
            );
          } else {
            const expected = before.slice();
            for (let j = 0; j < k; j++)
              for (let i = 0; i < r; i++)
                expected[tr + i + (tc + j) * rows] = sourceBytes[sr + i + (sc + j) * rows]!;
            target.copyFrom(source, { stream });
            expect(bytesOf(whole.buffer)).toEqual(expected);
          }
          whole.dispose();
          if (!same) wholeFrom.dispose();
        },
      ),
      { seed: 34, numRuns: 300 },
    );
  });

  it('a disposed buffer is refused on both paths, and neither buffer is declared used', () => {
    for (const disposedSide of ['destination', 'source'] as const) {
      const to = filled(64);
      const from = filled(64);
      // Last used on another stream: a declared use would move it to `stream` or add a reader.
      to.useOn(other);
      from.useOn(other);
      const gone = disposedSide === 'destination' ? to : from;
      const kept = gone === to ? from : to;
      const a = new DeviceArray(to, 'uint8', [64], [1], 0, false);
      const b = new DeviceArray(from, 'uint8', [64], [1], 0, false);
      gone.dispose();
      const message = new RegExp(`the ${disposedSide} DeviceBuffer has been disposed`);
      expectRefused(
        () => copyDeviceToDevice({ buffer: to }, { buffer: from }, 64, { stream }),
        [kept],
        DisposedError,
        message,
      );
      expectRefused(() => a.copyFrom(b, { stream }), [kept], DisposedError, message);
      kept.dispose();
    }
  });

  it('arrays of another context: refused on a stream of neither; a peer copy on either', () => {
    const here = filled(32);
    const there = filled(32, elsewhere);
    const third = filled(32);
    const a = new DeviceArray(here, 'uint8', [32], [1], 0, false);
    const b = new DeviceArray(there, 'uint8', [32], [1], 0, false);
    const c = new DeviceArray(third, 'uint8', [32], [1], 0, false);
    // One context, a stream of another.
    expectRefused(
      () => copyDeviceToDevice({ buffer: here }, { buffer: third }, 32, { stream: elsewhere }),
      [here, third],
      CudaArgumentError,
      /^copyDeviceToDevice: .* but Stream\(s1\) belongs to .*; copy on a stream of their context/,
    );
    expectRefused(
      () => a.copyFrom(c, { stream: elsewhere }),
      [here, third],
      CudaArgumentError,
      /^copyFrom: .* copy on a stream of their context/,
    );
    // Two contexts: a peer copy on a stream of either, carried out as the host copies.
    const expected = bytesOf(there);
    a.copyFrom(b, { stream });
    expect(bytesOf(here)).toEqual(expected);
    expect(fake.state.calls).toEqual(['cuMemcpyPeerAsync']);
    fake.state.calls.length = 0;
    copyDeviceToDevice({ buffer: third }, { buffer: there }, 32, { stream: elsewhere });
    expect(bytesOf(third)).toEqual(expected);
    expect(fake.state.calls).toEqual(['cuMemcpyPeerAsync']);
  });

  it('a disposed stream is refused before anything, also for an empty copy', () => {
    const gone = Stream.create({ context: stream.context, name: 'gone' });
    gone.dispose();
    const to = filled(16);
    const from = filled(16);
    for (const count of [16, 0]) {
      expectRefused(
        () => copyDeviceToDevice({ buffer: to }, { buffer: from }, count, { stream: gone }),
        [to, from],
        DisposedError,
        /Stream\(gone\)/,
      );
    }
    const a = new DeviceArray(to, 'uint8', [16], [1], 0, false);
    const b = new DeviceArray(from, 'uint8', [16], [1], 0, false);
    expectRefused(() => a.copyFrom(b, { stream: gone }), [to, from], DisposedError, /gone/);
  });
});
