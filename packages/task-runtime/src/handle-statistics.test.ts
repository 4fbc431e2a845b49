import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { HandleCounters } from './handle-statistics.js';
import type { WorkspaceCount } from './handle-workspaces.js';

/** A handle's workspaces as the statistics read them: `count` adds these. */
function holding(workspaces: number, bytes: number) {
  return {
    workspaces: {
      count(count: WorkspaceCount) {
        count.workspaces += workspaces;
        count.workspaceBytes += bytes;
      },
    },
  };
}

describe('HandleCounters: a cache’s counters', () => {
  it('leases taken and given back, over any handles: leased is what is held now, shared the takes of a handle already held', () => {
    // A model of the cache: leases per handle; each step takes a lease of handle `take`, or
    // gives back one lease of the handle `give` (when it has one).
    const step = fc.oneof(
      fc.record({ take: fc.integer({ min: 0, max: 3 }) }),
      fc.record({ give: fc.integer({ min: 0, max: 3 }) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 60 }), (steps) => {
        const counters = new HandleCounters();
        const leases = [0, 0, 0, 0];
        let shared = 0;
        for (const s of steps) {
          if ('take' in s) {
            if (leases[s.take]! > 0) shared++;
            counters.leaseTaken(leases[s.take]!);
            leases[s.take]!++;
          } else if (leases[s.give]! > 0) {
            leases[s.give]!--;
            counters.leaseReturned();
          }
        }
        expect(counters.leased).toBe(leases.reduce((a, b) => a + b, 0));
        expect(counters.shared).toBe(shared);
      }),
    );
  });

  it('statistics: the counters, the idle handles of every context, the handles alive and their workspaces', () => {
    const counters = new HandleCounters();
    counters.created = 7;
    counters.destroyed = 2;
    counters.leaseTaken(0);
    counters.leaseTaken(1);
    const contexts = new Map<unknown, { idle: unknown[] }>([
      ['context 0', { idle: ['a', 'b'] }],
      ['context 1', { idle: ['c', 'd', 'e'] }],
      ['context 2', { idle: [] }],
    ]);
    const records = new Map<
      unknown,
      { workspaces: ReturnType<typeof holding>['workspaces'] | undefined }
    >([
      ['a', holding(2, 3 << 20)],
      ['b', holding(1, 1024)],
      ['c', { workspaces: undefined }],
      ['d', holding(0, 0)],
      ['e', holding(1, 512)],
    ]);
    const result = counters.statistics(contexts, records);
    expect(result).toEqual({
      created: 7,
      destroyed: 2,
      idle: 5,
      leased: 2,
      handles: 5,
      shared: 1,
      workspaces: 4,
      workspaceBytes: (3 << 20) + 1024 + 512,
    });
    // The order `HandleCache.statistics()` has always reported them in.
    expect(Object.keys(result)).toEqual([
      'created',
      'destroyed',
      'idle',
      'leased',
      'handles',
      'shared',
      'workspaces',
      'workspaceBytes',
    ]);
  });

  it('statistics of a cache with no handles: zeros, and the counters as they stand', () => {
    const counters = new HandleCounters();
    counters.created = 3;
    counters.destroyed = 3;
    expect(counters.statistics(new Map(), new Map())).toEqual({
      created: 3,
      destroyed: 3,
      idle: 0,
      leased: 0,
      handles: 0,
      shared: 0,
      workspaces: 0,
      workspaceBytes: 0,
    });
  });
});
