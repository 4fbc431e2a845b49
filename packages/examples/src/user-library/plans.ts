/**
 * cuFFT plans through the task runtime's public `HandleCache`. A plan is fixed to one
 * transform (type, size, batch), so there is one cache per (type, n, batch): each task leases
 * one plan per cache and context, bound lazily to the task's stream with cufftSetStream, and
 * gives it back when it settles. The number of plans of one size therefore follows the
 * number of tasks using that size at once, not the number of calls.
 *
 * Plans are made without a work area of their own (cufftSetAutoAllocation(plan, 0)): each
 * execution gets its work area from the stream-ordered pool on its own stream (see `fft.ts`),
 * so a plan handed from one task to the next can never have two streams writing one work
 * area, and the memory of idle plans stays small.
 */
import { HandleCache } from '@cuda-tasks/task-runtime';
import { check } from './errors.js';
import { CUFFT_C2C, CUFFT_R2C, cufft } from './ffi.js';

/** Complex-to-complex or real-to-complex. */
export type TransformType = 'c2c' | 'r2c';

/** A cuFFT plan and the work area it needs per execution. */
export interface Plan {
  /** The `cufftHandle` (a C int). */
  readonly handle: number;
  /** Bytes of work area an execution needs (0: none). */
  readonly workBytes: number;
  /** Complex-to-complex or real-to-complex. */
  readonly type: TransformType;
  /** Transform length. */
  readonly n: number;
  /** Transforms per execution. */
  readonly batch: number;
}

/** Idle plans kept per (type, n, batch) and context; more are destroyed. */
export const MAX_IDLE_PLANS = 32;

type Caches = Record<TransformType, Map<number, Map<number, HandleCache<Plan>>>>;

const CACHES_KEY = Symbol.for('@cuda-tasks/examples/user-library/plans');

// Process-wide: two loaded copies of this module share the plans.
const caches: Caches = ((globalThis as any)[CACHES_KEY] ??= {
  c2c: new Map(),
  r2c: new Map(),
});

/** The statistics key of a cache, e.g. `c2c:256x4`. */
export function planKey(type: TransformType, n: number, batch: number): string {
  return `${type}:${n}x${batch}`;
}

function createCache(type: TransformType, n: number, batch: number): HandleCache<Plan> {
  const cufftType = type === 'c2c' ? CUFFT_C2C : CUFFT_R2C;
  return new HandleCache<Plan>({
    name: `cufft ${planKey(type, n, batch)}`,
    create() {
      const api = cufft();
      const out = [0];
      check(api.cufftCreate(out), 'cufftCreate');
      const handle = out[0]!;
      try {
        check(api.cufftSetAutoAllocation(handle, 0), 'cufftSetAutoAllocation');
        const workSize: (number | bigint)[] = [0];
        check(api.cufftMakePlan1d(handle, n, cufftType, batch, workSize), 'cufftMakePlan1d');
        return { handle, workBytes: Number(workSize[0]), type, n, batch };
      } catch (error) {
        api.cufftDestroy(handle);
        throw error;
      }
    },
    destroy(plan) {
      check(cufft().cufftDestroy(plan.handle), 'cufftDestroy');
    },
    bindStream(plan, stream) {
      check(cufft().cufftSetStream(plan.handle, stream.handle), 'cufftSetStream');
    },
    maxIdlePerContext: MAX_IDLE_PLANS,
  });
}

/**
 * The plan cache for one transform: created on first use, then found with two Map lookups
 * on numbers (no string is built on the hot path).
 */
export function planCache(type: TransformType, n: number, batch: number): HandleCache<Plan> {
  let bySize = caches[type].get(n);
  if (bySize === undefined) caches[type].set(n, (bySize = new Map()));
  let cache = bySize.get(batch);
  if (cache === undefined) bySize.set(batch, (cache = createCache(type, n, batch)));
  return cache;
}

/** Plans created, destroyed, idle and leased, for one transform. */
export interface PlanStatistics {
  /** e.g. `c2c:256x1` */
  key: string;
  /** Plans created (cufftCreate + cufftMakePlan1d) for this transform. */
  created: number;
  /** Plans destroyed (idle beyond the limit, or by `destroyIdlePlans`). */
  destroyed: number;
  /** Plans idle in the cache now. */
  idle: number;
  /** Plans leased to running tasks now. */
  leased: number;
}

/**
 * Statistics of every plan cache used so far, or of one transform.
 * @example
 * await Promise.all(inputs.map((x) => task(() => fft(x))));
 * planStatistics('c2c', 1024)[0]!.created; // at most inputs.length
 */
export function planStatistics(type?: TransformType, n?: number, batch = 1): PlanStatistics[] {
  if (type !== undefined && n !== undefined) {
    const cache = caches[type].get(n)?.get(batch);
    return cache === undefined
      ? [{ key: planKey(type, n, batch), created: 0, destroyed: 0, idle: 0, leased: 0 }]
      : [{ key: planKey(type, n, batch), ...cache.statistics() }];
  }
  const out: PlanStatistics[] = [];
  for (const kind of ['c2c', 'r2c'] as const) {
    if (type !== undefined && kind !== type) continue;
    for (const [size, bySize] of caches[kind]) {
      for (const [count, cache] of bySize) {
        out.push({ key: planKey(kind, size, count), ...cache.statistics() });
      }
    }
  }
  return out;
}

/** Destroys every idle plan (all sizes); returns how many. Leased plans stay. */
export function destroyIdlePlans(): number {
  let destroyed = 0;
  for (const kind of ['c2c', 'r2c'] as const) {
    for (const bySize of caches[kind].values()) {
      for (const cache of bySize.values()) destroyed += cache.destroyIdle();
    }
  }
  return destroyed;
}

/** The cuFFT version, e.g. 12000 (from cufftGetVersion). */
export function version(): number {
  const out = [0];
  check(cufft().cufftGetVersion(out), 'cufftGetVersion');
  return out[0]!;
}
