import { setTimeout as sleep } from 'node:timers/promises';
import type { Context, DeviceBuffer, Stream } from '@cuda-tasks/cudadrv';
import { afterEach, describe, expect, it, vi } from 'vitest';

// The driver is replaced by a test double (see testing/fake-driver.ts): its streams log the
// GPU-side waits, its events their records, its DeviceBuffer allocations and frees, all in
// `fake.state.gpuLog`.
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import { onCleanupError } from './cleanup.js';
import { capture } from './graphs.js';
import {
  configureHandles,
  DEFAULT_MAX_HANDLES_PER_CONTEXT,
  HandleCache,
  type HandleCacheOptions,
  warmHandles,
} from './handle-cache.js';
import { stream } from './state.js';
import { prewarm, task, withDevice, withStream } from './task.js';

const context0 = fake.devices[0]!.context;
const context1 = fake.devices[1]!.context;

interface FakeHandle {
  id: number;
  context: unknown;
}

function userStream(context = context0, name = 'user'): Stream {
  return new fake.FakeStream(context, name) as unknown as Stream;
}

function nameOf(s: Stream | undefined): string {
  return (s as unknown as { name: string }).name;
}

const gpu = () => fake.state.gpuLog.splice(0);

/** Caches made by a test, disposed after it (so their listeners do not pile up). */
const made: HandleCache<FakeHandle>[] = [];
afterEach(() => {
  for (const cache of made.splice(0)) cache.dispose();
  configureHandles({ maxHandlesPerContext: DEFAULT_MAX_HANDLES_PER_CONTEXT });
});

/** A cache whose callbacks are spies that also log, in order, what happened to which handle. */
function makeCache(options: Partial<HandleCacheOptions<FakeHandle>> = {}) {
  let next = 0;
  const log: string[] = [];
  const callbacks = {
    name: 'fakelib',
    create: vi.fn((context: Context): FakeHandle => {
      const handle = { id: next++, context };
      log.push(`create ${handle.id}`);
      return handle;
    }),
    destroy: vi.fn((handle: FakeHandle, _context: Context) => {
      log.push(`destroy ${handle.id}`);
    }),
    setStream: vi.fn((handle: FakeHandle, s: Stream) => {
      log.push(`setStream ${handle.id} ${nameOf(s)}`);
    }),
  };
  const cache = new HandleCache<FakeHandle>({ ...callbacks, ...options });
  made.push(cache);
  gpu();
  return { cache, options: callbacks, log };
}

/** Starts `count` tasks that each run `body`, all alive at once until the gate opens. */
async function concurrently<T>(count: number, body: (index: number) => T): Promise<T[]> {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  let started = 0;
  const tasks = Array.from({ length: count }, (_, index) =>
    task(async () => {
      const result = body(index);
      started++;
      await gate;
      return result;
    }),
  );
  // All hold their handles at once (a burst's starts may span event-loop turns).
  while (started < count) await sleep(1);
  open();
  return Promise.all(tasks);
}

describe('leases', () => {
  it('the first use in a context makes the whole bound at once; a burst after it creates none and shares past the bound', async () => {
    const { cache, options } = makeCache({ maxHandlesPerContext: 4 });
    const first = await task(() => cache.get());
    expect(options.create).toHaveBeenCalledTimes(4);
    expect(cache.statistics()).toMatchObject({ created: 4, idle: 4, leased: 0 });
    const handles = await concurrently(6, () => cache.get());
    expect(options.create).toHaveBeenCalledTimes(4);
    expect(new Set(handles).size).toBe(4);
    expect(handles).toContain(first);
  });

  it('after idle handles were destroyed, a task shares one that exists and the cache grows back between turns', async () => {
    const { cache, options } = makeCache({ maxHandlesPerContext: 3 });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const holder = task(async () => {
      const mine = cache.get();
      await gate;
      return mine;
    });
    await sleep(1);
    expect(cache.destroyIdle()).toBe(2);
    const created = options.create.mock.calls.length;
    let shared: FakeHandle | undefined;
    const sharer = task(async () => {
      shared = cache.get();
      expect(options.create).toHaveBeenCalledTimes(created); // none inline
      await sleep(5);
    });
    await sharer;
    release();
    expect(shared).toBe(await holder);
    expect(options.create.mock.calls.length - created).toBe(2); // grown back, one per turn
    expect(cache.statistics().handles).toBe(3);
  });

  it('a lease goes back to the idle pool when the task settles, and serves the next task', async () => {
    const { cache, options } = makeCache({ maxHandlesPerContext: 1 });
    const makeCurrentBefore = context0.makeCurrentCalls;
    const handle = await task(async () => {
      const handle = cache.get();
      expect(cache.statistics()).toMatchObject({ created: 1, idle: 0, leased: 1, handles: 1 });
      await sleep(1);
      expect(cache.get()).toBe(handle); // one lease per task
      return handle;
    });
    expect(options.create).toHaveBeenCalledTimes(1);
    expect(options.create.mock.calls[0]![0]).toBe(context0);
    expect(context0.makeCurrentCalls).toBeGreaterThan(makeCurrentBefore);
    expect(cache.statistics()).toMatchObject({ created: 1, destroyed: 0, idle: 1, leased: 0 });
    expect(await task(() => cache.get())).toBe(handle);
    expect(options.create).toHaveBeenCalledTimes(1);
  });

  it('concurrent tasks hold distinct handles; a nested task has its own', async () => {
    const { cache } = makeCache();
    const handles = await concurrently(3, () => cache.get());
    expect(new Set(handles).size).toBe(3);
    await task(async () => {
      const outer = cache.get();
      const inner = await task(() => cache.get());
      expect(inner).not.toBe(outer);
      expect(cache.get()).toBe(outer);
    });
  });

  it('one lease per task and context: each device has its own handles', async () => {
    const { cache } = makeCache({ maxHandlesPerContext: 1 });
    const [on0, on1, again1] = await task(async () => {
      const on0 = cache.get();
      const on1 = withDevice(1, () => cache.get());
      await sleep(1);
      return [on0, on1, withDevice(1, () => cache.get())];
    });
    expect(on0!.context).toBe(context0);
    expect(on1!.context).toBe(context1);
    expect(again1).toBe(on1);
    expect(cache.statistics()).toMatchObject({ idle: 2, leased: 0 });
  });
});

describe('lazy binding with one rebind-skip rule', () => {
  it('binds on first use, rebinds only when the stream changes', async () => {
    const { cache, options } = makeCache();
    const other = userStream(context0, 'other');
    await task(() => {
      const own = stream();
      const handle = cache.get();
      cache.get();
      expect(options.setStream.mock.calls).toEqual([[handle, own]]);
      expect(cache.boundStream(handle)).toBe(own);
      expect(withStream(other, () => cache.get())).toBe(handle);
      expect(cache.boundStream(handle)).toBe(other);
      cache.get();
      expect(options.setStream.mock.calls.map(([, s]) => nameOf(s))).toEqual([
        nameOf(own),
        'other',
        nameOf(own),
      ]);
    });
  });

  it('a handle leased again on the stream the library still has needs no setStream', async () => {
    const { cache, options } = makeCache();
    const s = userStream(context0, 'kept');
    const handle = await task(() => withStream(s, () => cache.get()));
    expect(options.setStream).toHaveBeenCalledTimes(1);
    // Released (unbound), then leased on the same stream: bound again without a call.
    expect(await task(() => withStream(s, () => cache.get()))).toBe(handle);
    expect(options.setStream).toHaveBeenCalledTimes(1);
    expect(await task(() => cache.boundStream(withStream(s, () => cache.get())))).toBe(s);
  });

  it('a lease prefers the idle handle last bound to the stream the task uses', async () => {
    const { cache, options } = makeCache();
    const s1 = userStream(context0, 's1');
    const s2 = userStream(context0, 's2');
    const [onS1, onS2] = await concurrently(2, (i) =>
      withStream(i === 0 ? s1 : s2, () => cache.get()),
    );
    expect(onS1).not.toBe(onS2);
    const calls = options.setStream.mock.calls.length;
    expect(await task(() => withStream(s1, () => cache.get()))).toBe(onS1);
    expect(await task(() => withStream(s2, () => cache.get()))).toBe(onS2);
    expect(options.setStream.mock.calls.length).toBe(calls);
  });

  it('invalidate() makes the next use rebind, still skipping setStream', async () => {
    const onBind = vi.fn();
    const { cache, options } = makeCache({ onBind });
    await task(() => {
      cache.get();
      cache.get();
      expect(onBind).toHaveBeenCalledTimes(1);
      cache.invalidate();
      cache.get();
      expect(onBind).toHaveBeenCalledTimes(2);
      expect(options.setStream).toHaveBeenCalledTimes(1);
    });
  });
});

describe("bind() hands a view, not the cache's bookkeeping", () => {
  it('the handle, its bound stream and its workspace, read live; the same object at each call; nothing else', async () => {
    const set = vi.fn();
    const { cache } = makeCache({ ordered: false, workspace: { bytes: () => 4096, set } });
    const other = userStream(context0, 'other');
    await task(() => {
      const binding = cache.bind();
      expect(Object.keys(binding)).toEqual([]);
      for (const internal of ['leases', 'spares', 'binding', 'context', 'lastBound', 'record']) {
        expect(internal in binding, internal).toBe(false);
      }
      expect(binding.handle).toBe(cache.get());
      expect(binding.stream).toBe(stream());
      expect(binding.workspace).toBe(cache.workspaceOf(binding.handle, stream()));
      expect(cache.bind()).toBe(binding);
      // Bound elsewhere: the same view reads the new stream and its workspace.
      const there = withStream(other, () => cache.bind());
      expect(there).toBe(binding);
      expect(binding.stream).toBe(other);
      expect(binding.workspace).toBe(cache.workspaceOf(binding.handle, other));
      expect(binding.workspace).toBe(set.mock.calls.at(-1)![1]);
      expect(() => {
        (binding as { handle: unknown }).handle = undefined;
      }).toThrow(TypeError);
    });
  });
});

describe('a bound on the handles a burst creates', () => {
  it('past maxHandlesPerContext, tasks share the least-leased handles, rebound at each call', async () => {
    const { cache, options, log } = makeCache({ maxHandlesPerContext: 2, ordered: false });
    const results = await concurrently(5, () => {
      const handle = cache.get();
      return { handle, stream: stream() };
    });
    expect(options.create).toHaveBeenCalledTimes(2);
    const uses = [0, 1].map((id) => results.filter((r) => r.handle.id === id).length).sort();
    expect(uses).toEqual([2, 3]);
    expect(cache.statistics()).toMatchObject({ created: 2, shared: 3, leased: 0, idle: 2 });
    // Each call bound the shared handle to the caller's stream.
    for (const { handle, stream: s } of results) {
      expect(log).toContain(`setStream ${handle.id} ${nameOf(s)}`);
    }
  });

  it('a shared handle rebinds to each task’s stream on each of its calls', async () => {
    const { cache, options } = makeCache({ maxHandlesPerContext: 1, ordered: false });
    await concurrently(2, () => cache.get());
    let a!: Stream;
    let b!: Stream;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const first = task(async () => {
      a = stream();
      cache.get();
      await gate;
      cache.get();
    });
    const second = task(async () => {
      b = stream();
      cache.get();
      await gate;
      cache.get();
    });
    await sleep(1);
    options.setStream.mockClear();
    release();
    await Promise.all([first, second]);
    expect(options.setStream.mock.calls.map(([, s]) => s)).toEqual([a, b]);
  });

  it('warm() makes the handles ahead, up to the bound; a burst then creates none', async () => {
    const { cache, options } = makeCache({ maxHandlesPerContext: 4 });
    expect(cache.warm()).toBe(4);
    expect(cache.statistics()).toMatchObject({ created: 4, idle: 4 });
    expect(cache.warm(10)).toBe(4);
    const handles = await concurrently(6, () => cache.get());
    expect(options.create).toHaveBeenCalledTimes(4);
    expect(new Set(handles).size).toBe(4);
    expect(() => cache.warm(-1)).toThrow(fake.CudaArgumentError);
  });

  it('configureHandles sets the bound of caches that set none; prewarm() makes streams and handles', async () => {
    const { cache } = makeCache();
    const bounded = makeCache({ maxHandlesPerContext: 1, name: 'bounded' }).cache;
    expect(cache.maxHandlesPerContext).toBe(DEFAULT_MAX_HANDLES_PER_CONTEXT);
    configureHandles({ maxHandlesPerContext: 3 });
    expect(cache.maxHandlesPerContext).toBe(3);
    expect(bounded.maxHandlesPerContext).toBe(1);
    const warmed = warmHandles(context0 as unknown as Context);
    expect(warmed).toMatchObject({ fakelib: 3, bounded: 1 });
    const result = prewarm(0);
    expect(result.streams).toBeGreaterThan(0);
    expect(result.handles).toMatchObject({ fakelib: 3, bounded: 1 });
    expect(() => configureHandles({ maxHandlesPerContext: 0 })).toThrow(fake.CudaArgumentError);
    expect(cache.maxHandlesPerContext).toBe(3);
    // A lowered bound destroys the idle handles beyond it.
    configureHandles({ maxHandlesPerContext: 1 });
    expect(cache.statistics()).toMatchObject({ idle: 1, destroyed: 2 });
  });
});

describe('the GPU-side hand-off', () => {
  it('a handle going idle records an event where its work went; the next bind elsewhere waits for it', async () => {
    const { cache } = makeCache({ ordered: false });
    const s1 = userStream(context0, 's1');
    const s2 = userStream(context0, 's2');
    await task(() => withStream(s1, () => cache.get()));
    const recorded = gpu();
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatch(/^record event \d+ on s1$/);
    const event = recorded[0]!.split(' ')[2];
    await task(() => withStream(s2, () => cache.get()));
    expect(gpu()).toEqual([`s2 waits for event ${event} (s1)`, `record event ${event} on s2`]);
    // Back on the stream it was released from: already in order there, no wait.
    await task(() => withStream(s2, () => cache.get()));
    expect(gpu()).toEqual([`record event ${event} on s2`]);
  });

  it('ordered handles (the default): every switch of streams waits for the previous one', async () => {
    const { cache } = makeCache();
    const other = userStream(context0, 'other');
    await task(() => {
      const own = nameOf(stream());
      cache.get();
      gpu();
      withStream(other, () => cache.get());
      cache.get();
      expect(gpu()).toEqual([`other waits for ${own}`, `${own} waits for other`]);
    });
  });

  it('unordered handles switch streams without a wait', async () => {
    const { cache } = makeCache({ ordered: false });
    const other = userStream(context0, 'other');
    await task(() => {
      cache.get();
      withStream(other, () => cache.get());
      cache.get();
      expect(gpu()).toEqual([]);
    });
  });
});

describe('a workspace per (handle, stream)', () => {
  const bytes = 1 << 20;
  function workspaceCache(extra: Partial<HandleCacheOptions<FakeHandle>> = {}) {
    const set = vi.fn(
      (_handle: FakeHandle, _workspace: DeviceBuffer | undefined, _stream: Stream) => {},
    );
    let size = bytes;
    const result = makeCache({
      ordered: false,
      workspace: { bytes: () => size, set },
      ...extra,
    });
    return { ...result, set, resize: (value: number) => (size = value) };
  }
  type Buffer = InstanceType<typeof fake.FakeDeviceBuffer>;

  it('allocated on the stream, handed to the library once, kept as spares when the handle goes idle, freed on their streams', async () => {
    const { cache, set } = workspaceCache();
    const other = userStream(context0, 'other');
    let own!: Stream;
    const { handle, first, second } = await task(() => {
      own = stream();
      const binding = cache.bind();
      cache.bind();
      const onOther = withStream(other, () => cache.bind());
      return {
        handle: binding.handle,
        first: cache.workspaceOf(binding.handle, own) as unknown as Buffer,
        second: onOther.workspace as unknown as Buffer,
      };
    });
    expect(first.stream).toBe(own);
    expect(first.byteLength).toBe(bytes);
    expect(second.stream).toBe(other);
    expect(second).not.toBe(first);
    expect(set.mock.calls.map(([, w, s]) => [w, s])).toEqual([
      [first, own],
      [second, other],
    ]);
    // Idle now: its hand-off recorded; the workspaces stay with the handle as spares.
    const log = gpu();
    expect(log.at(-1)).toMatch(/^record event \d+ on other$/);
    expect(first.disposed || second.disposed).toBe(false);
    expect(cache.workspaceOf(handle, own)).toBeUndefined();
    expect(cache.statistics()).toMatchObject({ workspaces: 2, workspaceBytes: 2 * bytes });
    // Released: each freed on the stream it was used on.
    expect(cache.releaseWorkspaces()).toBe(2 * bytes);
    expect(gpu().sort()).toEqual(
      [
        `free 0x${first.address.toString(16)} on ${nameOf(own)}`,
        `free 0x${second.address.toString(16)} on other`,
      ].sort(),
    );
    expect(first.disposed && second.disposed).toBe(true);
  });

  it('a workspace on another task’s pool stream becomes a spare when that stream goes back to the pool', async () => {
    const { cache } = workspaceCache();
    await task(async () => {
      let other!: Stream;
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const otherTask = task(async () => {
        other = stream();
        await gate;
      });
      await sleep(1);
      const handle = cache.get();
      const there = withStream(other, () => cache.bind()).workspace as unknown as Buffer;
      cache.get(); // back on our own stream
      expect(cache.workspaceOf(handle, other)).toBe(there);
      release();
      await otherTask; // its stream goes back to the pool
      expect(there.disposed).toBe(false);
      expect(cache.workspaceOf(handle, other)).toBeUndefined();
      expect(cache.statistics().workspaces).toBe(2);
      expect(cache.workspaceOf(handle, stream())).toBeDefined();
    });
  });

  it('workspaces of two handles on a pool stream, one freed before: the stream going back unbinds the other', async () => {
    const { cache, resize } = workspaceCache();
    let other!: Stream;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const otherTask = task(async () => {
      other = stream();
      await gate;
    });
    await sleep(1);
    // Two tasks, each with a handle of its own and a workspace on the other task's stream.
    let first!: Buffer;
    let second!: Buffer;
    let secondHandle!: FakeHandle;
    let releaseSecond!: () => void;
    const secondGate = new Promise<void>((resolve) => (releaseSecond = resolve));
    const holder = task(async () => {
      const binding = withStream(other, () => cache.bind());
      second = binding.workspace as unknown as Buffer;
      secondHandle = binding.handle;
      await secondGate;
    });
    await task(async () => {
      first = withStream(other, () => cache.bind()).workspace as unknown as Buffer;
      // 0 bytes at the next bind: this handle's workspace there is freed now.
      cache.invalidate();
      resize(0);
      withStream(other, () => cache.bind());
      resize(bytes);
    });
    expect(first.disposed).toBe(true);
    expect(second.disposed).toBe(false);
    release();
    await otherTask; // its stream goes back to the pool: the second handle's workspace is a spare
    expect(second.disposed).toBe(false);
    expect(cache.workspaceOf(secondHandle, other)).toBeUndefined();
    releaseSecond();
    await holder;
    cache.releaseWorkspaces();
    expect(second.disposed).toBe(true);
  });

  it('the next task on the same stream gets the block back at the same address: nothing to set', async () => {
    const { cache, set } = workspaceCache();
    const s = userStream(context0, 'pooled');
    await task(() => withStream(s, () => cache.get()));
    expect(set).toHaveBeenCalledTimes(1);
    await task(() => withStream(s, () => cache.get()));
    expect(set).toHaveBeenCalledTimes(1);
  });

  it('a new size applies at the next bind after invalidate(); 0 bytes hands the library none', async () => {
    const { cache, set, resize } = workspaceCache();
    await task(() => {
      cache.get();
      resize(2 * bytes);
      cache.invalidate();
      const binding = cache.bind();
      expect(binding.workspace?.byteLength).toBe(2 * bytes);
      resize(0);
      cache.invalidate();
      expect(cache.bind().workspace).toBeUndefined();
      expect(set.mock.calls.map(([, w]) => w?.byteLength)).toEqual([bytes, 2 * bytes, undefined]);
    });
  });

  it('with resetBySetStream, the workspace is set again after each setStream', async () => {
    const set = vi.fn();
    const { cache } = makeCache({
      ordered: false,
      workspace: { bytes: () => bytes, set, resetBySetStream: true },
    });
    const other = userStream(context0, 'other');
    await task(() => {
      cache.get();
      withStream(other, () => cache.get());
      cache.get(); // back: setStream again, so the workspace again (its address is unchanged)
      expect(set).toHaveBeenCalledTimes(3);
      expect(set.mock.calls[2]![1]).toBe(set.mock.calls[0]![1]);
    });
  });

  it('a disposed stream: its workspace is freed there first, and the handle forgets it', async () => {
    const { cache, set } = workspaceCache();
    const doomed = new fake.FakeStream(context0, 'doomed');
    await task(() => {
      const binding = withStream(doomed as unknown as Stream, () => cache.bind());
      const workspace = binding.workspace as unknown as Buffer;
      gpu();
      doomed.dispose();
      expect(gpu()).toEqual([
        `free 0x${workspace.address.toString(16)} on doomed`,
        expect.stringMatching(/^record event \d+ on doomed$/),
      ]);
      expect(cache.boundStream(binding.handle)).toBeUndefined();
      // The next use binds to the task's stream, with its own workspace, set anew.
      cache.get();
      expect(set).toHaveBeenCalledTimes(2);
      expect(gpu()[0]).toMatch(/waits for event \d+ \(doomed\)$/);
    });
  });

  it('inside a graph capture: a workspace the graph owns, allocated outside; a stream workspace after', async () => {
    const { cache, set } = workspaceCache();
    await task(async () => {
      cache.get();
      let inside: { stream: Stream; workspace: Buffer } | undefined;
      await capture(() => {
        const binding = cache.bind();
        cache.bind();
        inside = { stream: stream(), workspace: binding.workspace as unknown as Buffer };
        expect(cache.workspaceOf(binding.handle, stream())).toBe(binding.workspace);
      });
      const { stream: captureStream, workspace } = inside!;
      expect(workspace.stream).toBe(context0.defaultStream);
      expect(set.mock.calls[1]![1]).toBe(workspace);
      expect(set.mock.calls[1]![2]).toBe(captureStream);
      // Nothing was allocated on the capturing stream.
      expect(fake.state.gpuLog.join('\n')).not.toContain(`on ${nameOf(captureStream)} at`);
      // Back on the task's stream: its own workspace, not the graph's.
      const after = cache.bind();
      expect(after.workspace).not.toBe(workspace);
      expect(set.mock.calls.at(-1)![1]).toBe(after.workspace);
    });
  });
});

describe('exception-safe release, disposal, and out-of-memory', () => {
  it('one failing destroy strands no other lease; every failure is reported', async () => {
    const { cache, options } = makeCache({ maxIdlePerContext: 0 });
    options.destroy.mockImplementation((handle: FakeHandle) => {
      throw new Error(`destroy ${handle.id} failed`);
    });
    const reported: unknown[] = [];
    const off = onCleanupError((error) => reported.push(error));
    try {
      const outcome = await task(() => {
        cache.get();
        withDevice(1, () => cache.get());
        return 'result';
      });
      expect(outcome).toBe('result');
      expect(cache.statistics()).toMatchObject({ leased: 0, handles: 0, destroyed: 2 });
      expect(reported.map(String).sort()).toEqual([
        'Error: destroy 0 failed',
        'Error: destroy 1 failed',
      ]);
    } finally {
      off();
    }
  });

  it('dispose() removes the listeners, destroys idle handles, and leased ones when their task settles', async () => {
    const disposedBefore = fake.disposedListeners.size;
    const hooksBefore = fake.state.outOfMemoryHooks.size;
    const { cache, options } = makeCache({ maxHandlesPerContext: 2 });
    expect(fake.disposedListeners.size).toBe(disposedBefore + 1);
    expect(fake.state.outOfMemoryHooks.size).toBe(hooksBefore + 1);
    await concurrently(2, () => cache.get());
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const holder = task(async () => {
      cache.get();
      await gate;
    });
    await sleep(1);
    cache.dispose();
    cache.dispose(); // safe twice
    expect(fake.disposedListeners.size).toBe(disposedBefore);
    expect(fake.state.outOfMemoryHooks.size).toBe(hooksBefore);
    expect(options.destroy).toHaveBeenCalledTimes(1);
    release();
    await holder;
    expect(options.destroy).toHaveBeenCalledTimes(2);
    expect(cache.statistics()).toMatchObject({ handles: 0, idle: 0, leased: 0 });
    await expect(task(() => cache.get())).rejects.toThrow(fake.DisposedError);
    expect(() => cache.warm()).toThrow(fake.DisposedError);
  });

  it('the out-of-memory hook destroys the idle handles of that context', async () => {
    const { cache, options } = makeCache({ maxHandlesPerContext: 1 });
    await task(() => {
      cache.get();
      withDevice(1, () => cache.get());
    });
    for (const hook of fake.state.outOfMemoryHooks) hook(context1);
    expect(options.destroy).toHaveBeenCalledTimes(1);
    expect(options.destroy.mock.calls[0]![1]).toBe(context1);
    expect(cache.statistics()).toMatchObject({ idle: 1, destroyed: 1 });
    expect(cache.destroyIdle()).toBe(1);
  });

  it('a disposed stream is refused with a DisposedError before leasing or binding a handle (issue 14, bug 5)', async () => {
    const { cache, options } = makeCache();
    const gone = new fake.FakeStream(context0, 'gone');
    gone.dispose();
    await task(() => {
      expect(() => cache.get(gone as unknown as Stream)).toThrow(
        'FakeStream(gone) has been disposed and cannot be used',
      );
      expect(() => cache.get(gone as unknown as Stream)).toThrow(fake.DisposedError);
    });
    expect(options.create).not.toHaveBeenCalled();
    expect(options.setStream).not.toHaveBeenCalled();
    expect(cache.statistics().leased).toBe(0);
  });

  it('bad bounds are refused before anything is made', () => {
    expect(() => makeCache({ maxHandlesPerContext: 0 })).toThrow(fake.CudaArgumentError);
    expect(() => makeCache({ maxIdlePerContext: -1 })).toThrow(/maxIdlePerContext/);
  });
});
