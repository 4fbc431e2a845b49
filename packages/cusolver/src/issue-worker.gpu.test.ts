import { performance } from 'node:perf_hooks';
import { Device, DisposedError, Stream } from '@cuda-tasks/cudadrv';
import { setOperationObserver } from '@cuda-tasks/cudadrv/internal';
import { task } from '@cuda-tasks/task-runtime';
import {
  describeGpu,
  diagonallyDominant,
  luReconstruct,
  Rng,
  randomMatrix,
  relativeError,
  relativeResidual,
} from '@cuda-tasks/testing';
import { afterEach, beforeAll, expect, it } from 'vitest';
import { download, SOLVER_DTYPES, TOLERANCE, upload } from '../test/device.js';
import {
  DEFAULT_ISSUE_WORKER_THRESHOLD,
  issueWorkerStatistics,
  lu,
  SingularMatrixError,
  setIssueWorkerThreshold,
  solve,
  startIssueWorker,
} from './index.js';

const offThread = () => issueWorkerStatistics().offThread;

describeGpu('the issue worker: large LU factorizations issued off the event loop', () => {
  beforeAll(async () => {
    expect(await startIssueWorker()).toBe(true);
  });
  afterEach(() => {
    setIssueWorkerThreshold(DEFAULT_ISSUE_WORKER_THRESHOLD);
  });

  it('is ready; solve at the threshold (n = 2048) goes through it, n = 2047 does not', async () => {
    expect(issueWorkerStatistics().state).toBe('ready');
    const rng = new Rng(11);
    for (const [n, through] of [
      [2048, 1],
      [2047, 0],
    ] as const) {
      const { array: a, host: hostA } = upload('float64', diagonallyDominant(rng, n), [n, n]);
      const { array: b, host: hostB } = upload('float64', randomMatrix(rng, n, 2), [n, 2]);
      const before = offThread();
      const x = await solve(a, b);
      expect(offThread() - before).toBe(through);
      expect(relativeResidual(hostA, await download(x), hostB, n, 2)).toBeLessThan(
        TOLERANCE.float64.residual,
      );
      for (const array of [a, b, x]) array.dispose();
    }
  });

  it('every size through it (threshold 0): P L U = A with the pivots of an inline lu, both dtypes', async () => {
    const rng = new Rng(12);
    for (const dtype of SOLVER_DTYPES) {
      for (const [m, n] of [
        [160, 160],
        [96, 64],
        [64, 96],
      ] as const) {
        const { array: a, host } = upload(dtype, randomMatrix(rng, m, n), [m, n]);
        setIssueWorkerThreshold(0);
        const before = offThread();
        const worker = await lu(a);
        expect(offThread() - before).toBe(1);
        setIssueWorkerThreshold(Number.POSITIVE_INFINITY);
        const inline = await lu(a);
        expect(offThread() - before).toBe(1);
        const pivots = await worker.pivots.toHost();
        expect(pivots).toEqual(await inline.pivots.toHost());
        const rebuilt = luReconstruct(await download(worker.lu), pivots, m, n);
        expect(relativeError(rebuilt, host)).toBeLessThan(TOLERANCE[dtype].reconstruction);
        for (const array of [a, worker.lu, worker.pivots, inline.lu, inline.pivots]) {
          array.dispose();
        }
      }
    }
  });

  it('tasks on their own streams and several solves in one task share it; a singular one rejects', async () => {
    setIssueWorkerThreshold(0);
    const rng = new Rng(13);
    const n = 200;
    const problems = Array.from({ length: 12 }, () => ({
      a: upload('float64', diagonallyDominant(rng, n), [n, n]),
      b: upload('float64', randomMatrix(rng, n, 1), [n, 1]),
    }));
    const singular = randomMatrix(rng, n, n);
    for (let i = 0; i < n; i++) singular[i + 6 * n] = 0; // column 7 (1-based) is zero
    const bad = upload('float64', singular, [n, n]);
    const before = offThread();
    // 4 tasks, 3 solves each at once (one task's solves share its stream and handle lease),
    // and one task whose matrix is singular.
    const results = await Promise.all([
      ...[0, 1, 2, 3].map((t) =>
        task(() =>
          Promise.all(
            problems.slice(3 * t, 3 * t + 3).map(async ({ a, b }) => {
              const x = await solve(a.array, b.array);
              const residual = relativeResidual(a.host, await download(x), b.host, n, 1);
              x.dispose();
              return residual;
            }),
          ),
        ),
      ),
      task(() =>
        lu(bad.array).then(
          () => undefined,
          (error: unknown) => error,
        ),
      ),
    ]);
    const residuals = results.slice(0, 4).flat() as number[];
    expect(residuals).toHaveLength(12);
    for (const residual of residuals) expect(residual).toBeLessThan(TOLERANCE.float64.residual);
    const error = results[4];
    expect(error).toBeInstanceOf(SingularMatrixError);
    expect((error as SingularMatrixError).info).toBe(7);
    expect(offThread() - before).toBe(13);
    for (const { a, b } of problems) {
      a.array.dispose();
      b.array.dispose();
    }
    bad.array.dispose();
  });

  it('reports how long solve(n = 4096) holds the event loop, inline and through the worker', async () => {
    const rng = new Rng(14);
    const n = 4096;
    const { array: a, host: hostA } = upload('float64', diagonallyDominant(rng, n), [n, n]);
    const { array: b, host: hostB } = upload('float64', randomMatrix(rng, n, 1), [n, 1]);
    const held: Record<string, number[]> = { inline: [], worker: [] };
    for (let round = 0; round < 4; round++) {
      for (const mode of ['inline', 'worker'] as const) {
        setIssueWorkerThreshold(mode === 'inline' ? Number.POSITIVE_INFINITY : 0);
        const start = performance.now();
        const pending = solve(a, b); // everything up to its first await runs here
        held[mode]!.push(performance.now() - start);
        const x = await pending;
        if (round === 0) {
          expect(relativeResidual(hostA, await download(x), hostB, n, 1)).toBeLessThan(
            TOLERANCE.float64.residual,
          );
        }
        x.dispose();
      }
    }
    const median = (values: number[]) => [...values].sort((p, q) => p - q)[values.length >> 1]!;
    console.log(
      `solve(n = 4096, float64) holds the event loop for ${median(held.inline!).toFixed(3)} ms inline, ${median(held.worker!).toFixed(3)} ms with the issue worker (median of 4)`,
    );
    a.dispose();
    b.dispose();
  });

  /**
   * The pool's bytes held by buffers (used, less the small blocks cached for reuse), once settled:
   * releases still on their way (a disposed stream's cached blocks, a worker's workspace) land
   * within a few turns, so read until two readings 5 ms apart agree. A leak stays and is seen.
   */
  async function heldBytes(): Promise<number> {
    const context = Device.get(0).primaryContext();
    const read = () => {
      context.synchronize();
      const statistics = context.memoryPool.statistics();
      return statistics.usedBytes - statistics.cachedBytes;
    };
    let last = read();
    for (let attempt = 0; attempt < 200; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 5));
      const now = read();
      if (now === last) return now;
      last = now;
    }
    return last;
  }

  /** solve(a, b) of n = 2048 on a fresh stream, checked against the float64 CPU residual. */
  async function checkedSolve(
    a: ReturnType<typeof upload<'float64'>>,
    b: ReturnType<typeof upload<'float64'>>,
    n: number,
  ): Promise<number> {
    const fresh = Stream.create();
    const x = await solve(a.array, b.array, { stream: fresh });
    const residual = relativeResidual(a.host, await download(x), b.host, n, 1);
    x.dispose();
    fresh.dispose();
    return residual;
  }

  it('a stream disposed while the worker factors (n = 2048, 4096): no crash, a DisposedError, memory back, later solves correct', async () => {
    const rng = new Rng(15);
    const outcomes: string[] = [];
    for (const n of [2048, 4096]) {
      const a = upload('float64', diagonallyDominant(rng, n), [n, n]);
      const b = upload('float64', randomMatrix(rng, n, 1), [n, 1]);
      const baseline = await heldBytes();
      // Dispose at once (the call queued or being issued) and after short delays.
      for (const delay of [0, 0.3, 1, 3]) {
        const doomed = Stream.create();
        const pending = solve(a.array, b.array, { stream: doomed }).then(
          (x) => {
            x.dispose();
            return 'solved';
          },
          (error: unknown) => error,
        );
        const until = performance.now() + delay;
        while (performance.now() < until) {
          // spin: the worker runs meanwhile
        }
        doomed.dispose();
        const outcome = await pending;
        expect(DisposedError.isInstance(outcome)).toBe(true);
        outcomes.push(`n=${n} delay=${delay}ms: ${String(outcome).split('\n')[0]}`);
      }
      const after = await heldBytes();
      expect(after).toBe(baseline);
      expect(await checkedSolve(a, b, n)).toBeLessThan(TOLERANCE.float64.residual);
      console.log(
        `dispose mid-factorization n=${n}: pool held ${baseline} B before, ${after} B after`,
      );
      a.array.dispose();
      b.array.dispose();
    }
    console.log(outcomes.join('; '));
  });

  it("a task's signal aborting during the worker's getrf (n = 4096): its reason, no getrs issued, memory back, a later solve correct", async () => {
    const rng = new Rng(16);
    const n = 4096;
    const a = upload('float64', diagonallyDominant(rng, n), [n, n]);
    const b = upload('float64', randomMatrix(rng, n, 1), [n, 1]);
    const baseline = await heldBytes();
    const operations: string[] = [];
    const previous = setOperationObserver({
      begin(name) {
        operations.push(name);
        return 0;
      },
      end() {},
    });
    try {
      for (const delay of [0, 1]) {
        operations.length = 0;
        const controller = new AbortController();
        const reason = new Error(`deadline after ${delay} ms`);
        const outcome = await task(
          async () => {
            const pending = solve(a.array, b.array);
            setTimeout(() => controller.abort(reason), delay);
            return pending;
          },
          { signal: controller.signal },
        ).then(
          () => 'solved',
          (error: unknown) => error,
        );
        expect(outcome).toBe(reason);
        expect(operations).toContain('cusolver.getrf');
        expect(operations).not.toContain('cusolver.getrs');
      }
    } finally {
      setOperationObserver(previous);
    }
    const after = await heldBytes();
    console.log(`abort mid-factorization n=${n}: pool held ${baseline} B before, ${after} B after`);
    expect(after).toBe(baseline);
    expect(await checkedSolve(a, b, n)).toBeLessThan(TOLERANCE.float64.residual);
    a.array.dispose();
    b.array.dispose();
  });
});
