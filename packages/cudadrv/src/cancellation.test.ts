import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

// Every operation of this package, called in a scope whose signal has aborted (as the task
// runtime's providers answer for a cancelled task), throws the signal's reason before any
// native call: cudadrv's native door (koffi, and the library loader) is replaced by a recorder
// that fails every use.
const native = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/native-recorder')).createNativeRecorder(),
);
vi.mock('./ffi/library.js', async (importOriginal) =>
  native.replace(await importOriginal<object>()),
);

import { Context, type Device } from './context/device.js';
import { currentSignal, resolveStream, setCurrentStreamProvider } from './context/provider.js';
import { CudaArgumentError } from './errors.js';
import { Graph } from './graph/graph.js';
import type { Kernel } from './kernel/kernel.js';
import { launch } from './kernel/launch.js';
import { Module } from './kernel/module.js';
import { DeviceArray } from './memory/array.js';
import { DeviceBuffer } from './memory/memory.js';
import {
  copyDeviceToDevice,
  copyDeviceToPinned,
  copyHostToDevice,
  memset,
  memsetWords,
  PinnedHostBuffer,
} from './memory/transfer.js';
import { Event } from './stream/event.js';
import { Stream } from './stream/stream.js';

const device = { ordinal: 0 } as Device;
const context = new Context(device, 77n);
Object.assign(device, { primaryContext: () => context });
const explicit = Stream.wrap(1n, context, 'explicit');
const kernel = { name: 'k', module: { disposed: false, context } } as unknown as Kernel;
const graph = Object.create(Graph.prototype) as Graph;
/** Stand-ins that pass every argument check (64 bytes each) and hold no memory. */
const bytes64 = () => ({ byteLength: 64, disposed: false, address: 0 }) as unknown as DeviceBuffer;
const a = new DeviceArray(bytes64(), 'float32', [4, 4], [1, 4], 0, false);
const b = new DeviceArray(bytes64(), 'float32', [4, 4], [1, 4], 0, false);
const pinned = { byteLength: 64, disposed: false } as unknown as PinnedHostBuffer;
const region = { buffer: bytes64(), byteOffset: 0 };

const controller = new AbortController();
const reason = new Error('the request was cancelled');
let restore: () => void;

beforeEach(() => {
  // The task runtime's contract: a cancelled scope's stream provider throws the reason, and
  // its signal provider answers the aborted signal.
  const previous = setCurrentStreamProvider(
    () => {
      if (controller.signal.aborted) throw controller.signal.reason;
      return explicit;
    },
    () => device,
    () => controller.signal,
  );
  restore = () => setCurrentStreamProvider(previous.stream, previous.device, previous.signal);
  controller.abort(reason);
  native.calls.length = 0;
});

afterEach(() => restore());

/** Each operation, with the stream left to the provider and given explicitly. */
const operations: Record<string, (options: { stream?: Stream }) => unknown> = {
  launch: (options) => launch(kernel, { grid: 1, block: 1, ...options }),
  'DeviceBuffer.allocate': (options) => DeviceBuffer.allocate(64, options),
  'DeviceBuffer.allocate (0 bytes)': (options) => DeviceBuffer.allocate(0, options),
  'DeviceBuffer.allocateAsync': (options) => DeviceBuffer.allocateAsync(64, options),
  'DeviceArray.empty': (options) => DeviceArray.empty('float32', [4], options),
  'DeviceArray.emptyAsync': (options) => DeviceArray.emptyAsync('float32', [4], options),
  'DeviceArray.zeros': (options) => DeviceArray.zeros('float32', [4], options),
  'DeviceArray.full': (options) => DeviceArray.full('float32', [4], 1, options),
  'DeviceArray.fromHost': (options) => DeviceArray.fromHost(new Float32Array(4), [4], options),
  copyHostToDevice: (options) => copyHostToDevice(region, new Uint8Array(16), options),
  'copyHostToDevice (0 bytes)': (options) =>
    copyHostToDevice(region, new Uint8Array(0), { ...options, byteLength: 0 }),
  copyDeviceToPinned: (options) => copyDeviceToPinned(pinned, region, 16, options),
  copyDeviceToDevice: (options) => copyDeviceToDevice(region, region, 16, options),
  memset: (options) => memset(region, 0, 16, options),
  memsetWords: (options) => memsetWords(region, 7, 4, 4, options),
  'DeviceArray.copy': (options) => a.copy(options),
  'DeviceArray.copyFrom': (options) => a.copyFrom(b, options),
  'DeviceArray.copyFromHost': (options) => a.copyFromHost(new Float32Array(16), options),
  'DeviceArray.fill': (options) => a.fill(2, options),
  'DeviceArray.toHost': (options) => a.toHost(options),
  'Graph.launch': (options) => graph.launch(options),
};

/** Operations that take no stream but make something in the current context. */
const creations: Record<string, () => unknown> = {
  'Stream.create': () => Stream.create(),
  'Event.create': () => Event.create(),
  'Event.record': () => Event.prototype.record.call({} as Event),
  'Module.fromPtx': () => Module.fromPtx('.version 8.0\n.target sm_90\n'),
  'PinnedHostBuffer.allocate': () => PinnedHostBuffer.allocate(64),
};

/** What `fn` threw, or what its promise rejected with. */
async function failure(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('in a cancelled scope, every operation throws the reason before any native call', () => {
  for (const [name, operation] of Object.entries(operations)) {
    it(`${name}, on the current stream and on an explicit one`, async () => {
      expect(await failure(() => operation({}))).toBe(reason);
      expect(await failure(() => operation({ stream: explicit }))).toBe(reason);
      expect(native.calls).toEqual([]);
    });
  }
  for (const [name, creation] of Object.entries(creations)) {
    it(name, async () => {
      expect(await failure(creation)).toBe(reason);
      expect(native.calls).toEqual([]);
    });
  }
});

describe('resolveStream and currentSignal', () => {
  it('answer the provider outside a cancelled scope, and refuse inside one', () => {
    expect(currentSignal()).toBe(controller.signal);
    expect(() => resolveStream(explicit)).toThrow(reason);
    expect(() => resolveStream(undefined)).toThrow(reason);
    restore();
    const live = new AbortController();
    const previous = setCurrentStreamProvider(
      () => explicit,
      () => device,
      () => live.signal,
    );
    restore = () => setCurrentStreamProvider(previous.stream, previous.device, previous.signal);
    const other = Stream.wrap(2n, context, 'other');
    expect(resolveStream(other)).toBe(other);
    expect(resolveStream(undefined)).toBe(explicit);
    live.abort();
    expect(() => resolveStream(other)).toThrow(live.signal.reason);
  });

  it('without a signal provider, nothing is cancelled', () => {
    restore();
    const previous = setCurrentStreamProvider(
      () => explicit,
      () => device,
    );
    restore = () => setCurrentStreamProvider(previous.stream, previous.device, previous.signal);
    expect(currentSignal()).toBeUndefined();
    expect(resolveStream(explicit)).toBe(explicit);
  });
});

describe('a stream option that is not a Stream is refused before any native call', () => {
  // What a caller may pass by mistake: null, a raw CUstream handle, a number, a name, an
  // object that is not a Stream (another handle wrapper, an Event, a DeviceArray).
  const notStreams: [unknown, RegExp][] = [
    [null, /got null$/],
    [0x1234n, /got 4660n$/],
    [7, /got 7$/],
    ['default', /got "default"$/],
    [{}, /got Object$/],
    [Object.create(Event.prototype), /got Event$/],
    [a, /got DeviceArray/],
  ];

  beforeEach(() => {
    // Not cancelled: the provider answers `explicit`, and nothing aborts.
    restore();
    const previous = setCurrentStreamProvider(
      () => explicit,
      () => device,
    );
    restore = () => setCurrentStreamProvider(previous.stream, previous.device, previous.signal);
  });

  for (const [name, operation] of Object.entries(operations)) {
    it(`${name}: a CudaArgumentError naming the value`, async () => {
      for (const [value, description] of notStreams) {
        const error = await failure(() => operation({ stream: value as Stream }));
        expect(error, `${name} given ${String(value)}`).toBeInstanceOf(CudaArgumentError);
        expect((error as Error).message).toMatch(/option stream must be a Stream, got /);
        expect((error as Error).message).toMatch(description);
      }
      expect(native.calls).toEqual([]);
    });
  }

  it('resolveStream: a Stream and undefined pass as before', () => {
    expect(resolveStream(explicit)).toBe(explicit);
    expect(resolveStream(undefined)).toBe(explicit);
    expect(() => resolveStream(null as never)).toThrow(
      new CudaArgumentError('option stream must be a Stream, got null'),
    );
  });
});
