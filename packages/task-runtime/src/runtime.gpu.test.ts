import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import {
  DeviceArray,
  Event,
  type Kernel,
  launch,
  Module,
  Stream,
  setPollingWindow,
} from '@cuda-tasks/cudadrv';
import { pendingWaits } from '@cuda-tasks/cudadrv/internal';
import { describeGpu, randomFloat32 } from '@cuda-tasks/testing';
import { beforeAll, expect, it } from 'vitest';
import {
  currentTask,
  deviceSynchronize,
  stream,
  streamPoolStatistics,
  synchronize,
  synchronizeSync,
  task,
  withDevice,
  withStream,
} from './index.js';

const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));

describeGpu('task runtime on the GPU', () => {
  let axpb: Kernel;
  let spin: Kernel;
  beforeAll(() => {
    const module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
    axpb = module.kernel('axpb_f32', ['float32*', 'float32*', 'float32', 'float32', 'uint64']);
    spin = module.kernel('spin_ns', ['uint64']);
    launch(spin, { grid: 1, block: 1 }, 1000); // warm up the module
  });

  it('runs 16 concurrent tasks on 16 distinct streams with correct results', async () => {
    const n = 1 << 16;
    const x = randomFloat32(n, 11);
    // Every task holds its stream until all 16 have issued their work: a burst's starts are
    // spread over event-loop turns, and a task that finished first would give its stream back.
    let started = 0;
    let allStarted!: () => void;
    const gate = new Promise<void>((resolve) => (allStarted = resolve));
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, t) =>
        task(
          async () => {
            const dx = DeviceArray.fromHost(x);
            const dy = DeviceArray.empty('float32', n);
            launch(spin, { grid: 1, block: 1 }, 2_000_000); // 2 ms, so the tasks overlap
            launch(axpb, { grid: 128, block: 256 }, dy, dx, t, 1, n);
            if (++started === 16) allStarted();
            await gate;
            await synchronize();
            const y = await dy.toHost();
            dx.dispose();
            dy.dispose();
            return { handle: stream().handle, y, id: currentTask().id };
          },
          { name: `worker-${t}` },
        ),
      ),
    );
    expect(new Set(results.map((r) => r.handle)).size).toBe(16);
    expect(new Set(results.map((r) => r.id)).size).toBe(16);
    results.forEach(({ y }, t) => {
      // The GPU may fuse a * x + b into one FMA: compare with a float32 tolerance.
      for (let i = 0; i < n; i += 97)
        expect(Math.abs(y[i]! - (t * x[i]! + 1))).toBeLessThan(1e-5 * (1 + Math.abs(t * x[i]!)));
    });
  });

  it('overlaps two tasks with long kernels', async () => {
    const length = 100_000_000; // 100 ms
    const one = async () => {
      launch(spin, { grid: 1, block: 1 }, length);
      await synchronize();
    };
    let start = performance.now();
    await task(one);
    const alone = performance.now() - start;
    start = performance.now();
    await Promise.all([task(one), task(one)]);
    const both = performance.now() - start;
    expect(alone).toBeGreaterThanOrEqual(99);
    expect(both).toBeLessThan(1.3 * alone);
  });

  it('events show two tasks with long kernels overlap', async () => {
    const length = 100_000_000; // 100 ms
    // Timing events recorded on the task's own stream around its work.
    const timed = async () => {
      const s = stream();
      const start = Event.create({ timing: true, context: s.context });
      const end = Event.create({ timing: true, context: s.context });
      start.record(s);
      launch(spin, { grid: 1, block: 1 }, length);
      end.record(s);
      await synchronize();
      return { start, end, stream: s };
    };
    const alone = await task(timed);
    const aloneMs = Event.elapsedTime(alone.start, alone.end);
    const [a, b] = await Promise.all([task(timed), task(timed)]);
    expect(a.stream).not.toBe(b.stream);
    // Each task's kernel ran its full length.
    expect(aloneMs).toBeGreaterThanOrEqual(99);
    expect(Event.elapsedTime(a.start, a.end)).toBeGreaterThanOrEqual(99);
    expect(Event.elapsedTime(b.start, b.end)).toBeGreaterThanOrEqual(99);
    // First start to last end, on the GPU's clock (events of one context compare across streams).
    const first = Event.elapsedTime(a.start, b.start) >= 0 ? a.start : b.start;
    const last = Event.elapsedTime(a.end, b.end) >= 0 ? b.end : a.end;
    const totalMs = Event.elapsedTime(first, last);
    expect(totalMs).toBeGreaterThanOrEqual(99);
    expect(totalMs).toBeLessThan(1.3 * aloneMs);
    // Each started before the other ended: the intervals intersect.
    expect(Event.elapsedTime(a.start, b.end)).toBeGreaterThan(0);
    expect(Event.elapsedTime(b.start, a.end)).toBeGreaterThan(0);
    for (const run of [alone, a, b]) {
      run.start.dispose();
      run.end.dispose();
    }
  });

  it("synchronizeSync() returns once the task's stream is idle, not waiting for other tasks", async () => {
    const length = 50_000_000; // 50 ms
    // Another task keeps a 400 ms kernel running on its own stream until released.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    let otherStream!: Stream;
    const other = task(async () => {
      otherStream = stream();
      launch(spin, { grid: 1, block: 1 }, 400_000_000);
      await gate;
      await synchronize();
    });
    try {
      await task(() => {
        const own = stream();
        expect(own).not.toBe(otherStream);
        const issued = performance.now();
        launch(spin, { grid: 1, block: 1 }, length);
        expect(own.query()).toBe(false);
        synchronizeSync();
        const waited = performance.now() - issued;
        expect(own.query()).toBe(true);
        expect(waited).toBeGreaterThanOrEqual(0.9 * 50);
        // Only the current stream: the other task's 400 ms kernel is still running.
        expect(waited).toBeLessThan(300);
        expect(otherStream.query()).toBe(false);
      });
    } finally {
      release();
      await other;
    }
  });

  it("deviceSynchronize() also waits for another task's stream", async () => {
    const length = 50_000_000; // 50 ms
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    // The other task stays alive (its stream stays its own) until released.
    let otherStream!: Stream;
    let issued = 0;
    const other = task(async () => {
      otherStream = stream();
      issued = performance.now();
      launch(spin, { grid: 1, block: 1 }, length);
      await gate;
    });
    try {
      await task(() => {
        const own = stream();
        expect(own).not.toBe(otherStream);
        launch(spin, { grid: 1, block: 1 }, 1_000_000); // 1 ms on this task's stream
        expect(otherStream.query()).toBe(false);
        deviceSynchronize();
        const waited = performance.now() - issued;
        expect(otherStream.query()).toBe(true);
        expect(own.query()).toBe(true);
        expect(waited).toBeGreaterThanOrEqual(0.9 * 50);
      });
    } finally {
      release();
      await other;
    }
  });

  it('synchronize() in one task does not wait for another task', async () => {
    let longDone = 0;
    const long = task(async () => {
      launch(spin, { grid: 1, block: 1 }, 300_000_000); // 300 ms
      await synchronize();
      longDone = performance.now();
    });
    const start = performance.now();
    const shortDone = await task(async () => {
      launch(spin, { grid: 1, block: 1 }, 1_000_000); // 1 ms
      await synchronize();
      return performance.now();
    });
    expect(shortDone - start).toBeLessThan(100);
    await long;
    expect(longDone - start).toBeGreaterThanOrEqual(290);
  });

  it('keeps the event loop responsive while awaiting a 200 ms kernel', async () => {
    const histogram = monitorEventLoopDelay({ resolution: 1 });
    histogram.enable();
    await task(async () => {
      launch(spin, { grid: 1, block: 1 }, 200_000_000);
      await synchronize();
    });
    histogram.disable();
    const maxMs = histogram.max / 1e6;
    expect(maxMs).toBeLessThan(5);
  });

  it('a wait inside the polling window is polled on the event loop; past it, it sleeps on a worker', async () => {
    /** Where a synchronize on a 12 ms kernel is 6 ms in, and when it resolved. */
    const waitOnce = async () => {
      let midway: { blocking: number; polled: number } | undefined;
      const start = performance.now();
      await task(async () => {
        launch(spin, { grid: 1, block: 1 }, 12_000_000); // 12 ms
        setTimeout(() => {
          midway = pendingWaits();
        }, 6);
        await synchronize();
      });
      return { midway, ms: performance.now() - start };
    };
    // The default window (20 ms): the whole wait is polled.
    const polled = await waitOnce();
    expect(polled.midway).toEqual({ blocking: 0, polled: 1 });
    expect(polled.ms).toBeGreaterThanOrEqual(11.9);
    // A 1 ms window: by 6 ms the wait sleeps in cuEventSynchronize on a worker thread.
    const previous = setPollingWindow(1);
    try {
      const slept = await waitOnce();
      expect(slept.midway).toEqual({ blocking: 1, polled: 0 });
      expect(slept.ms).toBeGreaterThanOrEqual(11.9);
    } finally {
      setPollingWindow(previous);
    }
    expect(pendingWaits()).toEqual({ blocking: 0, polled: 0 });
  });

  it('100 tasks synchronizing at once neither starve the pool nor block the event loop', async () => {
    const histogram = monitorEventLoopDelay({ resolution: 1 });
    histogram.enable();
    const start = performance.now();
    const done = await Promise.all(
      Array.from({ length: 100 }, () =>
        task(async () => {
          launch(spin, { grid: 1, block: 1 }, 5_000_000); // 5 ms each, all at once
          await synchronize();
          return performance.now() - start;
        }),
      ),
    );
    histogram.disable();
    // 100 one-block kernels run side by side (streams share 32 hardware queues, so a few
    // run back to back); each waiter resolves when its own stream is done.
    expect(Math.min(...done)).toBeGreaterThanOrEqual(4.9);
    expect(Math.max(...done)).toBeLessThan(100);
    expect(histogram.max / 1e6).toBeLessThan(10);
  });

  it('withStream switches the stream for sync and async code, and restores it', async () => {
    const own = Stream.create({ name: 'own' });
    await task(async () => {
      const taskStream = stream();
      const inside = withStream(own, () => stream());
      expect(inside).toBe(own);
      expect(stream()).toBe(taskStream);
      await withStream(own, async () => {
        await new Promise((resolve) => setTimeout(resolve, 1));
        expect(stream()).toBe(own);
        const y = DeviceArray.zeros('float32', 8);
        expect(y.buffer.lastStream).toBe(own);
        y.dispose();
      });
      expect(stream()).toBe(taskStream);
      expect(() =>
        withStream(own, () => {
          throw new Error('boom');
        }),
      ).toThrow('boom');
      expect(stream()).toBe(taskStream);
    });
    own.dispose();
  });

  it('withDevice(0) works and a missing ordinal is a clear error', async () => {
    const s = await withDevice(0, () => task(async () => stream()));
    expect(s.context.device.ordinal).toBe(0);
    expect(() => withDevice(64, () => 1)).toThrow(/device 64 does not exist/);
  });

  it('runs 1,000 tasks one after another on a few streams', async () => {
    const before = streamPoolStatistics().created;
    for (let i = 0; i < 1000; i++) {
      await task(async () => {
        launch(spin, { grid: 1, block: 1 }, 0);
        await synchronize();
      });
    }
    expect(streamPoolStatistics().created - before).toBeLessThanOrEqual(2);
  });
});
