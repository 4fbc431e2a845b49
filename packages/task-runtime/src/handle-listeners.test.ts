import type { Context, Stream } from '@cuda-tasks/cudadrv';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';

// The driver is the test double (testing/fake-driver.ts): disposing a FakeStream runs the
// stream-disposed listeners, `state.outOfMemoryHooks` and `state.releaseCachedHooks` hold the
// memory hooks. The pool's channel is replaced by a set the test fires.
const fake = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/fake-driver')).createFakeDriver(),
);
const released = vi.hoisted(() => new Set<(stream: unknown) => void>());

vi.mock('@cuda-tasks/cudadrv', () => fake.module);
vi.mock('@cuda-tasks/cudadrv/internal', () => fake.module);
vi.mock('./pool.js', () => ({
  onStreamReleased(listener: (stream: unknown) => void) {
    released.add(listener);
    return () => released.delete(listener);
  },
}));

import { onCleanupError } from './cleanup.js';
import { HandleListeners, type ListeningCache } from './handle-listeners.js';
import type { HandleRecord } from './handle-record.js';
import { WorkspaceHolders } from './handle-workspaces.js';

const context0 = fake.devices[0]!.context as unknown as Context;
const context1 = fake.devices[1]!.context as unknown as Context;

function fakeStream(name: string): Stream {
  return new fake.FakeStream(fake.devices[0]!.context, name) as unknown as Stream;
}

/** A record as the listeners reach it; what they do to it goes to `log`, `fail` makes it throw. */
function recordOf(
  id: string,
  log: string[],
  options: { workspaces?: boolean; fail?: boolean } = {},
) {
  const name = (s: unknown) => (s as { name: string }).name;
  const step = (what: string) => {
    log.push(`${id} ${what}`);
    if (options.fail) throw new Error(`${id} ${what} failed`);
  };
  return {
    lastBound: undefined as Stream | undefined,
    binding: { forget: (s: Stream) => step(`forget ${name(s)}`) },
    workspaces:
      options.workspaces === false
        ? undefined
        : {
            streamDisposed: (s: Stream) => step(`workspaces disposed ${name(s)}`),
            streamReleased: (s: Stream, keep: boolean) =>
              step(`workspaces released ${name(s)} ${keep ? 'kept' : 'freed'}`),
          },
  };
}

/** Listeners over `records` for a cache whose give-back calls are logged (and can fail). */
function listen(records: Record<string, ReturnType<typeof recordOf>>) {
  const log: string[] = [];
  const cache = {
    disposed: false as boolean,
    failDestroy: false as boolean,
    destroyIdle(context: Context) {
      log.push(`destroyIdle ${context === context0 ? 0 : 1}`);
      if (cache.failDestroy) throw new Error('destroy failed');
      return 0;
    },
    releaseWorkspaces(context: Context) {
      log.push(`releaseWorkspaces ${context === context0 ? 0 : 1}`);
      return 0;
    },
  } satisfies ListeningCache & { failDestroy: boolean };
  const map = new Map(Object.entries(records)) as unknown as Map<string, HandleRecord<string>>;
  const holders = new WorkspaceHolders();
  const listeners = new HandleListeners(cache, map, holders);
  made.push(listeners);
  return { cache, holders, listeners, log };
}

const made: HandleListeners<string>[] = [];
const reported: string[] = [];
const stopReporting = onCleanupError((error) => reported.push((error as Error).message));
afterEach(() => {
  for (const listeners of made.splice(0)) listeners.remove();
  reported.length = 0;
});
afterAll(stopReporting);

describe('HandleListeners: a cache’s three channels', () => {
  it('a stream disposed: every handle frees its workspaces there and forgets it; only the handle last bound there forgets that', () => {
    const log: string[] = [];
    const s = fakeStream('s');
    const other = fakeStream('other');
    const a = recordOf('a', log);
    const b = recordOf('b', log, { workspaces: false });
    a.lastBound = s;
    b.lastBound = other;
    listen({ a, b });
    (s as unknown as { dispose(): void }).dispose();
    expect(log).toEqual(['a workspaces disposed s', 'a forget s', 'b forget s']);
    expect(a.lastBound).toBeUndefined();
    expect(b.lastBound).toBe(other);
  });

  it('a disposed stream: a handle that fails is reported, the others still forget it, the dispose does not throw', () => {
    const log: string[] = [];
    const s = fakeStream('s');
    listen({ a: recordOf('a', log, { fail: true }), b: recordOf('b', log) });
    expect(() => (s as unknown as { dispose(): void }).dispose()).not.toThrow();
    expect(log).toEqual(['a workspaces disposed s', 'b workspaces disposed s', 'b forget s']);
    expect(reported).toEqual(['a workspaces disposed s failed']);
  });

  it('a pool stream given back: nothing where no handle holds a workspace; else each handle’s become spares, freed once the cache is disposed', () => {
    const log: string[] = [];
    const s = fakeStream('s');
    const { cache, holders } = listen({ a: recordOf('a', log), b: recordOf('b', log) });
    for (const listener of released) listener(s);
    expect(log).toEqual([]);
    holders.change(s, 1);
    for (const listener of released) listener(s);
    expect(log).toEqual(['a workspaces released s kept', 'b workspaces released s kept']);
    log.length = 0;
    cache.disposed = true;
    for (const listener of released) listener(s);
    expect(log).toEqual(['a workspaces released s freed', 'b workspaces released s freed']);
  });

  it('out of memory: that context’s idle handles, then its spares, even when destroying fails (reported); releaseCached: the spares only', () => {
    const { cache, log } = listen({});
    for (const hook of fake.state.outOfMemoryHooks) hook(context1);
    expect(log).toEqual(['destroyIdle 1', 'releaseWorkspaces 1']);
    log.length = 0;
    cache.failDestroy = true;
    for (const hook of fake.state.outOfMemoryHooks) hook(context0);
    expect(log).toEqual(['destroyIdle 0', 'releaseWorkspaces 0']);
    expect(reported).toEqual(['destroy failed']);
    log.length = 0;
    for (const hook of fake.state.releaseCachedHooks) hook(context0);
    expect(log).toEqual(['releaseWorkspaces 0']);
  });

  it('remove() unsubscribes from every channel, once', () => {
    const before = {
      outOfMemory: fake.state.outOfMemoryHooks.size,
      releaseCached: fake.state.releaseCachedHooks.size,
      released: released.size,
    };
    const log: string[] = [];
    const { listeners, holders, log: cacheLog } = listen({ a: recordOf('a', log) });
    expect(fake.state.outOfMemoryHooks.size).toBe(before.outOfMemory + 1);
    expect(fake.state.releaseCachedHooks.size).toBe(before.releaseCached + 1);
    expect(released.size).toBe(before.released + 1);
    listeners.remove();
    listeners.remove();
    expect(fake.state.outOfMemoryHooks.size).toBe(before.outOfMemory);
    expect(fake.state.releaseCachedHooks.size).toBe(before.releaseCached);
    expect(released.size).toBe(before.released);
    const s = fakeStream('s');
    holders.change(s, 1);
    (s as unknown as { dispose(): void }).dispose();
    for (const hook of fake.state.outOfMemoryHooks) hook(context0);
    expect(log).toEqual([]);
    expect(cacheLog).toEqual([]);
  });
});
