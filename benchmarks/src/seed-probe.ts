/**
 * A diagnostic of the seed workload (not part of `pnpm bench`): where one serial iteration's
 * wall time goes, in one process. After seedWorkload's warm-up it prints where this process's
 * kernels came from (compiled or read from the disk cache) and one JSON line of medians over
 * 200 iterations:
 *
 * - `plain_us`: the seed_serial figure as the suite takes it (no events);
 * - `total_us`: an instrumented iteration, host wall time (task start to task settled);
 * - `gemm1_us`, `sin1_us`, `gemm2_us`, `sin2_us`: GPU time of each step from timing events
 *   recorded between them on the task's stream (gaps before a step count in it);
 * - `gpu_span_us`: first event to last (the GPU busy span of the iteration);
 * - `lead_us`: host time from the task body's start until the first gemm has been issued
 *   (GPU idle meanwhile: it is on the critical path);
 * - `issue_us`: host time to issue all four steps;
 * - `tail_us`: total - lead - span, the time after the GPU finished until the task settled
 *   (the wait's detection latency, the task's settlement), an upper bound.
 *
 * total ≈ lead + span + tail: a slow process shows which term grew. Run it in a process whose
 * kernels are compiled and in one that reads them from the disk cache:
 *   D=$(mktemp -d); for i in 1 2; do CUDA_TASKS_KERNEL_CACHE=$D tsx --conditions=@cuda-tasks/source src/seed-probe.ts; done
 */
import { cpus } from 'node:os';
import { gemm, gemmPlanStatistics } from '@cuda-tasks/cublas';
import { Event } from '@cuda-tasks/cudadrv';
import { serialIteration } from '@cuda-tasks/examples/seed';
import { map } from '@cuda-tasks/kernels';
import { kernelCacheStatistics, stream, synchronize, task } from '@cuda-tasks/task-runtime';
import { seedWorkload } from './batches.js';
import { median, nowUs } from './harness.js';

const ITERATIONS = 200;

const seed = await seedWorkload();
const jobs = seed.jobs;
const cache = kernelCacheStatistics();
const plans = gemmPlanStatistics();

const plain: number[] = [];
for (let i = 0; i < ITERATIONS; i++) {
  const t0 = nowUs();
  await serialIteration(jobs);
  plain.push(nowUs() - t0);
}

const events = Array.from({ length: 5 }, () => Event.create({ timing: true }));
const [e0, e1, e2, e3, e4] = events as [Event, Event, Event, Event, Event];
const rows = {
  total: [] as number[],
  lead: [] as number[],
  issue: [] as number[],
  gemm1: [] as number[],
  sin1: [] as number[],
  gemm2: [] as number[],
  sin2: [] as number[],
  span: [] as number[],
  tail: [] as number[],
};
const [j1, j2] = [jobs[0]!, jobs[1]!];
for (let i = 0; i < ITERATIONS + 20; i++) {
  let lead = 0;
  let issue = 0;
  const t0 = nowUs();
  await task(
    async () => {
      const tb = nowUs();
      const s = stream();
      e0.record(s);
      gemm(j1.a, j1.b, j1.c);
      lead = nowUs() - tb;
      e1.record(s);
      map(j1.c, 'sin', j1.c);
      e2.record(s);
      gemm(j2.a, j2.b, j2.c);
      e3.record(s);
      map(j2.c, 'sin', j2.c);
      e4.record(s);
      issue = nowUs() - tb;
      await synchronize();
    },
    { name: 'probe' },
  );
  const total = nowUs() - t0;
  if (i < 20) continue;
  const span = 1000 * Event.elapsedTime(e0, e4);
  rows.total.push(total);
  rows.lead.push(lead);
  rows.issue.push(issue);
  rows.gemm1.push(1000 * Event.elapsedTime(e0, e1));
  rows.sin1.push(1000 * Event.elapsedTime(e1, e2));
  rows.gemm2.push(1000 * Event.elapsedTime(e2, e3));
  rows.sin2.push(1000 * Event.elapsedTime(e3, e4));
  rows.span.push(span);
  rows.tail.push(total - lead - span);
}
for (const event of events) event.dispose();
seed.dispose();

const round = (value: number) => Math.round(value * 10) / 10;
console.log(
  JSON.stringify({
    name: 'seed_probe',
    kernels_compiled: cache.compiled,
    kernels_from_disk: cache.diskHits,
    gemm_plans_built: plans.built,
    cpu: cpus()[0]?.model,
    plain_us: round(median(plain)),
    total_us: round(median(rows.total)),
    lead_us: round(median(rows.lead)),
    issue_us: round(median(rows.issue)),
    gemm1_us: round(median(rows.gemm1)),
    sin1_us: round(median(rows.sin1)),
    gemm2_us: round(median(rows.gemm2)),
    sin2_us: round(median(rows.sin2)),
    gpu_span_us: round(median(rows.span)),
    tail_us: round(median(rows.tail)),
  }),
);
process.exit(0);
