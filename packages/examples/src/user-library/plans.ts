/**
 * cuFFT plans through the task runtime's library kit (`HandleCache`): this file says only what
 * is specific to cuFFT (how a plan is made and destroyed, `cufftSetStream`, and the work area
 * `cufftSetWorkArea` takes); the kit does the rest, as it does for cuBLAS, cuSOLVER and
 * cuRAND: one lease per task, context and transform, given back when the task settles; at
 * most 16 plans per transform and context (tasks beyond share them, rebound per call); binding
 * to the task's stream only when it changes; a work area per (plan, stream) from the
 * stream-ordered pool, so two streams never share one; the GPU-side hand-off when a plan goes
 * idle; and `dispose()` to drop a transform's cache with its listeners. Each cache comes with the
 * kit's issue envelope over it (`IssueEnvelope`), through which `fft.ts` issues every call.
 *
 * A plan is fixed to one transform (type, size, batch), so there is one cache per
 * (type, n, batch). Plans are made without a work area of their own
 * (cufftSetAutoAllocation(plan, 0)): the kit gives each (plan, stream) pair one.
 */
import { packageOf, processState } from '@cuda-tasks/cudadrv';
import { HandleCache, IssueEnvelope } from '@cuda-tasks/task-runtime';
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

/**
 * One transform's plans: the kit's cache of them, and the issue envelope over that cache that
 * every call of the transform goes through (its plan, its trace, its status as a CufftError).
 */
export interface TransformPlans {
  /** The transform's plans: one lease per task and context, bound to the task's stream. */
  readonly cache: HandleCache<Plan>;
  /** The issue envelope over `cache`: `handle(stream)`, `begin`, `end` of every call. */
  readonly envelope: IssueEnvelope<Plan>;
}

type Caches = Record<TransformType, Map<number, Map<number, TransformPlans>>>;

// Process-wide: two loaded copies of this module share the plans.
const caches: Caches = processState(
  packageOf(import.meta.url, '@cuda-tasks/examples'),
  'user-library/plans',
  (): Caches => ({ c2c: new Map(), r2c: new Map() }),
);

/** The statistics key of a cache, e.g. `c2c:256x4`. */
export function planKey(type: TransformType, n: number, batch: number): string {
  return `${type}:${n}x${batch}`;
}

function createPlans(type: TransformType, n: number, batch: number): TransformPlans {
  const cufftType = type === 'c2c' ? CUFFT_C2C : CUFFT_R2C;
  const cache = new HandleCache<Plan>({
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
    setStream(plan, stream) {
      check(cufft().cufftSetStream(plan.handle, stream.handle), 'cufftSetStream');
    },
    // The work area of each (plan, stream) pair: allocated by the kit on the stream, handed to
    // cuFFT here (cufftSetStream leaves it alone, so it is set again only when it changes).
    workspace: {
      bytes: (plan) => plan.workBytes,
      set(plan, workArea) {
        check(cufft().cufftSetWorkArea(plan.handle, workArea?.pointer ?? null), 'cufftSetWorkArea');
      },
    },
    // A plan's executions on two streams share nothing but read-only tables (each stream has
    // its own work area): no ordering across streams is needed.
    ordered: false,
    maxIdlePerContext: MAX_IDLE_PLANS,
  });
  return { cache, envelope: new IssueEnvelope<Plan>({ name: 'cufft', check, handles: cache }) };
}

/**
 * The plans of one transform, with their issue envelope: created on first use, then found
 * with two Map lookups on numbers (no string is built on the hot path).
 */
export function transformPlans(type: TransformType, n: number, batch: number): TransformPlans {
  let bySize = caches[type].get(n);
  if (bySize === undefined) caches[type].set(n, (bySize = new Map()));
  let plans = bySize.get(batch);
  if (plans === undefined) bySize.set(batch, (plans = createPlans(type, n, batch)));
  return plans;
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
  /** Leases running tasks hold now (more than plans when tasks share plans past the bound). */
  leased: number;
  /** Leases that shared a plan with another task (past 16 plans of the transform). */
  shared: number;
}

function statisticsOf(key: string, plans: TransformPlans | undefined): PlanStatistics {
  if (plans === undefined) return { key, created: 0, destroyed: 0, idle: 0, leased: 0, shared: 0 };
  const { created, destroyed, idle, leased, shared } = plans.cache.statistics();
  return { key, created, destroyed, idle, leased, shared };
}

/**
 * Statistics of every plan cache used so far, or of one transform.
 * @example
 * await Promise.all(inputs.map((x) => task(() => fft(x))));
 * planStatistics('c2c', 1024)[0]!.created; // at most inputs.length
 */
export function planStatistics(type?: TransformType, n?: number, batch = 1): PlanStatistics[] {
  if (type !== undefined && n !== undefined) {
    return [statisticsOf(planKey(type, n, batch), caches[type].get(n)?.get(batch))];
  }
  const out: PlanStatistics[] = [];
  for (const kind of ['c2c', 'r2c'] as const) {
    if (type !== undefined && kind !== type) continue;
    for (const [size, bySize] of caches[kind]) {
      for (const [count, plans] of bySize) {
        out.push(statisticsOf(planKey(kind, size, count), plans));
      }
    }
  }
  return out;
}

/**
 * Destroys every idle plan (all sizes); returns how many. Leased plans stay. The cache of a
 * transform left with no plan at all is disposed (its listeners removed); the next call of
 * that size makes a new one.
 */
export function destroyIdlePlans(): number {
  let destroyed = 0;
  for (const kind of ['c2c', 'r2c'] as const) {
    for (const [size, bySize] of caches[kind]) {
      for (const [count, { cache }] of bySize) {
        destroyed += cache.destroyIdle();
        if (cache.statistics().handles === 0) {
          cache.dispose();
          bySize.delete(count);
        }
      }
      if (bySize.size === 0) caches[kind].delete(size);
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
