import { setTimeout as sleep } from 'node:timers/promises';
import type { Context, Stream } from '@cuda-tasks/cudadrv';
import { afterEach, describe, expect, it, vi } from 'vitest';

// The driver is replaced by a test double (see testing/fake-driver.ts).
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import * as runtime from './index.js';
import { HandleCache, onStreamReleased, stream, streamPoolStatistics, task } from './index.js';

/** `onCleanupError` as the package exports it (absent before the fix: the tests then fail). */
const onCleanupError = (runtime as Record<string, unknown>).onCleanupError as
  | ((
      listener: (error: unknown, task: { id: number; name: string | undefined }) => void,
    ) => () => void)
  | undefined;

interface FakeHandle {
  id: number;
}

/** A cache that keeps no idle handle, so a task's release destroys its handle; `destroy` may throw. */
function cacheWhoseDestroy(behaviour: 'throws' | 'works', name: string) {
  let next = 0;
  const destroyed: FakeHandle[] = [];
  const cache = new HandleCache<FakeHandle>({
    name,
    create: (_context: Context) => ({ id: next++ }),
    destroy: (handle: FakeHandle) => {
      destroyed.push(handle);
      if (behaviour === 'throws') throw new Error(`${name}: destroy failed (a sticky error)`);
    },
    setStream: () => {},
    maxIdlePerContext: 0,
  });
  return { cache, destroyed };
}

/** Collects what reaches `onCleanupError` while a test runs. */
function collectCleanupErrors() {
  const seen: { error: unknown; task: { id: number; name: string | undefined } }[] = [];
  const off = onCleanupError?.((error, info) => seen.push({ error, task: info }));
  return { seen, off: () => off?.() };
}

let off: (() => void) | undefined;
afterEach(() => {
  off?.();
  off = undefined;
});

describe('settling a task is exception-safe', () => {
  it('a throwing release strands neither the other leases nor the stream, and keeps fn’s result', async () => {
    const failing = cacheWhoseDestroy('throws', 'failing');
    const working = cacheWhoseDestroy('works', 'working');
    const collected = collectCleanupErrors();
    off = collected.off;
    const idleBefore = streamPoolStatistics().idle;
    let own: Stream | undefined;
    // Today the first release throws out of the task's finally: the second lease stays leased,
    // the stream never goes back, and the task rejects with the cleanup error.
    const result = await task(
      () => {
        own = stream();
        failing.cache.get();
        working.cache.get();
        return 42;
      },
      { name: 'settles' },
    );
    expect(result).toBe(42);
    expect(failing.cache.statistics()).toMatchObject({ leased: 0, destroyed: 1 });
    expect(working.cache.statistics()).toMatchObject({ leased: 0, destroyed: 1 });
    expect(working.destroyed).toHaveLength(1);
    // The stream went back to the pool: the next task gets it.
    expect(streamPoolStatistics().idle).toBeGreaterThanOrEqual(idleBefore);
    expect(await task(() => stream())).toBe(own);
    // The cleanup error was reported, naming the task, not swallowed.
    expect(collected.seen).toHaveLength(1);
    expect(String(collected.seen[0]!.error)).toContain('failing: destroy failed');
    expect(collected.seen[0]!.task.name).toBe('settles');
  });

  it('when fn throws and cleanup throws too, the task rejects with fn’s error', async () => {
    const failing = cacheWhoseDestroy('throws', 'failing');
    const collected = collectCleanupErrors();
    off = collected.off;
    await expect(
      task(async () => {
        failing.cache.get();
        await sleep(1);
        throw new Error('fn failed');
      }),
    ).rejects.toThrow('fn failed');
    expect(failing.cache.statistics().leased).toBe(0);
    expect(collected.seen).toHaveLength(1);
  });

  it('a throwing stream-released listener keeps neither the stream from the pool nor the other listeners from running', async () => {
    const collected = collectCleanupErrors();
    off = collected.off;
    const thrower = onStreamReleased(() => {
      throw new Error('listener failed');
    });
    const after = vi.fn();
    const offAfter = onStreamReleased(after);
    try {
      const own = await task(() => stream());
      expect(after).toHaveBeenCalledWith(own);
      expect(await task(() => stream())).toBe(own);
      expect(collected.seen.map((entry) => String(entry.error))).toContain(
        'Error: listener failed',
      );
    } finally {
      thrower();
      offAfter();
    }
  });

  it('with no listener, a cleanup error becomes a process warning (never an unhandled rejection)', async () => {
    const failing = cacheWhoseDestroy('throws', 'unheard');
    // Captured, so the test run prints neither the warning nor its stack.
    const emitted = vi.spyOn(process, 'emitWarning').mockImplementation(() => undefined);
    try {
      const outcome = await task(() => {
        failing.cache.get();
        return 'done';
      });
      expect(outcome).toBe('done');
      await sleep(5);
      expect(emitted).toHaveBeenCalledTimes(1);
      const [message, options] = emitted.mock.calls[0]!;
      expect(message).toMatch(
        /^task #\d+: giving back its resources failed: unheard: destroy failed \(a sticky error\)$/,
      );
      // The stack of the error goes in the warning's detail.
      expect(options).toEqual({
        type: 'CudaTasksCleanupWarning',
        detail: expect.stringMatching(/^Error: unheard: destroy failed[\s\S]*\n\s+at /),
      });
    } finally {
      emitted.mockRestore();
    }
  });
});
