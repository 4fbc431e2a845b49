import { setTimeout as sleep } from 'node:timers/promises';
import type { Context, Stream } from '@cuda-tasks/cudadrv';
import { afterEach, describe, expect, it, vi } from 'vitest';

// The driver is replaced by a test double (see testing/fake-driver.ts): its waits can be held
// (as a GPU still running the task's work would hold them) and reject when their signal aborts.
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import { capture } from './graphs.js';
import { HandleCache } from './handle-cache.js';
import { onStreamReleased, streamPoolStatistics } from './pool.js';
import { stream } from './state.js';
import { currentTask, synchronize, task, withDevice, withStream } from './task.js';

const context0 = fake.devices[0]!.context;

/** A stream the user created (not from the runtime's pool). */
function userStream(name = 'user'): Stream {
  return new fake.FakeStream(context0, name) as unknown as Stream;
}

/** What `fn` threw, or what its promise rejected with. */
async function failure(fn: () => unknown): Promise<unknown> {
  try {
    await fn();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw or a rejection');
}

/** Every way an operation of the libraries finds its stream or context. */
const entries: Record<string, () => unknown> = {
  'stream()': () => stream(),
  'currentStream()': () => fake.module.currentStream(),
  'resolveStream(undefined)': () => fake.module.resolveStream(undefined),
  'resolveStream(explicit)': () => fake.module.resolveStream(userStream()),
  'currentContext()': () => fake.module.currentContext(),
  'withStream(explicit, stream)': () => withStream(userStream(), () => stream()),
  'withDevice(1, stream)': () => withDevice(1, () => stream()),
  'synchronize()': () => synchronize(),
  'capture(fn)': () => capture(() => {}),
};

afterEach(() => {
  for (const wait of fake.state.heldWaits.splice(0)) wait.finish();
  fake.state.holdWaits = false;
  fake.state.captureLog.length = 0;
});

describe('task options are checked before anything runs', () => {
  it('a bad priority or signal is a CudaArgumentError, and fn never runs', () => {
    const fn = vi.fn();
    expect(() => task(fn, { priority: 'urgent' as never })).toThrow(fake.CudaArgumentError);
    expect(() => task(fn, { priority: 'urgent' as never })).toThrow(
      /priority must be 'high', 'normal' or 'low', got "urgent"/,
    );
    expect(() => task(fn, { signal: { aborted: false } as never })).toThrow(
      /signal must be an AbortSignal .* got \[object Object\]/,
    );
    expect(fn).not.toHaveBeenCalled();
  });
});

describe('an already-aborted signal', () => {
  it('rejects the task with its reason; fn never runs and no stream is taken', async () => {
    const reason = new Error('the client went away');
    const fn = vi.fn(() => stream());
    const created = fake.state.created.length;
    const started = currentTask().id;
    await expect(task(fn, { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(fn).not.toHaveBeenCalled();
    expect(fake.state.created.length).toBe(created);
    // No task state was made for it either: ids go on from where they were.
    const next = await task(() => currentTask().id);
    expect(next).toBeGreaterThan(started);
  });

  it('without a reason: an AbortError DOMException', async () => {
    const controller = new AbortController();
    controller.abort();
    const error = await failure(() => task(() => 1, { signal: controller.signal }));
    expect(error).toBeInstanceOf(DOMException);
    expect((error as DOMException).name).toBe('AbortError');
  });

  it("a parent's aborted signal keeps its nested tasks from starting", async () => {
    const controller = new AbortController();
    const child = vi.fn();
    const outcome = await task(
      async () => {
        controller.abort(new Error('deadline'));
        return failure(() => task(child, { name: 'child' }));
      },
      { signal: controller.signal },
    );
    expect(outcome).toBe(controller.signal.reason);
    expect(child).not.toHaveBeenCalled();
  });
});

describe('abort while the task waits in synchronize()', () => {
  it('synchronize rejects at once with the reason, without the GPU finishing', async () => {
    fake.state.holdWaits = true;
    const controller = new AbortController();
    let own: Stream | undefined;
    const running = task(
      async () => {
        own = stream();
        await synchronize();
        return 'finished';
      },
      { signal: controller.signal },
    );
    await sleep(1);
    expect(fake.state.heldWaits).toHaveLength(1);
    expect(fake.state.heldWaits[0]!.stream).toBe(own);
    const reason = new Error('cancelled');
    controller.abort(reason);
    await expect(running).rejects.toBe(reason);
    // The wait was never completed: the rejection did not wait for the (imaginary) GPU.
    expect(fake.state.heldWaits).toHaveLength(1);
  });

  it("the task's stream and library handles go back as on any settle", async () => {
    fake.state.holdWaits = true;
    const released: Stream[] = [];
    const offReleased = onStreamReleased((s) => released.push(s));
    const handles = new HandleCache<{ id: number }>({
      name: 'double',
      create: (_context: Context) => ({ id: 1 }),
      destroy: () => {},
      setStream: () => {},
    });
    const controller = new AbortController();
    let own: Stream | undefined;
    const idleBefore = streamPoolStatistics(0).idle;
    const running = task(
      async () => {
        own = stream();
        handles.get();
        await synchronize();
      },
      { signal: controller.signal },
    );
    await sleep(1);
    expect(handles.statistics().leased).toBe(1);
    controller.abort();
    await failure(() => running);
    offReleased();
    expect(released).toEqual([own]);
    expect(handles.statistics().leased).toBe(0);
    expect(streamPoolStatistics(0).idle).toBe(idleBefore);
    // The next task gets a stream and runs as usual.
    fake.state.holdWaits = false;
    const next = await task(async () => {
      await synchronize();
      return 'ok';
    });
    expect(next).toBe('ok');
  });

  it('AbortSignal.timeout(ms) is a deadline: the wait rejects with a TimeoutError', async () => {
    fake.state.holdWaits = true;
    const start = performance.now();
    const error = await failure(() =>
      task(() => synchronize(), { signal: AbortSignal.timeout(20) }),
    );
    expect(error).toBeInstanceOf(DOMException);
    expect((error as DOMException).name).toBe('TimeoutError');
    expect(performance.now() - start).toBeGreaterThanOrEqual(15);
  });
});

describe('calls after the abort', () => {
  for (const [name, entry] of Object.entries(entries)) {
    it(`${name} throws (or rejects with) the reason`, async () => {
      const controller = new AbortController();
      const reason = new Error(`stop before ${name}`);
      const waited = fake.state.waited.length;
      const created = fake.state.created.length;
      const error = await task(
        async () => {
          controller.abort(reason);
          return failure(entry);
        },
        { signal: controller.signal },
      );
      expect(error).toBe(reason);
      // Nothing reached the driver: no stream was taken, nothing waited for or captured.
      expect(fake.state.created.length).toBe(created);
      expect(fake.state.waited.length).toBe(waited);
      expect(fake.state.captureLog).toEqual([]);
    });
  }

  it('the same calls in a task without a signal, and outside any task, go on as usual', async () => {
    const controller = new AbortController();
    const cancelled = task(
      async () => {
        controller.abort();
        await sleep(5);
      },
      { signal: controller.signal },
    );
    const other = task(async () => {
      await sleep(1);
      for (const entry of Object.values(entries)) await entry();
      return stream();
    });
    expect(await other).toBeInstanceOf(fake.FakeStream);
    for (const entry of Object.values(entries)) await entry();
    await expect(cancelled).resolves.toBeUndefined();
  });

  it('code of the task that outlives it (a timer) is refused too', async () => {
    const controller = new AbortController();
    let late: Promise<unknown> | undefined;
    await task(
      () => {
        late = new Promise((resolve) => setTimeout(() => resolve(failure(() => stream())), 5));
      },
      { signal: controller.signal },
    );
    controller.abort(new Error('later'));
    expect(await late).toBe(controller.signal.reason);
  });
});

describe('nested tasks', () => {
  it("inherit the parent's signal: the parent's abort cancels them", async () => {
    fake.state.holdWaits = true;
    const controller = new AbortController();
    const seen: (AbortSignal | undefined)[] = [];
    const running = task(
      () =>
        task(
          async () => {
            seen.push(currentTask().signal);
            await synchronize();
          },
          { name: 'child' },
        ),
      { signal: controller.signal },
    );
    await sleep(1);
    expect(seen).toEqual([controller.signal]);
    controller.abort(new Error('parent cancelled'));
    await expect(running).rejects.toBe(controller.signal.reason);
  });

  it("combine their own signal with the parent's: either cancels the child, only the parent's the parent", async () => {
    const parentController = new AbortController();
    const outcome = await task(
      async () => {
        const childController = new AbortController();
        const child = task(
          async () => {
            const combined = currentTask().signal!;
            expect(combined).not.toBe(childController.signal);
            expect(combined).not.toBe(parentController.signal);
            childController.abort(new Error('child only'));
            expect(combined.aborted).toBe(true);
            return failure(() => stream());
          },
          { signal: childController.signal },
        );
        const childError = await child;
        // The parent is not cancelled by its child's signal.
        expect(stream()).toBeInstanceOf(fake.FakeStream);
        return childError;
      },
      { signal: parentController.signal },
    );
    expect(outcome).toBeInstanceOf(Error);
    expect((outcome as Error).message).toBe('child only');

    // And the parent's abort reaches a child that has a signal of its own.
    const outer = new AbortController();
    const seen = await task(
      () =>
        task(
          async () => {
            outer.abort(new Error('parent'));
            return failure(() => stream());
          },
          { signal: new AbortController().signal },
        ),
      { signal: outer.signal },
    );
    expect(seen).toBe(outer.signal.reason);
  });

  it("a child given its parent's own signal runs under that signal, not a combination", async () => {
    const controller = new AbortController();
    const signals = await task(
      () => task(() => currentTask().signal, { signal: controller.signal }),
      { signal: controller.signal },
    );
    expect(signals).toBe(controller.signal);
  });
});

describe('currentTask() reports the options', () => {
  it('the root task: normal priority, no signal', () => {
    expect(currentTask()).toMatchObject({ isRoot: true, priority: 'normal', signal: undefined });
  });

  it("a task's priority is its own, else its parent's", async () => {
    const seen = await task(
      async () => {
        const own = currentTask().priority;
        const inherited = await task(() => currentTask().priority);
        const overridden = await task(() => currentTask().priority, { priority: 'low' });
        const grandchild = await task(() => task(() => currentTask().priority), {
          priority: 'normal',
        });
        return { own, inherited, overridden, grandchild };
      },
      { priority: 'high' },
    );
    expect(seen).toEqual({
      own: 'high',
      inherited: 'high',
      overridden: 'low',
      grandchild: 'normal',
    });
    expect(await task(() => currentTask().priority)).toBe('normal');
  });
});

describe('the issue engine’s launches not issued yet', () => {
  it('an abort cancels them on the streams only the task holds, once; a settled task’s abort does nothing', async () => {
    const controller = new AbortController();
    let mine: { issueCancels: number } | undefined;
    const running = task(
      async () => {
        mine = stream() as unknown as { issueCancels: number };
        await sleep(20);
      },
      { signal: controller.signal },
    );
    await sleep(5);
    expect(mine!.issueCancels).toBe(0);
    controller.abort(new Error('stop'));
    expect(mine!.issueCancels).toBe(1);
    await running.catch(() => {});
    const later = new AbortController();
    let settled: { issueCancels: number } | undefined;
    await task(
      () => {
        settled = stream() as unknown as { issueCancels: number };
      },
      { signal: later.signal },
    );
    const before = settled!.issueCancels;
    later.abort();
    expect(settled!.issueCancels).toBe(before);
  });
});
