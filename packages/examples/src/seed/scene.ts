/**
 * The demo's second scene: where the GPU has room, many tasks overlap. 16 tasks, each a few
 * rounds of the seed's `c = sin(a * b)` with a narrow product (c is 512 x 512, the inner
 * dimension 4096: a long SGEMM of few thread blocks, so one does not fill an H200 and the GPU
 * has room for the others; a square SGEMM 512 is over before the next task has issued its own,
 * so the scene would measure the host, not the GPU), awaiting its stream after every round. Every task reads the same `a` and `b` (reads
 * do not wait for reads) and writes its own `c`. Times the 16 jobs one after another in one
 * task against the 16 tasks at once, checks that every task's output equals the serial run's,
 * and traces one concurrent iteration to measure how much the streams' GPU work overlapped.
 */
import { CudaArgumentError, DeviceArray } from '@cuda-tasks/cudadrv';
import { rand } from '@cuda-tasks/curand';
import { startTrace, synchronize, type Trace, task } from '@cuda-tasks/task-runtime';
import { type GpuOverlap, gpuOverlap } from '../trace/overlap.js';
import { compare, run, timeIterations } from './seed.js';

/** Options of `manyTasks`. */
export interface SceneOptions {
  /** Tasks (jobs) at once (default 16). */
  tasks?: number;
  /** Rounds of `c = sin(a * b)` per job, each awaited (default 4). */
  rounds?: number;
  /** Rows and columns of each output `c` (default 512). */
  n?: number;
  /** The product's inner dimension: `a` is n x k, `b` k x n (default 4096). */
  k?: number;
  /** Timed iterations per variant; the median is reported (default 20). */
  iterations?: number;
  /** Untimed iterations before each variant's timed ones (default 100). */
  warmups?: number;
}

/** What `manyTasks` found. */
export interface SceneSummary {
  /** Tasks at once. */
  tasks: number;
  /** Rounds per job. */
  rounds: number;
  /** Rows and columns of each output. */
  n: number;
  /** The product's inner dimension. */
  k: number;
  /** Timed iterations per variant. */
  iterations: number;
  /** Whether every task's output equals the serial run's, bit for bit. */
  resultsMatch: boolean;
  /** The jobs one after another in one task: median host wall time, microseconds. */
  serialUs: number;
  /** One task per job, all at once: median host wall time, microseconds. */
  concurrentUs: number;
  /** concurrentUs / serialUs. */
  ratio: number;
  /** The GPU overlap of one traced concurrent iteration. */
  overlap: GpuOverlap;
  /** overlap.overlapUs / overlap.busyUs: the share of busy GPU time with 2+ streams busy. */
  overlapFraction: number;
  /** The traced concurrent iteration (write it, or render it with `renderTimelineSvg`). */
  trace: Trace;
}

function positive(name: string, value: number, minimum = 1): number {
  if (!Number.isSafeInteger(value) || value < minimum) {
    throw new CudaArgumentError(
      `manyTasks: ${name} must be an integer >= ${minimum}, got ${value}`,
    );
  }
  return value;
}

/** One job: `rounds` times `c = sin(a * b)`, awaiting the stream after each. */
async function job(
  a: DeviceArray<'float32'>,
  b: DeviceArray<'float32'>,
  c: DeviceArray<'float32'>,
  rounds: number,
): Promise<void> {
  for (let round = 0; round < rounds; round++) {
    run(a, b, c);
    await synchronize();
  }
}

/**
 * Runs the scene (see the module comment) and returns what it found. `a` and `b` come from
 * cuRAND in the calling task; the outputs start as NaN, so a job that did not run cannot
 * compare equal.
 * @example
 * const scene = await manyTasks();
 * console.log(scene.concurrentUs / scene.serialUs, scene.overlapFraction);
 */
export async function manyTasks(options: SceneOptions = {}): Promise<SceneSummary> {
  const tasks = positive('tasks', options.tasks ?? 16);
  const rounds = positive('rounds', options.rounds ?? 4);
  const n = positive('n', options.n ?? 512);
  const k = positive('k', options.k ?? 4096);
  const iterations = positive('iterations', options.iterations ?? 20);
  const warmups = positive('warmups', options.warmups ?? 100, 0);
  const a = rand('float32', [n, k]);
  const b = rand('float32', [k, n]);
  const serialOut = DeviceArray.full('float32', [n, n], Number.NaN);
  const outputs = Array.from({ length: tasks }, () =>
    DeviceArray.full('float32', [n, n], Number.NaN),
  );
  try {
    const serial = () =>
      task(
        async () => {
          for (const c of outputs) await job(a, b, c, rounds);
        },
        { name: 'serial' },
      );
    const concurrent = async () => {
      await Promise.all(
        outputs.map((c, index) => task(() => job(a, b, c, rounds), { name: `task ${index + 1}` })),
      );
    };

    // The reference: one job in its own task, before anything else wrote the outputs.
    await task(() => job(a, b, serialOut, 1));
    const reference = (await serialOut.toHost()) as Float32Array;
    await concurrent();
    const fromTasks = (await Promise.all(outputs.map((c) => c.toHost()))) as Float32Array[];
    const resultsMatch = fromTasks.every((values) => compare(reference, values).equal);

    const serialUs = await timeIterations(serial, iterations, warmups);
    const concurrentUs = await timeIterations(concurrent, iterations, warmups);

    const recorder = startTrace();
    await concurrent();
    const trace = await recorder.stop();
    const overlap = gpuOverlap(trace.traceEvents);
    return {
      tasks,
      rounds,
      n,
      k,
      iterations,
      resultsMatch,
      serialUs,
      concurrentUs,
      ratio: concurrentUs / serialUs,
      overlap,
      overlapFraction: overlap.busyUs > 0 ? overlap.overlapUs / overlap.busyUs : 0,
      trace,
    };
  } finally {
    for (const array of [a, b, serialOut, ...outputs]) array.dispose();
  }
}
