import { beforeEach, describe, expect, it, vi } from 'vitest';

// Every public call of this package that takes an options object refuses one that is not an
// object (`null`, a number) or that holds an option the call does not take (a misspelt one
// would be ignored without a word), with a CudaArgumentError naming the call, before any
// native call: cudadrv's native door (koffi, and the library loader) is replaced by a recorder
// that fails every use. The other arguments are stand-ins that are never reached.
const native = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/native-recorder')).createNativeRecorder(),
);
vi.mock('./ffi/library.js', async (importOriginal) =>
  native.replace(await importOriginal<object>()),
);

import { CudaArgumentError } from './errors.js';
import { Graph } from './graph/graph.js';
import type { Kernel } from './kernel/kernel.js';
import { launch } from './kernel/launch.js';
import { DeviceArray } from './memory/array.js';
import { fromDLPack, toDLPack } from './memory/dlpack.js';
import { HostView } from './memory/host-view.js';
import { allocateShareable, openSharedMemory, shareableArray } from './memory/ipc.js';
import { DeviceBuffer } from './memory/memory.js';
import {
  borrowArray,
  type LentArrayDescriptor,
  lendArray,
  receiveArray,
  type TransferredArrayDescriptor,
  transferArray,
} from './memory/thread-share.js';
import {
  copyDeviceToDevice,
  copyDeviceToPinned,
  copyHostToDevice,
  memset,
  memsetWords,
  type PinnedHostBuffer,
} from './memory/transfer.js';
import { Event } from './stream/event.js';
import { Stream } from './stream/stream.js';

const bytes64 = () => ({ byteLength: 64, disposed: false, address: 0 }) as unknown as DeviceBuffer;
const a = new DeviceArray(bytes64(), 'float32', [4, 4], [1, 4], 0, false);
const b = new DeviceArray(bytes64(), 'float32', [4, 4], [1, 4], 0, false);
const pinned = { byteLength: 64, disposed: false } as unknown as PinnedHostBuffer;
const region = { buffer: bytes64(), byteOffset: 0 };
const view = Object.create(HostView.prototype) as HostView<'float32'>;
const graph = Object.create(Graph.prototype) as Graph;

type Options = never;
/**
 * Each call given `options` in place of its options object; the names it takes, in the
 * order its message lists them; and a right option spelt in the wrong case, with its name.
 */
const calls: [string, (options: Options) => unknown, string, [string, string]][] = [
  ['DeviceBuffer.allocate', (o) => DeviceBuffer.allocate(64, o), 'stream', ['Stream', 'stream']],
  [
    'DeviceBuffer.allocateAsync',
    (o) => DeviceBuffer.allocateAsync(64, o),
    'stream',
    ['STREAM', 'stream'],
  ],
  [
    'DeviceArray.empty',
    (o) => DeviceArray.empty('float32', [4], o),
    'stream',
    ['Stream', 'stream'],
  ],
  [
    'DeviceArray.emptyAsync',
    (o) => DeviceArray.emptyAsync('float32', [4], o),
    'stream',
    ['Stream', 'stream'],
  ],
  [
    'DeviceArray.zeros',
    (o) => DeviceArray.zeros('float32', [4], o),
    'stream',
    ['Stream', 'stream'],
  ],
  [
    'DeviceArray.full',
    (o) => DeviceArray.full('float32', [4], 1, o),
    'stream',
    ['Stream', 'stream'],
  ],
  [
    'DeviceArray.fromHost',
    (o) => DeviceArray.fromHost(new Float32Array(4), [4], o),
    'stream, dtype',
    ['dType', 'dtype'],
  ],
  ['DeviceArray.copy', (o) => a.copy(o), 'stream', ['Stream', 'stream']],
  ['DeviceArray.copyFrom', (o) => a.copyFrom(b, o), 'stream', ['Stream', 'stream']],
  [
    'DeviceArray.copyFromHost',
    (o) => a.copyFromHost(new Float32Array(16), o),
    'stream',
    ['Stream', 'stream'],
  ],
  ['DeviceArray.fill', (o) => a.fill(2, o), 'stream', ['Stream', 'stream']],
  ['DeviceArray.toHost', (o) => a.toHost(o), 'stream, signal', ['Signal', 'signal']],
  [
    'copyHostToDevice',
    (o) => copyHostToDevice(region, new Uint8Array(16), o),
    'stream, byteLength',
    ['bytelength', 'byteLength'],
  ],
  [
    'copyDeviceToPinned',
    (o) => copyDeviceToPinned(pinned, region, 16, o),
    'stream',
    ['Stream', 'stream'],
  ],
  [
    'copyDeviceToDevice',
    (o) => copyDeviceToDevice(region, region, 16, o),
    'stream',
    ['Stream', 'stream'],
  ],
  ['memset', (o) => memset(region, 0, 16, o), 'stream', ['Stream', 'stream']],
  ['memsetWords', (o) => memsetWords(region, 7, 4, 4, o), 'stream', ['Stream', 'stream']],
  ['HostView.allocate', (o) => HostView.allocate('float32', 4, o), 'mapped', ['Mapped', 'mapped']],
  ['HostView.deviceArray', (o) => view.deviceArray([4], o), 'stream', ['Stream', 'stream']],
  ['HostView.copyFrom', (o) => view.copyFrom(a, o), 'stream', ['Stream', 'stream']],
  ['HostView.copyTo', (o) => view.copyTo(a, o), 'stream', ['Stream', 'stream']],
  ['HostView.toDevice', (o) => view.toDevice([4], o), 'stream', ['Stream', 'stream']],
  ['HostView.ready', (o) => view.ready(o), 'signal', ['Signal', 'signal']],
  ['lendArray', (o) => lendArray(a, o), 'stream, readOnly', ['readonly', 'readOnly']],
  ['borrowArray', (o) => borrowArray({} as LentArrayDescriptor, o), 'stream', ['Stream', 'stream']],
  ['transferArray', (o) => transferArray(a, o), 'stream', ['Stream', 'stream']],
  [
    'receiveArray',
    (o) => receiveArray({} as TransferredArrayDescriptor, o),
    'stream',
    ['Stream', 'stream'],
  ],
  ['allocateShareable', (o) => allocateShareable(64, o), 'stream', ['Stream', 'stream']],
  ['shareableArray', (o) => shareableArray('float32', [4], o), 'stream', ['Stream', 'stream']],
  [
    'openSharedMemory',
    (o) => openSharedMemory('not a handle', o),
    'stream, access, onExporterExit',
    ['Access', 'access'],
  ],
  [
    'toDLPack',
    (o) => toDLPack(a, o),
    'stream, readOnly, reverseDimensions',
    ['readonly', 'readOnly'],
  ],
  [
    'fromDLPack',
    (o) => fromDLPack(0x1000n, o),
    'stream, reverseDimensions',
    ['reversedimensions', 'reverseDimensions'],
  ],
  ['Graph.launch', (o) => graph.launch(o), 'stream', ['Stream', 'stream']],
  ['Stream.create', (o) => Stream.create(o), 'context, priority, blocking, name', ['Name', 'name']],
  ['Event.create', (o) => Event.create(o), 'timing, blockingSync, context', ['Timing', 'timing']],
];

/** What `fn` threw, or what its promise rejected with. */
async function failure(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

/** The message of the CudaArgumentError `fn` throws or rejects with. */
async function refusal(fn: () => unknown): Promise<string> {
  const error = await failure(fn);
  expect(error).toBeInstanceOf(CudaArgumentError);
  return (error as Error).message;
}

beforeEach(() => {
  native.calls.length = 0;
});

describe('an options argument that is not an object, or holds an unknown option, is refused', () => {
  it.each(calls)('%s', async (call, run, takes, [misspelt, right]) => {
    expect(await refusal(() => run(null as Options))).toBe(
      `${call}: options must be an object, got null`,
    );
    expect(await refusal(() => run(5 as Options))).toBe(
      `${call}: options must be an object, got 5`,
    );
    expect(await refusal(() => run({ gamma: 1 } as Options))).toBe(
      `${call}: unknown option "gamma"; ${call} takes ${takes}`,
    );
    expect(await refusal(() => run({ [misspelt]: undefined } as Options))).toBe(
      `${call}: unknown option "${misspelt}" (did you mean ${right}?); ${call} takes ${takes}`,
    );
    expect(native.calls).toEqual([]);
  });
});

describe('flags and element values are checked before any native call', () => {
  it("Stream.create's and Event.create's flags are true or false", async () => {
    expect(await refusal(() => Stream.create({ blocking: 1 as never }))).toBe(
      'Stream.create: option blocking must be true or false, got 1',
    );
    expect(await refusal(() => Event.create({ timing: 'yes' as never }))).toBe(
      'Event.create: option timing must be true or false, got "yes"',
    );
    expect(await refusal(() => Stream.create({ context: 5 as never }))).toBe(
      'Stream.create: option context must be a Context, got 5',
    );
    expect(await refusal(() => Event.create({ context: {} as never }))).toMatch(
      /^Event.create: option context must be a Context, got /,
    );
    expect(await refusal(() => Stream.create({ priority: 'urgent' as never }))).toBe(
      `Stream.create: option priority must be 'high', 'normal', 'low' or an integer, got "urgent"`,
    );
    expect(await refusal(() => Stream.create({ priority: 1.5 }))).toMatch(/got 1\.5$/);
    expect(await refusal(() => Stream.create({ name: 7 as never }))).toBe(
      'Stream.create: option name must be a string, got 7',
    );
    expect(native.calls).toEqual([]);
  });

  it('fill and full refuse a value the integer dtype would wrap or truncate', async () => {
    const ints = new DeviceArray(bytes64(), 'int32', [16], [1], 0, false);
    const bytes = new DeviceArray(bytes64(), 'uint8', [64], [1], 0, false);
    expect(await refusal(() => ints.fill(1e10))).toBe(
      'DeviceArray.fill: int32 elements are integers in [-2147483648, 2147483647], got 10000000000',
    );
    expect(await refusal(() => ints.fill(1.5))).toMatch(/got 1\.5$/);
    expect(await refusal(() => ints.fill(Number.NaN))).toMatch(/got NaN$/);
    expect(await refusal(() => bytes.fill(256))).toMatch(
      /uint8 elements are integers in \[0, 255\]/,
    );
    expect(await refusal(() => bytes.fill(-1))).toMatch(/got -1$/);
    expect(await refusal(() => a.fill('2' as never))).toBe(
      'DeviceArray.fill: value must be a number, got "2"',
    );
    expect(await refusal(() => a.toHost({ signal: 5 as never }))).toBe(
      'DeviceArray.toHost: option signal must be an AbortSignal, got [object Number]',
    );
    expect(await refusal(() => a.copyFromHost(null as never))).toBe(
      'copyFromHost: data must be a Float32Array, got null',
    );
    // A plain list given to fromHost: checked element by element, before anything else.
    expect(await refusal(() => DeviceArray.fromHost([1, 2, 300], [3], { dtype: 'uint8' }))).toBe(
      'DeviceArray.fromHost: element 2: uint8 elements are integers in [0, 255], got 300',
    );
    expect(await refusal(() => DeviceArray.fromHost([1, 'x' as never], [2]))).toBe(
      'DeviceArray.fromHost: element 1 must be a number, got "x"',
    );
    expect(await refusal(() => DeviceArray.fromHost([0.5], [1], { dtype: 'int32' }))).toMatch(
      /element 0: int32 elements are integers/,
    );
    expect(
      await refusal(() => DeviceArray.fromHost([1], [1], { dtype: 'float33' as never })),
    ).toMatch(/^unknown dtype "float33"/);
    expect(await refusal(() => DeviceArray.full('int8', [4], 128))).toMatch(
      /^DeviceArray.full: int8 elements are integers in \[-128, 127\], got 128$/,
    );
    expect(native.calls).toEqual([]);
  });
});

describe("launch's config", () => {
  const kernel = {
    name: 'k',
    module: { disposed: false },
    launchDirect: undefined,
  } as unknown as Kernel;

  it.each([null, undefined, 5, 'grid'])('%s is refused, naming launch', async (config) => {
    expect(await refusal(() => launch(kernel, config as never))).toMatch(
      /^launch: config must be an object \{ grid, block, sharedMemory\?, stream\? \}, got /,
    );
    expect(native.calls).toEqual([]);
  });

  it('a misspelt grid or block is refused, naming the right one', async () => {
    expect(await refusal(() => launch(kernel, { Grid: 1, block: 32 } as never))).toBe(
      'launch: unknown option "Grid" (did you mean grid?); launch takes grid, block, sharedMemory, stream',
    );
    expect(await refusal(() => launch(kernel, { grid: 1, blocks: 32 } as never))).toBe(
      'launch: unknown option "blocks" (did you mean block?); launch takes grid, block, sharedMemory, stream',
    );
    expect(await refusal(() => launch(kernel, { block: 32 } as never))).toBe(
      'launch: config must hold grid and block (a number or [x, y?, z?]), got grid undefined, block 32',
    );
    expect(native.calls).toEqual([]);
  });

  it('through a compiled launch too (which reads the config unchecked)', async () => {
    // What the generated launch does first: it reads the config's stream.
    const direct = (config: { stream?: unknown }) => config.stream !== undefined && false;
    const compiled = { ...kernel, launchDirect: direct } as unknown as Kernel;
    expect(await refusal(() => launch(compiled, null as never, 1))).toBe(
      'launch: config must be an object { grid, block, sharedMemory?, stream? }, got null',
    );
    expect(await refusal(() => launch(compiled, { Grid: 1, block: 32 } as never, 1))).toContain(
      'unknown option "Grid" (did you mean grid?)',
    );
    expect(native.calls).toEqual([]);
  });
});
