import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import {
  type Context,
  Device,
  DeviceArray,
  type Kernel,
  launch,
  Module,
  Stream,
} from '@cuda-tasks/cudadrv';
import { describeGpu, failureOf, randomFloat32, watchEventLoop } from '@cuda-tasks/testing';
import { beforeAll, expect, it } from 'vitest';
import { startTrace, synchronize, task, withStream } from './index.js';

const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));
const SECOND = 1_000_000_000; // nanoseconds
const N = 1 << 20; // 4 MiB of int32: beyond the per-stream block cache, so frees reach the pool

/** The largest gap between the ticks of a 1 ms interval over `ms` (the event loop's stalls). */
async function largestLoopGap(ms: number): Promise<number> {
  const watch = watchEventLoop();
  await sleep(ms);
  return watch.stop();
}

describeGpu('cancelling a task on the GPU', () => {
  let context: Context;
  let spinThenFill: Kernel;
  let spin: Kernel;
  let axpb: Kernel;

  /** Used bytes of the pool once all queued work is done and cached blocks are given back. */
  function drainedUsedBytes(): number {
    context.synchronize(); // test-only: blocks until the GPU has drained
    context.memoryPool.releaseCached();
    context.synchronize();
    return context.memoryPool.statistics().usedBytes;
  }

  /** y = 2 x + 1 in a fresh task, checked against the CPU in float64. */
  async function computesCorrectly(seed: number): Promise<void> {
    const x = randomFloat32(N, seed);
    const y = await task(async () => {
      const dx = DeviceArray.fromHost(x);
      const dy = DeviceArray.empty('float32', N);
      try {
        launch(axpb, { grid: 256, block: 256 }, dy, dx, 2, 1, N);
        return await dy.toHost();
      } finally {
        dx.dispose();
        dy.dispose();
      }
    });
    for (let i = 0; i < N; i += 127) {
      expect(Math.abs(y[i]! - (2 * x[i]! + 1))).toBeLessThan(1e-5 * (1 + Math.abs(2 * x[i]!)));
    }
  }

  beforeAll(async () => {
    context = Device.get(0).primaryContext();
    const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
    spinThenFill = module.kernel('spin_then_fill', ['int32*', 'int32', 'uint64', 'uint64']);
    spin = module.kernel('spin_ns', ['uint64']);
    axpb = module.kernel('axpb_f32', ['float32*', 'float32*', 'float32', 'float32', 'uint64']);
    // Warm up what the tests use (modules, the waiter's events, pool streams, staging buffers).
    await computesCorrectly(1);
  });

  it('abort while a 1 s kernel runs: the task rejects within 20 ms, the loop stays free, the next task computes, and memory returns once the GPU drains', async () => {
    const usedBefore = drainedUsedBytes();
    const controller = new AbortController();
    let launched!: () => void;
    const running = new Promise<void>((resolve) => {
      launched = resolve;
    });
    const cancelled = task(
      async () => {
        const out = DeviceArray.empty('int32', N);
        try {
          launch(spinThenFill, { grid: 1, block: 256 }, out, 7, N, SECOND);
          launched();
          await synchronize();
        } finally {
          out.dispose(); // ordered after the kernel on the task's stream: the kernel still writes it
        }
      },
      { signal: controller.signal, name: 'cancelled' },
    );
    await running;
    await sleep(50); // the kernel is running, the task waits in synchronize()
    const abortedAt = performance.now();
    controller.abort();
    const error = await failureOf(() => cancelled);
    const rejectedAfter = performance.now() - abortedAt;
    console.log(
      `abort during a 1 s kernel: the task rejected after ${rejectedAfter.toFixed(2)} ms`,
    );
    expect(error).toBeInstanceOf(DOMException);
    expect((error as DOMException).name).toBe('AbortError');
    expect(rejectedAfter).toBeLessThan(20);
    // The kernel runs on (CUDA cannot recall it); the event loop does not wait for it.
    const gap = await largestLoopGap(200);
    console.log(`largest event-loop gap while the aborted kernel ran on: ${gap.toFixed(2)} ms`);
    expect(gap).toBeLessThan(50);
    expect(performance.now() - abortedAt).toBeLessThan(900); // all of this before the kernel ended
    // The cancelled task's stream went to the bottom of the idle list: the next task gets
    // another one, not queued behind the kernel that runs on.
    const nextStarted = performance.now();
    await computesCorrectly(2);
    console.log(
      `the next task computed in ${(performance.now() - nextStarted).toFixed(2)} ms while the aborted kernel ran on`,
    );
    expect(drainedUsedBytes()).toBe(usedBefore);
  });

  it('abort between two launches: the second throws and never reaches the GPU', async () => {
    const controller = new AbortController();
    const reason = new Error('deadline passed');
    const out = DeviceArray.zeros('int32', 1024);
    const recorder = startTrace();
    const second = await task(
      () => {
        launch(spinThenFill, { grid: 1, block: 256 }, out, 7, 1024, 1_000_000);
        controller.abort(reason);
        return failureOf(() => launch(spinThenFill, { grid: 1, block: 256 }, out, 9, 1024, 0));
      },
      { signal: controller.signal, name: 'two launches' },
    );
    const trace = await recorder.stop();
    expect(second).toBe(reason);
    // The trace records each launch just before its native call: only the first was issued.
    const launches = trace.traceEvents.filter(
      (event) => event.cat === 'gpu' && event.args?.task === 'two launches',
    );
    expect(launches.map((event) => event.name)).toEqual(['spin_then_fill']);
    // And on the GPU: the buffer holds the first launch's value, never the second's.
    const values = await task(() => out.toHost());
    expect(new Set(values)).toEqual(new Set([7]));
    out.dispose();
  });

  it('AbortSignal.timeout(ms) is a deadline: a task over it rejects with a TimeoutError on time', async () => {
    const start = performance.now();
    const error = await failureOf(() =>
      task(
        async () => {
          launch(spin, { grid: 1, block: 1 }, 300_000_000); // 300 ms
          await synchronize();
        },
        { signal: AbortSignal.timeout(50) },
      ),
    );
    const elapsed = performance.now() - start;
    expect((error as DOMException).name).toBe('TimeoutError');
    expect(elapsed).toBeGreaterThanOrEqual(45);
    expect(elapsed).toBeLessThan(150);
    drainedUsedBytes();
  });

  it('abort during toHost(): it rejects at once, and its copy, landing later, overwrites no other read', async () => {
    const controller = new AbortController();
    let launched!: () => void;
    const running = new Promise<void>((resolve) => {
      launched = resolve;
    });
    // The aborted read runs on a stream of its own, so that the next read (on a pool stream)
    // is not queued behind it.
    const aside = Stream.create({ name: 'aside' });
    const cancelled = task(
      () =>
        withStream(aside, async () => {
          const out = DeviceArray.empty('int32', N);
          try {
            launch(spinThenFill, { grid: 1, block: 256 }, out, 7, N, SECOND / 2);
            launched();
            return await out.toHost(); // its copy lands in a staging buffer after 500 ms
          } finally {
            out.dispose();
          }
        }),
      { signal: controller.signal },
    );
    await running;
    await sleep(20);
    const abortedAt = performance.now();
    controller.abort();
    await failureOf(() => cancelled);
    expect(performance.now() - abortedAt).toBeLessThan(20);
    // Another read of the same size, whose staging buffer is read only after 800 ms: had it
    // been given the aborted read's staging buffer, that read's copy (7s) would land in it first.
    const expected = new Int32Array(N).map((_, i) => i);
    const read = await task(async () => {
      const y = DeviceArray.fromHost(expected);
      try {
        const reading = y.toHost();
        launch(spin, { grid: 1, block: 1 }, 800_000_000); // the read resolves after this
        return await reading;
      } finally {
        y.dispose();
      }
    });
    expect(read).toEqual(expected);
    drainedUsedBytes();
    aside.dispose();
  });
});
