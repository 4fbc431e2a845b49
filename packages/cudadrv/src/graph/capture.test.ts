import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

// Stream capture and graph replay against a scripted driver: which native calls a capture,
// its allocations, frees and hand-offs, and a replay make, on which stream.
const fake = vi.hoisted(() => {
  const state = {
    calls: [] as string[],
    nextAddress: 0x10_0000,
    nextHandle: 100,
    nextEvent: 5000,
    nextGraph: 9000,
    /** Streams in capture mode, as the driver sees them. */
    capturing: new Set<number>(),
    /** Each capturing stream's capture id (a stream that joined a capture has its origin's). */
    captureIds: new Map<number, number>(),
    nextCaptureId: 1,
    /** What cuStreamEndCapture returns next (0: success). */
    endResult: 0,
    /** While true, cuStreamEndCapture leaves the stream in capture mode (a driver that fails). */
    endStuck: false,
    /** What cuGraphExecUpdate_v2 returns next, and the CUgraphExecUpdateResult it reports. */
    updateResult: 0,
    updateDetail: 0,
    nodes: 20,
    /** Events cuEventQuery was asked about. */
    queried: [] as string[],
  };
  const name = (handle: unknown) => `s${Number(handle)}`;
  const lastAllocation = { value: 0 };
  /** A call on a capturing stream is recorded with a `captured` prefix. */
  const on = (stream: unknown) =>
    state.capturing.has(Number(stream)) ? `${name(stream)} (captured)` : name(stream);
  const api = {
    cuStreamCreateWithPriority(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextHandle++);
      return 0;
    },
    cuStreamSynchronize: () => 0,
    cuStreamQuery: () => 0,
    cuStreamDestroy_v2: () => 0,
    cuCtxSetCurrent: () => 0,
    cuCtxSynchronize() {
      state.calls.push('cuCtxSynchronize');
      return 0;
    },
    cuEventCreate(out: (bigint | null)[]) {
      out[0] = BigInt(state.nextEvent++);
      return 0;
    },
    cuEventDestroy_v2: () => 0,
    cuEventRecord(event: unknown, stream: unknown) {
      state.calls.push(`record e${Number(event)} on ${on(stream)}`);
      return 0;
    },
    cuStreamWaitEvent(stream: unknown, event: unknown, flags: number) {
      state.calls.push(`wait ${on(stream)} for e${Number(event)}${flags ? ' (external)' : ''}`);
      return 0;
    },
    cuMemAllocAsync(_out: unknown, bytes: number, stream: unknown) {
      state.calls.push(`alloc ${bytes} on ${on(stream)}`);
      lastAllocation.value = state.nextAddress;
      state.nextAddress += 0x1_0000;
      return 0;
    },
    cuMemFreeAsync(address: unknown, stream: unknown) {
      state.calls.push(`free 0x${Number(address).toString(16)} on ${on(stream)}`);
      return 0;
    },
    cuMemPoolTrimTo: () => 0,
    /** Polled events: all complete. */
    cuEventQuery(event: unknown) {
      state.queried.push(`e${Number(event)}`);
      return 0;
    },
  };
  const graphApi = {
    cuStreamBeginCapture_v2(stream: unknown, mode: number) {
      state.calls.push(`begin capture ${name(stream)} mode ${mode}`);
      state.capturing.add(Number(stream));
      state.captureIds.set(Number(stream), state.nextCaptureId++);
      return 0;
    },
    cuStreamGetCaptureInfo_v3(stream: unknown, status: number[], id: number[]) {
      state.calls.push(`capture info ${name(stream)}`);
      status[0] = state.capturing.has(Number(stream)) ? 1 : 0;
      id[0] = state.captureIds.get(Number(stream)) ?? 0;
      return 0;
    },
    cuStreamIsCapturing(stream: unknown, status: number[]) {
      state.calls.push(`is capturing ${name(stream)}`);
      status[0] = state.capturing.has(Number(stream)) ? 1 : 0;
      return 0;
    },
    cuStreamEndCapture(stream: unknown, out: (bigint | null)[]) {
      const id = state.captureIds.get(Number(stream));
      const origin = [...state.captureIds].find(([, other]) => other === id)?.[0];
      if (origin !== Number(stream)) {
        // Not the stream that began it: the driver invalidates the capture.
        state.calls.push(`end capture ${name(stream)} (unmatched)`);
        out[0] = null;
        return 901; // CUDA_ERROR_STREAM_CAPTURE_UNMATCHED
      }
      if (!state.endStuck) {
        // The origin and every stream that joined its capture leave capture mode.
        for (const [joined, other] of [...state.captureIds]) {
          if (other !== id) continue;
          state.capturing.delete(joined);
          state.captureIds.delete(joined);
        }
      }
      const result = state.endResult;
      state.endResult = 0;
      state.calls.push(`end capture ${name(stream)}`);
      out[0] = result === 0 ? BigInt(state.nextGraph++) : null;
      return result;
    },
    cuGraphGetNodes(_graph: unknown, _nodes: unknown, count: number[]) {
      count[0] = state.nodes;
      return 0;
    },
    cuGraphInstantiateWithFlags(out: (bigint | null)[], graph: unknown, flags: number) {
      state.calls.push(`instantiate g${Number(graph)} flags ${flags}`);
      out[0] = BigInt(Number(graph) + 100_000);
      return 0;
    },
    cuGraphLaunch(exec: unknown, stream: unknown) {
      state.calls.push(`launch x${Number(exec)} on ${on(stream)}`);
      return 0;
    },
    cuGraphExecUpdate_v2(exec: unknown, graph: unknown) {
      state.calls.push(`update x${Number(exec)} from g${Number(graph)}`);
      // The CUgraphExecUpdateResultInfo's result, in the scratch arena.
      arenaWords[0] = state.updateDetail;
      const result = state.updateResult;
      state.updateResult = 0;
      return result;
    },
    cuGraphDestroy(graph: unknown) {
      state.calls.push(`destroy g${Number(graph)}`);
      return 0;
    },
    cuGraphExecDestroy(exec: unknown) {
      state.calls.push(`destroy x${Number(exec)}`);
      return 0;
    },
  };
  const arenaWords = new Uint32Array(16);
  return { state, api, graphApi, lastAllocation, arenaWords };
});

vi.mock('../driver.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../driver.js')>();
  class Scratch {
    readonly address = 1;
    readonly pointer = 1n;
    readonly u32 = fake.arenaWords;
    readonly i32 = new Int32Array(fake.arenaWords.buffer);
    readAddress(): number {
      return fake.lastAllocation.value;
    }
  }
  const arena = new Scratch();
  return {
    ...original,
    driver: () => fake.api,
    check: (result: number, call: string) => {
      if (result !== 0) throw new Error(`${call} returned ${result}`);
    },
    cudaError: (result: number, call: string) =>
      Object.assign(new Error(`${call}: ${result}`), { code: result, status: `STATUS_${result}` }),
    scratch: () => arena,
  };
});

vi.mock('../ffi/graph.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('../ffi/graph.js')>();
  return { ...original, cudaGraph: () => fake.graphApi };
});

import { Context, type Device } from '../context/device.js';
import { CaptureError, DisposedError } from '../errors.js';
import type { Module } from '../kernel/module.js';
import { cachedBytes } from '../memory/block-cache.js';
import { DeviceBuffer } from '../memory/memory.js';
import { MemoryPool } from '../memory/memory-pool.js';
import { PinnedHostBuffer } from '../memory/transfer.js';
import { beginOperation, setOperationObserver } from '../stream/observer.js';
import { Stream } from '../stream/stream.js';
import { waitForStream } from '../stream/wait.js';
import { StreamCapture } from './capture.js';
import type { Graph } from './graph.js';

const context = new Context({ ordinal: 0 } as unknown as Device, 77n);
const pool = Object.create(MemoryPool.prototype) as MemoryPool;
Object.assign(pool, { context, handle: 5n });
Object.defineProperty(context, 'memoryPool', { value: pool });
const calls = () => fake.state.calls.splice(0);
const s = Stream.create({ context, name: 's' });
const r = Stream.create({ context, name: 'r' });
const other = Stream.create({ context, name: 'other' });
Object.defineProperty(context, 'defaultStream', { value: other });
const [ss, sr, so] = [s, r, other].map((x) => `s${Number(x.handle)}`) as [string, string, string];

beforeEach(() => {
  pool.releaseCached();
  calls();
});

afterEach(() => {
  // A failed test must not leave the next one a capturing stream.
  for (const stream of [s, r, other]) stream.capture?.abort();
});

/** A capture of `s` around `body`, ended into a graph. */
function captured(body: (session: StreamCapture) => void): Graph {
  const session = StreamCapture.begin(s);
  body(session);
  return session.end();
}

describe('StreamCapture', () => {
  it('records the pre-capture event, begins relaxed, and ends into a graph', () => {
    const session = StreamCapture.begin(s);
    expect(s.capturing).toBe(true);
    expect(context.capturingStreams).toBe(1);
    const [record, begin] = calls();
    expect(record).toMatch(new RegExp(`^record e\\d+ on ${ss}$`));
    expect(begin).toBe(`begin capture ${ss} mode 2`);
    const graph = session.end();
    expect(s.capturing).toBe(false);
    expect(context.capturingStreams).toBe(0);
    expect(graph.nodeCount).toBe(20);
    expect(graph.instantiated).toBe(false);
    expect(calls()).toEqual([`end capture ${ss}`]);
    graph.dispose();
  });

  it('refuses a second capture of the same stream', () => {
    const session = StreamCapture.begin(s);
    expect(() => StreamCapture.begin(s)).toThrow(CaptureError);
    session.abort();
    expect(s.capturing).toBe(false);
  });

  it('reports an invalidated capture as a CaptureError and leaves the stream usable', () => {
    const session = StreamCapture.begin(s);
    fake.state.endResult = 901; // CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
    let error: unknown;
    try {
      session.end();
    } catch (thrown) {
      error = thrown;
    }
    expect(CaptureError.isInstance(error)).toBe(true);
    expect((error as CaptureError).code).toBe(901);
    expect((error as Error).message).toMatch(/invalidated.*usable/);
    expect(s.capturing).toBe(false);
    expect(context.capturingStreams).toBe(0);
    expect(s.query()).toBe(true);
  });
});

describe('StreamCapture.endLeftOpen', () => {
  afterEach(() => {
    fake.state.endStuck = false;
    fake.state.capturing.clear();
    fake.state.captureIds.clear();
  });

  it('aborts a session left open: the stream leaves capture, its graph is destroyed', () => {
    const session = StreamCapture.begin(s);
    const allocated = DeviceBuffer.allocate(256, { stream: s });
    calls();
    expect(StreamCapture.endLeftOpen(s)).toBe(session);
    expect(s.capturing).toBe(false);
    expect(session.ended).toBe(true);
    expect(context.capturingStreams).toBe(0);
    expect(fake.state.capturing.has(Number(s.handle))).toBe(false);
    const steps = calls();
    expect(steps[0]).toBe(`end capture ${ss}`);
    expect(steps).toContainEqual(expect.stringMatching(/^destroy g\d+$/));
    expect(steps.at(-1)).toBe(`is capturing ${ss}`);
    // Memory allocated inside the discarded capture never exists.
    expect(() => allocated.address).toThrow();
    // The stream is usable again: a new capture begins.
    StreamCapture.begin(s).abort();
  });

  it('leaves alone a capture the stream joined: only the stream that began a capture ends it', () => {
    const session = StreamCapture.begin(r);
    // s waits on an event recorded in r's capture: it joins that capture.
    fake.state.capturing.add(Number(s.handle));
    fake.state.captureIds.set(Number(s.handle), fake.state.captureIds.get(Number(r.handle))!);
    calls();
    expect(StreamCapture.endLeftOpen(s)).toBe('joined');
    expect(calls().filter((step) => step.startsWith('end capture'))).toEqual([]);
    expect(StreamCapture.isCapturing(s)).toBe(true);
    // r's capture is intact: it ends into a graph, and s leaves capture with it.
    expect(session.ended).toBe(false);
    session.end().dispose();
    expect(StreamCapture.isCapturing(s)).toBe(false);
  });

  it('leaves alone a capture begun through the ffi layer (which stream began it cannot be told)', () => {
    fake.graphApi.cuStreamBeginCapture_v2(s.ffiHandle, 2);
    calls();
    expect(StreamCapture.endLeftOpen(s)).toBe('foreign');
    expect(calls().filter((step) => step.startsWith('end capture'))).toEqual([]);
    expect(fake.state.capturing.has(Number(s.handle))).toBe(true);
    fake.graphApi.cuStreamEndCapture(s.ffiHandle, [null]);
  });

  it('answers null, with one query, for a stream that is not capturing', () => {
    expect(StreamCapture.endLeftOpen(s)).toBe(null);
    expect(calls()).toEqual([`is capturing ${ss}`]);
  });

  it('leaves a wrapped stream’s own captures and a disposed stream alone', () => {
    const wrapped = Stream.wrap(4242n, context, 'wrapped');
    fake.state.capturing.add(4242);
    expect(StreamCapture.endLeftOpen(wrapped)).toBe(null);
    expect(fake.state.capturing.has(4242)).toBe(true);
    const gone = Stream.create({ context, name: 'gone' });
    gone.dispose();
    calls();
    expect(StreamCapture.endLeftOpen(gone)).toBe(null);
    expect(calls()).toEqual([]);
  });

  it('throws a CaptureError when the stream still captures afterwards', () => {
    StreamCapture.begin(s);
    fake.state.endStuck = true;
    const error = (() => {
      try {
        StreamCapture.endLeftOpen(s);
      } catch (caught) {
        return caught;
      }
    })();
    expect(error).toBeInstanceOf(CaptureError);
    expect((error as Error).message).toMatch(/could not be ended/);
  });
});

describe('memory inside a capture', () => {
  it('allocations bypass the block cache both ways, and a free inside is a graph node', () => {
    // A small block cached on s before the capture...
    DeviceBuffer.allocate(256, { stream: s }).dispose();
    expect(cachedBytes(context)).toBe(512);
    calls();
    const graph = captured(() => {
      // ...is not handed to the capture, and the capture's block is not cached.
      const inside = DeviceBuffer.allocate(256, { stream: s });
      inside.dispose();
    });
    expect(calls()).toEqual([
      expect.stringMatching(/^record e\d+ on/),
      `begin capture ${ss} mode 2`,
      `alloc 256 on ${ss} (captured)`,
      expect.stringMatching(new RegExp(`^free 0x[0-9a-f]+ on ${ss} \\(captured\\)$`)),
      `end capture ${ss}`,
    ]);
    expect(cachedBytes(context)).toBe(512);
    expect(graph.outputs).toEqual([]);
    graph.dispose();
  });

  it('a buffer from before the capture disposed inside it is freed once the capture ends', () => {
    const outside = DeviceBuffer.allocate(1 << 20, { stream: s });
    calls();
    const session = StreamCapture.begin(s);
    outside.dispose();
    expect(outside.disposed).toBe(true);
    expect(calls().filter((call) => call.startsWith('free'))).toEqual([]);
    const graph = session.end();
    expect(calls()).toEqual([
      `end capture ${ss}`,
      expect.stringMatching(new RegExp(`^free 0x[0-9a-f]+ on ${ss}$`)),
    ]);
    graph.dispose();
  });

  it('memory of a capture in progress cannot be used by another stream', () => {
    const session = StreamCapture.begin(s);
    const inside = DeviceBuffer.allocate(4096, { stream: s });
    expect(() => inside.ffiAddressOn(r)).toThrow(/capture of Stream\(s\), which is in progress/);
    session.abort();
  });

  it('an allocation that outlives the capture is a graph output: usable from the first launch', () => {
    let output: DeviceBuffer | undefined;
    const graph = captured(() => {
      output = DeviceBuffer.allocate(4096, { stream: s });
    });
    expect(graph.outputs).toEqual([output]);
    expect(output!.disposed).toBe(false);
    expect(() => output!.ffiAddressOn(r)).toThrow(/launch the graph first/);
    calls();
    graph.launch({ stream: r });
    expect(calls()).toEqual([
      expect.stringMatching(/^instantiate g\d+ flags 1$/), // AUTO_FREE_ON_LAUNCH
      expect.stringMatching(new RegExp(`^launch x\\d+ on ${sr}$`)),
    ]);
    expect(output!.lastStream).toBe(r);
    expect(typeof output!.ffiAddressOn(r)).toBe('number');
    // Disposed while the graph lives: the graph keeps the memory (its next launch frees it).
    output!.dispose();
    expect(output!.disposed).toBe(true);
    expect(calls()).toEqual([]);
    graph.launch({ stream: r });
    calls();
    // The graph goes: the memory of its last launch, no buffer's now, is freed after it.
    graph.dispose();
    expect(calls()).toEqual([
      expect.stringMatching(/^destroy x\d+$/),
      expect.stringMatching(/^destroy g\d+$/),
      expect.stringMatching(new RegExp(`^free 0x[0-9a-f]+ on ${sr}$`)),
    ]);
  });

  it('an output still held when the graph goes is its buffer’s to free', () => {
    let output: DeviceBuffer | undefined;
    const graph = captured(() => {
      output = DeviceBuffer.allocate(4096, { stream: s });
    });
    graph.launch({ stream: r });
    graph.dispose();
    calls();
    expect(typeof output!.ffiAddressOn(r)).toBe('number');
    output!.dispose();
    expect(calls()).toEqual([expect.stringMatching(new RegExp(`^free 0x[0-9a-f]+ on ${sr}$`))]);
  });

  it('outputs of a graph disposed before its first launch, or of a failed capture, never exist', () => {
    let output: DeviceBuffer | undefined;
    const graph = captured(() => {
      output = DeviceBuffer.allocate(4096, { stream: s });
    });
    graph.dispose();
    expect(output!.disposed).toBe(true);
    expect(() => output!.ffiAddressOn(r)).toThrow(DisposedError);
    const session = StreamCapture.begin(s);
    const failed = DeviceBuffer.allocate(4096, { stream: s });
    session.abort();
    expect(() => failed.address).toThrow(/capture that failed/);
    calls();
    failed.dispose();
    expect(calls()).toEqual([]);
  });
});

describe('uses, hand-offs and replays', () => {
  it('a captured use changes nothing now and is re-declared on the replaying stream', () => {
    const input = DeviceBuffer.allocate(1 << 20, { stream: other });
    const result = DeviceBuffer.allocate(1 << 20, { stream: other });
    calls();
    const graph = captured((session) => {
      input.ffiAddressOn(s, 'read');
      result.ffiAddressOn(s, 'write');
      result.ffiAddressOn(s, 'read'); // a write and a read: a write
      expect([...session.uses.entries()]).toEqual([
        [input, 'read'],
        [result, 'write'],
      ]);
    });
    // No hand-off was ordered during the capture, and the buffers' last writer is unchanged.
    expect(calls().filter((call) => call.startsWith('wait'))).toEqual([]);
    expect(result.lastStream).toBe(other);
    graph.launch({ stream: r });
    const launchCalls = calls();
    // The replay on r waits for other's writes of both buffers (one record, one wait each).
    expect(launchCalls.filter((call) => call.startsWith('wait'))).toEqual([
      expect.stringMatching(new RegExp(`^wait ${sr} for e\\d+$`)),
      expect.stringMatching(new RegExp(`^wait ${sr} for e\\d+$`)),
    ]);
    expect(launchCalls.at(-1)).toMatch(new RegExp(`^launch x\\d+ on ${sr}$`));
    expect(result.lastStream).toBe(r);
    expect(input.lastStream).toBe(other);
    expect(input.readers).toEqual([r]);
    // A disposed input is a clear error at the next launch, before the native call.
    input.dispose();
    calls();
    expect(() => graph.launch({ stream: r })).toThrow(DisposedError);
    expect(calls().filter((call) => call.startsWith('launch'))).toEqual([]);
    graph.dispose();
    result.dispose();
  });

  it('another stream handed a buffer from a capturing stream waits for its pre-capture work', () => {
    const buffer = DeviceBuffer.allocate(1 << 20, { stream: s });
    calls();
    const session = StreamCapture.begin(s);
    const [record] = calls();
    const event = /e(\d+)/.exec(record!)![1];
    buffer.ffiAddressOn(r, 'read');
    // No event is recorded on the capturing stream (that would join r to the capture).
    expect(calls()).toEqual([`wait ${sr} for e${event}`]);
    session.abort();
    buffer.dispose();
  });

  it('a capturing stream asked to wait for another makes the replays wait instead', () => {
    const session = StreamCapture.begin(s);
    calls();
    s.waitFor(r);
    expect(calls()).toEqual([]);
    expect([...session.dependencies]).toEqual([r]);
    s.waitEvent({ handle: 7n });
    expect(calls()).toEqual([`wait ${ss} (captured) for e7 (external)`]);
    const graph = session.end();
    calls();
    graph.launch({ stream: other });
    expect(calls()).toEqual([
      expect.stringMatching(/^instantiate/),
      expect.stringMatching(new RegExp(`^record e\\d+ on ${sr}$`)),
      expect.stringMatching(new RegExp(`^wait ${so} for e\\d+$`)),
      expect.stringMatching(new RegExp(`^launch x\\d+ on ${so}$`)),
    ]);
    graph.dispose();
  });

  it('keeps captured modules and pinned memory, and refuses a disposed module at launch', () => {
    const module = { disposed: false } as unknown as Module;
    const pinned = Object.create(PinnedHostBuffer.prototype) as PinnedHostBuffer;
    const graph = captured((session) => {
      session.retainModule(module);
      session.retainHost(pinned);
    });
    graph.launch({ stream: r });
    (module as { disposed: boolean }).disposed = true;
    expect(() => graph.launch({ stream: r })).toThrow(/captured kernel module/);
    graph.dispose();
  });

  it('a buffer a library adopted is declared written at each launch and freed with the graph', () => {
    const workspace = DeviceBuffer.allocate(1 << 20, { stream: other });
    const graph = captured((session) => session.adopt(workspace));
    graph.launch({ stream: r });
    expect(workspace.lastStream).toBe(r);
    calls();
    graph.dispose();
    expect(workspace.disposed).toBe(true);
    expect(calls().at(-1)).toMatch(new RegExp(`^free 0x[0-9a-f]+ on ${sr}$`));
  });

  it('refuses a launch inside a capture and on another context', () => {
    const graph = captured(() => undefined);
    const session = StreamCapture.begin(r);
    expect(() => graph.launch({ stream: r })).toThrow(CaptureError);
    session.abort();
    const elsewhere = new Context({ ordinal: 1 } as unknown as Device, 78n);
    const foreign = Stream.wrap(1234n, elsewhere, 'foreign');
    expect(() => graph.launch({ stream: foreign })).toThrow(/belongs to/);
    graph.dispose();
    expect(() => graph.launch({ stream: r })).toThrow(DisposedError);
  });
});

describe('waiting while a stream captures', () => {
  it('query, synchronize, waitForStream, dispose and a context synchronize give CaptureErrors', async () => {
    const session = StreamCapture.begin(s);
    calls();
    expect(() => s.query()).toThrow(CaptureError);
    expect(() => s.synchronize()).toThrow(CaptureError);
    await expect(waitForStream(s)).rejects.toThrow(CaptureError);
    expect(() => s.dispose()).toThrow(CaptureError);
    expect(() => context.synchronize()).toThrow(/1 stream of Context\(device 0\) is capturing/);
    expect(calls()).toEqual([]);
    // Other streams wait as usual.
    await waitForStream(r);
    session.abort();
    context.synchronize();
    expect(calls()).toContain('cuCtxSynchronize');
  });

  it('a wait asked for before the capture began waits for the pre-capture work', async () => {
    const waited = waitForStream(s);
    const session = StreamCapture.begin(s);
    const event = /e(\d+)/.exec(calls()[0]!)![1];
    fake.state.queried.length = 0;
    await waited;
    expect(fake.state.queried).toEqual([`e${event}`]);
    session.abort();
  });

  it('the operation observer does not see work on a capturing stream', () => {
    const begun: string[] = [];
    setOperationObserver({
      begin: (name) => {
        begun.push(name);
        return 0;
      },
      end: () => undefined,
    });
    try {
      const session = StreamCapture.begin(s);
      expect(beginOperation('inside', s)).toBe(-1);
      expect(beginOperation('elsewhere', r)).toBe(0);
      session.abort();
      const graph = captured(() => undefined);
      graph.launch({ stream: r });
      expect(begun).toEqual(['elsewhere', 'graph (20 nodes)']);
      graph.dispose();
    } finally {
      setOperationObserver(null);
    }
  });
});

describe('Graph.update', () => {
  it('takes the new capture’s parameters and buffers into the executable graph', () => {
    const first = DeviceBuffer.allocate(1 << 20, { stream: other });
    const second = DeviceBuffer.allocate(1 << 20, { stream: other });
    const graph = captured(() => first.ffiAddressOn(s, 'write'));
    graph.instantiate();
    const source = captured(() => second.ffiAddressOn(s, 'write'));
    calls();
    graph.update(source);
    const updateCalls = calls();
    expect(updateCalls[0]).toMatch(/^update x\d+ from g\d+$/);
    expect(source.disposed).toBe(true);
    graph.launch({ stream: r });
    expect(second.lastStream).toBe(r);
    expect(first.lastStream).toBe(other);
    graph.dispose();
    first.dispose();
    second.dispose();
  });

  it('reports a topology change by name and leaves both graphs as they were', () => {
    const graph = captured(() => undefined);
    const source = captured(() => undefined);
    fake.state.updateResult = 910;
    fake.state.updateDetail = 2;
    expect(() => graph.update(source)).toThrow(/CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED/);
    expect(source.disposed).toBe(false);
    expect(graph.disposed).toBe(false);
    fake.state.updateDetail = 0;
    graph.dispose();
    source.dispose();
  });

  it('refuses graphs that allocate inside their capture', () => {
    const graph = captured(() => DeviceBuffer.allocate(256, { stream: s }).dispose());
    const source = captured(() => undefined);
    calls();
    expect(() => graph.update(source)).toThrow(/allocated memory cannot be updated/);
    expect(calls()).toEqual([]);
    graph.dispose();
    source.dispose();
  });
});
