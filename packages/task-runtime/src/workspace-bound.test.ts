import { setTimeout as sleep } from 'node:timers/promises';
import type { DeviceBuffer, Stream } from '@cuda-tasks/cudadrv';
import { barrier } from '@cuda-tasks/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';

// The bound on a HandleCache's workspaces under long churn, against the fake driver: its
// DeviceBuffer logs every allocation and free (and every hand-off of a buffer to another
// stream) in `fake.state.gpuLog`, so the live workspaces are counted from the driver's side.
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);

import {
  configureHandles,
  DEFAULT_MAX_HANDLES_PER_CONTEXT,
  HandleCache,
  type HandleCacheOptions,
} from './handle-cache.js';
import { stream } from './state.js';
import { task, withStream } from './task.js';

/**
 * Runs `count` tasks of `fn`, all alive at once (their starts may span event-loop turns, and a
 * task that ended would give its stream, and workspace, to the next).
 */
async function together(count: number, fn: () => unknown): Promise<void> {
  const arrive = barrier(count);
  await Promise.all(
    Array.from({ length: count }, () =>
      task(async () => {
        fn();
        await arrive();
      }),
    ),
  );
}

const context0 = fake.devices[0]!.context;
const BYTES = 32 * 1024 * 1024;

interface FakeHandle {
  id: number;
}

const made: HandleCache<FakeHandle>[] = [];
afterEach(() => {
  for (const cache of made.splice(0)) cache.dispose();
  configureHandles({ maxHandlesPerContext: DEFAULT_MAX_HANDLES_PER_CONTEXT });
});

/** A cuBLAS-like cache: a workspace per (handle, stream), calls on two streams share nothing. */
function workspaceCache(
  workspace: Partial<NonNullable<HandleCacheOptions<FakeHandle>['workspace']>> = {},
  options: Partial<HandleCacheOptions<FakeHandle>> = {},
) {
  let next = 0;
  const set = vi.fn((_h: FakeHandle, _w: DeviceBuffer | undefined, _s: Stream) => {});
  const cache = new HandleCache<FakeHandle>({
    name: 'blaslike',
    create: () => ({ id: next++ }),
    destroy: () => {},
    setStream: () => {},
    ordered: false,
    workspace: { bytes: () => BYTES, set, ...workspace },
    ...options,
  });
  made.push(cache);
  fake.state.gpuLog.length = 0;
  return { cache, set };
}

/** Allocations and frees of `BYTES`-sized buffers in the driver's log since the last call. */
class LiveCounter {
  allocations = 0;
  frees = 0;
  readonly #addresses = new Set<string>();
  peak = 0;
  /** Reads (and empties) the log; returns the workspaces alive now. */
  read(): number {
    for (const line of fake.state.gpuLog.splice(0)) {
      const allocated = /^allocate (\d+) on .* at (0x[0-9a-f]+)$/.exec(line);
      if (allocated !== null && Number(allocated[1]) === BYTES) {
        this.allocations++;
        this.#addresses.add(allocated[2]!);
      }
      const freed = /^free (0x[0-9a-f]+) on /.exec(line);
      if (freed !== null && this.#addresses.delete(freed[1]!)) this.frees++;
      this.peak = Math.max(this.peak, this.#addresses.size);
    }
    return this.#addresses.size;
  }
}

describe('the workspaces of a HandleCache stay bounded under churn', () => {
  it('10,000 tasks on rotating pool streams, 24 at once over 16 handles: workspaces made once, not per task', async () => {
    const { cache } = workspaceCache();
    const counter = new LiveCounter();
    const perHandle = cache.maxWorkspacesPerHandle ?? 2;
    const bound = cache.maxHandlesPerContext * perHandle;
    const waves = Math.ceil(10_000 / 24);
    for (let wave = 0; wave < waves; wave++) {
      await Promise.all(
        Array.from({ length: 24 }, () =>
          task(async () => {
            cache.bind();
            await sleep(0);
            cache.bind(); // rebinding on the same stream needs nothing more
          }),
        ),
      );
      expect(counter.read()).toBeLessThanOrEqual(bound);
    }
    counter.read();
    console.log(
      `10,000 tasks: ${counter.allocations} workspace allocations, ${counter.frees} frees, at most ${counter.peak} alive (bound ${bound}); statistics ${JSON.stringify(cache.statistics())}`,
    );
    // Before the bound, every task allocated a workspace and freed it at its end.
    expect(counter.allocations).toBeLessThanOrEqual(bound);
    expect(counter.peak).toBeLessThanOrEqual(bound);
    expect(cache.statistics().workspaces).toBeLessThanOrEqual(bound);
    // Disposing the cache frees every workspace it made.
    cache.dispose();
    expect(counter.read()).toBe(0);
    expect(counter.frees).toBe(counter.allocations);
  });

  it('one handle bound to 50 streams in turn while they stay held: at most maxWorkspacesPerHandle workspaces, each hand-off ordered', async () => {
    configureHandles({ maxHandlesPerContext: 1 });
    const { cache } = workspaceCache({ maxWorkspacesPerHandle: 2 });
    const counter = new LiveCounter();
    const streams = Array.from(
      { length: 50 },
      (_, i) => new fake.FakeStream(context0, `held-${i}`) as unknown as Stream,
    );
    const log: string[] = [];
    await task(async () => {
      for (let round = 0; round < 4; round++) {
        for (const s of streams) {
          withStream(s, () => cache.bind());
          log.push(...fake.state.gpuLog);
          expect(counter.read()).toBeLessThanOrEqual(2);
        }
        await sleep(0);
      }
    });
    counter.read();
    console.log(
      `50 held streams x 4 rounds on one handle: ${counter.allocations} allocations, at most ${counter.peak} alive`,
    );
    expect(counter.peak).toBeLessThanOrEqual(2);
    expect(counter.allocations).toBe(2);
    // A workspace taken over from another stream orders the new stream after the old one.
    expect(log).toContain('held-2 waits for held-0');
    expect(log).toContain('held-0 waits for held-48');
  });

  it('a spare workspace goes to the next task on another stream behind a GPU-side wait, never reallocated', async () => {
    const { cache } = workspaceCache();
    const a = new fake.FakeStream(context0, 'a') as unknown as Stream;
    const b = new fake.FakeStream(context0, 'b') as unknown as Stream;
    const first = await task(() => withStream(a, () => cache.bind().workspace));
    expect(first?.disposed).toBe(false); // kept for the next task
    fake.state.gpuLog.length = 0;
    const second = await task(() => withStream(b, () => cache.bind().workspace));
    expect(second).toBe(first);
    const log = fake.state.gpuLog.splice(0);
    expect(log.some((line) => line.startsWith('allocate'))).toBe(false);
    expect(log).toContain('b waits for a');
  });

  it('idle spares go back after keepIdleMs, ordered on their stream; releaseWorkspaces() frees them at once', async () => {
    const { cache } = workspaceCache({ keepIdleMs: 20 });
    const counter = new LiveCounter();
    await together(3, () => cache.bind());
    expect(counter.read()).toBe(3);
    await sleep(80);
    expect(counter.read()).toBe(0);
    expect(counter.frees).toBe(3);

    await together(3, () => cache.bind());
    expect(counter.read()).toBe(3);
    expect(cache.releaseWorkspaces()).toBe(3 * BYTES);
    expect(counter.read()).toBe(0);
    expect(cache.statistics()).toMatchObject({ workspaces: 0, workspaceBytes: 0 });
  });

  it('MemoryPool.releaseCached() (its hook) and out-of-memory free the spares', async () => {
    const { cache } = workspaceCache();
    const counter = new LiveCounter();
    await together(2, () => cache.bind());
    expect(counter.read()).toBe(2);
    for (const hook of fake.state.releaseCachedHooks) hook(context0);
    expect(counter.read()).toBe(0);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const holder = task(async () => {
      cache.bind();
      await gate;
    });
    await sleep(1);
    // A leased handle keeps the workspace it is bound with; its spares go.
    await task(() => withStream(new fake.FakeStream(context0, 'x') as unknown as Stream, () => 0));
    for (const hook of fake.state.outOfMemoryHooks) hook(context0);
    expect(counter.read()).toBe(1);
    release();
    await holder;
    expect(stream).toBeDefined();
  });
});
