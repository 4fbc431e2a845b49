import { thrown } from '@cuda-tasks/testing';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// A disposed stream at every public entry of this package, against a driver that records every
// native call: each entry refuses with a DisposedError naming the stream before any native call,
// and leaves no trace on the buffers it was given (issue 14, bug 5).
const fake = vi.hoisted(() => {
  const state = { calls: [] as string[], nextHandle: 100, nextAddress: 0x10_0000 };
  const special: Record<string, (...args: any[]) => number> = {
    cuStreamCreateWithPriority(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    cuEventCreate(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    // No pinned memory here (a staging buffer would be a view of it).
    cuMemHostAlloc() {
      throw new Error('cuMemHostAlloc reached');
    },
  };
  // Any other driver function: recorded by name, succeeds.
  const api = new Proxy(special, {
    get(target, name: string) {
      const own = target[name];
      return (...args: unknown[]) => {
        state.calls.push(name);
        return own === undefined ? 0 : own(...args);
      };
    },
  });
  return { state, api };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  return { ...original, driver: () => fake.api, check: () => undefined };
});

import { Context, type Device } from '../context/device.js';
import { DisposedError } from '../errors.js';
import { Kernel } from '../kernel/kernel.js';
import { launch } from '../kernel/launch.js';
import type { Module } from '../kernel/module.js';
import { DeviceArray } from '../memory/array.js';
import { DeviceBuffer } from '../memory/memory.js';
import {
  copyDeviceToDevice,
  copyDeviceToPinned,
  copyHostToDevice,
  memset,
  memsetWords,
  type PinnedHostBuffer,
} from '../memory/transfer.js';
import { Event } from './event.js';
import { onStreamDisposed, Stream } from './stream.js';
import { waitForStream } from './wait.js';

const context = new Context({ ordinal: 0 } as unknown as Device, 77n);
Object.defineProperty(context, 'memoryPool', {
  value: { allocate: () => (fake.state.nextAddress += 0x1000) },
});
const live = Stream.create({ context, name: 'live' });
Object.defineProperty(context, 'defaultStream', { value: live });
const module = { context, disposed: false } as unknown as Module;
const kernel = new Kernel(module, 'scale', 1n, ['float32*', 'float32', 'int32']);
const scalarKernel = new Kernel(module, 'tick', 2n, ['int32']);
const pinned = { disposed: false, byteLength: 256, pointer: 0x9000n } as PinnedHostBuffer;

let gone: Stream;
let array: DeviceArray<'float32'>;
let other: DeviceArray<'float32'>;

beforeEach(() => {
  gone = Stream.create({ context, name: 'gone' });
  gone.dispose();
  array = DeviceArray.empty('float32', 16, { stream: live });
  other = DeviceArray.empty('float32', 16, { stream: live });
  fake.state.calls.length = 0;
});

/** `run` throws a DisposedError that names the disposed stream, after no native call. */
function expectRefused(run: () => unknown): void {
  const error = thrown(run);
  expect(error).toBeInstanceOf(DisposedError);
  expect(error.message).toBe('Stream(gone) has been disposed and cannot be used');
  expect(fake.state.calls).toEqual([]);
  // No buffer was declared used on the disposed stream.
  expect(array.buffer.lastStream).toBe(live);
  expect(array.buffer.readers).toEqual([]);
  expect(other.buffer.lastStream).toBe(live);
  expect(other.buffer.readers).toEqual([]);
}

describe('a disposed stream is refused at every entry, before any native call', () => {
  it('launch, with buffer arguments and with scalars only', () => {
    expectRefused(() => launch(kernel, { grid: 1, block: 16, stream: gone }, array, 2, 16));
    expectRefused(() => launch(scalarKernel, { grid: 1, block: 1, stream: gone }, 7));
  });

  it('copies and memsets of DeviceBuffer regions', () => {
    const to = { buffer: array.buffer };
    const from = { buffer: other.buffer };
    expectRefused(() => copyHostToDevice(to, new Float32Array(16), { stream: gone }));
    expectRefused(() => copyDeviceToPinned(pinned, from, 64, { stream: gone }));
    expectRefused(() => copyDeviceToDevice(to, from, 64, { stream: gone }));
    expectRefused(() => memset(to, 0, 64, { stream: gone }));
    expectRefused(() => memsetWords(to, 0, 16, 4, { stream: gone }));
  });

  it('DeviceArray copies, fills and factories', () => {
    expectRefused(() => array.copyFrom(other, { stream: gone }));
    expectRefused(() => array.copyFromHost(new Float32Array(16), { stream: gone }));
    expectRefused(() => array.fill(1, { stream: gone }));
    expectRefused(() => array.copy({ stream: gone }));
    expectRefused(() => DeviceArray.zeros('float32', 16, { stream: gone }));
    expectRefused(() => DeviceArray.fromHost(new Float32Array(4), undefined, { stream: gone }));
  });

  it('toHost and waitForStream reject', async () => {
    for (const pending of [array.toHost({ stream: gone }), waitForStream(gone)]) {
      const error = await pending.then(
        () => new Error('resolved'),
        (reason: Error) => reason,
      );
      expect(error).toBeInstanceOf(DisposedError);
      expect(error.message).toBe('Stream(gone) has been disposed and cannot be used');
    }
    await new Promise((resolve) => setImmediate(resolve));
    expect(fake.state.calls).toEqual([]);
  });

  it('buffer uses, stream waits, event records and stream attributes', () => {
    expectRefused(() => DeviceBuffer.allocate(64, { stream: gone }));
    expectRefused(() => array.buffer.useOn(gone, 'read'));
    expectRefused(() => array.buffer.ffiAddressOn(gone));
    expectRefused(() => array.useOn(gone));
    expectRefused(() => gone.waitFor(live));
    expectRefused(() => gone.waitEvent({ handle: 5n }));
    expectRefused(() => gone.query());
    expectRefused(() => gone.synchronize());
    expectRefused(() => gone.priority());
    const event = Event.create({ context });
    fake.state.calls.length = 0;
    expectRefused(() => event.record(gone));
  });

  it('an unnamed stream is named by its handle', () => {
    const unnamed = Stream.create({ context });
    unnamed.dispose();
    const error = thrown(() => unnamed.assertUsable());
    expect(error).toBeInstanceOf(DisposedError);
    expect(error.message).toBe(
      `Stream(0x${unnamed.handle.toString(16)}) has been disposed and cannot be used`,
    );
  });
});

describe('stream-disposed listeners', () => {
  it('one that throws stops neither the others nor the disposal; its error comes after', () => {
    const stream = Stream.create({ context, name: 'listened' });
    const heard: string[] = [];
    const failure = new Error('listener failed');
    const off = [
      onStreamDisposed((s) => heard.push(`first ${s.name}`)),
      onStreamDisposed(() => {
        throw failure;
      }),
      onStreamDisposed((s) => heard.push(`third ${s.name} disposed=${s.disposed}`)),
    ];
    fake.state.calls.length = 0;
    try {
      expect(thrown(() => stream.dispose())).toBe(failure);
      expect(heard).toEqual(['first listened', 'third listened disposed=false']);
      expect(stream.disposed).toBe(true);
      expect(fake.state.calls).toContain('cuStreamDestroy_v2');
      // Disposed once: a second call does nothing and throws nothing.
      fake.state.calls.length = 0;
      stream.dispose();
      expect(fake.state.calls).toEqual([]);
      expect(heard).toHaveLength(2);
    } finally {
      for (const unregister of off) unregister();
    }
  });

  it('several that throw give an AggregateError of their errors', () => {
    const stream = Stream.create({ context, name: 'twice' });
    const errors = [new Error('a'), new Error('b')];
    const off = errors.map((error) =>
      onStreamDisposed(() => {
        throw error;
      }),
    );
    try {
      const error = thrown(() => stream.dispose());
      expect(error).toBeInstanceOf(AggregateError);
      expect((error as AggregateError).errors).toEqual(errors);
      expect(error.message).toBe('2 stream-disposed listeners failed');
      expect(stream.disposed).toBe(true);
    } finally {
      for (const unregister of off) unregister();
    }
  });

  it("one that answers 'keep-native-stream' leaves the native stream alive; the stream is drained and disposed", () => {
    const stream = Stream.create({ context, name: 'kept' });
    const off = onStreamDisposed(() => 'keep-native-stream');
    fake.state.calls.length = 0;
    try {
      stream.dispose();
      expect(stream.disposed).toBe(true);
      expect(fake.state.calls).toContain('cuStreamSynchronize');
      expect(fake.state.calls).not.toContain('cuStreamDestroy_v2');
      expect(thrown(() => stream.assertUsable())).toBeInstanceOf(DisposedError);
    } finally {
      off();
    }
  });
});
