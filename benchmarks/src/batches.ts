/**
 * Our side of the benchmarks that both the suite (core.ts, libraries.ts) and the
 * same-process comparison (paired.ts) time: one definition of each batch, so that the two
 * measure the same code. A batch returns microseconds per operation; the drain after the
 * timed loop is not timed.
 */
import { type Kernel, type LaunchConfig, launch, type Stream } from '@cuda-tasks/cudadrv';
import { rand } from '@cuda-tasks/curand';
import {
  concurrentIteration,
  disposeJobs,
  makeJobs,
  type SeedJob,
  serialIteration,
} from '@cuda-tasks/examples/seed';
import { synchronize, task, withStream } from '@cuda-tasks/task-runtime';
import { nowUs, warmJit } from './harness.js';

/** `launches` launches of `kernel` (no arguments) on the current stream `s`. */
export function launchBatch(
  kernel: Kernel,
  config: LaunchConfig,
  s: Stream,
  launches: number,
): () => number {
  return () => {
    const t0 = nowUs();
    for (let i = 0; i < launches; i++) launch(kernel, config);
    const t1 = nowUs();
    s.synchronize();
    return (t1 - t0) / launches;
  };
}

/** `launches` calls of `body` inside `withStream`, alternating `s1` and `s2`. */
export function withStreamBatch(
  s1: Stream,
  s2: Stream,
  body: () => void,
  launches: number,
): () => number {
  return () => {
    const t0 = nowUs();
    for (let i = 0; i < launches; i++) withStream(i % 2 ? s2 : s1, body);
    const t1 = nowUs();
    s1.synchronize();
    s2.synchronize();
    return (t1 - t0) / launches;
  };
}

/** One round of 100 concurrent tasks, each launching `kernel` and awaiting its stream. */
export function tasksRound(kernel: Kernel, config: LaunchConfig): () => Promise<unknown> {
  return () =>
    Promise.all(
      Array.from({ length: 100 }, () =>
        task(async () => {
          launch(kernel, config);
          await synchronize();
        }),
      ),
    );
}

/** Microseconds one call of `body` takes, awaited: a batch of one iteration. */
export function timedOnce(body: () => Promise<unknown>): () => Promise<number> {
  return async () => {
    const t0 = nowUs();
    await body();
    return nowUs() - t0;
  };
}

/**
 * The seed workload's two jobs (random 1024 x 1024 float32 operands from cuRAND), with V8
 * warmed up on both iterations: the argument checks and the kernel-argument marshalling
 * reach V8's optimizing tier only after a few thousand calls (3-5x slower before: decision
 * 0010 in docs/decisions), which a long-running program is past and a 200-iteration warm-up
 * is not. `dispose` frees everything.
 */
export async function seedWorkload(): Promise<{ jobs: SeedJob[]; dispose: () => void }> {
  const n = 1024;
  const a = rand('float32', [n, n]);
  const b = rand('float32', [n, n]);
  // Each job its own copies of a and b, as the C baseline has.
  const jobs = makeJobs(a, b, 2, { copyInputs: true });
  await synchronize();
  await warmJit(() => serialIteration(jobs), 2000);
  await warmJit(() => concurrentIteration(jobs), 2000);
  return {
    jobs,
    dispose() {
      disposeJobs(jobs);
      a.dispose();
      b.dispose();
    },
  };
}
