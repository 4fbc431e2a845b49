import { setTimeout as sleep } from 'node:timers/promises';
import type { Context, Stream } from '@cuda-tasks/cudadrv';
import { describe, expect, it, vi } from 'vitest';

// The driver is replaced by a test double (see testing/fake-driver.ts): device 0 has the
// stream priorities of current GPUs (0 the least and the default, -5 the greatest), device 1 a
// single level.
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import { capture } from './graphs.js';
import { pooledStream, streamPoolStatistics } from './pool.js';
import { priorityLabel, streamPriority } from './priority.js';
import { stream, type TaskPriority } from './state.js';
import { currentTask, prewarmStreams, task, withDevice, withStream } from './task.js';
import { startTrace } from './trace.js';

type FakeStream = InstanceType<typeof fake.FakeStream>;
const context0 = fake.devices[0]!.context as unknown as Context;
const context1 = fake.devices[1]!.context as unknown as Context;

/** The stream a task of `priority` gets (on device `ordinal`), with its pool's record. */
async function streamOf(priority: TaskPriority | undefined, ordinal = 0) {
  const s = (await task(() => withDevice(ordinal, () => stream()), {
    priority,
  })) as unknown as FakeStream;
  return { stream: s, pool: pooledStream(s as unknown as Stream)!.pool };
}

describe('the CUDA priority of each task priority', () => {
  it("high is the device's greatest, low its least, normal the default (0)", () => {
    expect(streamPriority(context0, 'high')).toBe(-5);
    expect(streamPriority(context0, 'normal')).toBe(0);
    expect(streamPriority(context0, 'low')).toBe(0);
    expect(priorityLabel(context0, -5)).toBe('high');
    expect(priorityLabel(context0, 0)).toBeUndefined();
  });

  it('on a device whose range excludes 0, normal is clamped into it; low reads as low', () => {
    fake.state.priorityRanges[2] = { least: 3, greatest: 1 };
    const context = new (
      fake.devices[0]!.constructor as new (
        ordinal: number,
      ) => { context: unknown }
    )(2).context as Context;
    try {
      expect(streamPriority(context, 'normal')).toBe(1);
      expect(streamPriority(context, 'low')).toBe(3);
      expect(priorityLabel(context, 3)).toBe('low');
    } finally {
      fake.state.priorityRanges.length = 2;
    }
  });
});

describe('priority pools', () => {
  it('a task of each priority gets a stream of its pool, created at that CUDA priority', async () => {
    const high = await streamOf('high');
    const normal = await streamOf('normal');
    const low = await streamOf('low');
    expect(high.stream.priority).toBe(-5);
    expect(high.pool.priority).toBe(-5);
    expect(normal.stream.priority).toBe(0);
    expect(high.pool).not.toBe(normal.pool);
    expect(high.pool.context).toBe(normal.pool.context);
    // least == default on this device: low and normal tasks share one pool.
    expect(low.pool).toBe(normal.pool);
    // Every stream of the high pool is a high-priority stream.
    for (const entry of high.pool.streams)
      expect((entry.stream as unknown as FakeStream).priority).toBe(-5);
  });

  it("nested tasks inherit the priority unless they give their own, and get their pool's streams", async () => {
    const seen = await task(
      async () => {
        const own = stream() as unknown as FakeStream;
        const inherited = (await task(() => stream())) as unknown as FakeStream;
        const lowered = (await task(() => stream(), { priority: 'low' })) as unknown as FakeStream;
        return { own, inherited, lowered };
      },
      { priority: 'high' },
    );
    expect(seen.own.priority).toBe(-5);
    expect(seen.inherited.priority).toBe(-5);
    expect(seen.inherited).not.toBe(seen.own);
    expect(seen.lowered.priority).toBe(0);
  });

  it('withStream keeps its explicit stream whatever the priority', async () => {
    const mine = new fake.FakeStream(fake.devices[0]!.context, 'mine') as unknown as Stream;
    const seen = await task(() => withStream(mine, () => [stream(), currentTask().priority]), {
      priority: 'high',
    });
    expect(seen[0]).toBe(mine);
    expect(seen[1]).toBe('high');
  });

  it('on a single-level device the option changes nothing: one pool, one priority', async () => {
    const high = await streamOf('high', 1);
    const normal = await streamOf('normal', 1);
    const low = await streamOf('low', 1);
    expect(high.pool).toBe(normal.pool);
    expect(low.pool).toBe(normal.pool);
    expect([high.stream.priority, normal.stream.priority, low.stream.priority]).toEqual([0, 0, 0]);
    expect(high.pool.context).toBe(context1);
  });

  it('a capture in a high-priority task runs on a high-priority stream', async () => {
    let captured: FakeStream | undefined;
    await task(
      () =>
        capture(() => {
          captured = stream() as unknown as FakeStream;
        }),
      { priority: 'high' },
    );
    expect(captured?.priority).toBe(-5);
  });

  it("prewarmStreams makes each listed priority's pool once, and checks the list", () => {
    // One level on device 1: one pool, made and counted once.
    const streams = prewarmStreams(1, ['high', 'normal', 'low']);
    expect(streams).toBeGreaterThan(0);
    expect(streams).toBe(streamPoolStatistics(1).streams);
    // On device 0, low and normal are one level: their pool is counted once.
    const normal = prewarmStreams(0, ['normal']);
    expect(prewarmStreams(0, ['normal', 'low'])).toBe(normal);
    expect(prewarmStreams(0, ['normal', 'high'])).toBe(streamPoolStatistics(0).streams);
    expect(() => prewarmStreams(0, ['urgent' as TaskPriority])).toThrow(
      /priorities must be 'high', 'normal' or 'low', got "urgent"/,
    );
    expect(() => prewarmStreams(0, [])).toThrow(fake.CudaArgumentError);
  });
});

describe('a cancelled task gives its stream back to the bottom of the idle list', () => {
  it('the next task gets another stream; after a plain settle, the same one', async () => {
    const plain = (await task(() => stream())) as unknown as FakeStream;
    expect(await task(() => stream())).toBe(plain); // last in, first out
    const controller = new AbortController();
    let cancelled: FakeStream | undefined;
    const running = task(
      async () => {
        cancelled = stream() as unknown as FakeStream;
        await sleep(5);
      },
      { signal: controller.signal },
    );
    await sleep(1);
    controller.abort();
    await running;
    const next = (await task(() => stream())) as unknown as FakeStream;
    expect(next).not.toBe(cancelled);
    // It is still in the pool, handed out once the others are taken.
    expect(pooledStream(cancelled as unknown as Stream)?.holders).toBe(0);
  });
});

describe('traces show the priority', () => {
  it('on each operation, each task span, and the track of a high-priority pool stream', async () => {
    const recorder = startTrace();
    await task(
      () => {
        const token = recorder.begin('short_kernel', stream());
        recorder.end(token);
      },
      { name: 'urgent', priority: 'high' },
    );
    await task(
      () => {
        const token = recorder.begin('long_kernel', stream());
        recorder.end(token);
      },
      { name: 'bulk', priority: 'low' },
    );
    const trace = await recorder.stop();
    const operation = (name: string) => trace.traceEvents.find((event) => event.name === name)!;
    expect(operation('short_kernel').args).toMatchObject({ task: 'urgent', priority: 'high' });
    expect(operation('long_kernel').args).toMatchObject({ task: 'bulk', priority: 'low' });
    const spans = trace.traceEvents.filter((event) => event.cat === 'task');
    expect(spans.find((event) => event.name === 'urgent')?.args).toEqual({ priority: 'high' });
    const tracks = trace.traceEvents
      .filter((event) => event.name === 'thread_name' && event.pid === 1)
      .map((event) => event.args);
    // The high-priority stream's track says so; the default-priority one does not.
    expect(tracks).toContainEqual({
      name: expect.stringMatching(/^stream task-stream-\d+ \(high priority\)$/),
      priority: -5,
    });
    expect(tracks).toContainEqual({
      name: expect.stringMatching(/^stream task-stream-\d+$/),
      priority: 0,
    });
  });
});
