import { threadId } from 'node:worker_threads';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';

// Loans of arrays without a GPU (the loan-ending tests): `lendArray` and `DeviceArray.isInstance`
// answer for the test's stand-in arrays, and pass everything else to the real package.
const hooks = vi.hoisted(() => ({
  lend: undefined as ((array: unknown) => unknown) | undefined,
  fakes: new WeakSet<object>(),
}));
vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => {
  const original = await importOriginal<typeof import('@cuda-tasks/cudadrv')>();
  class DeviceArray extends original.DeviceArray {
    static override isInstance(value: unknown): value is InstanceType<typeof original.DeviceArray> {
      if (typeof value === 'object' && value !== null && hooks.fakes.has(value)) return true;
      return original.DeviceArray.isInstance(value);
    }
  }
  return {
    ...original,
    DeviceArray,
    lendArray: (array: unknown, options: unknown) =>
      hooks.fakes.has(array as object)
        ? hooks.lend!(array)
        : original.lendArray(array as never, options as never),
  };
});

import { onCleanupError } from './cleanup.js';
import { WorkerJobError, WorkerPool } from './worker-pool.js';

/** A stand-in array and its loan, whose `end` and `abandon` do what the test says. */
function fakeLoan(behaviour: { end?: () => void; abandon?: () => Promise<void> }) {
  const array = { fake: true };
  hooks.fakes.add(array);
  const calls = { end: 0, abandon: 0 };
  const loan = {
    descriptor: { kind: 'not-a-real-loan' },
    returned: false,
    ended: false,
    end() {
      calls.end++;
      behaviour.end?.();
    },
    abandon() {
      calls.abandon++;
      return behaviour.abandon?.() ?? Promise.resolve();
    },
  };
  return { array, loan, calls };
}

// Real worker threads running the runtime from its source, on jobs that touch no GPU: the
// protocol (dispatch, results, errors, cancellation, exits, close). The device-array paths are
// in worker-pool.gpu.test.ts.
const JOBS = new URL('../test/fixtures/pool-jobs.ts', import.meta.url);

let pool: WorkerPool;
beforeAll(async () => {
  pool = await WorkerPool.start(JOBS, { workers: 2 });
}, 60_000);
afterAll(async () => {
  await pool.close();
});

describe('WorkerPool', () => {
  it('lists the module’s exported functions as its jobs and runs them', async () => {
    expect([...pool.jobs].sort()).toEqual(
      ['add', 'describe', 'exits', 'fails', 'seenAs', 'slow', 'waitsForAbort', 'whoAmI'].sort(),
    );
    expect(pool.size).toBe(2);
    await expect(pool.run('add', 2, 3)).resolves.toBe(5);
  });

  it('runs each job as a task of its own on a worker thread, spread over the workers', async () => {
    const results = await Promise.all(
      Array.from({ length: 16 }, (_, i) =>
        pool.runWith<{
          value: number;
          threadId: number;
          isRoot: boolean;
          name: string;
          priority: string;
        }>('describe', [i], { name: `job-${i}`, priority: i % 2 === 0 ? 'high' : 'low' }),
      ),
    );
    expect(results.map((r) => r.value)).toEqual(Array.from({ length: 16 }, (_, i) => i));
    expect(results.every((r) => r.threadId !== threadId && !r.isRoot)).toBe(true);
    expect(results.map((r) => r.name)).toEqual(Array.from({ length: 16 }, (_, i) => `job-${i}`));
    expect(results[0]!.priority).toBe('high');
    expect(results[1]!.priority).toBe('low');
    expect(new Set(results.map((r) => r.threadId)).size).toBe(2);
  });

  it('carries any structured-clonable value through nested lists and objects unchanged', async () => {
    const values = fc.jsonValue({ maxDepth: 5 });
    await fc.assert(
      fc.asyncProperty(values, async (value) => {
        const back = await pool.run<{ value: unknown }>('describe', value);
        expect(back.value).toEqual(value);
      }),
      { numRuns: 40 },
    );
  });

  it('keeps an own "__proto__" key (JSON.parse makes them) as data, on the way there and back', async () => {
    const text =
      '{"__proto__":{"isAdmin":true},"nested":{"__proto__":0,"a":[1,{"__proto__":"x"}]}}';
    const value = JSON.parse(text) as Record<string, unknown>;
    // In the worker: an own key, not the object's prototype (nothing read through it).
    const seen = await pool.run<{ keys: string[]; plainPrototype: boolean; isAdmin: unknown }>(
      'seenAs',
      value,
    );
    expect(seen).toEqual({
      keys: ['__proto__', 'nested'],
      plainPrototype: true,
      isAdmin: undefined,
    });
    // Back here, nested ones too.
    const back = await pool.run<{ value: Record<string, unknown> }>('describe', value);
    expect(JSON.stringify(back.value)).toBe(text);
    expect(Object.getPrototypeOf(back.value)).toBe(Object.prototype);
    expect((back.value as { isAdmin?: unknown }).isAdmin).toBeUndefined();
  });

  it('rejects with the worker’s error rebuilt: its class name, message and stack', async () => {
    const error = await pool.run('fails', 'out of range on purpose').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkerJobError);
    const e = error as WorkerJobError;
    expect(e.remoteName).toBe('RangeError');
    expect(e.job).toBe('fails');
    expect(e.message).toMatch(/RangeError: out of range on purpose/);
    expect(e.stack).toMatch(/in the worker[\s\S]*pool-jobs/);
  });

  it('refuses an unknown job before sending it, and a closed pool', async () => {
    await expect(pool.run('notAJob')).rejects.toThrow(/has no job "notAJob"/);
    await expect(pool.run('nope')).rejects.toThrow(/exports .*add/);
  });

  it('a signal aborted before the call sends nothing; one aborted while running aborts the job’s task', async () => {
    const before = pool.statistics().completed.reduce((a, b) => a + b, 0);
    await expect(
      pool.runWith('add', [1, 2], { signal: AbortSignal.abort(new Error('early')) }),
    ).rejects.toThrow('early');
    expect(pool.statistics().completed.reduce((a, b) => a + b, 0)).toBe(before);
    const controller = new AbortController();
    const running = pool.runWith<string>('waitsForAbort', [], { signal: controller.signal });
    await new Promise((resolve) => setTimeout(resolve, 50));
    controller.abort(new Error('stop now'));
    await expect(running).rejects.toThrow('stop now');
    // The worker saw it as its task's signal, and answered (in flight goes back to 0).
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(pool.statistics().inFlight).toEqual([0, 0]);
  });

  it('a worker that exits rejects its jobs, and is started again', async () => {
    const exiting = pool.run('exits', 7);
    const error = await exiting.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkerJobError);
    expect((error as Error).message).toMatch(/exited with code 7/);
    for (let i = 0; i < 200 && pool.statistics().restarts === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(pool.statistics().restarts).toBe(1);
    // Until it is ready again the other worker takes the jobs; then both do.
    for (let i = 0; i < 500; i++) {
      const ids = await Promise.all(
        Array.from({ length: 8 }, () => pool.run<{ threadId: number }>('describe', 0)),
      );
      if (new Set(ids.map((r) => r.threadId)).size === 2) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await expect(pool.run('add', 1, 1)).resolves.toBe(2);
  });

  it('broadcast() runs a job once on every worker; argv reaches the workers’ process.argv', async () => {
    const other = await WorkerPool.start(JOBS, { workers: 3, argv: ['mode=fast', 'n=3'] });
    const all = await other.broadcast<{ threadId: number; argv: string[] }>('whoAmI');
    expect(all).toHaveLength(3);
    expect(new Set(all.map((r) => r.threadId)).size).toBe(3);
    expect(all.every((r) => r.argv.join(' ') === 'mode=fast n=3')).toBe(true);
    await expect(other.broadcast('nope')).rejects.toThrow(/no job "nope"/);
    await other.close();
    await expect(other.broadcast('whoAmI')).rejects.toThrow(/closed/);
    await expect(WorkerPool.start(JOBS, { argv: [3 as unknown as string] })).rejects.toThrow(
      /argv must be/,
    );
  });

  it('close() waits for the jobs in flight, then refuses new ones', async () => {
    const other = await WorkerPool.start(JOBS, { workers: 1 });
    const slow = other.run('slow', 100);
    const closed = other.close();
    await expect(other.run('add', 1, 2)).rejects.toThrow(/closed/);
    await expect(slow).resolves.toBe(100);
    await closed;
    await other.close();
  });

  it('close() waits for a job in flight at most timeoutMs, then stops the workers and rejects it', async () => {
    const other = await WorkerPool.start(JOBS, { workers: 1 });
    const slow = other.run('slow', 10_000).catch((error: unknown) => error);
    const started = performance.now();
    await other.close({ timeoutMs: 100 });
    expect(performance.now() - started).toBeLessThan(5_000);
    const error = await slow;
    expect(error).toBeInstanceOf(WorkerJobError);
    expect((error as Error).message).toMatch(/exited/);
  });

  it('start() rejects with the module’s error when it fails to load, and checks its options', async () => {
    const broken = new URL('../test/fixtures/pool-broken.ts', import.meta.url);
    await expect(WorkerPool.start(broken, { workers: 1 })).rejects.toThrow(/broken on purpose/);
    await expect(WorkerPool.start(JOBS, { workers: 0 })).rejects.toThrow(/workers must be/);
    await expect(WorkerPool.start(JOBS, { workers: 1.5 })).rejects.toThrow(/workers must be/);
    await expect(WorkerPool.start('')).rejects.toThrow(/URL or a path/);
  });

  it('each loan of a reply is ended even when another one’s end throws, and every failure is reported', async () => {
    const first = fakeLoan({
      end: () => {
        throw new Error('first loan end failed');
      },
    });
    const second = fakeLoan({});
    const third = fakeLoan({
      end: () => {
        throw new Error('third loan end failed');
      },
    });
    const loans = [first, second, third];
    let next = 0;
    hooks.lend = () => loans[next++]!.loan;
    try {
      // The worker cannot borrow the stand-in descriptors: the job answers with an error, and
      // the reply ends the three loans.
      const error = await pool
        .runWith('add', [first.array, second.array, third.array], {
          stream: {} as never,
        })
        .catch((e: unknown) => e);
      expect(loans.map((l) => l.calls.end)).toEqual([1, 1, 1]);
      expect(error).toBeInstanceOf(AggregateError);
      const messages = (error as AggregateError).errors.map((e: Error) => e.message);
      expect(messages).toEqual(['first loan end failed', 'third loan end failed']);
      expect((error as Error).message).toMatch(/2 of the job’s 3 loans/);
    } finally {
      hooks.lend = undefined;
    }
  });

  it('a loan abandoned when its worker exits, whose abandon rejects, is reported as a cleanup error (no unhandled rejection)', async () => {
    const other = await WorkerPool.start(JOBS, { workers: 1 });
    const reported: unknown[] = [];
    const off = onCleanupError((error) => reported.push(error));
    const failing = fakeLoan({ abandon: () => Promise.reject(new Error('abandon failed')) });
    const fine = fakeLoan({});
    const loans = [failing, fine];
    let next = 0;
    hooks.lend = () => loans[next++]!.loan;
    try {
      // The worker exits on the first job, before it reads the second: the second's loans are
      // abandoned. Both go by postMessage (a named job does), so that they arrive in order: a
      // plain job goes through the ring, which the worker may read after a posted one.
      const exiting = other.runWith('exits', [3], { name: 'exit first' }).catch((e: unknown) => e);
      const lending = other
        .runWith('add', [failing.array, fine.array], { stream: {} as never })
        .catch((e: unknown) => e);
      expect(await exiting).toBeInstanceOf(WorkerJobError);
      expect(await lending).toBeInstanceOf(WorkerJobError);
      for (let i = 0; i < 100 && reported.length === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      expect(failing.calls.abandon).toBe(1);
      expect(fine.calls.abandon).toBe(1);
      expect(reported.map((e) => (e as Error).message)).toEqual(['abandon failed']);
    } finally {
      hooks.lend = undefined;
      off();
      await other.close();
    }
  });
});
