import { streamDouble, thrown } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';

// The launch code generated per kernel is named (`//# sourceURL=`) and printable
// (`Kernel.launchSource()`): an error thrown inside it names the source in its stack, and the
// printed text, compiled again around a recording double, does what the kernel's own launch
// does (the same arena bytes and the same native call, or the same error).
const fake = vi.hoisted(() => {
  const state = {
    arenaBytes: 0,
    arena: 0n,
    calls: [] as { config: unknown; fn: unknown; args: unknown; bytes: Uint8Array }[],
    fail: false,
    view: (_address: bigint, _bytes: number): ArrayBuffer => new ArrayBuffer(0),
  };
  const api = {
    cuLaunchKernelEx(config: unknown, fn: unknown, args: unknown) {
      if (state.fail) throw new Error('the driver failed');
      state.calls.push({
        config,
        fn,
        args,
        bytes: new Uint8Array(state.view(state.arena, state.arenaBytes).slice(0)),
      });
      return 0;
    },
  };
  return { state, api };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  return { ...original, driver: () => fake.api };
});

import type { Context } from '../context/device.js';
import { launchGate } from '../context/launch-gate.js';
import { ffiValue, int32High, int32Low } from '../driver.js';
import { CudaArgumentError } from '../errors.js';
import { koffi } from '../ffi/library.js';
import { DeviceArray } from '../memory/array.js';
import { type DeviceBuffer, handOff } from '../memory/memory.js';
import type { Stream } from '../stream/stream.js';
import { Kernel, type KernelArgument } from './kernel.js';
import { launch } from './launch.js';
import { LAUNCH_FACTORY_PARAMETERS, MAX_POSITIONAL } from './marshal.js';
import type { Module } from './module.js';

/** How many times the fake context was made current (the full path does it, the gate's not). */
let madeCurrent = 0;
const context = {
  name: 'fake context',
  makeCurrent() {
    madeCurrent++;
  },
};
const fakeModule = { context, disposed: false } as unknown as Module;
const stream = streamDouble({
  context,
  name: 'fake stream',
  capture: null,
  disposed: false,
  ffiHandle: 0x5150,
  rawFfiHandle: 0x5150,
  assertUsable() {},
});

function fakeArray(pointer: number): DeviceArray<'float32'> {
  const buffer = {
    byteLength: 4096,
    pointer: BigInt(pointer),
    address: pointer,
    disposed: false,
    context,
    useOn: () => BigInt(pointer),
    ffiAddressOn: () => pointer,
  };
  return new DeviceArray(buffer as unknown as DeviceBuffer, 'float32', [1024], [1], 0, false);
}

const kernel = new Kernel(fakeModule, 'axpy<float>', 7n, [
  'float32*',
  'const float32*',
  'float32',
  'int32',
  'int64',
  'uint8',
]);
const COUNT = kernel.parameters.length;
const ARENA_BYTES = Math.max(16, COUNT * 16) + 64;
fake.state.arenaBytes = ARENA_BYTES;
fake.state.arena = BigInt(kernel.ffiArgumentArray);
fake.state.view = (address, bytes) => koffi().view(address, bytes);

describe('Kernel.launchSource: the generated launch, named and printable', () => {
  const text = kernel.launchSource();
  const url = /\/\/# sourceURL=(cuda-tasks\/launch\/axpy_float_-\d+\.js)$/.exec(text)?.[1];

  it('ends with a sourceURL of the kernel name, unique per compiled launch', () => {
    expect(url).toBeDefined();
    const again = new Kernel(fakeModule, 'axpy<float>', 8n, ['int32']);
    expect(again.launchSource()).toMatch(/sourceURL=cuda-tasks\/launch\/axpy_float_-\d+\.js$/);
    expect(again.launchSource()).not.toContain(url!);
  });

  it('an error thrown inside the generated launch names the source in its stack', () => {
    const y = fakeArray(0x10000);
    const x = fakeArray(0x20000);
    const refused = thrown(() =>
      launch(kernel, { grid: 1, block: 32, stream }, y, x, 'two' as unknown as number, 1),
    );
    expect(refused).toBeInstanceOf(CudaArgumentError);
    expect(refused.stack).toContain(url!);
    fake.state.fail = true;
    try {
      const failed = thrown(() =>
        launch(kernel, { grid: 1, block: 32, stream }, y, x, 2, 1, 5n, 3),
      );
      expect(failed.message).toBe('the driver failed');
      expect(failed.stack).toContain(url!);
    } finally {
      fake.state.fail = false;
    }
  });

  it('compiled again around a recording double, it does what the kernel does', () => {
    // The double: the kernel's own checks (recorded), fresh arena views, recorded driver.
    const buffer = new ArrayBuffer(ARENA_BYTES);
    const views = {
      i8: new Int8Array(buffer),
      u8: new Uint8Array(buffer),
      i16: new Int16Array(buffer),
      u16: new Uint16Array(buffer),
      i32: new Int32Array(buffer),
      u32: new Uint32Array(buffer),
      i64: new BigInt64Array(buffer),
      u64: new BigUint64Array(buffer),
      f32: new Float32Array(buffer),
      f64: new Float64Array(buffer),
    };
    const checks: string[] = [];
    const recording = {
      wrongCount(n: number) {
        checks.push(`wrongCount ${n}`);
        kernel.wrongCount(n);
      },
      badArgument(i: number, v: unknown) {
        checks.push(`bad ${i}`);
        kernel.badArgument(i, v);
      },
      checkPointer(i: number, v: unknown) {
        checks.push(`pointer ${i}`);
        kernel.checkPointer(i, v);
      },
      checkStream(s: Stream) {
        checks.push('stream');
        kernel.checkStream(s);
      },
    };
    const issued: unknown[][] = [];
    // The double's launch gate, opened and closed with the kernel's own (see below).
    const doubleGate: { open: unknown } = { open: null };
    // biome-ignore lint/security/noGlobalEval: the test compiles the printed launch source again
    const factory = globalThis.eval(kernel.launchSource()) as (...parts: unknown[]) => {
      direct: (config: unknown, count: number, ...args: unknown[]) => boolean;
    };
    expect(factory.length).toBe(LAUNCH_FACTORY_PARAMETERS.length);
    const double = factory(recording, views, -(2n ** 63n), 2n ** 63n - 1n, 2n ** 64n - 1n, {
      module: fakeModule,
      CONTEXT: context,
      name: kernel.name,
      CONFIG: 0xc0,
      FUNCTION: 0xf0,
      ARGUMENTS: 0xa0,
      driver: () => ({
        cuLaunchKernelEx: (...args: unknown[]) => {
          issued.push([...args, new Uint8Array(buffer.slice(0))]);
          return 0;
        },
      }),
      check: () => undefined,
      beginOperation: () => 0,
      endOperation: () => undefined,
      resolveStream: (s: Stream | undefined) => s ?? stream,
      DeviceArray,
      handOff,
      ENGINE: { running: false },
      KERNEL_ID: 0,
      GATE: doubleGate,
    });
    const y = fakeArray(0x10000);
    const x = fakeArray(0x20000);
    const outcomes = { launched: 0, throughGate: 0, refused: 0 };
    const invalid = fc.oneof(
      fc.double(),
      fc.bigInt({ min: -(2n ** 65n), max: 2n ** 65n }),
      fc.constantFrom('1', null, undefined, 2 ** 64, -1),
    );
    /** Mostly a value of the parameter's type, sometimes anything. */
    const argument = (valid: fc.Arbitrary<unknown>) =>
      fc.oneof({ arbitrary: valid, weight: 6 }, { arbitrary: invalid, weight: 1 });
    const float = argument(fc.double());
    const int32 = argument(fc.oneof(fc.integer(), fc.boolean()));
    const int64 = argument(
      fc.oneof(
        fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }),
        fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
      ),
    );
    const uint8 = argument(fc.oneof(fc.integer({ min: 0, max: 255 }), fc.boolean()));
    fc.assert(
      fc.property(
        fc.tuple(float, int32, int64, uint8),
        fc.integer({ min: 1, max: 2 ** 32 - 1 }),
        fc.integer({ min: 1, max: 1024 }),
        fc.nat(8),
        fc.boolean(),
        ([a, n, big, small], grid, block, drop, open) => {
          // The gate open for the fake context (its launch goes straight to the driver) or
          // closed (the full path, which makes the context current): the same bytes and call.
          launchGate.open = open ? (context as unknown as Context) : null;
          doubleGate.open = launchGate.open;
          const args = [y, x, a, n, big, small].slice(0, COUNT - (drop === 8 ? 1 : 0));
          const config = { grid, block, stream };
          fake.state.calls.length = 0;
          issued.length = 0;
          checks.length = 0;
          madeCurrent = 0;
          const real = failureOf(() => launch(kernel, config, ...(args as KernelArgument[])));
          const realMadeCurrent = madeCurrent;
          const padded = [...args, ...new Array(MAX_POSITIONAL - args.length).fill(undefined)];
          const again = failureOf(() => double.direct(config, args.length, ...padded));
          // The same error (the double calls the kernel's own checks), or the same launch.
          expect(again.error?.message).toBe(real.error?.message);
          expect(again.error?.constructor).toBe(real.error?.constructor);
          if (real.error === undefined) {
            outcomes.launched++;
            if (open) outcomes.throughGate++;
            expect(again.value).toBe(true);
            // Each made the context current once on the full path, never through the gate.
            expect([realMadeCurrent, madeCurrent]).toEqual(open ? [0, 0] : [1, 2]);
            expect(fake.state.calls.length).toBe(1);
            expect(issued.length).toBe(1);
            const call = fake.state.calls[0]!;
            expect([call.config, call.fn, call.args]).toEqual([
              kernel.launchConfigAddress,
              kernel.ffiHandle,
              kernel.ffiArgumentArray,
            ]);
            expect(issued[0]!.slice(0, 4)).toEqual([0xc0, 0xf0, 0xa0, 0]);
            // The slots and the launch configuration (the void* array is the arena's own).
            const slots = COUNT * 8;
            expect(Array.from((issued[0]![4] as Uint8Array).subarray(slots))).toEqual(
              Array.from(call.bytes.subarray(slots)),
            );
          } else {
            outcomes.refused++;
            expect(checks.length).toBeGreaterThan(0);
          }
        },
      ),
      { seed: 35, numRuns: 400 },
    );
    launchGate.open = null;
    console.log('launch source double:', outcomes);
    expect(outcomes.launched).toBeGreaterThan(20);
    expect(outcomes.throughGate).toBeGreaterThan(10);
    expect(outcomes.launched - outcomes.throughGate).toBeGreaterThan(10);
    expect(outcomes.refused).toBeGreaterThan(20);
  });
});

describe('launch: addresses and the stream handle written as two int32 halves', () => {
  /** A float32 array at `base` (as `ffiValue` gives it), `offset` elements in. */
  const arrayAt = (base: bigint, offset: number): DeviceArray<'float32'> => {
    const address = ffiValue(base);
    const buffer = {
      byteLength: 1 << 24,
      pointer: base,
      address,
      disposed: false,
      context,
      useOn: () => base,
      ffiAddressOn: () => address,
    };
    return new DeviceArray(buffer as unknown as DeviceBuffer, 'float32', [16], [1], offset, false);
  };
  /** The same array as an older loaded copy of the package makes it: no `ffiLo`/`ffiHi`. */
  const olderCopyOf = (array: DeviceArray<'float32'>): DeviceArray<'float32'> =>
    ({
      [Symbol.for('@cuda-tasks/DeviceArray')]: true,
      dtype: array.dtype,
      buffer: array.buffer,
      allocation: array.allocation,
      ffiAddress: array.ffiAddress,
      disposed: false,
    }) as unknown as DeviceArray<'float32'>;
  /** A stream of `handle`; an older copy's has no `rawLo`/`rawHi`. */
  const streamOf = (handle: bigint, older: boolean): Stream =>
    streamDouble({
      context,
      name: 'handle stream',
      capture: null,
      disposed: false,
      ffiHandle: ffiValue(handle),
      rawFfiHandle: ffiValue(handle),
      ...(older ? {} : { rawLo: int32Low(handle), rawHi: int32High(handle) }),
      assertUsable() {},
    });
  // Addresses below 2^53 (Numbers, the common case) and above (BigInts), leaving room for the
  // offset; handles anywhere in 64 bits.
  const base = fc.oneof(
    fc.bigInt({ min: 1n, max: 2n ** 53n - 2n ** 24n }),
    fc.bigInt({ min: 2n ** 53n, max: 2n ** 64n - 2n ** 24n }),
    fc.constantFrom(2n ** 31n, 2n ** 32n - 4n, 2n ** 32n, 0x7f00_0000_1000n),
  );
  const handle = fc.oneof(
    fc.bigInt({ min: 1n, max: 2n ** 64n - 1n }),
    fc.constantFrom(2n ** 31n, 2n ** 32n, 0x5555_8000_0000n),
  );

  it('the slots and the config hold the exact 64-bit values, gate open or closed', () => {
    const k = koffi();
    fc.assert(
      fc.property(
        base,
        base,
        fc.nat(1024),
        handle,
        fc.boolean(),
        fc.boolean(),
        fc.boolean(),
        (yBase, xBase, offset, h, open, olderArray, olderStream) => {
          launchGate.open = open ? (context as unknown as Context) : null;
          const y = arrayAt(yBase, offset);
          const x = arrayAt(xBase, 0);
          const s = streamOf(h, olderStream);
          fake.state.calls.length = 0;
          launch(
            kernel,
            { grid: 3, block: 32, stream: s },
            olderArray ? olderCopyOf(y) : y,
            x,
            2,
            5,
            7n,
            1,
          );
          expect(fake.state.calls.length).toBe(1);
          const slots = new DataView(fake.state.calls[0]!.bytes.buffer);
          const slot = (i: number) => {
            const address = new BigUint64Array(k.view(BigInt(kernel.ffiArgumentArray), COUNT * 8));
            const offsetInArena = Number(address[i]! - fake.state.arena);
            return slots.getBigUint64(offsetInArena, true);
          };
          expect(slot(0)).toBe(yBase + BigInt(offset * 4));
          expect(slot(1)).toBe(xBase);
          const config = new DataView(k.view(BigInt(kernel.launchConfigAddress), 40));
          expect(config.getBigUint64(32, true)).toBe(h);
        },
      ),
      { seed: 61, numRuns: 300 },
    );
    launchGate.open = null;
  });
});

function failureOf<T>(run: () => T): { value?: T; error?: Error } {
  try {
    return { value: run() };
  } catch (error) {
    return { error: error as Error };
  }
}
