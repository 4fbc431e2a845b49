import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import fc from 'fast-check';
import { afterEach, describe, expect, it, vi } from 'vitest';

// The issue engine against a double of libcuda: first its ring protocol in one thread (the
// writer's pushes and an issuer's drain, interleaved at random), then the whole engine with
// real issuer threads whose libcuda calls are a double (test/issuer-calls-double.mjs) that
// logs every launch into shared memory, driven by real `launch()` calls on real Streams.
const fake = vi.hoisted(() => {
  const state = { nextHandle: 0x1000, direct: [] as string[], queries: 0 };
  const api = new Proxy({} as Record<string, (...args: any[]) => number>, {
    get(_target, name: string) {
      return (...args: any[]) => {
        if (name === 'cuStreamCreateWithPriority') args[0][0] = BigInt(state.nextHandle++);
        if (name === 'cuLaunchKernelEx') state.direct.push(name);
        if (name === 'cuStreamQuery') state.queries++;
        return 0;
      };
    },
  });
  return { state, api };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  const errors = await import('../errors.js');
  return {
    ...original,
    driver: () => fake.api,
    check: (result: number, call: string) => {
      if (result !== 0) throw new Error(`${call} returned ${result}`);
    },
    cudaError: (result: number, call: string) =>
      new errors.CudaError(result, `CUDA_ERROR_${result}`, call, 'a double'),
  };
});

import { Context, type Device } from '../context/device.js';
import { launchGate } from '../context/launch-gate.js';
import { int32High, int32Low } from '../driver.js';
import { CudaError } from '../errors.js';
import { Kernel } from '../kernel/kernel.js';
import { launch } from '../kernel/launch.js';
import type { Module } from '../kernel/module.js';
import { DeviceArray } from '../memory/array.js';
import type { DeviceBuffer } from '../memory/memory.js';
import {
  engine,
  IssueAttachment,
  issueEngineStatistics,
  startIssueEngineWith,
  stopIssueEngine,
  Writer,
} from './issue-engine.js';
import {
  CANCELLED,
  createRing,
  createSlots,
  createWatch,
  drain,
  GENERATION,
  HEAD,
  type IssuerCalls,
  type Reader,
  SLOT_SHIFT,
  TAIL,
  WATCHING,
  watchRound,
} from './issue-ring.js';
import { Stream } from './stream.js';
import { waitForStream } from './wait.js';

const DATA_ADDRESS = 0x10_0000;

function readerOf(
  ring: ReturnType<typeof createRing>,
  slots: ReturnType<typeof createSlots>,
): Reader {
  return {
    control: new Int32Array(ring.control),
    data: new Int32Array(ring.data),
    issued: new Int32Array(slots.issued),
    errors: new Int32Array(slots.errors),
    cancelled: new Int32Array(slots.cancelled),
    dataAddress: DATA_ADDRESS,
    pointers: new Int32Array(512),
    pointersAddress: 0x9000,
    current: 0,
    tail: 0,
    watch: createWatch(2000),
  };
}

/** A ring of `capacity` words with its slots, its writer and its reader (a watch on `now`). */
function oneRing(capacity: number, now?: () => number) {
  const ring = createRing(capacity);
  const slots = createSlots();
  const reader: Reader = { ...readerOf(ring, slots), watch: createWatch(2000, now) };
  return { ring, slots, writer: new Writer(ring), reader };
}

/** Issuer calls whose queries are logged into `queried` and answered by `answer`. */
function queryCalls(queried: number[], answer: (stream: number) => number): IssuerCalls {
  return {
    cuCtxSetCurrent: () => 0,
    cuLaunchKernel: () => 0,
    cuStreamQuery: (stream) => {
      queried.push(stream);
      return answer(stream);
    },
  };
}

function fakeStream(handle: number, context = 77n): Stream {
  return {
    rawHandle: BigInt(handle),
    rawLo: int32Low(handle),
    rawHi: int32High(handle),
    context: { handle: context },
    toString: () => `Stream(${handle})`,
  } as unknown as Stream;
}

describe('the ring protocol (one thread)', () => {
  it('any interleaving of pushes and drains issues each stream’s launches in order, with their values', () => {
    const push = fc.record({
      stream: fc.integer({ min: 0, max: 3 }),
      values: fc.array(fc.integer(), { maxLength: 4 }),
      drainFirst: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.constantFrom(64, 128, 256),
        fc.array(push, { maxLength: 60 }),
        (capacity, pushes) => {
          const ring = createRing(capacity);
          const slots = createSlots();
          const writer = new Writer(ring);
          const reader = readerOf(ring, slots);
          const streams = [0, 1, 2, 3].map(
            (i) =>
              new IssueAttachment(fakeStream(0x500 + i, BigInt(70 + (i % 2))), i, writer, slots),
          );
          const issued: { stream: number; sequence: number; values: number[] }[] = [];
          let contextSwitches = 0;
          const calls: IssuerCalls = {
            cuStreamQuery: () => 0,
            cuCtxSetCurrent: () => {
              contextSwitches++;
              return 0;
            },
            cuLaunchKernel(fn, gx, _gy, _gz, bx, _by, _bz, shared, stream, params) {
              expect(fn).toBe(0x1234_5678_9a);
              expect(params).toBe(reader.pointersAddress);
              // The values are read where the pointers point: in the ring, 8 bytes apart.
              const values: number[] = [];
              for (let i = 0; i < bx; i++) {
                const address =
                  (reader.pointers[2 * i]! >>> 0) + reader.pointers[2 * i + 1]! * 2 ** 32;
                const word = (address - DATA_ADDRESS) / 4;
                expect(word % 2).toBe(0);
                values.push(reader.data[word]!);
                expect(reader.data[word + 1]).toBe(~reader.data[word]!);
              }
              issued.push({ stream: stream - 0x500, sequence: gx, values });
              expect(shared).toBe(gx % 7);
              return 0;
            },
          };
          const sequence = [0, 0, 0, 0];
          const pushed: { stream: number; sequence: number; values: number[] }[] = [];
          const arena = new Int32Array(16);
          for (const { stream, values, drainFirst } of pushes) {
            const words = 20 + 2 * values.length;
            const used = (writer.head - Atomics.load(writer.control, TAIL)) | 0;
            if (drainFirst || used + 2 * words > capacity) drain(reader, calls);
            values.forEach((v, i) => {
              arena[4 + 2 * i] = v;
              arena[5 + 2 * i] = ~v;
            });
            const s = ++sequence[stream]!;
            streams[stream]!.launch(
              0x1234_5678_9a,
              3,
              s,
              1,
              1,
              values.length,
              1,
              1,
              s % 7,
              arena,
              4,
              values.length,
            );
            pushed.push({ stream, sequence: s, values: [...values] });
            expect(streams[stream]!.pending()).toBe(true);
          }
          drain(reader, calls);
          for (let i = 0; i < 4; i++) {
            expect(streams[i]!.pending()).toBe(false);
            expect(issued.filter((c) => c.stream === i)).toEqual(
              pushed.filter((p) => p.stream === i),
            );
          }
          expect(issued).toEqual(pushed);
          // Two contexts alternate only where consecutive launches differ in context.
          expect(contextSwitches).toBeLessThanOrEqual(pushed.length);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('pushes of any size up to the engine’s 256 arguments, through rings of the engine’s sizes: every launch once, in order per stream, never waiting for room that cannot come', () => {
    const push = fc.record({
      stream: fc.integer({ min: 0, max: 2 }),
      count: fc.oneof(fc.integer({ min: 0, max: 8 }), fc.integer({ min: 200, max: 256 })),
      drainFirst: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.constantFrom(1024, 2048),
        fc.array(push, { minLength: 1, maxLength: 80 }),
        (capacity, pushes) => {
          const ring = createRing(capacity);
          const slots = createSlots();
          const writer = new Writer(ring);
          const reader = readerOf(ring, slots);
          const issued: { stream: number; sequence: number; count: number; first: number }[] = [];
          const calls: IssuerCalls = {
            cuCtxSetCurrent: () => 0,
            cuStreamQuery: () => 0,
            cuLaunchKernel(_fn, gx, _gy, _gz, bx, _by, _bz, _shared, stream) {
              const address = (reader.pointers[0]! >>> 0) + reader.pointers[1]! * 2 ** 32;
              const first = bx === 0 ? -1 : reader.data[(address - DATA_ADDRESS) / 4]!;
              issued.push({ stream: stream - 0x800, sequence: gx, count: bx, first });
              return 0;
            },
          };
          // The issuer drains whenever the writer has to wait: after a full drain the ring is
          // empty, so a wait for more room than the ring has would spin for ever.
          const waitForRoom = writer.waitForRoom.bind(writer);
          writer.waitForRoom = (needed: number) => {
            // What it publishes while it waits, an issuer drains.
            Atomics.store(writer.control, HEAD, writer.head);
            drain(reader, calls);
            if (needed > capacity) {
              throw new Error(`waits for ${needed} free words in a ring of ${capacity}`);
            }
            waitForRoom(needed);
          };
          const streams = [0, 1, 2].map(
            (i) => new IssueAttachment(fakeStream(0x800 + i), 20 + i, writer, slots),
          );
          const arena = new Int32Array(2 * 256);
          const sequence = [0, 0, 0];
          const pushed: typeof issued = [];
          for (const { stream, count, drainFirst } of pushes) {
            if (drainFirst) drain(reader, calls);
            const s = ++sequence[stream]!;
            arena[0] = s * 1000 + stream;
            streams[stream]!.launch(0x10, 0, s, 1, 1, count, 1, 1, 0, arena, 0, count);
            pushed.push({
              stream,
              sequence: s,
              count,
              first: count === 0 ? -1 : s * 1000 + stream,
            });
          }
          drain(reader, calls);
          for (let i = 0; i < 3; i++) {
            expect(streams[i]!.pending()).toBe(false);
            expect(issued.filter((c) => c.stream === i)).toEqual(
              pushed.filter((p) => p.stream === i),
            );
          }
          expect(issued).toEqual(pushed);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('a stream’s launches are issued after 2^31 of them (the sequence numbers wrap), and a cancellation still skips only what was pushed before it', () => {
    const ring = createRing(1024);
    const slots = createSlots();
    const writer = new Writer(ring);
    const reader = readerOf(ring, slots);
    const launched: number[] = [];
    const calls: IssuerCalls = {
      cuCtxSetCurrent: () => 0,
      cuStreamQuery: () => 0,
      cuLaunchKernel: (_f, gx) => {
        launched.push(gx);
        return 0;
      },
    };
    const values = new Int32Array(2);
    const issuedWords = new Int32Array(slots.issued);
    // A stream that has issued 2^31 - 2 launches and was never cancelled.
    const a = new IssueAttachment(fakeStream(0x900), 3, writer, slots);
    a.pushed = 2 ** 31 - 2;
    Atomics.store(issuedWords, 3 << 4, a.pushed);
    for (const gx of [1, 2, 3, 4]) a.launch(1, 0, gx, 1, 1, 1, 1, 1, 0, values, 0, 0);
    drain(reader, calls);
    expect(launched).toEqual([1, 2, 3, 4]);
    // One cancelled once, 2^31 launches ago (as far as int32 sequence numbers can tell).
    const b = new IssueAttachment(fakeStream(0x901), 4, writer, slots);
    b.launch(1, 0, 10, 1, 1, 1, 1, 1, 0, values, 0, 0);
    b.cancelPending();
    drain(reader, calls);
    for (let i = 0; i < 9; i++) {
      // 2^29 launches later, nine times (2^32 in all: the sequence numbers wrap): each issued.
      const before = b.pushed;
      b.pushed = (before + 2 ** 29 - 1) | 0;
      Atomics.store(issuedWords, 4 << 4, b.pushed);
      b.launch(1, 0, 11 + i, 1, 1, 1, 1, 1, 0, values, 0, 0);
      drain(reader, calls);
    }
    b.launch(1, 0, 20, 1, 1, 1, 1, 1, 0, values, 0, 0);
    b.cancelPending();
    b.launch(1, 0, 21, 1, 1, 1, 1, 1, 0, values, 0, 0);
    drain(reader, calls);
    expect(launched).toEqual([1, 2, 3, 4, 11, 12, 13, 14, 15, 16, 17, 18, 19, 21]);
    expect(b.pending()).toBe(false);
  });

  it('a cancelled stream’s launches not issued yet are skipped; later ones are issued', () => {
    const ring = createRing(1024);
    const slots = createSlots();
    const writer = new Writer(ring);
    const reader = readerOf(ring, slots);
    const a = new IssueAttachment(fakeStream(0x700), 7, writer, slots);
    const b = new IssueAttachment(fakeStream(0x701), 8, writer, slots);
    const launched: number[] = [];
    const calls: IssuerCalls = {
      cuCtxSetCurrent: () => 0,
      cuStreamQuery: () => 0,
      cuLaunchKernel: (_f, gx) => {
        launched.push(gx);
        return 0;
      },
    };
    const values = new Int32Array(2);
    a.launch(1, 0, 1, 1, 1, 1, 1, 1, 0, values, 0, 0);
    drain(reader, calls);
    for (const gx of [2, 3, 4]) a.launch(1, 0, gx, 1, 1, 1, 1, 1, 0, values, 0, 0);
    b.launch(1, 0, 100, 1, 1, 1, 1, 1, 0, values, 0, 0);
    a.cancelPending();
    a.launch(1, 0, 5, 1, 1, 1, 1, 1, 0, values, 0, 0);
    drain(reader, calls);
    expect(launched).toEqual([1, 100, 5]);
    expect(a.pending()).toBe(false);
    expect(Atomics.load(new Int32Array(ring.control), CANCELLED)).toBe(3);
  });

  it('a refused launch is kept as the stream’s error, the first one only, until taken', () => {
    const ring = createRing(256);
    const slots = createSlots();
    const writer = new Writer(ring);
    const reader = readerOf(ring, slots);
    const a = new IssueAttachment(fakeStream(0x600), 5, writer, slots);
    const b = new IssueAttachment(fakeStream(0x601), 6, writer, slots);
    engine.kernelNames[41] = 'spin<float>';
    const calls: IssuerCalls = {
      cuCtxSetCurrent: () => 0,
      cuStreamQuery: () => 0,
      cuLaunchKernel: (_f, gx) => (gx === 2 ? 1 : gx === 3 ? 700 : 0),
    };
    const values = new Int32Array(2);
    for (const gx of [1, 2, 3, 4]) a.launch(1, 41, gx, 1, 1, 1, 1, 1, 0, values, 0, 0);
    b.launch(1, 41, 5, 1, 1, 1, 1, 1, 0, values, 0, 0);
    expect(drain(reader, calls)).toBe(5);
    expect(b.takeError()).toBeNull();
    const error = a.takeError();
    expect(error).toBeInstanceOf(CudaError);
    expect((error as CudaError).code).toBe(1);
    expect((error as CudaError).call).toMatch(
      /cuLaunchKernel\(spin<float>\) on Stream\(1536\), issued by the issue engine/,
    );
    expect(a.takeError()).toBeNull();
  });

  it('each command’s words are free for the writer as soon as it is issued, not after the whole drain', () => {
    const { ring, slots, writer, reader } = oneRing(1024);
    const a = new IssueAttachment(fakeStream(0x700), 1, writer, slots);
    const control = new Int32Array(ring.control);
    const seen: number[] = [];
    const calls: IssuerCalls = {
      cuCtxSetCurrent: () => 0,
      cuStreamQuery: () => 0,
      cuLaunchKernel: () => {
        seen.push(Atomics.load(control, TAIL));
        return 0;
      },
    };
    const values = new Int32Array(8);
    for (const count of [0, 3, 1, 0]) a.launch(1, 0, 1, 1, 1, 1, 1, 1, 0, values, 0, count);
    expect(drain(reader, calls)).toBe(4);
    // While the n-th launch is made, TAIL is past every launch before it.
    expect(seen).toEqual([0, 20, 46, 68]);
    expect(Atomics.load(control, TAIL)).toBe(88);
  });

  it('the function, stream and context handles reach libcuda whole, for any value below 2^53, the function given as a Number or a BigInt', () => {
    const handle = fc.maxSafeNat().filter((h) => h > 0);
    fc.assert(
      fc.property(handle, handle, handle, fc.boolean(), (fn, stream, context, asBigInt) => {
        const { writer, slots, reader } = oneRing(256);
        const a = new IssueAttachment(fakeStream(stream, BigInt(context)), 2, writer, slots);
        const seen: (number | bigint)[][] = [];
        const calls: IssuerCalls = {
          cuStreamQuery: () => 0,
          cuCtxSetCurrent: (c) => {
            seen.push([c]);
            return 0;
          },
          cuLaunchKernel: (f, _gx, _gy, _gz, _bx, _by, _bz, _shared, s) => {
            seen.push([f, s]);
            return 0;
          },
        };
        a.launch(asBigInt ? BigInt(fn) : fn, 0, 1, 1, 1, 1, 1, 1, 0, new Int32Array(2), 0, 0);
        expect(drain(reader, calls)).toBe(1);
        expect(seen).toEqual([[context], [fn, stream]]);
      }),
    );
  });
});

describe('queries through the ring (one thread)', () => {
  /**
   * A model of the GPU for the property below: each stream has launches issued and launches
   * done; a query of a stream answers done when all its issued launches are done.
   */
  it('any interleaving of launches, waits’ queries, drains, watch rounds and work finishing: a query answers done only once every launch pushed before it has run, and every query is answered or left to the waiter', () => {
    const step = fc.oneof(
      fc.record({ kind: fc.constant('launch' as const), stream: fc.integer({ min: 0, max: 2 }) }),
      fc.record({ kind: fc.constant('ask' as const), stream: fc.integer({ min: 0, max: 2 }) }),
      fc.record({ kind: fc.constant('drain' as const) }),
      fc.record({ kind: fc.constant('round' as const) }),
      fc.record({ kind: fc.constant('finish' as const), stream: fc.integer({ min: 0, max: 2 }) }),
      fc.record({ kind: fc.constant('time' as const), ms: fc.integer({ min: 0, max: 3 }) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 80 }), (steps) => {
        let clock = 0;
        const { slots, writer, reader } = oneRing(256, () => clock);
        const handles = [0x900, 0x901, 0x902];
        const streams = handles.map(
          (h, i) => new IssueAttachment(fakeStream(h), 20 + i, writer, slots),
        );
        // The GPU: launches issued and done per stream.
        const issued = [0, 0, 0];
        const done = [0, 0, 0];
        const calls: IssuerCalls = {
          cuCtxSetCurrent: () => 0,
          cuLaunchKernel: (_f, _gx, _gy, _gz, _bx, _by, _bz, _shared, stream) => {
            issued[handles.indexOf(stream)]!++;
            return 0;
          },
          cuStreamQuery: (stream) => {
            const i = handles.indexOf(stream);
            return done[i] === issued[i] ? 0 : 600;
          },
        };
        // Per ticket: the stream's launches pushed before it was asked.
        const asked: { stream: number; ticket: number; before: number }[] = [];
        const pushed = [0, 0, 0];
        const values = new Int32Array(2);
        const check = () => {
          for (const q of asked) {
            const answer = streams[q.stream]!.answer(q.ticket);
            // Answered done: at least the launches pushed before it were done when it was.
            if (answer === 1) expect(done[q.stream]).toBeGreaterThanOrEqual(q.before);
          }
        };
        for (const s of steps) {
          if (s.kind === 'launch') {
            streams[s.stream]!.launch(1, 0, 1, 1, 1, 1, 1, 1, 0, values, 0, 0);
            pushed[s.stream]!++;
          } else if (s.kind === 'ask') {
            const ticket = streams[s.stream]!.requestQuery();
            asked.push({ stream: s.stream, ticket, before: pushed[s.stream]! });
          } else if (s.kind === 'drain') drain(reader, calls);
          else if (s.kind === 'round') watchRound(reader, calls);
          else if (s.kind === 'finish') done[s.stream] = issued[s.stream]!;
          else clock += s.ms;
          check();
        }
        // Everything issued, then past the watch's limit: each query answered or left.
        drain(reader, calls);
        clock += 3;
        watchRound(reader, calls);
        check();
        for (const q of asked) expect(streams[q.stream]!.answer(q.ticket)).not.toBe(0);
        expect(reader.watch.count).toBe(0);
        for (const [i, stream] of streams.entries()) {
          expect(stream.pending()).toBe(false);
          expect(Atomics.load(reader.issued, ((20 + i) << SLOT_SHIFT) + WATCHING)).toBe(0);
        }
      }),
    );
  });

  it('a query that fails is the stream’s error, naming cuStreamQuery and the stream; a newer ticket’s answer answers the older one', () => {
    const { slots, writer, reader } = oneRing(256);
    const a = new IssueAttachment(fakeStream(0x910), 30, writer, slots);
    const b = new IssueAttachment(fakeStream(0x911), 31, writer, slots);
    let answerOfA = 600;
    const queried: number[] = [];
    const calls = queryCalls(queried, (stream) => (stream === 0x910 ? answerOfA : 0));
    const first = a.requestQuery();
    const other = b.requestQuery();
    drain(reader, calls);
    expect([a.answer(first), b.answer(other)]).toEqual([0, 1]);
    expect(reader.watch.count).toBe(1);
    const second = a.requestQuery();
    drain(reader, calls);
    answerOfA = 700;
    expect(watchRound(reader, calls)).toBe(0);
    expect([a.answer(first), a.answer(second)]).toEqual([1, 1]);
    expect(queried).toEqual([0x910, 0x911, 0x910, 0x910]);
    const error = a.takeError();
    expect(error).toBeInstanceOf(CudaError);
    expect((error as CudaError).code).toBe(700);
    expect((error as CudaError).call).toMatch(
      /cuStreamQuery on Stream\(2320\), made by the issue engine/,
    );
    expect(b.takeError()).toBeNull();
  });

  it('a stream given up (a new generation) is neither queried nor answered any more', () => {
    const { slots, writer, reader } = oneRing(256);
    const a = new IssueAttachment(fakeStream(0x920), 40, writer, slots);
    const queried: number[] = [];
    const calls = queryCalls(queried, () => 600);
    const watched = a.requestQuery();
    drain(reader, calls);
    const queued = a.requestQuery();
    // The stream goes while one query is watched and one is in the ring: the next generation.
    const words = new Int32Array(slots.issued);
    Atomics.add(words, (40 << SLOT_SHIFT) + GENERATION, 1);
    drain(reader, calls);
    watchRound(reader, calls);
    expect(queried).toEqual([0x920]);
    expect(reader.watch.count).toBe(0);
    expect(Atomics.load(words, (40 << SLOT_SHIFT) + WATCHING)).toBe(0);
    expect([a.answer(watched), a.answer(queued)]).toEqual([0, 0]);
  });
});

// Real issuer threads with the double of libcuda.
const DOUBLE = fileURLToPath(new URL('../../test/issuer-calls-double.mjs', import.meta.url));
const STOP_DOUBLE = fileURLToPath(new URL('../../test/issuer-stop-double.mjs', import.meta.url));

const context = new Context({ ordinal: 0 } as unknown as Device, 77n);
const fakeModule = { context, disposed: false } as unknown as Module;
const kernel = new Kernel(fakeModule, 'sequence', 0x4242n, ['float32*', 'int32']);
const threeArguments = new Kernel(fakeModule, 'sequence3', 0x4243n, ['float32*', 'int32', 'int32']);

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

/** The double's log: [stream, gx, gy, params-was-null, thread] per launch. */
function entries(log: SharedArrayBuffer) {
  const words = new Int32Array(log);
  const used = Atomics.load(words, 0);
  const out: { stream: number; gx: number; gy: number; thread: number }[] = [];
  for (let at = 1; at < used + 1; at += 5) {
    out.push({
      stream: words[at]!,
      gx: words[at + 1]!,
      gy: words[at + 2]!,
      thread: words[at + 4]!,
    });
  }
  return out;
}

describe('the engine with issuer threads (libcuda a double)', () => {
  afterEach(async () => {
    await stopIssueEngine();
  });

  it('closes the launch gate while it runs (every launch takes the full path to it) and opens it after', async () => {
    const before = launchGate.engines;
    startIssueEngineWith({ issuers: 1, spinMicroseconds: 0 }, DOUBLE, new SharedArrayBuffer(64));
    expect([launchGate.engines, launchGate.open]).toEqual([before + 1, null]);
    await stopIssueEngine({ keepThreads: true });
    expect(launchGate.engines).toBe(before);
    // Taken up again from the kept threads: closed again, and open once stopped for good.
    startIssueEngineWith({ issuers: 1, spinMicroseconds: 0 }, DOUBLE, new SharedArrayBuffer(64));
    expect([launchGate.engines, launchGate.open]).toEqual([before + 1, null]);
    await stopIssueEngine();
    expect(launchGate.engines).toBe(before);
    expect(launchGate.open).toBe(before === 0 && !launchGate.observed ? launchGate.current : null);
  });

  it('64 streams x 1,000 launches from launch(): each stream’s order holds, no gap, across 4 issuers', async () => {
    const log = new SharedArrayBuffer(4 * (1 + 5 * 64_000 + 16));
    startIssueEngineWith({ issuers: 4, ringWords: 4096, spinMicroseconds: 20 }, DOUBLE, log);
    const streams = Array.from({ length: 64 }, (_, i) => Stream.create({ context, name: `s${i}` }));
    const x = fakeArray(0x7000);
    for (let round = 1; round <= 1000; round++) {
      for (const stream of streams) launch(kernel, { grid: round, block: 32, stream }, x, round);
    }
    expect(fake.state.direct).toEqual([]);
    // Reading a stream's handle waits until its launches are issued.
    for (const stream of streams) void stream.ffiHandle;
    const all = entries(log);
    expect(all.length).toBe(64_000);
    const threads = new Set(all.map((e) => e.thread));
    expect(threads.size).toBe(4);
    for (const stream of streams) {
      const mine = all.filter((e) => e.stream === Number(stream.rawHandle));
      expect(mine.map((e) => e.gx)).toEqual(Array.from({ length: 1000 }, (_, i) => i + 1));
      // One stream, one issuer.
      expect(new Set(mine.map((e) => e.thread)).size).toBe(1);
    }
    const stats = issueEngineStatistics();
    expect(stats.launches).toBe(64_000);
    expect(stats.streams).toBe(64);
    // The ring (4,096 words, 16 streams' launches each) fills and is waited for; the fences
    // above that found launches not issued yet waited too.
    expect(stats.roomWaits).toBeGreaterThan(0);
    expect(stats.longestWaitMs).toBeLessThanOrEqual(stats.waitMs);
    for (const stream of streams) stream.dispose();
    expect(issueEngineStatistics().streams).toBe(0);
  });

  it('a refused launch surfaces at the stream’s next query or fence, naming the kernel; others are unaffected', async () => {
    const log = new SharedArrayBuffer(4 * (1 + 5 * 100));
    startIssueEngineWith({ issuers: 2, spinMicroseconds: 0 }, DOUBLE, log);
    const bad = Stream.create({ context, name: 'bad' });
    const good = Stream.create({ context, name: 'good' });
    const x = fakeArray(0x7000);
    launch(kernel, { grid: [1, 13], block: 32, stream: bad }, x, 1); // gy 13: the double refuses it
    launch(kernel, { grid: 2, block: 32, stream: bad }, x, 2);
    launch(kernel, { grid: 1, block: 32, stream: good }, x, 1);
    expect(good.query()).toBe(true);
    const error = (() => {
      try {
        bad.fence();
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(CudaError);
    expect((error as CudaError).call).toMatch(/cuLaunchKernel\(sequence\) on Stream\(bad\)/);
    expect(bad.query()).toBe(true); // reported once
    expect(
      entries(log)
        .filter((e) => e.stream === Number(bad.rawHandle))
        .map((e) => e.gx),
    ).toEqual([1, 2]);
    bad.dispose();
    good.dispose();
  });

  it('an idle engine sleeps, and is woken by the next launch; stop issues everything first', async () => {
    const log = new SharedArrayBuffer(4 * (1 + 5 * 100));
    startIssueEngineWith({ issuers: 1, spinMicroseconds: 0 }, DOUBLE, log);
    const stream = Stream.create({ context, name: 'sleepy' });
    const x = fakeArray(0x7000);
    // The issuer is up once a launch went through; then it has nothing to do.
    launch(kernel, { grid: 6, block: 32, stream }, x, 6);
    stream.fence();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const wakeUps = issueEngineStatistics().wakeUps;
    const cpuBefore = process.cpuUsage();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const cpu = process.cpuUsage(cpuBefore);
    // The whole process's CPU time over 500 ms idle: far from a busy core (500 ms).
    expect((cpu.user + cpu.system) / 1000).toBeLessThan(150);
    launch(kernel, { grid: 7, block: 32, stream }, x, 7);
    expect(issueEngineStatistics().wakeUps).toBe(wakeUps + 1);
    launch(kernel, { grid: 8, block: 32, stream }, x, 8);
    // Three launches never fill a ring (the counts start from zero at each start).
    expect(issueEngineStatistics().roomWaits).toBe(0);
    await stopIssueEngine();
    expect(entries(log).map((e) => e.gx)).toEqual([6, 7, 8]);
    expect(stream.issue).toBeNull();
    launch(kernel, { grid: 9, block: 32, stream }, x, 9);
    expect(fake.state.direct).toEqual(['cuLaunchKernelEx']);
    stream.dispose();
  });

  it('a full ring waits for its issuer: 20,000 launches through a ring of 1,024 words', () => {
    const log = new SharedArrayBuffer(4 * (1 + 5 * 20_000));
    startIssueEngineWith({ issuers: 1, ringWords: 1024, spinMicroseconds: 0 }, DOUBLE, log);
    const stream = Stream.create({ context, name: 'full' });
    const x = fakeArray(0x7000);
    const t0 = performance.now();
    for (let i = 1; i <= 20_000; i++) launch(kernel, { grid: i, block: 32, stream }, x, i);
    stream.fence();
    const elapsed = performance.now() - t0;
    expect(entries(log).map((e) => e.gx)).toEqual(Array.from({ length: 20_000 }, (_, i) => i + 1));
    // The waits are counted: 20,000 launches of 24 words cannot pass 1,024 words without many,
    // and the time they held this thread lies within the loop's.
    const stats = issueEngineStatistics();
    expect(stats.roomWaits).toBeGreaterThan(100);
    expect(stats.waitMs).toBeGreaterThan(0);
    expect(stats.waitMs).toBeLessThanOrEqual(elapsed);
    expect(stats.longestWaitMs).toBeGreaterThan(0);
    expect(stats.longestWaitMs).toBeLessThanOrEqual(stats.waitMs);
    stream.dispose();
  });

  it('a fence counts the time it held the thread; one inside a blocking Stream.synchronize() does not (that call holds it until the work is done anyway)', () => {
    const log = new SharedArrayBuffer(4 * (1 + 5 * 100));
    startIssueEngineWith({ issuers: 1, spinMicroseconds: 0 }, DOUBLE, log);
    const stream = Stream.create({ context, name: 'slow' });
    const x = fakeArray(0x7000);
    launch(kernel, { grid: 1, block: 32, stream }, x, 1);
    stream.fence(); // the issuer is up (its start is the longest wait so far)
    const before = issueEngineStatistics();
    launch(kernel, { grid: [2, 17], block: 32, stream }, x, 2); // 30 ms on the issuer
    stream.synchronize();
    const blocking = issueEngineStatistics();
    expect(blocking.fenceWaits).toBe(before.fenceWaits + 1);
    expect(blocking.waitMs).toBe(before.waitMs);
    expect(blocking.longestWaitMs).toBe(before.longestWaitMs);
    launch(kernel, { grid: [3, 17], block: 32, stream }, x, 3);
    const t0 = performance.now();
    stream.fence();
    const held = performance.now() - t0;
    const fenced = issueEngineStatistics();
    expect(fenced.fenceWaits).toBe(before.fenceWaits + 2);
    expect(fenced.waitMs - blocking.waitMs).toBeGreaterThan(20);
    expect(fenced.waitMs - blocking.waitMs).toBeLessThanOrEqual(held);
    expect(entries(log).map((e) => e.gx)).toEqual([1, 2, 3]);
    stream.dispose();
  });

  it('stopped with keepThreads, the same engine starts again on its sleeping threads', async () => {
    const log = new SharedArrayBuffer(4 * (1 + 5 * 400));
    startIssueEngineWith({ issuers: 2, spinMicroseconds: 0 }, DOUBLE, log);
    const x = fakeArray(0x7000);
    const run = (first: number) => {
      const streams = [0, 1].map((i) => Stream.create({ context, name: `kept${first}-${i}` }));
      for (let i = 0; i < 50; i++) {
        for (const stream of streams) launch(kernel, { grid: first + i, block: 32, stream }, x, i);
      }
      for (const stream of streams) stream.fence();
      const mine = entries(log).filter((e) =>
        streams.some((s) => Number(s.rawHandle) === e.stream),
      );
      for (const stream of streams) stream.dispose();
      return mine;
    };
    const before = run(1);
    await stopIssueEngine({ keepThreads: true });
    expect(issueEngineStatistics().running).toBe(false);
    const started = performance.now();
    startIssueEngineWith({ issuers: 2, spinMicroseconds: 0 }, DOUBLE, log);
    const after = run(1001);
    const restartMs = performance.now() - started;
    // The same two threads, and each stream's launches in order.
    expect(new Set(after.map((e) => e.thread))).toEqual(new Set(before.map((e) => e.thread)));
    for (const stream of new Set(after.map((e) => e.stream))) {
      const gx = after.filter((e) => e.stream === stream).map((e) => e.gx);
      expect(gx).toEqual(Array.from({ length: 50 }, (_, i) => 1001 + i));
    }
    expect(restartMs).toBeLessThan(1000);
    // Other options: new threads.
    await stopIssueEngine({ keepThreads: true });
    startIssueEngineWith({ issuers: 1, spinMicroseconds: 0 }, DOUBLE, log);
    const other = run(2001);
    expect(new Set(other.map((e) => e.thread)).size).toBe(1);
    expect(before.some((e) => e.thread === other[0]!.thread)).toBe(false);
  });

  it('checks its options and refuses a second start', () => {
    expect(() => startIssueEngineWith({ issuers: 0 }, DOUBLE)).toThrow(/issuers must be/);
    expect(() => startIssueEngineWith({ ringWords: 1000 }, DOUBLE)).toThrow(/power of two/);
    startIssueEngineWith({ issuers: 1 }, DOUBLE, new SharedArrayBuffer(64));
    expect(() => startIssueEngineWith({ issuers: 1 }, DOUBLE)).toThrow(/runs already/);
  });

  it('an issuer that is about to sleep when the engine stops sees the stop and exits promptly (no lost wake-up)', async () => {
    const words = new SharedArrayBuffer(16);
    const w = new Int32Array(words);
    startIssueEngineWith({ issuers: 1, spinMicroseconds: 0 }, STOP_DOUBLE, words);
    const stream = Stream.create({ context, name: 'stopping' });
    launch(kernel, { grid: 1, block: 32, stream }, fakeArray(0x7000), 1);
    stream.fence();
    // The issuer has checked STOP (not set) and holds before its Atomics.wait on HEAD.
    expect(Atomics.wait(w, 1, 0, 5_000)).not.toBe('timed-out');
    const started = performance.now();
    const stopped = stopIssueEngine();
    // Now let it go to sleep: the stop must have changed what it waits on.
    Atomics.store(w, 2, 1);
    Atomics.notify(w, 2);
    await stopped;
    const ms = performance.now() - started;
    console.log(`[issue engine] issuer asleep at stop exited in ${ms.toFixed(1)} ms`);
    // Without the wake-up the issuer sleeps until the stop's 5 s terminate.
    expect(ms).toBeLessThan(2_000);
    expect(Atomics.load(w, 0)).toBe(1);
    stream.dispose();
  }, 15_000);

  it('an issuer thread that dies is noticed by a fence waiting for it: a CudaError naming the failure, at once', async () => {
    startIssueEngineWith(
      { issuers: 1, spinMicroseconds: 0 },
      STOP_DOUBLE,
      new SharedArrayBuffer(16),
    );
    const stream = Stream.create({ context, name: 'orphan' });
    const x = fakeArray(0x7000);
    launch(kernel, { grid: [1, 66], block: 32, stream }, x, 1); // gy 66: the double throws
    launch(kernel, { grid: 2, block: 32, stream }, x, 2);
    const started = performance.now();
    const error = (() => {
      try {
        stream.fence();
      } catch (e) {
        return e;
      }
    })();
    const ms = performance.now() - started;
    expect(error).toBeInstanceOf(CudaError);
    expect((error as Error).message).toMatch(/issuer thread failed.*the double died on purpose/);
    expect(ms).toBeLessThan(5_000);
    // Every later fence throws the same, and the statistics name it.
    expect(() => stream.fence()).toThrow(/the double died on purpose/);
    expect(issueEngineStatistics().failure).toMatch(/the double died on purpose/);
    // Stopping tears the engine down and reports the launches it could not issue.
    await expect(stopIssueEngine()).rejects.toThrow(/the double died on purpose/);
    expect(issueEngineStatistics().running).toBe(false);
    expect(stream.issue).toBeNull();
    stream.dispose();
  });

  it('an issuer thread that exits is noticed by a push waiting for room in its full ring', async () => {
    startIssueEngineWith(
      { issuers: 1, ringWords: 1024, spinMicroseconds: 0 },
      STOP_DOUBLE,
      new SharedArrayBuffer(16),
    );
    const stream = Stream.create({ context, name: 'full-orphan' });
    const x = fakeArray(0x7000);
    launch(kernel, { grid: [1, 67], block: 32, stream }, x, 1); // gy 67: the double exits
    const started = performance.now();
    const error = (() => {
      try {
        // A 1,024-word ring holds fewer than 40 launches: one of these waits for room.
        for (let i = 0; i < 200; i++) launch(kernel, { grid: 2, block: 32, stream }, x, 2);
      } catch (e) {
        return e;
      }
    })();
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(error).toBeInstanceOf(CudaError);
    expect((error as Error).message).toMatch(/issuer thread .*exited with code 3/);
    await expect(stopIssueEngine()).rejects.toThrow(/exited with code 3/);
    stream.dispose();
  });

  it('a wait whose query waits for room in the full ring of an issuer that exited is rejected with that failure', async () => {
    startIssueEngineWith(
      { issuers: 1, ringWords: 1024, spinMicroseconds: 0 },
      STOP_DOUBLE,
      new SharedArrayBuffer(16),
    );
    const stream = Stream.create({ context, name: 'query-orphan' });
    const x = fakeArray(0x7000);
    // 37 launches of 24 words (the first exits the issuer: nothing is taken from the ring) and
    // 5 of 26 fill 1,018 of its 1,024 words without a wait: the query's 10 do not fit.
    launch(kernel, { grid: [1, 67], block: 32, stream }, x, 1); // gy 67: the double exits
    for (let i = 0; i < 36; i++) launch(kernel, { grid: 2, block: 32, stream }, x, 2);
    for (let i = 0; i < 5; i++) launch(threeArguments, { grid: 2, block: 32, stream }, x, 2, 3);
    expect(issueEngineStatistics().roomWaits).toBe(0);
    // The spin pass runs before the event loop hears of the exit: the query's wait for room
    // finds the issuer gone.
    const error = await waitForStream(stream).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(CudaError);
    expect((error as Error).message).toMatch(/issuer thread .*exited with code 3/);
    expect(issueEngineStatistics().roomWaits).toBe(1);
    await expect(stopIssueEngine()).rejects.toThrow(/exited with code 3/);
    stream.dispose();
  });

  it('two wrappers of one CUstream share one attachment (one issuer, one order) until the last is disposed', async () => {
    const log = new SharedArrayBuffer(4 * (1 + 5 * 1000));
    startIssueEngineWith({ issuers: 4, spinMicroseconds: 0 }, DOUBLE, log);
    const x = fakeArray(0x7000);
    // Other streams first, so that a second attachment would go to another issuer.
    const others = [0, 1, 2].map((i) => Stream.create({ context, name: `other${i}` }));
    for (const stream of others) launch(kernel, { grid: 1, block: 32, stream }, x, 1);
    const a = Stream.wrap(0xabc0n, context, 'a');
    const b = Stream.wrap(0xabc0n, context, 'b');
    for (let i = 1; i <= 100; i++) {
      launch(kernel, { grid: i, block: 32, stream: i % 2 === 0 ? a : b }, x, i);
    }
    expect(a.issue).not.toBeNull();
    expect(b.issue).toBe(a.issue);
    expect(issueEngineStatistics().streams).toBe(4);
    a.fence();
    const mine = entries(log).filter((e) => e.stream === 0xabc0);
    expect(mine.map((e) => e.gx)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(new Set(mine.map((e) => e.thread)).size).toBe(1);
    // Disposing one wrapper leaves the other attached; the last one frees the slot.
    a.dispose();
    expect(b.issue).not.toBeNull();
    launch(kernel, { grid: 101, block: 32, stream: b }, x, 101);
    b.fence();
    expect(issueEngineStatistics().streams).toBe(4);
    b.dispose();
    expect(issueEngineStatistics().streams).toBe(3);
    // A new wrapper of the handle gets a fresh attachment.
    const c = Stream.wrap(0xabc0n, context, 'c');
    launch(kernel, { grid: 102, block: 32, stream: c }, x, 102);
    c.fence();
    expect(
      entries(log)
        .filter((e) => e.stream === 0xabc0)
        .map((e) => e.gx)
        .slice(-2),
    ).toEqual([101, 102]);
    await stopIssueEngine();
    expect([a, b, c].map((s) => s.issue)).toEqual([null, null, null]);
    for (const stream of [c, ...others]) stream.dispose();
  });

  it('a stream dropped without dispose() is not kept alive by the engine: collected, its launches issued and its slot freed', async () => {
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const log = new SharedArrayBuffer(4 * (1 + 5 * 100));
    startIssueEngineWith({ issuers: 1, spinMicroseconds: 0 }, DOUBLE, log);
    const x = fakeArray(0x7000);
    const made: { ref?: WeakRef<Stream>; handle?: number } = {};
    (function dropped() {
      const stream = Stream.create({ context, name: 'dropped' });
      for (let i = 1; i <= 10; i++) launch(kernel, { grid: i, block: 32, stream }, x, i);
      made.ref = new WeakRef(stream);
      made.handle = Number(stream.rawHandle);
    })();
    expect(issueEngineStatistics().streams).toBe(1);
    let freed = false;
    for (let attempt = 0; attempt < 50 && !freed; attempt++) {
      gc();
      await new Promise((resolve) => setTimeout(resolve, 5));
      freed = issueEngineStatistics().streams === 0;
    }
    expect(freed).toBe(true);
    expect(made.ref!.deref()).toBeUndefined();
    expect(
      entries(log)
        .filter((e) => e.stream === made.handle)
        .map((e) => e.gx),
    ).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it('waits on the engine’s streams make no driver call on the waiting thread: each stream’s issuer queries it after its launches', async () => {
    const log = new SharedArrayBuffer(4 * (1 + 5 * 2000));
    startIssueEngineWith({ issuers: 4, spinMicroseconds: 50 }, DOUBLE, log);
    const streams = Array.from({ length: 16 }, (_, i) => Stream.create({ context, name: `w${i}` }));
    const x = fakeArray(0x7000);
    fake.state.queries = 0;
    fake.state.direct.length = 0;
    for (let round = 1; round <= 3; round++) {
      for (const stream of streams) {
        for (let i = 1; i <= 5; i++) launch(kernel, { grid: i, block: 32, stream }, x, i);
      }
      await Promise.all(streams.map((stream) => waitForStream(stream)));
    }
    expect([fake.state.direct, fake.state.queries]).toEqual([[], 0]);
    for (const stream of streams) {
      const mine = entries(log).filter((e) => e.stream === Number(stream.rawHandle));
      // Per round: its 5 launches, then its issuer's queries: the first not ready (the
      // double's stream runs), the last done.
      let at = 0;
      for (let round = 1; round <= 3; round++) {
        expect(mine.slice(at, at + 5).map((e) => e.gx)).toEqual([1, 2, 3, 4, 5]);
        at += 5;
        const queries = [];
        while (at < mine.length && mine[at]!.gx === -1) queries.push(mine[at++]!.gy);
        expect(queries.length).toBeGreaterThanOrEqual(2);
        expect(queries[0]).toBe(600);
        expect(queries.at(-1)).toBe(0);
      }
      expect(at).toBe(mine.length);
    }
    const stats = issueEngineStatistics();
    expect(stats.queries).toBe(48);
    expect(stats.queriesLeft).toBe(0);
    for (const stream of streams) stream.dispose();
  });

  it('a stream whose work failed rejects its wait with a CudaError naming cuStreamQuery and the stream; other waits resolve', async () => {
    const log = new SharedArrayBuffer(4 * (1 + 5 * 200));
    startIssueEngineWith({ issuers: 2, spinMicroseconds: 0 }, DOUBLE, log);
    const bad = Stream.create({ context, name: 'faulty' });
    const good = Stream.create({ context, name: 'fine' });
    const x = fakeArray(0x7000);
    launch(kernel, { grid: [1, 15], block: 32, stream: bad }, x, 1); // gy 15: its queries fail
    launch(kernel, { grid: 1, block: 32, stream: good }, x, 1);
    const [failed, fine] = await Promise.allSettled([waitForStream(bad), waitForStream(good)]);
    expect(fine.status).toBe('fulfilled');
    expect(failed.status).toBe('rejected');
    const error = (failed as PromiseRejectedResult).reason;
    expect(error).toBeInstanceOf(CudaError);
    expect((error as CudaError).code).toBe(700);
    expect((error as CudaError).call).toMatch(
      /cuStreamQuery on Stream\(faulty\), made by the issue engine/,
    );
    bad.dispose();
    good.dispose();
  });

  it('a stream not done within the issuer’s watch is left to the waiting thread, which queries it as without the engine', async () => {
    const log = new SharedArrayBuffer(4 * (1 + 5 * 100_000));
    startIssueEngineWith({ issuers: 1, spinMicroseconds: 0, watchMicroseconds: 1000 }, DOUBLE, log);
    const stuck = Stream.create({ context, name: 'stuck' });
    const x = fakeArray(0x7000);
    launch(kernel, { grid: [1, 14], block: 32, stream: stuck }, x, 1); // gy 14: never ready
    fake.state.queries = 0;
    // The issuer answers "not ready" for 1 ms, then leaves it; this thread's query (the main
    // thread's double answers done) settles the wait.
    await waitForStream(stuck);
    expect(fake.state.queries).toBeGreaterThan(0);
    const stats = issueEngineStatistics();
    expect([stats.queries, stats.queriesLeft]).toEqual([1, 1]);
    const queries = entries(log).filter((e) => e.gx === -1);
    expect(queries.length).toBeGreaterThan(1);
    expect(new Set(queries.map((e) => e.gy))).toEqual(new Set([600]));
    stuck.dispose();
  });

  /**
   * An engine of one issuer that watches for 10 s, and a stream it watches: a launch that the
   * double makes never ready, a wait on it, and the issuer's queries of it seen in the log.
   */
  async function watchedStream(name: string) {
    const log = new SharedArrayBuffer(4 * (1 + 5 * 1_000_000));
    startIssueEngineWith(
      { issuers: 1, spinMicroseconds: 0, watchMicroseconds: 10_000_000 },
      DOUBLE,
      log,
    );
    const stream = Stream.create({ context, name });
    launch(kernel, { grid: [1, 14], block: 32, stream }, fakeArray(0x7000), 1);
    fake.state.queries = 0;
    const waited = waitForStream(stream);
    const started = performance.now();
    while (entries(log).filter((e) => e.gx === -1).length < 3) {
      expect(performance.now() - started).toBeLessThan(5_000);
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    return { log, stream, handle: Number(stream.rawHandle), waited };
  }

  /** The log's entries of `handle` from `after` on, 20 ms later. */
  async function entriesAfter(log: SharedArrayBuffer, after: number, handle: number) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    return entries(log)
      .slice(after)
      .filter((e) => e.stream === handle);
  }

  it('a stream disposed while its issuer watches it is forgotten first: no query of it after dispose() returns', async () => {
    const { log, stream, handle, waited } = await watchedStream('watched');
    stream.dispose();
    const after = entries(log).length;
    await waited; // a disposed stream's wait ends: its dispose drained it
    expect(await entriesAfter(log, after, handle)).toEqual([]);
    expect(issueEngineStatistics().streams).toBe(0);
  });

  it('before a capture (quiesceIssue) the issuer stops querying the stream; a wait it watched is left to the waiting thread', async () => {
    const { log, stream, handle, waited } = await watchedStream('to-capture');
    stream.quiesceIssue();
    const after = entries(log).length;
    await waited; // this thread's query (the main thread's double answers done)
    expect(fake.state.queries).toBeGreaterThan(0);
    expect(issueEngineStatistics().queriesLeft).toBe(1);
    expect(await entriesAfter(log, after, handle)).toEqual([]);
    stream.dispose();
  });

  it('queriesOnIssuers: false leaves every wait’s queries to the waiting thread', async () => {
    const log = new SharedArrayBuffer(4 * (1 + 5 * 100));
    startIssueEngineWith({ issuers: 1, spinMicroseconds: 0, queriesOnIssuers: false }, DOUBLE, log);
    const stream = Stream.create({ context, name: 'callers' });
    launch(kernel, { grid: 1, block: 32, stream }, fakeArray(0x7000), 1);
    fake.state.queries = 0;
    await waitForStream(stream);
    expect(fake.state.queries).toBe(1);
    expect(entries(log).filter((e) => e.gx === -1)).toEqual([]);
    expect(issueEngineStatistics().queries).toBe(0);
    stream.dispose();
  });

  it('checks the query options', () => {
    expect(() => startIssueEngineWith({ watchMicroseconds: -1 }, DOUBLE)).toThrow(
      /watchMicroseconds must be a finite number >= 0, got -1/,
    );
    expect(() =>
      startIssueEngineWith({ queriesOnIssuers: 'yes' as unknown as boolean }, DOUBLE),
    ).toThrow(/queriesOnIssuers must be a boolean, got yes/);
  });
});
