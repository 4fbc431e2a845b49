/**
 * The seed example: `c = sin(a * b)` with a cuBLAS SGEMM and `map(c, 'sin', c)`, run on the
 * current task's stream. Two independent jobs in two tasks overlap on the GPU without passing
 * a stream or a handle around; this module checks that the results are the same whichever way
 * the work is issued, and times one stream against two tasks.
 */
import { gemm } from '@cuda-tasks/cublas';
import {
  CudaArgumentError,
  DeviceArray,
  resolveStream,
  Stream,
  type StreamOption,
} from '@cuda-tasks/cudadrv';
import { rand } from '@cuda-tasks/curand';
import { map } from '@cuda-tasks/kernels';
import { synchronize, task, withStream } from '@cuda-tasks/task-runtime';

/** What `checkRunOperands` looks at: a DeviceArray or anything shaped like one. */
export interface OperandLike {
  /** Element type, e.g. `float32`. */
  readonly dtype: string;
  /** Dimensions (a matrix has two). */
  readonly shape: readonly number[];
  /** Whether the elements are one dense run in memory. */
  readonly contiguous: boolean;
}

/**
 * Checks the operands of `run` before anything reaches the GPU: float32 everywhere, 2-D, and a
 * contiguous `c` (`map` walks it as one flat vector).
 * The shapes are checked by `gemm` itself, also before any native call.
 */
export function checkRunOperands(a: OperandLike, b: OperandLike, c: OperandLike): void {
  for (const [name, operand] of [
    ['a', a],
    ['b', b],
    ['c', c],
  ] as const) {
    if (operand.dtype !== 'float32') {
      throw new CudaArgumentError(`seed run: ${name} must be float32, got ${operand.dtype}`);
    }
    if (operand.shape.length !== 2) {
      throw new CudaArgumentError(
        `seed run: ${name} must be a matrix, got shape ${JSON.stringify(operand.shape)}`,
      );
    }
  }
  if (!c.contiguous) {
    throw new CudaArgumentError('seed run: c must be contiguous (map walks it flat)');
  }
}

/**
 * `c = sin(a * b)`: a cuBLAS SGEMM into `c`, then `map(c, 'sin', c)` (an element-wise kernel
 * compiled once from its expression) in place, both queued on the stream (default: the current
 * task's stream). Returns `c` without waiting.
 * @example
 * run(a, b, c);
 * await synchronize();
 */
export function run(
  a: DeviceArray,
  b: DeviceArray,
  c: DeviceArray,
  options: StreamOption = {},
): DeviceArray {
  checkRunOperands(a, b, c);
  const stream = resolveStream(options.stream);
  gemm(a, b, c, { stream });
  map(c, 'sin', c, { stream });
  return c;
}

/** One job of the seed workload: `c = sin(a * b)` on its own output. */
export interface SeedJob {
  /** Left operand (shared by the jobs, or the job's own copy: see `makeJobs`). */
  a: DeviceArray<'float32'>;
  /** Right operand (shared by the jobs, or the job's own copy). */
  b: DeviceArray<'float32'>;
  /** Output: `sin(a * b)`. */
  c: DeviceArray<'float32'>;
  /** Whether `a` and `b` are the job's own copies (freed by `disposeJobs`). */
  ownsInputs: boolean;
}

/** Options of `makeJobs`. */
export interface MakeJobsOptions {
  /**
   * Give each job its own copies of `a` and `b` (default false: every job reads the same `a`
   * and `b`, as the seed program does). The C baseline copies; the benchmark does too.
   */
  copyInputs?: boolean;
}

/**
 * `count` jobs, each with its own output `c`, reading the same `a` and `b` (or copies of them
 * with `copyInputs`).
 *
 * Sharing the inputs does not serialize the jobs: a buffer remembers its last writer and the
 * streams that read it since, so a read on a task's stream waits for the last write (only
 * while it is not known complete), never for another task's read.
 */
export function makeJobs(
  a: DeviceArray<'float32'>,
  b: DeviceArray<'float32'>,
  count = 2,
  options: MakeJobsOptions = {},
): SeedJob[] {
  const copyInputs = options.copyInputs ?? false;
  return Array.from({ length: count }, () => ({
    a: copyInputs ? a.copy() : a,
    b: copyInputs ? b.copy() : b,
    c: DeviceArray.empty('float32', [a.rows, b.columns]),
    ownsInputs: copyInputs,
  }));
}

/** Frees the jobs' outputs, and their inputs where they are the jobs' own copies. */
export function disposeJobs(jobs: readonly SeedJob[]): void {
  for (const job of jobs) {
    if (job.ownsInputs) {
      job.a.dispose();
      job.b.dispose();
    }
    job.c.dispose();
  }
}

/** The serial iteration: every job one after the other in one task (one stream). */
export function serialIteration(jobs: readonly SeedJob[]): Promise<void> {
  return task(
    async () => {
      for (const job of jobs) run(job.a, job.b, job.c);
      await synchronize();
    },
    { name: 'serial' },
  );
}

/** The concurrent iteration: one task per job, each on its own stream, awaited together. */
export async function concurrentIteration(jobs: readonly SeedJob[]): Promise<void> {
  await Promise.all(
    jobs.map((job, index) =>
      task(
        async () => {
          run(job.a, job.b, job.c);
          await synchronize();
        },
        { name: `job ${index + 1}` },
      ),
    ),
  );
}

/**
 * Median of the host wall times (microseconds) of `iterations` calls, after `warmups` more
 * (enough by default for V8 to optimize the code, which takes a few thousand calls of the
 * argument checks; an iteration costs a fraction of a millisecond).
 */
export async function timeIterations(
  iteration: () => Promise<void>,
  iterations = 20,
  warmups = 1000,
): Promise<number> {
  for (let i = 0; i < warmups; i++) await iteration();
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const start = performance.now();
    await iteration();
    samples.push((performance.now() - start) * 1000);
  }
  samples.sort((x, y) => x - y);
  const middle = samples.length >> 1;
  return samples.length % 2 ? samples[middle]! : 0.5 * (samples[middle - 1]! + samples[middle]!);
}

/** How two host copies of a result compare. */
export interface Comparison {
  /** Bit-for-bit the same values (the same math on the same inputs). */
  equal: boolean;
  /** Elements that differ. */
  mismatches: number;
  /** Largest absolute difference (NaN where exactly one side is NaN). */
  maxAbsDifference: number;
}

/** Compares two host arrays element by element. */
export function compare(expected: Float32Array, actual: Float32Array): Comparison {
  if (expected.length !== actual.length) {
    return {
      equal: false,
      mismatches: Math.max(expected.length, actual.length),
      maxAbsDifference: Number.NaN,
    };
  }
  let mismatches = 0;
  let maxAbsDifference = 0;
  for (let i = 0; i < expected.length; i++) {
    const x = expected[i]!;
    const y = actual[i]!;
    if (x !== y && !(Number.isNaN(x) && Number.isNaN(y))) {
      mismatches++;
      const difference = Math.abs(x - y);
      maxAbsDifference = Number.isNaN(difference)
        ? Number.NaN
        : Math.max(maxAbsDifference, difference);
    }
  }
  return { equal: mismatches === 0, mismatches, maxAbsDifference };
}

/** What `main` found. */
export interface SeedSummary {
  /** Matrix size (N x N). */
  n: number;
  /** Timed iterations per variant (the median is reported). */
  iterations: number;
  /** The computation inside `withStream(new stream)` against the root task's. */
  withStream: Comparison;
  /** Each of the two tasks' outputs against the root task's. */
  tasks: Comparison[];
  /** True when every comparison is exactly equal. */
  resultsMatch: boolean;
  /** Serial iteration (2 jobs in one task), median host wall time, microseconds. */
  serialUs: number;
  /** Concurrent iteration (2 jobs in 2 tasks), median host wall time, microseconds. */
  concurrentUs: number;
  /** concurrentUs / serialUs: below 1 when the tasks overlap on the GPU. */
  ratio: number;
}

/** Options of `main`. */
export interface MainOptions {
  /** Timed iterations per variant (default 20). */
  iterations?: number;
  /**
   * Untimed iterations before each variant's timed ones (default 1000: V8 optimizes the
   * argument checks only after a few thousand calls; fewer under a sanitizer).
   */
  warmups?: number;
  /** Called with the jobs for one extra concurrent iteration (the demo traces it). */
  afterTiming?: (jobs: readonly SeedJob[]) => Promise<void>;
}

/**
 * The whole seed example at size `n`: random `a`, `b`, `c` from cuRAND; `c = sin(a * b)` in
 * the root task, then (with `c` reset to NaN first) inside `withStream(new stream)`, then in
 * two tasks at once, each on its own output that starts as NaN; every result compared exactly
 * with the root task's on the host, so a run that did not happen cannot compare equal. Then the
 * serial iteration (two jobs in one task) is timed against the concurrent one (two tasks).
 * @example
 * const summary = await main(1024);
 * console.log(summary.resultsMatch, summary.ratio);
 */
export async function main(n = 1024, options: MainOptions = {}): Promise<SeedSummary> {
  if (!Number.isSafeInteger(n) || n < 1) {
    throw new CudaArgumentError(`seed main: n must be a positive integer, got ${n}`);
  }
  const iterations = options.iterations ?? 20;
  const a = rand('float32', [n, n]);
  const b = rand('float32', [n, n]);
  const c = rand('float32', [n, n]);
  // The tasks' outputs start as NaN: a task that did not run (or wrote elsewhere) leaves NaN
  // behind, which never compares equal to the root task's finite result.
  const outputs = [
    DeviceArray.full('float32', [n, n], Number.NaN),
    DeviceArray.full('float32', [n, n], Number.NaN),
  ];
  const side = Stream.create({ name: 'withStream' });
  let jobs: SeedJob[] = [];
  try {
    // Warm-up: loads the kernel, creates the cuBLAS handle and its workspace.
    run(a, b, c);
    await synchronize();

    run(a, b, c);
    const root = (await c.toHost()) as Float32Array;

    // Reset c before the withStream run, so that its result cannot be the root task's left
    // over in c: a skipped or misdirected run would leave NaN, and compare unequal.
    c.fill(Number.NaN);
    const viaStream = (await withStream(side, async () => {
      run(a, b, c);
      return c.toHost();
    })) as Float32Array;

    // Two tasks at once, sharing a and b (reads: neither task's stream waits for the other's),
    // each writing its own output.
    await Promise.all(
      outputs.map((output, index) =>
        task(
          async () => {
            run(a, b, output);
            await synchronize();
          },
          { name: `check ${index + 1}` },
        ),
      ),
    );
    const fromTasks = (await Promise.all(
      outputs.map((output) => output.toHost()),
    )) as Float32Array[];

    const withStreamComparison = compare(root, viaStream);
    const taskComparisons = fromTasks.map((values) => compare(root, values));

    jobs = makeJobs(a, b, 2);
    const serialUs = await timeIterations(() => serialIteration(jobs), iterations, options.warmups);
    const concurrentUs = await timeIterations(
      () => concurrentIteration(jobs),
      iterations,
      options.warmups,
    );
    await options.afterTiming?.(jobs);

    return {
      n,
      iterations,
      withStream: withStreamComparison,
      tasks: taskComparisons,
      resultsMatch: withStreamComparison.equal && taskComparisons.every((t) => t.equal),
      serialUs,
      concurrentUs,
      ratio: concurrentUs / serialUs,
    };
  } finally {
    disposeJobs(jobs);
    for (const array of [a, b, c, ...outputs]) array.dispose();
    side.dispose();
  }
}
