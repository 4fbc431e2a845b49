import { fork } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { ringDigest } from '../test/fixtures/ring-digest.js';
import { WorkerJobError, WorkerPool } from './worker-pool.js';
import {
  BELL_SLEEPING,
  createBell,
  createRings,
  MAX_RING_ARGS,
  MAX_RING_CHARS,
  pushJob,
  type RingJob,
  RingView,
  ringBell,
  SLEEPING,
  sleepWhileFlagged,
  takeJob,
  wakeReader,
} from './worker-ring.js';

// Real worker threads running the runtime from its source, on jobs that touch no GPU: plain
// jobs and results through the shared rings (worker-ring.ts), everything else by postMessage.
const JOBS = new URL('../test/fixtures/ring-jobs.ts', import.meta.url);

/** What `compute(mode, delay, ...args)` answers (the job's own rule, computed here). */
function expected(mode: number, args: readonly unknown[]): unknown {
  const digest = ringDigest(args);
  if (mode === 1) return digest % 2 === 0;
  if (mode === 2) return undefined;
  if (mode === 3) return null;
  if (mode === 4) return `digest ${digest}`;
  if (mode === 5) return { digest };
  return digest;
}

/** Messages the pool posts to its workers (a ring job posts none). */
function countPosts() {
  return vi.spyOn(Worker.prototype, 'postMessage');
}

let pool: WorkerPool;
beforeAll(async () => {
  pool = await WorkerPool.start(JOBS, { workers: 2 });
}, 60_000);
afterAll(async () => {
  await pool.close();
});
afterEach(() => {
  vi.restoreAllMocks();
});

const plainArg = fc.oneof(
  fc.double(),
  fc.integer(),
  fc.boolean(),
  fc.constant(undefined),
  fc.constant(null),
  fc.string({ maxLength: 12 }),
  fc.string({ unit: 'binary', maxLength: 6 }),
);
const otherArg = fc.oneof(
  fc.string({ minLength: MAX_RING_CHARS + 1, maxLength: MAX_RING_CHARS + 20 }),
  fc.array(fc.integer(), { maxLength: 3 }),
  fc.record({ a: fc.integer() }),
);

describe('WorkerPool jobs through the shared rings', () => {
  it('random batches of plain and other jobs and results all answer once, each as the job computes it', async () => {
    const job = fc.record({
      mode: fc.integer({ min: 0, max: 7 }),
      delay: fc.integer({ min: 0, max: 3 }),
      args: fc.array(
        fc.oneof({ weight: 5, arbitrary: plainArg }, { weight: 1, arbitrary: otherArg }),
        {
          maxLength: MAX_RING_ARGS,
        },
      ),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(job, { minLength: 1, maxLength: 64 }), async (jobs) => {
        const settled = await Promise.allSettled(
          jobs.map((j) => pool.run('compute', j.mode, j.delay, ...j.args)),
        );
        for (let i = 0; i < jobs.length; i++) {
          const { mode, args } = jobs[i]!;
          const outcome = settled[i]!;
          if (mode === 6) {
            expect(outcome.status).toBe('rejected');
            const error = (outcome as PromiseRejectedResult).reason as WorkerJobError;
            expect(error).toBeInstanceOf(WorkerJobError);
            expect(error.remoteName).toBe('RangeError');
            expect(error.remoteMessage).toBe(`digest ${ringDigest(args)}`);
          } else {
            expect(outcome).toEqual({ status: 'fulfilled', value: expected(mode, args) });
          }
        }
        expect(pool.statistics().inFlight).toEqual([0, 0]);
      }),
      { numRuns: 60 },
    );
  });

  it('sends plain jobs without a postMessage, and the others by postMessage as before', async () => {
    const posts = countPosts();
    const plain = await Promise.all(
      Array.from({ length: 100 }, (_, i) => pool.run('compute', 0, 0, i, 'é✓', true, null)),
    );
    expect(plain).toEqual(Array.from({ length: 100 }, (_, i) => ringDigest([i, 'é✓', true, null])));
    expect(posts).toHaveBeenCalledTimes(0);
    const long = 'x'.repeat(MAX_RING_CHARS + 1);
    const many = Array.from({ length: MAX_RING_ARGS - 1 }, (_, i) => i);
    const others: [string, unknown[], object][] = [
      ['an object argument', [{ a: 1 }], {}],
      ['a long string', [long], {}],
      ['more arguments than a record holds', many, {}],
      ['a bigint', [12n], {}],
      ['a name', [1], { name: 'named' }],
      ['a signal', [1], { signal: new AbortController().signal }],
    ];
    for (const [what, args, options] of others) {
      posts.mockClear();
      const value = await pool.runWith('compute', [0, 0, ...args], options);
      expect(value, what).toBe(ringDigest(args));
      expect(posts, what).toHaveBeenCalledTimes(1);
    }
    // A priority travels in the record.
    posts.mockClear();
    await expect(pool.runWith('compute', [1, 0, 5], { priority: 'high' })).resolves.toBe(
      ringDigest([5]) % 2 === 0,
    );
    expect(posts).toHaveBeenCalledTimes(0);
  });

  it('batches of 4 on 2 new workers, 60,000 jobs, all answer (no wake-up is lost)', async () => {
    // A writer's wake-up that comes late (after its reader took the record and armed its wait
    // again) must not use up the reader's next one: with a late wake able to clear a fresh
    // sleep flag, this stopped for good in about half of the runs.
    const two = await WorkerPool.start(JOBS, { workers: 2 });
    try {
      const n = 60_000;
      let sum = 0;
      let want = 0;
      for (let i = 0; i < n; i += 4) {
        const batch = await Promise.all([
          two.run<number>('compute', 0, 0, i, 0),
          two.run<number>('compute', 0, 0, i, 1),
          two.run<number>('compute', 0, 0, i, 2),
          two.run<number>('compute', 0, 0, i, 3),
        ]);
        for (let k = 0; k < 4; k++) {
          sum += batch[k]!;
          want += ringDigest([i, k]);
        }
      }
      expect(sum).toBe(want);
      expect(two.statistics().inFlight).toEqual([0, 0]);
    } finally {
      await two.close({ timeoutMs: 0 });
    }
  }, 30_000);

  it('a full inbox sends the overflow by postMessage; every job answers', async () => {
    const one = await WorkerPool.start(JOBS, { workers: 1 });
    try {
      const posts = countPosts();
      const n = 1500;
      const results = await Promise.all(
        Array.from({ length: n }, (_, i) => one.run('compute', i % 4, 0, i)),
      );
      expect(results).toEqual(Array.from({ length: n }, (_, i) => expected(i % 4, [i])));
      expect(posts.mock.calls.length).toBeGreaterThan(0);
      expect(posts.mock.calls.length).toBeLessThan(n);
      expect(one.statistics()).toMatchObject({ inFlight: [0], completed: [n] });
    } finally {
      await one.close();
    }
  });

  it('a worker that exits with ring jobs in flight rejects them all; its restart gets new rings', async () => {
    const one = await WorkerPool.start(JOBS, { workers: 1 });
    try {
      const slow = Array.from({ length: 5 }, () => one.run('slow', 2_000).catch((e: unknown) => e));
      const exiting = one.run('exits', 4).catch((e: unknown) => e);
      const queued = Array.from({ length: 5 }, (_, i) =>
        one.run('compute', 0, 0, i).catch((e: unknown) => e),
      );
      for (const error of await Promise.all([...slow, exiting, ...queued])) {
        expect(error).toBeInstanceOf(WorkerJobError);
        expect((error as Error).message).toMatch(/exited with code 4/);
      }
      expect(one.statistics().inFlight).toEqual([0]);
      for (let i = 0; i < 300 && one.statistics().restarts === 0; i++) {
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      let ready = false;
      for (let i = 0; i < 300 && !ready; i++) {
        ready = await one.run('compute', 0, 0, 1).then(
          () => true,
          () => false,
        );
        if (!ready) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const posts = countPosts();
      const after = await Promise.all(
        Array.from({ length: 20 }, (_, i) => one.run('compute', 0, 0, i)),
      );
      expect(after).toEqual(Array.from({ length: 20 }, (_, i) => ringDigest([i])));
      expect(posts).toHaveBeenCalledTimes(0);
    } finally {
      await one.close();
    }
  });

  it('an idle pool with its workers asleep on their rings uses no core', async () => {
    await Promise.all(Array.from({ length: 64 }, (_, i) => pool.run('compute', 0, 0, i)));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const before = process.cpuUsage();
    const started = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const used = process.cpuUsage(before);
    const cpuMs = (used.user + used.system) / 1000;
    // The whole process (main thread and both workers): far below one busy core's 500 ms.
    expect(cpuMs).toBeLessThan(0.1 * (performance.now() - started));
  });

  it('a process whose started pool is idle after ring jobs exits on its own', async () => {
    const loader = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    const child = fork(
      fileURLToPath(new URL('../test/fixtures/ring-idle-child.ts', import.meta.url)),
      [],
      {
        execArgv: ['--conditions=@cuda-tasks/source', '--import', loader],
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      },
    );
    let done: { results: number; at: number } | undefined;
    child.on('message', (message: { results: number; at: number }) => {
      done = message;
    });
    const code = await new Promise<number | null>((resolve, reject) => {
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error('the child with an idle pool did not exit within 30 s'));
      }, 30_000);
      child.once('exit', (exitCode) => {
        clearTimeout(timer);
        resolve(exitCode);
      });
    });
    expect(code).toBe(0);
    expect(done?.results).toBe(16);
    expect(Date.now() - done!.at).toBeLessThan(5_000);
  }, 40_000);
});

describe('the rings’ sleep flags (one thread playing both sides)', () => {
  it('a wake that comes late (its record taken, the flag set again) makes the reader look again, and the next job wakes it', async () => {
    const rings = createRings(createBell());
    const writer = new RingView(rings.inbox);
    const reader = new RingView(rings.inbox);
    const job: RingJob = { id: 0, job: 0, priority: 0, args: [] };
    // The writer publishes job 1 (the reader is awake) and the reader takes it at once...
    expect(pushJob(writer, 1, 0, 0, [1])).toBe(true);
    expect(takeJob(reader, job)).toBe(true);
    // ...finds the ring empty, sets its flag, and looks once more: still empty.
    Atomics.store(reader.header, SLEEPING, 1);
    expect(takeJob(reader, job)).toBe(false);
    // Now the writer's wake for job 1 swaps the flag to 0, before the reader waits: the reader
    // must not sleep with its flag clear (job 2's writer would then not wake it).
    wakeReader(writer.header);
    expect(sleepWhileFlagged(reader.header, SLEEPING)).toBeUndefined();
    // It looks again, finds nothing, and sleeps for real; job 2 wakes it.
    Atomics.store(reader.header, SLEEPING, 1);
    expect(takeJob(reader, job)).toBe(false);
    const wait = sleepWhileFlagged(reader.header, SLEEPING);
    expect(wait).toBeInstanceOf(Promise);
    expect(pushJob(writer, 2, 0, 0, [2])).toBe(true);
    await expect(wait).resolves.toBe('ok');
    expect(takeJob(reader, job)).toBe(true);
    expect(job).toMatchObject({ id: 2, args: [2] });
  });

  it('the pool’s bell: a late ring ends the wait before it starts; a ring wakes a sleeping pool', async () => {
    const bell = new Int32Array(createBell());
    Atomics.store(bell, BELL_SLEEPING, 1);
    ringBell(bell);
    expect(sleepWhileFlagged(bell, BELL_SLEEPING)).toBeUndefined();
    Atomics.store(bell, BELL_SLEEPING, 1);
    const wait = sleepWhileFlagged(bell, BELL_SLEEPING);
    expect(wait).toBeInstanceOf(Promise);
    ringBell(bell);
    await expect(wait).resolves.toBe('ok');
    // No one sleeps: a ring changes nothing.
    ringBell(bell);
    expect(Atomics.load(bell, BELL_SLEEPING)).toBe(0);
  });
});
