import { setTimeout as sleep } from 'node:timers/promises';
import type { Device, Stream } from '@cuda-tasks/cudadrv';
import { describe, expect, it, vi } from 'vitest';

// The driver is replaced by a test double (see testing/fake-driver.ts).
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import { configureStreams, onStreamReleased, streamPoolStatistics } from './pool.js';
import {
  currentFrame,
  currentSignal,
  currentTaskState,
  device,
  enterFrame,
  type Frame,
  stream,
} from './state.js';
import { currentTask, synchronize, task, withDevice, withStream } from './task.js';

const device0 = fake.devices[0]!;
const device1 = fake.devices[1]!;
const context0 = device0.context;
const context1 = device1.context;

/** A stream the user created (not from the runtime's pool). */
function userStream(context = context0, name = 'user'): Stream {
  return new fake.FakeStream(context, name) as unknown as Stream;
}

const created = () => fake.state.created.length;

/** Element-wise identity (toEqual would accept two distinct but similar fake streams). */
function expectSame(actual: readonly unknown[], expected: readonly unknown[]): void {
  expect(actual).toHaveLength(expected.length);
  for (let i = 0; i < actual.length; i++) expect(actual[i]).toBe(expected[i]);
}

describe('the current frame, kept per async id (currentFrame)', () => {
  it('a scope entered and left in one synchronous run: the stream before it, after it', async () => {
    const mine = userStream(context0, 'mine');
    const theirs = userStream(context0, 'theirs');
    await task(async () => {
      const own = stream();
      // Looked up (and kept) before the scope, in the same synchronous run as all of it.
      expect(stream()).toBe(own);
      const inside = withStream(mine, () => {
        const first = stream();
        const nested = withStream(theirs, () => stream());
        return [first, nested, stream()];
      });
      expectSame(inside, [mine, theirs, mine]);
      expect(stream()).toBe(own);
      // A scope that throws is left as well.
      expect(() =>
        withStream(mine, () => {
          expect(stream()).toBe(mine);
          throw new Error('out');
        }),
      ).toThrow('out');
      expect(stream()).toBe(own);
    });
  });

  it('a task started and a device entered synchronously: the caller sees its own again', async () => {
    await task(async () => {
      const own = stream();
      let child: Stream | undefined;
      const running = task(async () => {
        child = stream();
        await Promise.resolve();
        return stream();
      });
      // The child's synchronous part ran (and looked up its frame) under the caller's id.
      expect(child).toBeDefined();
      expect(child).not.toBe(own);
      expect(stream()).toBe(own);
      expect(await running).toBe(child);
      const onOne = withDevice(1, () => stream());
      expect(onOne.context).toBe(context1);
      expect(device()).toBe(device0);
      expect(stream()).toBe(own);
    });
    // Outside any task, in the test's own async run.
    expect(stream()).toBe(context0.defaultStream);
  });

  it('interleaved tasks each see their own stream at every step', async () => {
    const steps = 50;
    const run = () =>
      task(async () => {
        const own = stream();
        const seen: Stream[] = [];
        for (let i = 0; i < steps; i++) {
          seen.push(stream());
          if (i % 3 === 0) await Promise.resolve();
          else if (i % 3 === 1) await sleep(0);
          else await new Promise((resolve) => setImmediate(resolve));
          seen.push(stream());
        }
        return { own, seen };
      });
    const results = await Promise.all(Array.from({ length: 8 }, run));
    const owns = new Set(results.map((r) => r.own));
    expect(owns.size).toBe(8);
    for (const { own, seen } of results) {
      expect(seen).toHaveLength(2 * steps);
      for (const s of seen) expect(s).toBe(own);
    }
  });
});

describe('the stream an async context sees', () => {
  it('the runtime installs its provider on import', () => {
    expect(fake.state.streamProvider).toBe(stream);
    expect(fake.state.deviceProvider).toBe(device);
    expect(fake.module.currentStream()).toBe(context0.defaultStream);
  });

  it('outside any task: the default device default stream, also after awaits', async () => {
    expect(stream()).toBe(context0.defaultStream);
    expect(device()).toBe(device0);
    await sleep(1);
    expect(stream()).toBe(context0.defaultStream);
    expect(currentTask().isRoot).toBe(true);
  });

  it('a task keeps its own stream across awaits of every kind', async () => {
    const before = created();
    const seen = await task(async () => {
      const first = stream();
      await sleep(1);
      const second = stream();
      await Promise.resolve();
      const third = stream();
      await new Promise((resolve) => setImmediate(resolve));
      const fourth = fake.module.currentStream();
      return [first, second, third, fourth];
    });
    expect(new Set(seen).size).toBe(1);
    const own = seen[0] as unknown as InstanceType<typeof fake.FakeStream>;
    expect(own).not.toBe(context0.defaultStream);
    expect(own.context).toBe(context0);
    // The first task of the context prewarmed its pool; later tasks create none.
    const afterFirst = created();
    expect(afterFirst - before).toBeLessThanOrEqual(32);
    await task(async () => stream());
    expect(created()).toBe(afterFirst);
    expect(stream()).toBe(context0.defaultStream);
  });

  it('two interleaved tasks each see their own stream throughout', async () => {
    const order: string[] = [];
    const worker = (name: string) =>
      task(async () => {
        const mine = stream();
        const seen: Stream[] = [];
        for (let i = 0; i < 6; i++) {
          await Promise.resolve();
          order.push(name);
          seen.push(stream());
          if (i % 2 === 1) await sleep(1);
        }
        return { mine, seen };
      });
    const [a, b] = await Promise.all([worker('a'), worker('b')]);
    expect(a.mine).not.toBe(b.mine);
    expect(a.seen.every((s) => s === a.mine)).toBe(true);
    expect(b.seen.every((s) => s === b.mine)).toBe(true);
    // The two really alternated.
    expect(order.slice(0, 4)).toEqual(['a', 'b', 'a', 'b']);
  });

  it('a nested task gets another stream; the parent keeps its own before and after', async () => {
    await task(async () => {
      const parent = stream();
      const parentTask = currentTask();
      const child = task(
        async () => {
          const mine = stream();
          await sleep(1);
          expect(stream()).toBe(mine);
          const info = currentTask();
          expect(info.isRoot).toBe(false);
          expect(info.name).toBe('child');
          expect(info.id).not.toBe(parentTask.id);
          return mine;
        },
        { name: 'child' },
      );
      expect(stream()).toBe(parent);
      const childStream = await child;
      expect(childStream).not.toBe(parent);
      expect(stream()).toBe(parent);
      await sleep(1);
      expect(stream()).toBe(parent);
      expect(currentTask()).toEqual(parentTask);
    });
  });

  it('plain async functions called in a task share its stream', async () => {
    async function helper(): Promise<Stream> {
      await sleep(1);
      return stream();
    }
    async function deeper(): Promise<Stream[]> {
      const a = await helper();
      await Promise.resolve();
      return [a, stream()];
    }
    const [own, ...others] = await task(async () => {
      const own = stream();
      return [own, await helper(), ...(await deeper())];
    });
    expectSame(others, [own, own, own]);
    expect(own).not.toBe(context0.defaultStream);
  });

  it('code that outlives its task falls back to the default stream', async () => {
    let late: Promise<Stream> | undefined;
    const own = await task(() => {
      late = new Promise((resolve) => setTimeout(() => resolve(stream()), 5));
      return stream();
    });
    expect(own).not.toBe(context0.defaultStream);
    expect(await late).toBe(context0.defaultStream);
  });

  it('a task on one device without library calls keeps its stream in its own record', async () => {
    const [own, record, others, leases] = await task(() => {
      const own = stream();
      const record = currentTaskState();
      return [own, record.ownStream, record.otherStreams, record.leases] as const;
    });
    expect(record).toBe(own);
    // Nothing allocated beside the record: no per-device array, no lease list.
    expect(others).toBeUndefined();
    expect(leases).toBeUndefined();
  });

  it('a task that does no GPU work takes no stream', async () => {
    const before = created();
    const idle = streamPoolStatistics().idle;
    expect(await task(async () => 42)).toBe(42);
    expect(await task(() => 'sync')).toBe('sync');
    expect(created()).toBe(before);
    expect(streamPoolStatistics().idle).toBe(idle);
  });

  it('a task whose fn returns a promise of another class settles with its value, then gives its stream back', async () => {
    class OtherPromise<T> extends Promise<T> {}
    const idle = streamPoolStatistics().idle;
    let used: Stream | undefined;
    const value = await task(() => {
      used = stream();
      return new OtherPromise<number>((resolve) => setTimeout(resolve, 1, 7));
    });
    expect(value).toBe(7);
    expect(streamPoolStatistics().idle).toBe(idle);
    expect(await task(() => stream())).toBe(used);
  });

  it('microtasks a synchronous fn queued run before the task settles, on its stream', async () => {
    let own: Stream | undefined;
    let queued: Stream | undefined;
    await task(() => {
      own = stream();
      queueMicrotask(() => {
        queued = stream();
      });
    });
    expect(queued).toBe(own);
    expect(own).not.toBe(context0.defaultStream);
  });

  it('a synchronous throw in a task becomes a rejection', async () => {
    const promise = task(() => {
      throw new Error('sync boom');
    });
    await expect(promise).rejects.toThrow('sync boom');
  });

  it('synchronize waits for the current stream only', async () => {
    const own = await task(async () => {
      await synchronize();
      return stream();
    });
    expect(fake.state.waited.at(-1)).toBe(own);
    const s = userStream();
    await withStream(s, () => synchronize());
    expect(fake.state.waited.at(-1)).toBe(s);
  });
});

describe('a burst of task starts is spread over event-loop turns', () => {
  /** Holds the thread for `ms`, as a task's first synchronous GPU calls do. */
  function busy(ms: number): void {
    const end = performance.now() + ms;
    while (performance.now() < end);
  }

  it('tasks past 2 ms of one turn start in later turns, in order; each turn stays short', async () => {
    const order: number[] = [];
    const turns: number[] = [];
    let turn = 0;
    let ticking = true;
    const tick = () => {
      turn++;
      if (ticking) setImmediate(tick);
    };
    // A fresh turn: the slice counts from the first task start of a turn.
    await new Promise((resolve) => setImmediate(resolve));
    setImmediate(tick);
    const results = Array.from({ length: 30 }, (_, i) =>
      task(() => {
        order.push(i);
        turns.push(turn);
        busy(1);
        return i * 2;
      }),
    );
    const inline = order.length;
    expect(await Promise.all(results)).toEqual(Array.from({ length: 30 }, (_, i) => i * 2));
    ticking = false;
    expect(order).toEqual(Array.from({ length: 30 }, (_, i) => i));
    // The first turn started a few (2 ms of 1 ms tasks, and the one that crossed the line).
    expect(inline).toBeGreaterThanOrEqual(1);
    expect(inline).toBeLessThanOrEqual(4);
    // The rest started over several later turns, at most ~4 tasks each.
    const perTurn = new Map<number, number>();
    for (const t of turns) perTurn.set(t, (perTurn.get(t) ?? 0) + 1);
    expect(perTurn.size).toBeGreaterThanOrEqual(8);
    for (const count of perTurn.values()) expect(count).toBeLessThanOrEqual(4);
  });

  it('a task whose signal aborts while it waits to start never runs; its promise rejects with the reason', async () => {
    await new Promise((resolve) => setImmediate(resolve));
    {
      const ran: string[] = [];
      const first = task(() => busy(6)); // uses up this turn's slice
      const controller = new AbortController();
      const waiting = task(() => ran.push('waiting'), { signal: controller.signal });
      const after = task(() => ran.push('after'));
      controller.abort(new Error('gone'));
      await first;
      await expect(waiting).rejects.toThrow('gone');
      await after;
      expect(ran).toEqual(['after']);
    }
  });
});

describe('arguments of the wrong kind', () => {
  it('task and withStream refuse a fn that is not a function, and withStream a non-stream, before anything else', () => {
    expect(() => task(5 as never)).toThrow(/^task: fn must be a function, got 5$/);
    expect(() => task(undefined as never)).toThrow(fake.CudaArgumentError);
    const s = userStream();
    expect(() => withStream(s, 'run' as never)).toThrow(
      /^withStream: fn must be a function, got run$/,
    );
    expect(() => withStream({} as never, () => 1)).toThrow(
      /^withStream: s must be a Stream, got \[object Object\]$/,
    );
    expect(() => withStream(null as never, () => 1)).toThrow(fake.CudaArgumentError);
    expect(() => withDevice({} as never, () => 1)).toThrow(
      /^withDevice: the device must be an ordinal or a Device, got \[object Object\]$/,
    );
    // A real stream still works after the refusals.
    expect(withStream(s, () => stream())).toBe(s);
  });
});

describe('withStream', () => {
  it('alternating two streams reuses their frames; a disposed stream or a pool stream given back is refused again', async () => {
    const s1 = userStream(context0, 's1');
    const s2 = userStream(context0, 's2');
    const frames = new Set<unknown>();
    for (let i = 0; i < 6; i++) {
      frames.add(withStream(i % 2 ? s2 : s1, () => currentFrame()));
      expect(withStream(i % 2 ? s2 : s1, () => stream())).toBe(i % 2 ? s2 : s1);
    }
    expect(frames.size).toBe(2);
    (s1 as unknown as { disposed: boolean }).disposed = true;
    expect(() => withStream(s1, () => stream())).toThrow(/withStream/);
    expect(withStream(s2, () => stream())).toBe(s2);
    // A task's pool stream, used from outside while the task holds it, then given back.
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let theirs!: Stream;
    let started!: () => void;
    const holding = new Promise<void>((resolve) => (started = resolve));
    const holder = task(async () => {
      theirs = stream();
      started();
      await gate;
    });
    // Its start may wait for a later turn (the turn's budget), so wait for the start itself.
    await holding;
    expect(withStream(theirs, () => stream())).toBe(theirs);
    expect(withStream(theirs, () => stream())).toBe(theirs);
    release();
    await holder;
    expect(() => withStream(theirs, () => stream())).toThrow(/no task holds it now/);
  });

  it('a stream entered from two tasks in turn gives each its own task, and a cancelled task throws', async () => {
    const s = userStream(context0, 'shared');
    const controller = new AbortController();
    const seen: string[] = [];
    let step!: () => void;
    let turn = new Promise<void>((resolve) => (step = resolve));
    const body = (name: string) => async () => {
      for (let i = 0; i < 4; i++) {
        // The same stream from the other task just before: each sees its own task.
        seen.push(`${name}:${withStream(s, () => String(currentTaskState().name))}`);
        await turn;
      }
    };
    const a = task(body('a'), { name: 'a' });
    const b = task(body('b'), { name: 'b', signal: controller.signal });
    for (let i = 0; i < 3; i++) {
      await sleep(1);
      const release = step;
      turn = new Promise<void>((resolve) => (step = resolve));
      release();
    }
    await sleep(1);
    controller.abort(new Error('stopped'));
    const release = step;
    release();
    await a;
    await b;
    expect(seen.filter((entry) => entry.startsWith('a:'))).toEqual(['a:a', 'a:a', 'a:a', 'a:a']);
    expect(seen.filter((entry) => entry.startsWith('b:'))).toEqual(['b:b', 'b:b', 'b:b', 'b:b']);
    // Once its signal aborted, the cancelled task's withStream throws the reason at stream().
    await expect(
      task(async () => withStream(s, () => stream()), { signal: controller.signal }),
    ).rejects.toThrow('stopped');
  });

  it("a frame made by an older loaded copy (no signal of its own) still carries its task's cancellation", async () => {
    const controller = new AbortController();
    const outcome = (f: () => unknown) => {
      try {
        f();
        return 'issued';
      } catch (error) {
        return (error as Error).message;
      }
    };
    const seen: unknown[] = [];
    await task(
      async () => {
        const { signal: _own, ...older } = currentFrame();
        const frame = older as unknown as Frame;
        seen.push(enterFrame(frame, () => currentSignal()) === controller.signal);
        seen.push(enterFrame(frame, () => stream()) === stream());
        // Entered from it, withDevice's frame takes the task's signal too.
        const inner = enterFrame(frame, () => withDevice(0, () => currentFrame()));
        controller.abort(new Error('aborted'));
        seen.push(outcome(() => enterFrame(frame, () => stream())));
        seen.push(outcome(() => enterFrame(inner, () => stream())));
      },
      { signal: controller.signal },
    ).catch(() => {});
    expect(seen).toEqual([true, true, 'aborted', 'aborted']);
  });

  it('sets the store on the running async resource itself where Node keeps stores there (no AsyncLocalStorage.run per call)', async () => {
    const { AsyncLocalStorage } = await import('node:async_hooks');
    const keepsStoresOnResources =
      typeof (new AsyncLocalStorage() as unknown as { kResourceStore?: unknown }).kResourceStore ===
      'symbol';
    const s = userStream(context0, 'resource-store');
    await task(async () => {
      withStream(s, () => stream()); // the storage's propagation is on from here
      const run = vi.spyOn(AsyncLocalStorage.prototype, 'run');
      try {
        const seen = await withStream(s, async () => {
          const before = stream();
          await sleep(1);
          const later = await new Promise<Stream>((resolve) =>
            setImmediate(() => resolve(stream())),
          );
          return [before, stream(), later];
        });
        expectSame(seen, [s, s, s]);
        expect(stream()).not.toBe(s);
        expect(run.mock.calls.length).toBe(keepsStoresOnResources ? 0 : 1);
      } finally {
        run.mockRestore();
      }
    });
  });

  it('a sync function sees the stream; the previous one is back after it returns', () => {
    const s = userStream();
    expect(withStream(s, () => stream())).toBe(s);
    expect(stream()).toBe(context0.defaultStream);
  });

  it('an async function sees the stream across its awaits', async () => {
    const s = userStream();
    const seen = await withStream(s, async () => {
      const first = stream();
      await sleep(1);
      return [first, stream()];
    });
    expectSame(seen, [s, s]);
    expect(stream()).toBe(context0.defaultStream);
  });

  it('inside a task the task stream is restored after return, sync throw and async rejection', async () => {
    const s = userStream();
    await task(async () => {
      const own = stream();
      expect(withStream(s, () => stream())).toBe(s);
      expect(stream()).toBe(own);
      expect(() =>
        withStream(s, () => {
          throw new Error('sync');
        }),
      ).toThrow('sync');
      expect(stream()).toBe(own);
      await expect(
        withStream(s, async () => {
          await sleep(1);
          expect(stream()).toBe(s);
          throw new Error('async');
        }),
      ).rejects.toThrow('async');
      expect(stream()).toBe(own);
      await sleep(1);
      expect(stream()).toBe(own);
    });
  });

  it('nests: the innermost stream wins, each level restores its outer one', async () => {
    const s1 = userStream(context0, 's1');
    const s2 = userStream(context0, 's2');
    const seen = withStream(s1, () => {
      const outer = stream();
      const inner = withStream(s2, () => stream());
      return [outer, inner, stream()];
    });
    expectSame(seen, [s1, s2, s1]);
    const asyncSeen = await withStream(s1, async () => {
      const inner = await withStream(s2, async () => {
        await sleep(1);
        return stream();
      });
      return [inner, stream()];
    });
    expectSame(asyncSeen, [s2, s1]);
  });

  it("the device follows the stream's context", () => {
    const s = userStream(context1, 'on device 1');
    expect(withStream(s, () => device())).toBe(device1);
    expect(device()).toBe(device0);
  });

  it('a withStream frame that outlives its task falls back to the default stream once the task settles', async () => {
    // The frame's stream is the task's pooled stream; after the task settles that stream goes
    // back to the pool and to the next task, and the leftover timer must not issue on it.
    const seen: Stream[] = [];
    let timer: ReturnType<typeof setInterval> | undefined;
    const own = await task(() =>
      withStream(stream(), () => {
        timer = setInterval(() => seen.push(stream()), 1);
        return stream();
      }),
    );
    try {
      expect(own).not.toBe(context0.defaultStream);
      // The next task takes the same pooled stream (the pool is last-in first-out)...
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const next = task(async () => {
        const mine = stream();
        await gate;
        return mine;
      });
      const before = seen.length;
      await sleep(10);
      release();
      expect(await next).toBe(own);
      // ...while the timer of the settled task ran on the default stream, never on it.
      expect(seen.length).toBeGreaterThan(before);
      for (const s of seen.slice(before)) expect(s).toBe(context0.defaultStream);
    } finally {
      clearInterval(timer);
    }
  });

  it('a withStream frame on a user stream keeps it after its task settles (the stream is not the pool’s)', async () => {
    const s = userStream(context0, 'kept');
    const late = await task(() =>
      withStream(s, () => new Promise<Stream>((resolve) => setTimeout(() => resolve(stream()), 5))),
    );
    expect(late).toBe(s);
  });

  it('refuses a disposed stream with a DisposedError naming it, before running fn (issue 14, bug 5)', () => {
    const s = userStream(context0, 'gone');
    s.dispose();
    let ran = false;
    let error: unknown;
    try {
      withStream(s, () => {
        ran = true;
      });
    } catch (caught) {
      error = caught;
    }
    expect(ran).toBe(false);
    expect(error).toBeInstanceOf(fake.DisposedError);
    expect((error as Error).message).toBe(
      'withStream: FakeStream(gone) has been disposed and cannot be used',
    );
  });

  it('a task started inside withStream gets its own stream, on that device', async () => {
    const s = userStream(context1, 'on device 1');
    const inner = (await withStream(s, () => task(() => stream()))) as unknown as InstanceType<
      typeof fake.FakeStream
    >;
    expect(inner).not.toBe(s);
    expect(inner.context).toBe(context1);
    expect(inner).not.toBe(context1.defaultStream);
  });
});

describe('withDevice', () => {
  it("outside a task: device 1's default stream, then back to device 0", () => {
    const seen = withDevice(1, () => [stream(), device()]);
    expectSame(seen, [context1.defaultStream, device1]);
    expect(stream()).toBe(context0.defaultStream);
    expect(device()).toBe(device0);
  });

  it("inside a task: a stream from device 1's context, and one per device", async () => {
    const before = created();
    const idleBefore = streamPoolStatistics().idle;
    const [own0, own1, again1] = await task(async () => {
      const own0 = stream();
      const own1 = withDevice(1, () => stream()) as unknown as InstanceType<typeof fake.FakeStream>;
      await sleep(1);
      const again1 = await withDevice(fake.devices[1] as unknown as Device, async () => {
        await sleep(1);
        return stream();
      });
      return [own0, own1, again1];
    });
    expect((own1 as unknown as InstanceType<typeof fake.FakeStream>).context).toBe(context1);
    expect(own1).not.toBe(context1.defaultStream);
    expect(again1).toBe(own1);
    expect(own0).not.toBe(own1);
    // Both streams went back to the pool.
    expect(streamPoolStatistics().idle).toBe(idleBefore + (created() - before));
  });

  it('a task that uses device 1 first, then device 0, holds one stream on each and gives both back', async () => {
    const before = created();
    const idleBefore = streamPoolStatistics().idle;
    const [first1, own0, again1, again0] = await task(async () => {
      const first1 = withDevice(1, () => stream());
      const own0 = stream();
      await sleep(1);
      return [first1, own0, withDevice(1, () => stream()), stream()];
    });
    expect((first1 as unknown as InstanceType<typeof fake.FakeStream>).context).toBe(context1);
    expect((own0 as unknown as InstanceType<typeof fake.FakeStream>).context).toBe(context0);
    expect(own0).not.toBe(context0.defaultStream);
    expect(again1).toBe(first1);
    expect(again0).toBe(own0);
    expect(streamPoolStatistics().idle).toBe(idleBefore + (created() - before));
  });

  it('tasks started inside inherit the device', async () => {
    const [ordinal, context] = await withDevice(1, () =>
      task(async () => {
        await sleep(1);
        return [device().ordinal, (stream() as unknown as { context: unknown }).context];
      }),
    );
    expect(ordinal).toBe(1);
    expect(context).toBe(context1);
  });

  it('nests', () => {
    expect(withDevice(1, () => withDevice(0, () => device().ordinal))).toBe(0);
    expect(withDevice(0, () => withDevice(1, () => stream()))).toBe(context1.defaultStream);
  });

  it('an invalid ordinal propagates the error of Device.get, before running fn', () => {
    const fn = vi.fn();
    expect(() => withDevice(7, fn)).toThrow(fake.CudaArgumentError);
    expect(() => withDevice(7, fn)).toThrow(
      'device 7 does not exist: this process sees 2 CUDA devices (ordinals 0..1)',
    );
    expect(() => withDevice(-1, fn)).toThrow(fake.CudaArgumentError);
    expect(fn).not.toHaveBeenCalled();
  });
});

describe('the stream pool', () => {
  it('1,000 tasks run one after another create at most a couple of streams', async () => {
    const before = created();
    const seen = new Set<Stream>();
    for (let i = 0; i < 1000; i++) {
      seen.add(
        await task(async () => {
          const s = stream();
          await Promise.resolve();
          return s;
        }),
      );
    }
    expect(created() - before).toBeLessThanOrEqual(2);
    expect(seen.size).toBeLessThanOrEqual(2);
  });

  it('concurrent tasks get distinct streams; a second wave reuses them', async () => {
    const wave = async (count: number) => {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const tasks = Array.from({ length: count }, () =>
        task(async () => {
          const s = stream();
          await gate;
          expect(stream()).toBe(s);
          return s;
        }),
      );
      await sleep(1);
      release();
      return Promise.all(tasks);
    };
    const first = await wave(20);
    expect(new Set(first).size).toBe(20);
    for (const s of first) {
      expect((s as unknown as { context: unknown }).context).toBe(context0);
      expect(s).not.toBe(context0.defaultStream);
    }
    const before = created();
    const second = await wave(20);
    expect(created()).toBe(before);
    expect(new Set(second).size).toBe(20);
    expect(new Set([...first, ...second]).size).toBe(20);
  });

  it('a stream goes back to the pool when the task settles, also when it throws', async () => {
    const released = vi.fn();
    const off = onStreamReleased(released);
    let used: Stream | undefined;
    await expect(
      task(async () => {
        used = stream();
        await sleep(1);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(released).toHaveBeenCalledTimes(1);
    expect(released).toHaveBeenCalledWith(used);
    // The pool is last-in first-out: the next task gets the same stream.
    const before = created();
    expect(await task(() => stream())).toBe(used);
    expect(created()).toBe(before);
    expect(released).toHaveBeenCalledTimes(2);
    off();
    await task(() => stream());
    expect(released).toHaveBeenCalledTimes(2);
  });

  it('a synchronous throw returns the stream too', async () => {
    const idle = streamPoolStatistics().idle;
    let used: Stream | undefined;
    await expect(
      task(() => {
        used = stream();
        throw new Error('sync');
      }),
    ).rejects.toThrow('sync');
    expect(streamPoolStatistics().idle).toBe(idle);
    expect(await task(() => stream())).toBe(used);
  });

  it('keeps at most maxIdle idle streams per context, destroying the rest once their work is done', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    // Six tasks hold six streams at once, then settle in order.
    const held: InstanceType<typeof fake.FakeStream>[] = [];
    const tasks = Array.from({ length: 6 }, () =>
      task(async () => {
        held.push(stream() as unknown as InstanceType<typeof fake.FakeStream>);
        await gate;
      }),
    );
    await sleep(1);
    expect(new Set(held).size).toBe(6);
    const idleBefore = streamPoolStatistics(0).idle;
    const destroyedBefore = streamPoolStatistics().destroyed;
    configureStreams({ maxIdle: 2 });
    try {
      // The idle streams beyond the bound go at once (none has work queued).
      expect(streamPoolStatistics(0).idle).toBe(2);
      expect(streamPoolStatistics(1).idle).toBeLessThanOrEqual(2);
      const destroyedIdle = streamPoolStatistics().destroyed - destroyedBefore;
      expect(destroyedIdle).toBeGreaterThanOrEqual(idleBefore - 2);
      // The last task's stream still has work queued when its task settles.
      const busy = held.at(-1)!;
      busy.idle = false;
      release();
      await Promise.all(tasks);
      // The idle list is full: the six released streams go; five at once...
      expect(streamPoolStatistics(0).idle).toBe(2);
      expect(held.filter((s) => s.disposed)).toHaveLength(5);
      for (const s of held.filter((s) => s.disposed)) expect(fake.state.disposed).toContain(s);
      // ...the busy one once a query finds its work done (never blocking on it).
      expect(busy.disposed).toBe(false);
      busy.idle = true;
      await sleep(20);
      expect(busy.disposed).toBe(true);
      expect(streamPoolStatistics().destroyed - destroyedBefore).toBe(destroyedIdle + 6);
      // The survivors serve the next tasks; a destroyed stream is never handed out.
      const next = (await task(() => stream())) as unknown as InstanceType<typeof fake.FakeStream>;
      expect(next.disposed).toBe(false);
    } finally {
      configureStreams({ maxIdle: 32 });
    }
  });

  it('configureStreams rejects a bad bound before changing anything', () => {
    const idle = streamPoolStatistics(0).idle;
    expect(idle).toBeGreaterThan(0);
    expect(() => configureStreams({ maxIdle: -1 })).toThrow(fake.CudaArgumentError);
    expect(() => configureStreams({ maxIdle: 1.5 })).toThrow(/integer >= 0/);
    expect(() => configureStreams({ maxStreams: 0 })).toThrow(/maxStreams must be an integer >= 1/);
    expect(() => configureStreams({ maxIdle: 0, prewarm: -1 })).toThrow(/prewarm/);
    expect(() => configureStreams({ trimIdleAfterMs: Number.NaN })).toThrow(/trimIdleAfterMs/);
    // Nothing changed: the valid maxIdle of the rejected call was not applied.
    expect(streamPoolStatistics(0).idle).toBe(idle);
  });

  it('streamPoolStatistics counts the streams created by the pool', () => {
    const statistics = streamPoolStatistics();
    expect(statistics.created).toBe(created());
    expect(statistics.idle).toBeLessThanOrEqual(statistics.created);
  });
});
