import { setImmediate as nextTurn } from 'node:timers/promises';
import { CudaArgumentError, type Stream } from '@cuda-tasks/cudadrv';
import { describe, expect, it } from 'vitest';
import {
  ContextHandles,
  checkBound,
  configureHandles,
  defaultMaxHandlesPerContext,
  type HandleBounds,
} from './handle-leases.js';

interface Plain {
  id: number;
  leases: number;
  lastBound: Stream | undefined;
}

const streamA = { name: 'a' } as unknown as Stream;
const streamB = { name: 'b' } as unknown as Stream;

/** The handles of one context over plain records; `failAfter` makes creation fail past it. */
function handlesOf(bounds: Partial<HandleBounds> = {}, failAfter = Number.POSITIVE_INFINITY) {
  const b = { maxHandlesPerContext: 4, maxIdlePerContext: 4, disposed: false, ...bounds };
  let created = 0;
  const handles = new ContextHandles<Plain>(b, () => {
    if (created >= failAfter) throw new Error('out of memory');
    return { id: created++, leases: 0, lastBound: undefined };
  });
  /** A lease as the cache takes it: the handle, counted. */
  const lease = (stream: Stream = streamA) => {
    const record = handles.take(stream);
    record.leases++;
    return record;
  };
  return { handles, bounds: b, lease, created: () => created };
}

describe('ContextHandles: which handle a lease gets, and when handles are made', () => {
  it('the first lease makes the whole bound at once (the idle bound too); later ones take idle ones', () => {
    const { handles, lease, created } = handlesOf({
      maxHandlesPerContext: 4,
      maxIdlePerContext: 2,
    });
    const first = lease();
    expect(first.id).toBe(0);
    expect(created()).toBe(3); // the leased one and 2 idle (the idle bound)
    expect(handles.idle.map((r) => r.id).sort()).toEqual([1, 2]);
    expect(lease().leases).toBe(1);
    expect(lease().leases).toBe(1);
    expect(handles.idle).toEqual([]);
    expect(handles.all.length).toBe(3);
  });

  it('an idle handle last bound to the lease’s stream is preferred; else the last in the idle list', () => {
    const { handles, lease } = handlesOf({ maxHandlesPerContext: 3 });
    const all = [lease(), lease(), lease()];
    for (const record of all) record.leases = 0;
    all[0]!.lastBound = streamB;
    all[1]!.lastBound = streamA;
    handles.putIdle(all[0]!);
    handles.putIdle(all[1]!);
    handles.putIdle(all[2]!);
    expect(handles.take(streamB)).toBe(all[0]); // the last idle one takes its place
    expect(handles.idle).toEqual([all[2], all[1]]);
    expect(handles.take(streamA)).toBe(all[1]);
    expect(handles.take(streamB)).toBe(all[2]);
  });

  it('past the bound: the least-leased handle, round-robin among equals, and nothing made', () => {
    const { handles, lease, created } = handlesOf({ maxHandlesPerContext: 3 });
    const own = [lease(), lease(), lease()];
    const shared = [lease(), lease(), lease()];
    expect(new Set(shared)).toEqual(new Set(own));
    expect(own.map((r) => r.leases)).toEqual([2, 2, 2]);
    expect(lease().leases).toBe(3);
    expect(created()).toBe(3);
    expect(handles.all.length).toBe(3);
  });

  it('below the bound with none idle (handles destroyed): shares now, grows back one per event-loop turn', async () => {
    const { handles, lease, created } = handlesOf({ maxHandlesPerContext: 4 });
    const first = lease();
    // The three made ahead are destroyed (idle trim, out of memory).
    for (const record of handles.idle.splice(0)) handles.remove(record);
    expect(lease()).toBe(first); // shared at once, nothing made in the call
    expect(created()).toBe(4);
    await nextTurn();
    expect(created()).toBe(5);
    await nextTurn();
    expect(created()).toBe(6);
    await nextTurn();
    // Two idle: it stops there.
    expect(created()).toBe(6);
    expect(handles.idle.length).toBe(2);
  });

  it('a failing creation while filling ahead stops it quietly: the lease has its handle', () => {
    const { handles, lease } = handlesOf({ maxHandlesPerContext: 4 }, 2);
    expect(lease().id).toBe(0);
    expect(handles.all.length).toBe(2);
  });

  it('putIdle keeps to the idle bound and refuses all once disposed; warm() stops at the idle bound', () => {
    const { handles, bounds, lease } = handlesOf({ maxHandlesPerContext: 4, maxIdlePerContext: 1 });
    const a = lease();
    const b = lease();
    expect(handles.idle.length).toBe(0);
    expect(handles.putIdle(a)).toBe(true);
    expect(handles.putIdle(b)).toBe(false);
    handles.idle.length = 0;
    bounds.disposed = true;
    expect(handles.putIdle(a)).toBe(false);
    bounds.disposed = false;
    expect(handles.warm(4)).toBe(3); // one more made: the idle bound is 1
    expect(handles.idle.length).toBe(1);
  });
});

describe('checkBound', () => {
  it('accepts undefined and safe integers from the minimum; refuses the rest with a CudaArgumentError naming it', () => {
    expect(() => checkBound('x', undefined, 1)).not.toThrow();
    expect(() => checkBound('x', 1, 1)).not.toThrow();
    for (const bad of [0, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => checkBound('lib: maxHandlesPerContext', bad, 1)).toThrow(
        new CudaArgumentError(
          `lib: maxHandlesPerContext must be an integer >= 1, got ${String(bad)}`,
        ),
      );
    }
  });
});

describe('configureHandles: its options checked before any is read', () => {
  it('null, a non-object and an unknown option are CudaArgumentErrors naming the call; the bound stays', () => {
    const before = defaultMaxHandlesPerContext();
    const set = configureHandles as (options: unknown) => void;
    expect(() => set(null)).toThrow(
      new CudaArgumentError('configureHandles: options must be an object, got null'),
    );
    expect(() => set(8)).toThrow(
      new CudaArgumentError('configureHandles: options must be an object, got 8'),
    );
    expect(() => set({ maxHandles: 3 })).toThrow(CudaArgumentError);
    expect(() => set({ maxHandles: 3 })).toThrow(
      /^configureHandles: unknown option "maxHandles"; configureHandles takes maxHandlesPerContext$/,
    );
    expect(() => set({ maxhandlesPerContext: 3 })).toThrow(
      /unknown option "maxhandlesPerContext" \(did you mean maxHandlesPerContext\?\)/,
    );
    expect(defaultMaxHandlesPerContext()).toBe(before);
  });

  it('undefined sets nothing; a known option still sets the bound', () => {
    const before = defaultMaxHandlesPerContext();
    try {
      (configureHandles as (options?: unknown) => void)(undefined);
      expect(defaultMaxHandlesPerContext()).toBe(before);
      configureHandles({ maxHandlesPerContext: before + 1 });
      expect(defaultMaxHandlesPerContext()).toBe(before + 1);
    } finally {
      configureHandles({ maxHandlesPerContext: before });
    }
  });
});
