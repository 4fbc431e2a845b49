import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  CaptureError,
  DeviceArray,
  driver,
  Event,
  type Kernel,
  launch,
  Module,
  type Stream,
  StreamCapture,
} from '@cuda-tasks/cudadrv';
import { cudaGraph } from '@cuda-tasks/cudadrv/ffi';
import { describeGpu, randomFloat32 } from '@cuda-tasks/testing';
import { afterEach, beforeAll, beforeEach, expect, it } from 'vitest';
import { onCleanupError, stream, streamPoolStatistics, task } from './index.js';

// A task that leaves a stream capture open must not hand the next task a capturing stream:
// the next task's launches and copies must run, on the GPU, and give the CPU's answer.
const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));
const N = 1 << 16;
const CONFIG = { grid: 64, block: 256 };

/** y = a x + b on the CPU in float64. */
function reference(x: Float32Array, a: number, b: number): Float64Array {
  return Float64Array.from(x, (value) => a * value + b);
}

function worstError(actual: Float32Array, expected: Float64Array): number {
  let worst = 0;
  for (let j = 0; j < expected.length; j++) {
    worst = Math.max(worst, Math.abs(actual[j]! - expected[j]!) / (1 + Math.abs(expected[j]!)));
  }
  return worst;
}

describeGpu('a capture left open by a task, on the GPU', () => {
  let axpb: Kernel;
  const reported: unknown[] = [];
  let off: () => void;
  beforeAll(() => {
    const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
    axpb = module.kernel('axpb_f32', [
      'float32*',
      'const float32*',
      'float32',
      'float32',
      'uint64',
    ]);
  });
  beforeEach(() => {
    reported.length = 0;
    off = onCleanupError((error) => reported.push(error));
  });
  afterEach(() => off());

  /** A task on the next-leased stream: copies in, launches, copies out; its stream and result. */
  async function nextTask(seed: number): Promise<{ stream: Stream; error: number }> {
    const input = randomFloat32(N, seed);
    return task(async () => {
      const own = stream();
      const x = DeviceArray.fromHost(input);
      const y = DeviceArray.zeros('float32', N);
      launch(axpb, CONFIG, y, x, 1.5, -0.25, N);
      const result = await y.toHost();
      x.dispose();
      y.dispose();
      return { stream: own, error: worstError(result, reference(input, 1.5, -0.25)) };
    });
  }

  it('a task that begins a capture and throws: the next task on that stream runs its work', async () => {
    await nextTask(1); // the pool has its streams
    let leaked: Stream | undefined;
    const boom = new Error('boom');
    const scratch = DeviceArray.zeros('float32', N);
    await expect(
      task(() => {
        leaked = stream();
        StreamCapture.begin(leaked);
        launch(axpb, CONFIG, scratch, scratch, 2, 1, N); // recorded, never run
        throw boom;
      }),
    ).rejects.toBe(boom);
    const next = await nextTask(2);
    console.log(
      `capture left open: next task on the same stream ${next.stream === leaked}, ` +
        `capturing ${next.stream.capturing}, worst relative error ${next.error.toExponential(2)}, ` +
        `reported ${reported.length}: ${String(reported[0])}`,
    );
    expect(next.stream).toBe(leaked); // the pool handed the same stream out next
    expect(next.stream.capturing).toBe(false);
    expect(next.error).toBeLessThan(1e-6);
    expect(reported).toHaveLength(1);
    expect(CaptureError.isInstance(reported[0])).toBe(true);
    // The captured launch never ran: scratch is still zeros.
    expect((await scratch.toHost()).every((value) => value === 0)).toBe(true);
    scratch.dispose();
  });

  it('a task that returns with a capture open rejects with a CaptureError; the next task runs', async () => {
    let leaked: Stream | undefined;
    const error = await task(() => {
      leaked = stream();
      StreamCapture.begin(leaked);
      return 1;
    }).then(
      () => undefined,
      (rejection: unknown) => rejection,
    );
    expect(CaptureError.isInstance(error)).toBe(true);
    const next = await nextTask(3);
    console.log(
      `capture left open by a fulfilled task: rejected with ${String(error)}; next task same stream ${next.stream === leaked}, worst relative error ${next.error.toExponential(2)}`,
    );
    expect(next.stream).toBe(leaked);
    expect(next.error).toBeLessThan(1e-6);
  });

  it('what the check costs a task that settles: one cuStreamIsCapturing on a stream not capturing', async () => {
    const measured = await task(() => {
      const own = stream();
      const calls = 20_000;
      for (let i = 0; i < 1000; i++) StreamCapture.endLeftOpen(own); // warm
      const start = performance.now();
      for (let i = 0; i < calls; i++) StreamCapture.endLeftOpen(own);
      return ((performance.now() - start) * 1e6) / calls;
    });
    console.log(
      `StreamCapture.endLeftOpen on a stream not capturing: ${measured.toFixed(0)} ns a call`,
    );
    expect(measured).toBeLessThan(20_000);
  });

  it('a capture begun through the ffi layer and left open is not ended (which stream began it cannot be told): its stream is retired', async () => {
    let leaked: Stream | undefined;
    await expect(
      task(() => {
        leaked = stream();
        const status = cudaGraph().cuStreamBeginCapture_v2(leaked.ffiHandle, 2);
        expect(status).toBe(0);
        throw new Error('raw capture left open');
      }),
    ).rejects.toThrow('raw capture left open');
    const status = [0];
    expect(cudaGraph().cuStreamIsCapturing(leaked!.ffiHandle, status)).toBe(0);
    const next = await nextTask(4);
    console.log(
      `ffi capture left open: driver capture status after release ${status[0]} (1: still active), next task same stream ${next.stream === leaked}, worst relative error ${next.error.toExponential(2)}; reported: ${String(reported[0])}`,
    );
    expect(status[0]).toBe(1); // left to whoever began it
    expect(next.stream).not.toBe(leaked); // retired, never handed out again
    expect(next.error).toBeLessThan(1e-6);
    expect(reported).toHaveLength(1);
    expect(CaptureError.isInstance(reported[0])).toBe(true);
    expect(String(reported[0])).toMatch(/begun through the ffi layer/);
    expect(String(reported[0])).not.toMatch(/failed: CUDA_ERROR/);
    // Its owner (here, the test) ends it: the stream leaves capture and the pool destroys it.
    const out: (bigint | null)[] = [null];
    expect(cudaGraph().cuStreamEndCapture(leaked!.ffiHandle, out)).toBe(0);
    if (out[0]) cudaGraph().cuGraphDestroy(out[0]);
    for (let i = 0; i < 100 && !leaked!.disposed; i++) await new Promise((r) => setTimeout(r, 5));
    console.log(`ffi capture ended by its owner: the retired stream destroyed ${leaked!.disposed}`);
    expect(leaked!.disposed).toBe(true);
  });

  it('a task whose stream joined another task’s capture settles without ending it; the owner ends it and the graph replays right', async () => {
    const input = randomFloat32(N, 5);
    const x = DeviceArray.fromHost(input);
    const y = DeviceArray.zeros('float32', N);
    // Both in place before the capture: no hand-off (a wait on an event recorded outside the
    // capture, which a capturing stream may not make) inside it.
    await Promise.all([x.toHost(), y.toHost()]);
    const fork = Event.create();
    const join = Event.create();
    let origin: Stream | undefined;
    let joined: Stream | undefined;
    const before = streamPoolStatistics().streams;
    const graph = await task(async () => {
      origin = stream();
      const session = StreamCapture.begin(origin);
      try {
        fork.record(origin);
        // Task B: its stream joins A's capture (waits on an event recorded in it), launches
        // into it, records the join event, and settles.
        const b = await task(() => {
          joined = stream();
          check(driver().cuStreamWaitEvent(joined.ffiHandle, fork.ffiHandle, 0));
          launch(axpb, CONFIG, y, x, 1.5, -0.25, N);
          join.record(joined);
          return 'b settled';
        });
        expect(b).toBe('b settled');
        // A joins B's work back (a plain wait: a join, not an external event wait).
        check(driver().cuStreamWaitEvent(origin.ffiHandle, join.ffiHandle, 0));
      } catch (error) {
        session.abort();
        throw error;
      }
      return session.end();
    });
    const untouched = (await y.toHost()).every((value) => value === 0);
    await task(async () => {
      graph.launch();
      await y.toHost();
    });
    const result = await y.toHost();
    const error = worstError(result, reference(input, 1.5, -0.25));
    for (let i = 0; i < 100 && !joined!.disposed; i++) await new Promise((r) => setTimeout(r, 5));
    console.log(
      `joined capture: B's stream ${joined === origin ? 'is' : 'is not'} A's, y untouched before replay ${untouched}, replay worst relative error ${error.toExponential(2)}, reported ${reported.length}, B's stream retired and destroyed ${joined!.disposed}, pool streams ${before} -> ${streamPoolStatistics().streams}`,
    );
    expect(joined).not.toBe(origin);
    expect(untouched).toBe(true);
    expect(error).toBeLessThan(1e-6);
    expect(reported).toHaveLength(0);
    expect(joined!.disposed).toBe(true);
    graph.dispose();
    fork.dispose();
    join.dispose();
    x.dispose();
    y.dispose();
  });
});

/** Throws on a CUresult other than 0. */
function check(status: number): void {
  if (status !== 0) throw new Error(`CUresult ${status}`);
}
