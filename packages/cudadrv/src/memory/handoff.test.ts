import { beforeEach, describe, expect, it, vi } from 'vitest';

// Buffer hand-offs between streams against a scripted driver: which event records and stream
// waits reach it, and when completion stamps (progress.ts) let a hand-off skip them.
const fake = vi.hoisted(() => {
  const state = {
    calls: [] as string[],
    busy: new Set<number>(),
    nextEvent: 5000,
    nextStream: 100,
    /** The event of each `record` and `wait` call, in order. */
    events: [] as number[],
  };
  const name = (handle: unknown) => `s${Number(handle)}`;
  const api = {
    cuEventCreate(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextEvent++);
      return 0;
    },
    cuEventRecord(event: unknown, stream: unknown) {
      state.calls.push(`record ${name(stream)}`);
      state.events.push(Number(event));
      return 0;
    },
    cuStreamWaitEvent(stream: unknown, event: unknown) {
      state.calls.push(`wait ${name(stream)}`);
      state.events.push(Number(event));
      return 0;
    },
    cuEventDestroy_v2: () => 0,
    cuStreamCreateWithPriority(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextStream++);
      return 0;
    },
    cuStreamDestroy_v2: () => 0,
    cuStreamQuery(stream: unknown) {
      return state.busy.has(Number(stream)) ? 600 : 0;
    },
    cuStreamSynchronize(stream: unknown) {
      state.busy.delete(Number(stream));
      return 0;
    },
    cuCtxSynchronize() {
      state.busy.clear();
      return 0;
    },
    cuCtxSetCurrent() {
      return 0;
    },
    cuLaunchKernelEx() {
      state.calls.push('launch');
      return 0;
    },
    cuMemFreeAsync(_address: unknown, stream: unknown) {
      state.calls.push(`free on ${name(stream)}`);
      return 0;
    },
  };
  return { state, api };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  return { ...original, driver: () => fake.api, check: () => undefined };
});

import { Context, type Device } from '../context/device.js';
import { CaptureError, DisposedError } from '../errors.js';
import type { StreamCapture } from '../graph/capture.js';
import { Kernel } from '../kernel/kernel.js';
import { launch } from '../kernel/launch.js';
import type { Module } from '../kernel/module.js';
import { useClock } from '../progress.js';
import { Stream } from '../stream/stream.js';
import { DeviceArray } from './array.js';
import { DeviceBuffer, handOff, recordOf } from './memory.js';

const context = new Context({ ordinal: 0 } as unknown as Device, 77n);
let nextAddress = 0x10000;
Object.defineProperty(context, 'memoryPool', {
  value: { allocate: () => (nextAddress += 0x1000) },
});
const streams = [1n, 2n, 3n, 4n].map((handle) => Stream.wrap(handle, context, `s${handle}`));
const [a, b, c, d] = streams as [Stream, Stream, Stream, Stream];
const defaultStream = Stream.wrap(8n, context, 's8');
Object.defineProperty(context, 'defaultStream', { value: defaultStream });

/** Marks every stream busy (work issued, not done) and forgets the calls so far. */
function busyAll(): void {
  for (const s of [...streams, defaultStream]) fake.state.busy.add(Number(s.handle));
  fake.state.calls.length = 0;
  fake.state.events.length = 0;
}
const calls = () => fake.state.calls.splice(0);

beforeEach(busyAll);

describe('buffer hand-off between streams', () => {
  it('orders a use on another stream after a busy writer (record + wait)', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    buffer.ffiAddressOn(b);
    expect(calls()).toEqual(['record s1', 'wait s2']);
    buffer.ffiAddressOn(b); // the same stream again: nothing
    expect(calls()).toEqual([]);
  });

  it('skips the ordering once a query found the writer idle after the use', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    buffer.ffiAddressOn(a);
    expect(a.query()).toBe(false); // still busy: proves nothing
    fake.state.busy.delete(Number(a.handle));
    expect(a.query()).toBe(true);
    buffer.ffiAddressOn(b);
    expect(calls()).toEqual([]);
    expect(buffer.lastStream).toBe(b);
  });

  it('orders again when the writer used the buffer after it was found idle', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    a.synchronize();
    buffer.ffiAddressOn(a, 'read'); // a use after the synchronize: not known complete
    buffer.ffiAddressOn(b);
    expect(calls()).toEqual(['record s1', 'wait s2']);
  });

  it('a synchronize of another stream does not count for the writer', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    c.synchronize();
    buffer.ffiAddressOn(b);
    expect(calls()).toEqual(['record s1', 'wait s2']);
  });

  it('readers: a read waits for a busy writer once per stream; a write waits for busy readers only', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    buffer.ffiAddressOn(b, 'read');
    buffer.ffiAddressOn(b, 'read');
    buffer.ffiAddressOn(c, 'read');
    expect(calls()).toEqual(['record s1', 'wait s2', 'record s1', 'wait s3']);
    expect(buffer.readers).toEqual([b, c]);
    b.synchronize(); // b's reads are done; c's are not
    buffer.ffiAddressOn(d);
    expect(calls()).toEqual(['record s1', 'wait s4', 'record s3', 'wait s4']);
    expect(buffer.readers).toEqual([]);
  });

  it('a read waits for the last write, not for the writer stream reading the buffer since', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    buffer.ffiAddressOn(a); // the write
    a.synchronize(); // ... is done
    buffer.ffiAddressOn(a, 'read'); // the writer stream reads it in work still running
    buffer.ffiAddressOn(b, 'read'); // a read elsewhere: reads do not wait for reads
    expect(calls()).toEqual([]);
    expect(buffer.readers).toEqual([b]);
    // A write waits for every read since the last write, the writer stream's own included.
    buffer.ffiAddressOn(c);
    expect(calls()).toEqual(['record s1', 'wait s3', 'record s2', 'wait s3']);
  });

  it('a read still waits when the write itself is not known complete', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    buffer.ffiAddressOn(a); // the write, running
    buffer.ffiAddressOn(a, 'read');
    buffer.ffiAddressOn(b, 'read');
    expect(calls()).toEqual(['record s1', 'wait s2']);
  });

  it('a later read by a known reader moves its stamp on', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    buffer.ffiAddressOn(b, 'read');
    b.synchronize();
    buffer.ffiAddressOn(b, 'read'); // after the synchronize: pending again
    calls();
    a.synchronize();
    buffer.ffiAddressOn(c);
    expect(calls()).toEqual(['record s2', 'wait s3']);
  });

  it('a context synchronize makes every earlier use complete', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    buffer.ffiAddressOn(b, 'read');
    context.synchronize();
    busyAll(); // new work elsewhere does not matter for the buffer's uses
    buffer.ffiAddressOn(c);
    expect(calls()).toEqual([]);
  });

  it('the free goes to the last writer after busy readers, and skips finished ones', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    buffer.ffiAddressOn(b, 'read');
    buffer.ffiAddressOn(c, 'read');
    calls();
    c.synchronize();
    buffer.dispose();
    expect(calls()).toEqual(['record s2', 'wait s1', 'free on s1']);
    buffer.dispose(); // twice: nothing
    expect(calls()).toEqual([]);
  });
});

describe('a disposed stream in later hand-offs (issue 14, bug 2)', () => {
  /** A wrapped stream (another library's) with work still queued, as a buffer's writer. */
  function foreignWriter(handle: bigint) {
    const foreign = Stream.wrap(handle, context, `s${handle}`);
    fake.state.busy.add(Number(handle));
    const buffer = DeviceBuffer.allocate(256, { stream: foreign });
    return { foreign, buffer };
  }

  it('disposing a wrapped stream records its tail; a later use elsewhere waits for it', () => {
    const { foreign, buffer } = foreignWriter(9n);
    calls();
    foreign.dispose();
    // The wrapper does not own the stream: no synchronize, but an event marks its last work.
    expect(calls()).toEqual(['record s9']);
    const tail = fake.state.events.splice(0)[0];
    buffer.ffiAddressOn(b);
    // Ordered after the tail, with no record on the stream the wrapper gave up.
    expect(calls()).toEqual(['wait s2']);
    expect(fake.state.events.splice(0)).toEqual([tail]);
  });

  it('the free of a buffer last used on it waits for the tail, on the default stream', () => {
    const { foreign, buffer } = foreignWriter(10n);
    foreign.dispose();
    const tail = fake.state.events.splice(0)[0];
    calls();
    buffer.dispose();
    expect(calls()).toEqual(['wait s8', 'free on s8']);
    expect(fake.state.events.splice(0)).toEqual([tail]);
  });

  it('a write waits for the tail of a disposed reader', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    const { foreign } = foreignWriter(11n);
    buffer.ffiAddressOn(foreign, 'read');
    foreign.dispose();
    calls();
    buffer.ffiAddressOn(c);
    expect(calls()).toEqual(['record s1', 'wait s3', 'wait s3']);
  });

  it('Stream.waitFor a disposed wrapped stream waits for its tail', () => {
    const { foreign } = foreignWriter(12n);
    foreign.dispose();
    const tail = fake.state.events.splice(0)[0];
    calls();
    b.waitFor(foreign);
    expect(calls()).toEqual(['wait s2']);
    expect(fake.state.events.splice(0)).toEqual([tail]);
  });

  it('an owned stream is drained by dispose: nothing waits for it afterwards', () => {
    const owned = Stream.create({ context, name: 'owned' });
    fake.state.busy.add(Number(owned.handle));
    const buffer = DeviceBuffer.allocate(256, { stream: owned });
    const read = DeviceBuffer.allocate(256, { stream: a });
    read.ffiAddressOn(owned, 'read');
    owned.dispose();
    expect(fake.state.busy.has(Number(owned.handle))).toBe(false);
    calls();
    buffer.ffiAddressOn(b);
    b.waitFor(owned);
    read.ffiAddressOn(a);
    expect(calls()).toEqual([]);
  });
});

describe("a launch's uses of its arrays (decision 0029)", () => {
  // y <- f(x): the first parameter written, the second read.
  const kernel = new Kernel({ context, disposed: false } as unknown as Module, 'f', 1n, [
    'float32*',
    'const float32*',
  ]);
  const array = (stream: Stream) =>
    new DeviceArray(DeviceBuffer.allocate(256, { stream }), 'float32', [64], [1], 0, true);
  const on = (stream: Stream, y: DeviceArray, x: DeviceArray) =>
    launch(kernel, { grid: 1, block: 64, stream }, y, x);

  it('on the stream that wrote both arrays: nothing but the launch', () => {
    const [y, x] = [array(a), array(a)];
    on(a, y, x);
    on(a, y, x);
    expect(calls()).toEqual(['launch', 'launch']);
  });

  it('on another stream: the write and the read wait for the busy writer', () => {
    const [y, x] = [array(a), array(a)];
    on(b, y, x);
    expect(calls()).toEqual(['record s1', 'wait s2', 'record s1', 'wait s2', 'launch']);
    expect(y.buffer.lastStream).toBe(b);
    expect(x.buffer.readers).toEqual([b]);
  });

  it('a use by a launch after a synchronize is pending again: a later hand-off waits for it', () => {
    const [y, x] = [array(a), array(a)];
    a.synchronize();
    on(a, y, x);
    calls();
    y.buffer.ffiAddressOn(b);
    x.buffer.ffiAddressOn(c);
    expect(calls()).toEqual(['record s1', 'wait s2', 'record s1', 'wait s3']);
  });

  it('a read alone after a synchronize is pending again too', () => {
    const reads = new Kernel({ context, disposed: false } as unknown as Module, 'g', 2n, [
      'const float32*',
    ]);
    const x = array(a);
    a.synchronize();
    launch(reads, { grid: 1, block: 64, stream: a }, x);
    calls();
    x.buffer.ffiAddressOn(c);
    expect(calls()).toEqual(['record s1', 'wait s3']);
  });

  it('a write by the writer stream waits for a busy reader on another stream', () => {
    const [y, x] = [array(a), array(a)];
    y.buffer.ffiAddressOn(b, 'read');
    calls();
    on(a, y, x);
    expect(calls()).toEqual(['record s2', 'wait s1', 'launch']);
    expect(y.buffer.readers).toEqual([]);
  });

  it('a random run of launches and synchronizes: the same hand-offs as declaring each use', () => {
    // mulberry32: a small seeded generator, the same script every run.
    let seed = 7;
    const random = (n: number) => {
      seed = (seed + 0x6d2b79f5) | 0;
      let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
      t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
      return (((t ^ (t >>> 14)) >>> 0) % 4294967296) % n;
    };
    const script = Array.from({ length: 400 }, () => ({
      stream: streams[random(3)]!,
      sync: random(4) === 0,
      swap: random(2) === 0,
      pick: random(3),
    }));
    const run = (viaLaunch: boolean) => {
      busyAll();
      const arrays = [array(a), array(b), array(c)];
      const log: string[] = [];
      for (const { stream, sync, swap, pick } of script) {
        if (sync) {
          stream.synchronize();
          fake.state.busy.add(Number(stream.handle)); // new work arrives later
          continue;
        }
        const y = arrays[pick]!;
        const x = arrays[(pick + (swap ? 1 : 2)) % 3]!;
        if (viaLaunch) on(stream, y, x);
        else {
          y.buffer.ffiAddressOn(stream, 'write');
          x.buffer.ffiAddressOn(stream, 'read');
        }
        log.push(
          calls()
            .filter((call) => call !== 'launch')
            .join(', '),
        );
        log.push(
          arrays
            .map((z) => `${z.buffer.lastStream.name}:${z.buffer.readers.map((r) => r.name)}`)
            .join(' '),
        );
      }
      return log;
    };
    const declared = run(false);
    expect(run(true)).toEqual(declared);
    // The run exercised both kinds of use: with and without ordering.
    expect(declared.some((line) => line.includes('wait'))).toBe(true);
    expect(declared.filter((line, i) => i % 2 === 0 && line === '').length).toBeGreaterThan(20);
  });
});

describe('handOff: the one hand-off of the memory layer', () => {
  const stampsOf = (buffer: DeviceBuffer) => {
    const { stream, stamp, writeStamp, readers, readerStamps } = recordOf(buffer);
    return { stream, stamp, writeStamp, readers, readerStamps };
  };
  /** Runs `fn` with `stream` capturing into a stand-in capture that records the uses. */
  const capturing = (stream: Stream, fn: (capture: StreamCapture) => void) => {
    const uses: [DeviceBuffer, string][] = [];
    const capture = {
      stream,
      allocations: [],
      recordUse: (buffer: DeviceBuffer, access: string) => uses.push([buffer, access]),
    } as unknown as StreamCapture;
    stream.capture = capture;
    try {
      fn(capture);
    } finally {
      stream.capture = null;
    }
    return uses;
  };

  it('stamps: the writer stream reading moves the last use only; writing moves both', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    const before = stampsOf(buffer);
    handOff(buffer, recordOf(buffer), a, 'read');
    const read = stampsOf(buffer);
    expect(read.stamp).toBe(useClock.value);
    expect(read.stamp).toBeGreaterThan(before.stamp);
    expect(read.writeStamp).toBe(before.writeStamp);
    handOff(buffer, recordOf(buffer), a, 'write');
    const written = stampsOf(buffer);
    expect([written.stamp, written.writeStamp]).toEqual([useClock.value, useClock.value]);
    expect(written.stream).toBe(a);
    expect(written.readers).toBeNull();
    expect(calls()).toEqual([]);
  });

  it('readers: a read elsewhere joins them once; a write by the writer waits for them and clears them', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    handOff(buffer, recordOf(buffer), b, 'read');
    expect(calls()).toEqual(['record s1', 'wait s2']);
    const first = stampsOf(buffer);
    expect(first.stream).toBe(a);
    expect(first.readers).toEqual([b]);
    expect(first.readerStamps).toEqual([useClock.value]);
    handOff(buffer, recordOf(buffer), b, 'read'); // a known reader: its stamp moves on only
    expect(calls()).toEqual([]);
    expect(stampsOf(buffer).readerStamps).toEqual([useClock.value]);
    handOff(buffer, recordOf(buffer), c, 'read');
    expect(calls()).toEqual(['record s1', 'wait s3']);
    expect(stampsOf(buffer).readers).toEqual([b, c]);
    // The writer writes again: it waits for both busy readers (not the common case).
    handOff(buffer, recordOf(buffer), a, 'write');
    expect(calls()).toEqual(['record s2', 'wait s1', 'record s3', 'wait s1']);
    expect(stampsOf(buffer)).toMatchObject({ stream: a, readers: [], readerStamps: [] });
    expect(stampsOf(buffer).writeStamp).toBe(useClock.value);
  });

  it('a write on another stream waits for the writer and the readers, and becomes the writer', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    handOff(buffer, recordOf(buffer), b, 'read');
    calls();
    handOff(buffer, recordOf(buffer), c, 'write');
    expect(calls()).toEqual(['record s1', 'wait s3', 'record s2', 'wait s3']);
    expect(stampsOf(buffer)).toMatchObject({ stream: c, readers: [], readerStamps: [] });
  });

  it('capture: a use by a capturing stream is recorded for the graph and moves nothing', () => {
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    const before = stampsOf(buffer);
    const clock = useClock.value;
    const uses = capturing(a, () => {
      handOff(buffer, recordOf(buffer), a, 'read');
      handOff(buffer, recordOf(buffer), a, 'write');
    });
    expect(uses).toEqual([
      [buffer, 'read'],
      [buffer, 'write'],
    ]);
    expect(stampsOf(buffer)).toEqual(before);
    expect(useClock.value).toBe(clock);
    expect(calls()).toEqual([]);
  });

  it("capture: the capture's own memory is used freely inside it and refused outside", () => {
    let buffer: DeviceBuffer | undefined;
    const uses = capturing(a, (capture) => {
      buffer = DeviceBuffer.allocate(256, { stream: a });
      expect(recordOf(buffer).capture).toBe(capture);
      handOff(buffer, recordOf(buffer), a, 'write');
      expect(() => handOff(buffer!, recordOf(buffer!), b, 'read')).toThrow(CaptureError);
    });
    expect(uses).toEqual([]);
  });

  it('empty memory: no ordering, nothing moves; disposed memory and streams throw first', () => {
    const empty = DeviceBuffer.allocate(0, { stream: a });
    const before = stampsOf(empty);
    handOff(empty, recordOf(empty), b, 'write');
    expect(stampsOf(empty)).toEqual(before);
    expect(calls()).toEqual([]);
    const gone = DeviceBuffer.allocate(256, { stream: a });
    gone.dispose();
    calls();
    expect(() => handOff(gone, recordOf(gone), a, 'read')).toThrow(DisposedError);
    const closed = Stream.wrap(9n, context, 's9');
    closed.dispose();
    const live = DeviceBuffer.allocate(256, { stream: a });
    calls();
    expect(() => handOff(live, recordOf(live), closed, 'read')).toThrow(DisposedError);
    expect(calls()).toEqual([]);
  });

  it('`live` follows the address: a launch refuses an array whose memory went', () => {
    const kernel = new Kernel({ context, disposed: false } as unknown as Module, 'k', 4n, [
      'float32*',
    ]);
    const empty = DeviceBuffer.allocate(0, { stream: a });
    expect([recordOf(empty).address, recordOf(empty).live]).toEqual([0, false]);
    const buffer = DeviceBuffer.allocate(256, { stream: a });
    const array = new DeviceArray(buffer, 'float32', [64], [1], 0, true);
    expect(recordOf(buffer).live).toBe(true);
    launch(kernel, { grid: 1, block: 64, stream: a }, array);
    expect(calls()).toEqual(['launch']);
    array.dispose();
    expect([recordOf(buffer).address, recordOf(buffer).live]).toEqual([0, false]);
    calls();
    expect(() => launch(kernel, { grid: 1, block: 64, stream: a }, array)).toThrow(DisposedError);
    expect(() => handOff(buffer, recordOf(buffer), a, 'write')).toThrow(DisposedError);
    expect(calls()).toEqual([]);
  });

  it("a buffer of another copy of the package: that copy's own ffiAddressOn", () => {
    const asked: string[] = [];
    const foreign = {
      byteLength: 64,
      ffiAddressOn: (stream: Stream, access: string) => asked.push(`${stream.name} ${access}`),
    } as unknown as DeviceBuffer;
    expect(recordOf(foreign).address).toBe(0);
    handOff(foreign, recordOf(foreign), b, 'read');
    expect(asked).toEqual(['s2 read']);
  });

  it('the generated launch calls it for each typed array and edits no allocation record', () => {
    const kernel = new Kernel({ context, disposed: false } as unknown as Module, 'h', 3n, [
      'float32*',
      'const float64*',
      'pointer',
    ]);
    const text = kernel.launchSource();
    expect(text).toContain("handOff(v0.buffer, v0.allocation, stream, 'write');");
    expect(text).toContain("handOff(v1.buffer, v1.allocation, stream, 'read');");
    expect(text).toContain("v2.ffiAddressOn(stream, 'write')");
    expect(text).not.toMatch(/\.(stamp|writeStamp|readers|readerStamps)\b|clock/);
    // One launch block, ending each of the three launch functions.
    expect(text.match(/driver\(\)\.cuLaunchKernelEx\(/g)).toHaveLength(3);
  });
});
