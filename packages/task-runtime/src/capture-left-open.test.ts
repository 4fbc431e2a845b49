import type { Stream } from '@cuda-tasks/cudadrv';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

// A stream capture that a task began and never ended, against the driver double
// (testing/fake-driver.ts): the stream must leave capture mode before anything else uses it.
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import { onCleanupError, onStreamReleased, task, withStream } from './index.js';
import { configureStreams, streamPoolStatistics } from './pool.js';
import { currentTaskState, stream } from './state.js';

type FakeStream = InstanceType<typeof fake.FakeStream>;
const begin = (s: Stream) => fake.module.StreamCapture.begin(s as unknown as FakeStream);
const log = () => fake.state.captureLog.splice(0);
const nameOf = (s: Stream) => (s as unknown as FakeStream).name;

let cleanup: { error: unknown; task: { id: number; name: string | undefined } | undefined }[];
let offs: (() => void)[];
beforeEach(() => {
  log();
  cleanup = [];
  offs = [onCleanupError((error, info) => cleanup.push({ error, task: info }))];
});
afterEach(() => {
  for (const off of offs) off();
  fake.state.captureFailures.end = false;
});

/** The stream of a task that runs after the one under test, and whether it captures. */
async function nextTasksStream(): Promise<{ stream: Stream; capturing: boolean }> {
  return task(() => {
    const own = stream();
    return { stream: own, capturing: own.capturing };
  });
}

describe('a capture left open by a task', () => {
  it('a task that throws with a capture open: the stream leaves capture before the next task gets it', async () => {
    let leaked: Stream | undefined;
    const boom = new Error('boom');
    await expect(
      task(
        () => {
          leaked = stream();
          begin(leaked);
          throw boom;
        },
        { name: 'thrower' },
      ),
    ).rejects.toBe(boom);
    // The pool hands out its last released stream first: the next task gets the same one.
    const next = await nextTasksStream();
    expect(next.stream).toBe(leaked);
    expect(next.capturing).toBe(false);
    expect(log()).toEqual([`begin ${nameOf(leaked!)}`, `abort ${nameOf(leaked!)}`]);
    // The task keeps its own error; the capture it left open is reported against it.
    expect(cleanup).toHaveLength(1);
    expect(fake.CaptureError.isInstance(cleanup[0]!.error)).toBe(true);
    expect((cleanup[0]!.error as Error).message).toMatch(/still capturing a graph when task #\d+/);
    // It says what happened, not that a call failed; class and code stay.
    expect((cleanup[0]!.error as Error).message).toMatch(/^\w*Stream\(.*the capture was ended/);
    expect((cleanup[0]!.error as Error).message).not.toMatch(/failed|CUDA_ERROR/);
    expect(String((cleanup[0]!.error as Error).stack)).not.toMatch(/endLeftOpen failed/);
    expect(cleanup[0]!.task?.name).toBe('thrower');
  });

  it('an async task that rejects with a capture open: the same', async () => {
    let leaked: Stream | undefined;
    await expect(
      task(async () => {
        leaked = stream();
        begin(leaked);
        await Promise.resolve();
        throw new Error('later');
      }),
    ).rejects.toThrow('later');
    const next = await nextTasksStream();
    expect(next.stream).toBe(leaked);
    expect(next.capturing).toBe(false);
    expect(cleanup).toHaveLength(1);
  });

  it('a task that returns with a capture open rejects with a CaptureError (its captured work never ran)', async () => {
    let leaked: Stream | undefined;
    const error = await task(async () => {
      leaked = stream();
      begin(leaked);
      await Promise.resolve();
      return 42;
    }).then(
      () => undefined,
      (rejection: unknown) => rejection,
    );
    expect(fake.CaptureError.isInstance(error)).toBe(true);
    expect((error as Error).message).toMatch(/still capturing a graph when task #\d+/);
    expect(leaked!.capturing).toBe(false);
    expect((await nextTasksStream()).capturing).toBe(false);
    expect(cleanup).toHaveLength(0);
  });

  it('a cancelled task with a capture open: its stream leaves capture too', async () => {
    const controller = new AbortController();
    let leaked: Stream | undefined;
    await expect(
      task(
        async () => {
          leaked = stream();
          begin(leaked);
          controller.abort(new Error('cancelled'));
          await Promise.resolve();
          stream(); // throws the reason
        },
        { signal: controller.signal },
      ),
    ).rejects.toThrow('cancelled');
    expect(leaked!.capturing).toBe(false);
    expect(log()).toContain(`abort ${nameOf(leaked!)}`);
  });

  it('a capture begun through withStream on the task’s own stream ends with the task', async () => {
    let leaked: Stream | undefined;
    await expect(
      task(() =>
        withStream(stream(), () => {
          leaked = stream();
          begin(leaked);
          throw new Error('inside withStream');
        }),
      ),
    ).rejects.toThrow('inside withStream');
    expect(leaked!.capturing).toBe(false);
    expect((await nextTasksStream()).capturing).toBe(false);
  });

  it('ends the capture before the task’s leases and the release listeners see the stream', async () => {
    const seen: string[] = [];
    offs.push(onStreamReleased((s) => seen.push(`released: capturing ${s.capturing}`)));
    await expect(
      task(() => {
        const own = stream();
        const state = currentTaskState();
        state.leases = {
          owner: { releaseLease: () => seen.push(`lease: capturing ${own.capturing}`) },
          next: state.leases,
        };
        begin(own);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(seen).toEqual(['lease: capturing false', 'released: capturing false']);
  });

  it('a stream whose capture cannot be ended is retired, never handed out again', async () => {
    await nextTasksStream(); // the pool has its streams
    const before = streamPoolStatistics();
    let leaked: Stream | undefined;
    await expect(
      task(() => {
        leaked = stream();
        begin(leaked);
        fake.state.captureFailures.end = true;
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(streamPoolStatistics().streams).toBe(before.streams - 1);
    const seen = await Promise.all(Array.from({ length: 40 }, () => nextTasksStream()));
    for (const entry of seen) expect(entry.stream).not.toBe(leaked);
    // Reported: the task's error stays its own.
    expect(cleanup.some((entry) => /could not be ended/.test(String(entry.error)))).toBe(true);
  });

  it('a shared stream leaves capture when its last holder lets go', async () => {
    configureStreams({ maxStreams: 1, prewarm: 1, spare: 0 });
    try {
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let shared: Stream | undefined;
      const holder = task(async () => {
        shared = stream();
        await held;
      });
      await expect(
        task(() => {
          const own = stream();
          expect(own).toBe(shared); // past maxStreams: shared
          begin(own);
          throw new Error('boom');
        }),
      ).rejects.toThrow('boom');
      release();
      // The holder's work issued after the capture began was recorded, not run: it rejects.
      const error = await holder.then(
        () => undefined,
        (rejection: unknown) => rejection,
      );
      expect(fake.CaptureError.isInstance(error)).toBe(true);
      expect(shared!.capturing).toBe(false);
      expect((await nextTasksStream()).capturing).toBe(false);
    } finally {
      configureStreams({ maxStreams: 32, prewarm: 32, spare: 2 });
    }
  });
});
