import { setTimeout as sleep } from 'node:timers/promises';
import type { Context, Stream } from '@cuda-tasks/cudadrv';
import { describe, expect, it, vi } from 'vitest';

// The driver is replaced by a test double (see testing/fake-driver.ts).
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import { HandleCache } from './handle-cache.js';
import { stream } from './state.js';
import { task, withDevice, withStream } from './task.js';

const context0 = fake.devices[0]!.context;
const context1 = fake.devices[1]!.context;

interface FakeHandle {
  id: number;
  context: unknown;
}

function userStream(context = context0, name = 'user'): Stream {
  return new fake.FakeStream(context, name) as unknown as Stream;
}

function nameOf(s: Stream): string {
  return (s as unknown as { name: string }).name;
}

/** A cache whose callbacks are spies that also log, in order, what happened to which handle. */
function makeCache(maxIdlePerContext?: number) {
  let next = 0;
  const log: string[] = [];
  const options = {
    name: 'fakelib',
    create: vi.fn((context: Context): FakeHandle => {
      const handle = { id: next++, context };
      log.push(`create ${handle.id}`);
      return handle;
    }),
    destroy: vi.fn((handle: FakeHandle, _context: Context) => {
      log.push(`destroy ${handle.id}`);
    }),
    bindStream: vi.fn((handle: FakeHandle, s: Stream, _previous?: Stream) => {
      log.push(`bind ${handle.id} ${nameOf(s)}`);
    }),
    unbindStream: vi.fn((handle: FakeHandle, s: Stream) => {
      log.push(`unbind ${handle.id} ${nameOf(s)}`);
    }),
    maxIdlePerContext,
  };
  const cache = new HandleCache<FakeHandle>(options);
  return { cache, options, log };
}

/** Starts `count` tasks that each run `body`, all alive at once until the gate opens. */
async function concurrently<T>(count: number, body: () => T): Promise<T[]> {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const tasks = Array.from({ length: count }, () =>
    task(async () => {
      const result = body();
      await gate;
      return result;
    }),
  );
  await sleep(1);
  open();
  return Promise.all(tasks);
}

describe('HandleCache leases', () => {
  it('a lease goes back to the idle pool when the task settles', async () => {
    const { cache, options } = makeCache();
    const makeCurrentBefore = context0.makeCurrentCalls;
    const handle = await task(async () => {
      const handle = cache.get();
      expect(cache.statistics()).toEqual({ created: 1, destroyed: 0, idle: 0, leased: 1 });
      await sleep(1);
      return handle;
    });
    expect(cache.statistics()).toEqual({ created: 1, destroyed: 0, idle: 1, leased: 0 });
    expect(options.create).toHaveBeenCalledTimes(1);
    expect(options.create.mock.calls[0]![0]).toBe(context0);
    expect(handle.context).toBe(context0);
    // The context was made current before create.
    expect(context0.makeCurrentCalls).toBeGreaterThan(makeCurrentBefore);
    expect(options.destroy).not.toHaveBeenCalled();
  });

  it('a lease goes back also when the task throws (async and sync)', async () => {
    const { cache } = makeCache();
    await expect(
      task(async () => {
        cache.get();
        await sleep(1);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(cache.statistics()).toEqual({ created: 1, destroyed: 0, idle: 1, leased: 0 });
    await expect(
      task(() => {
        cache.get();
        throw new Error('sync boom');
      }),
    ).rejects.toThrow('sync boom');
    expect(cache.statistics()).toEqual({ created: 1, destroyed: 0, idle: 1, leased: 0 });
  });

  it('one lease per task and context: repeated get() returns the same handle', async () => {
    const { cache, options } = makeCache();
    await task(async () => {
      const first = cache.get();
      await sleep(1);
      const second = cache.get();
      await Promise.resolve();
      expect(cache.get(stream())).toBe(first);
      expect(second).toBe(first);
      expect(cache.statistics().leased).toBe(1);
    });
    expect(options.create).toHaveBeenCalledTimes(1);
    expect(options.bindStream).toHaveBeenCalledTimes(1);
  });

  it('concurrent tasks get distinct handles; a second wave reuses the idle ones', async () => {
    const { cache, options } = makeCache();
    const first = await concurrently(3, () => cache.get());
    expect(new Set(first).size).toBe(3);
    expect(cache.statistics()).toEqual({ created: 3, destroyed: 0, idle: 3, leased: 0 });
    const second = await concurrently(3, () => cache.get());
    expect(options.create).toHaveBeenCalledTimes(3);
    expect(new Set([...first, ...second]).size).toBe(3);
    expect(cache.statistics()).toEqual({ created: 3, destroyed: 0, idle: 3, leased: 0 });
  });

  it('a nested task takes its own lease', async () => {
    const { cache } = makeCache();
    await task(async () => {
      const outer = cache.get();
      const inner = await task(async () => {
        const handle = cache.get();
        expect(cache.statistics().leased).toBe(2);
        return handle;
      });
      expect(inner).not.toBe(outer);
      expect(cache.get()).toBe(outer);
      expect(cache.statistics()).toMatchObject({ leased: 1, idle: 1 });
    });
    expect(cache.statistics()).toEqual({ created: 2, destroyed: 0, idle: 2, leased: 0 });
  });

  it('one lease per context: a task on two devices holds two handles', async () => {
    const { cache, options } = makeCache();
    const [h0, h1, h1Explicit] = await task(async () => {
      const h0 = cache.get();
      const h1 = withDevice(1, () => cache.get());
      await sleep(1);
      const h1Explicit = cache.get(userStream(context1, 'user on 1'));
      expect(cache.statistics().leased).toBe(2);
      return [h0, h1, h1Explicit];
    });
    expect(h0!.context).toBe(context0);
    expect(h1!.context).toBe(context1);
    expect(h1Explicit).toBe(h1);
    expect(options.create.mock.calls.map((call) => call[0])).toEqual([context0, context1]);
    expect(cache.statistics()).toEqual({ created: 2, destroyed: 0, idle: 2, leased: 0 });
    // Idle pools are per context: device 1 gets its device-1 handle back.
    expect(await withDevice(1, () => task(() => cache.get()))).toBe(h1);
    expect(await task(() => cache.get())).toBe(h0);
    expect(options.create).toHaveBeenCalledTimes(2);
  });
});

describe('HandleCache stream binding', () => {
  it('bindStream is called only when the stream changes', async () => {
    const { cache, options } = makeCache();
    const s2 = userStream(context0, 's2');
    await task(async () => {
      const own = stream();
      const handle = cache.get();
      cache.get();
      await sleep(1);
      cache.get();
      expect(options.bindStream).toHaveBeenCalledTimes(1);
      expect(options.bindStream.mock.calls[0]![0]).toBe(handle);
      expect(options.bindStream.mock.calls[0]![1]).toBe(own);
      expect(cache.boundStream(handle)).toBe(own);

      expect(withStream(s2, () => cache.get())).toBe(handle);
      withStream(s2, () => cache.get());
      expect(options.bindStream).toHaveBeenCalledTimes(2);
      expect(options.bindStream.mock.calls[1]![1]).toBe(s2);
      expect(cache.boundStream(handle)).toBe(s2);

      cache.get();
      cache.get();
      expect(options.bindStream).toHaveBeenCalledTimes(3);
      expect(options.bindStream.mock.calls[2]![1]).toBe(own);

      cache.get(s2);
      expect(options.bindStream).toHaveBeenCalledTimes(4);
      expect(options.bindStream.mock.calls[3]![1]).toBe(s2);
    });
  });

  it("releasing a task's stream unbinds handles bound to it; the next get() rebinds", async () => {
    const { cache, options } = makeCache();
    const [handle, own] = await task(async () => {
      const handle = cache.get();
      await sleep(1);
      return [handle, stream()] as const;
    });
    expect(options.unbindStream).toHaveBeenCalledTimes(1);
    expect(options.unbindStream.mock.calls[0]![0]).toBe(handle);
    expect(options.unbindStream.mock.calls[0]![1]).toBe(own);
    expect(cache.boundStream(handle)).toBeUndefined();

    const [again, next] = await task(() => [cache.get(), stream()] as const);
    expect(again).toBe(handle);
    expect(options.bindStream).toHaveBeenCalledTimes(2);
    expect(options.bindStream.mock.calls[1]![0]).toBe(handle);
    expect(options.bindStream.mock.calls[1]![1]).toBe(next);
  });

  it('bindStream is told the stream the handle was last bound to, also after an unbind', async () => {
    const { cache, options } = makeCache();
    const other = userStream(context0, 'other');
    const [handle, own] = await task(async () => {
      const handle = cache.get();
      withStream(other, () => cache.get());
      cache.get();
      return [handle, stream()] as const;
    });
    // A new handle has no previous binding; then own -> other -> own.
    expect(options.bindStream.mock.calls.map((call) => call[2])).toEqual([undefined, own, other]);
    // The stream went back to the pool (unbound); the next task gets both back.
    const next = await task(() => {
      expect(cache.get()).toBe(handle);
      return stream();
    });
    expect(next).toBe(own);
    expect(options.bindStream.mock.calls[3]![1]).toBe(own);
    expect(options.bindStream.mock.calls[3]![2]).toBe(own);
  });

  it('a handle bound to a user stream stays bound when the task settles', async () => {
    const { cache, options } = makeCache();
    const s = userStream(context0, 'kept');
    const handle = await task(() => withStream(s, () => cache.get()));
    expect(cache.boundStream(handle)).toBe(s);
    expect(options.unbindStream).not.toHaveBeenCalled();
    // Reused on the same stream: no rebind.
    expect(await task(() => withStream(s, () => cache.get()))).toBe(handle);
    expect(options.bindStream).toHaveBeenCalledTimes(1);
  });
});

describe('HandleCache stream affinity', () => {
  it('a lease prefers the idle handle last bound to the stream the task uses', async () => {
    const { cache, options } = makeCache();
    const s1 = userStream(context0, 's1');
    const s2 = userStream(context0, 's2');
    // Two tasks at once: one handle ends bound to s1, the other to s2, and the s2 one goes
    // idle last (plain LIFO would hand it out next).
    let open!: () => void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const onStream = (s: Stream) =>
      task(async () => {
        const handle = withStream(s, () => cache.get());
        await gate;
        return handle;
      });
    const waiting = [onStream(s1), onStream(s2)];
    await sleep(1);
    open();
    const [onS1, onS2] = await Promise.all(waiting);
    expect(onS1).not.toBe(onS2);
    const binds = options.bindStream.mock.calls.length;
    // A task on s1 gets the handle bound to s1, with no rebind; the same for s2.
    expect(await task(() => withStream(s1, () => cache.get()))).toBe(onS1);
    expect(await task(() => withStream(s2, () => cache.get()))).toBe(onS2);
    expect(options.bindStream.mock.calls.length).toBe(binds);
  });

  it('after a pooled stream is released, the next task on that stream gets the handle that used it', async () => {
    const { cache } = makeCache();
    const boundTo = new Map<FakeHandle, Stream>();
    await concurrently(2, () => {
      const handle = cache.get();
      boundTo.set(handle, stream());
      return handle;
    });
    for (let i = 0; i < 4; i++) {
      await task(() => {
        const handle = cache.get();
        // The runtime unbound it when the stream went back to the pool; the affinity remains.
        expect(boundTo.get(handle)).toBe(stream());
      });
    }
  });
});

describe('HandleCache and disposed streams', () => {
  it('disposing a user stream unbinds handles bound to it; the next get() rebinds', async () => {
    const { cache, options } = makeCache();
    const own = userStream(context0, 'doomed');
    await task(() => {
      const handle = withStream(own, () => cache.get());
      expect(cache.boundStream(handle)).toBe(own);
      for (const listener of fake.disposedListeners) listener(own);
      expect(options.unbindStream).toHaveBeenCalledWith(handle, own);
      expect(cache.boundStream(handle)).toBeUndefined();
      const bindsBefore = options.bindStream.mock.calls.length;
      cache.get();
      expect(options.bindStream).toHaveBeenCalledTimes(bindsBefore + 1);
      expect(cache.boundStream(handle)).toBe(stream());
    });
  });
});

describe('HandleCache.get on a disposed stream (issue 14, bug 5)', () => {
  it('refuses with a DisposedError before leasing or binding a handle', async () => {
    const { cache, options } = makeCache();
    const gone = userStream(context0, 'gone');
    gone.dispose();
    await task(() => {
      let error: unknown;
      try {
        cache.get(gone);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(fake.DisposedError);
      expect((error as Error).message).toBe(
        'FakeStream(gone) has been disposed and cannot be used',
      );
    });
    expect(options.create).not.toHaveBeenCalled();
    expect(options.bindStream).not.toHaveBeenCalled();
    expect(cache.statistics().leased).toBe(0);
  });
});

describe('HandleCache idle pool', () => {
  it('keeps at most maxIdlePerContext idle handles, unbinding before destroying the rest', async () => {
    const { cache, options, log } = makeCache(2);
    const handles = await concurrently(5, () => cache.get());
    expect(new Set(handles).size).toBe(5);
    expect(cache.statistics()).toEqual({ created: 5, destroyed: 3, idle: 2, leased: 0 });
    expect(options.destroy).toHaveBeenCalledTimes(3);
    for (const [handle, context] of options.destroy.mock.calls) {
      expect(context).toBe(context0);
      const unbound = log.findIndex((entry) => entry.startsWith(`unbind ${handle.id} `));
      expect(unbound).toBeGreaterThanOrEqual(0);
      expect(unbound).toBeLessThan(log.indexOf(`destroy ${handle.id}`));
    }
    // The survivors serve the next wave.
    const next = await concurrently(2, () => cache.get());
    expect(options.create).toHaveBeenCalledTimes(5);
    const destroyed = new Set(options.destroy.mock.calls.map((call) => call[0]));
    for (const handle of next) expect(destroyed.has(handle)).toBe(false);
  });

  it('destroyIdle destroys the idle handles, unbinding bound ones first', async () => {
    const { cache, options, log } = makeCache();
    const s = userStream(context0, 'kept');
    // Two idle handles, unbound when their tasks' streams went back to the pool...
    const pair = await concurrently(2, () => cache.get());
    for (const handle of pair) expect(cache.boundStream(handle)).toBeUndefined();
    // ...then one of them used on a user stream, which it stays bound to.
    const bound = await task(() => withStream(s, () => cache.get()));
    expect(pair).toContain(bound);
    expect(cache.boundStream(bound)).toBe(s);
    expect(cache.statistics()).toMatchObject({ idle: 2, leased: 0 });
    const unbindsBefore = options.unbindStream.mock.calls.length;

    expect(cache.destroyIdle()).toBe(2);
    expect(cache.statistics()).toEqual({ created: 2, destroyed: 2, idle: 0, leased: 0 });
    expect(options.unbindStream).toHaveBeenCalledTimes(unbindsBefore + 1);
    expect(options.unbindStream.mock.calls.at(-1)![0]).toBe(bound);
    expect(options.unbindStream.mock.calls.at(-1)![1]).toBe(s);
    expect(log.indexOf(`unbind ${bound.id} kept`)).toBeLessThan(log.indexOf(`destroy ${bound.id}`));
    expect(cache.boundStream(bound)).toBeUndefined();
    expect(cache.destroyIdle()).toBe(0);
  });

  it('destroyIdle leaves leased handles alone', async () => {
    const { cache, options } = makeCache();
    await task(async () => {
      const held = cache.get();
      await task(() => cache.get());
      expect(cache.destroyIdle()).toBe(1);
      expect(options.destroy.mock.calls.map((call) => call[0])).not.toContain(held);
      expect(cache.get()).toBe(held);
    });
    expect(cache.statistics()).toEqual({ created: 2, destroyed: 1, idle: 1, leased: 0 });
  });

  it('the out-of-memory hook destroys idle handles', async () => {
    const { cache, options } = makeCache();
    await concurrently(3, () => cache.get());
    expect(cache.statistics().idle).toBe(3);
    expect(fake.state.outOfMemoryHooks.size).toBeGreaterThan(0);
    for (const hook of fake.state.outOfMemoryHooks) hook(context0);
    expect(cache.statistics()).toEqual({ created: 3, destroyed: 3, idle: 0, leased: 0 });
    expect(options.destroy).toHaveBeenCalledTimes(3);
  });
});
