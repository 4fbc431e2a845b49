/**
 * `pnpm demo`: runs the seed example and prints whether the results match and how much the
 * two tasks overlap. With `--trace` (or CUDA_TASKS_TRACE=1) it also records three concurrent
 * iterations and writes a Chrome/Perfetto trace and an SVG timeline.
 *
 * Usage: tsx --conditions=@cuda-tasks/source src/seed/demo.ts [--trace] [--out DIR] [--n N]
 *        [--warmups N]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CudaUnavailableError, currentDevice } from '@cuda-tasks/cudadrv';
import { startTrace } from '@cuda-tasks/task-runtime';
import { gpuOverlap } from '../trace/overlap.js';
import { renderTimelineSvg } from '../trace/timeline.js';
import { concurrentIteration, main, type SeedJob, type SeedSummary } from './seed.js';

/** Concurrent iterations recorded with --trace. */
const TRACED_ITERATIONS = 3;

const defaultOut = fileURLToPath(new URL('../../out', import.meta.url));

interface DemoArguments {
  trace: boolean;
  out: string;
  n: number;
  warmups: number;
}

const usage = 'usage: demo.ts [--trace] [--out DIR] [--n N] [--warmups N]';

function parseArguments(argv: readonly string[]): DemoArguments {
  const parsed: DemoArguments = {
    trace: process.env.CUDA_TASKS_TRACE === '1',
    out: defaultOut,
    n: 1024,
    warmups: 1000,
  };
  for (let i = 0; i < argv.length; i++) {
    const argument = argv[i]!;
    if (argument === '--') continue; // pnpm passes it through
    if (argument === '--trace') parsed.trace = true;
    else if (argument === '--out' && argv[i + 1] !== undefined) parsed.out = resolve(argv[++i]!);
    else if (argument === '--n' && argv[i + 1] !== undefined) parsed.n = Number(argv[++i]);
    else if (argument === '--warmups' && argv[i + 1] !== undefined) {
      parsed.warmups = Number(argv[++i]);
    } else {
      console.error(`unknown argument ${argument}\n${usage}`);
      process.exit(2);
    }
  }
  if (!Number.isSafeInteger(parsed.n) || parsed.n < 1) {
    console.error(`--n must be a positive integer, got ${parsed.n}`);
    process.exit(2);
  }
  if (!Number.isSafeInteger(parsed.warmups) || parsed.warmups < 0) {
    console.error(`--warmups must be a non-negative integer, got ${parsed.warmups}`);
    process.exit(2);
  }
  return parsed;
}

function isUnavailable(error: unknown): error is Error {
  // By name too: another loaded copy of cudadrv has its own class.
  return (
    error instanceof CudaUnavailableError ||
    (error instanceof Error && error.name === 'CudaUnavailableError')
  );
}

const shown = (path: string) => {
  const relativePath = relative(process.cwd(), path);
  return relativePath.startsWith('..') ? path : relativePath;
};

async function demo(): Promise<number> {
  const options = parseArguments(process.argv.slice(2));
  const tracePaths: string[] = [];
  let overlapLine: string | undefined;

  // Records three concurrent iterations after the timing (so tracing does not slow it): the
  // first traced one pays the recorder's own start-up; the later ones show the steady state.
  const traceIteration = async (jobs: readonly SeedJob[]) => {
    const recorder = startTrace();
    for (let i = 0; i < TRACED_ITERATIONS; i++) await concurrentIteration(jobs);
    const trace = await recorder.stop();
    const overlap = gpuOverlap(trace.traceEvents);
    overlapLine =
      `GPU work on ${overlap.streams} streams overlapped for ${overlap.overlapUs.toFixed(1)} us ` +
      `of ${overlap.busyUs.toFixed(1)} us busy (${((100 * overlap.overlapUs) / Math.max(1, overlap.busyUs)).toFixed(0)}%)`;
    mkdirSync(options.out, { recursive: true });
    const jsonPath = join(options.out, 'seed-trace.json');
    const svgPath = join(options.out, 'seed-timeline.svg');
    trace.write(jsonPath);
    writeFileSync(svgPath, renderTimelineSvg(trace));
    tracePaths.push(jsonPath, svgPath);
  };

  let summary: SeedSummary;
  try {
    summary = await main(options.n, {
      warmups: options.warmups,
      ...(options.trace ? { afterTiming: traceIteration } : {}),
    });
  } catch (error) {
    if (isUnavailable(error)) {
      console.error(error.message);
      return 1;
    }
    throw error;
  }

  const yesNo = (equal: boolean) => (equal ? 'yes' : 'NO');
  const n = summary.n;
  console.log(`cuda-tasks seed example on ${currentDevice().name()}`);
  console.log(`c = sin(a * b), a and b ${n} x ${n} float32 from cuRAND, cuBLAS SGEMM + our kernel`);
  console.log('');
  console.log('results (compared bit for bit with the root task):');
  console.log(`  inside withStream(new stream): ${yesNo(summary.withStream.equal)}`);
  summary.tasks.forEach((comparison, index) => {
    console.log(`  task ${index + 1} of 2, concurrent:     ${yesNo(comparison.equal)}`);
  });
  for (const comparison of [summary.withStream, ...summary.tasks]) {
    if (!comparison.equal) {
      console.log(
        `  (${comparison.mismatches} elements differ, largest difference ${comparison.maxAbsDifference})`,
      );
    }
  }
  console.log('');
  console.log(`timing, median of ${summary.iterations} iterations (2 jobs of sgemm ${n} + sin):`);
  console.log(`  serial, one task:     ${summary.serialUs.toFixed(1).padStart(9)} us`);
  console.log(`  concurrent, 2 tasks:  ${summary.concurrentUs.toFixed(1).padStart(9)} us`);
  console.log(
    `  concurrent / serial:  ${summary.ratio.toFixed(3).padStart(9)}   (below 1: the tasks overlap on the GPU)`,
  );
  if (tracePaths.length > 0) {
    console.log('');
    console.log(`trace of ${TRACED_ITERATIONS} concurrent iterations: ${shown(tracePaths[0]!)}`);
    if (overlapLine !== undefined) console.log(`  ${overlapLine}`);
    console.log('  open it at https://ui.perfetto.dev or chrome://tracing');
    console.log(`timeline: ${shown(tracePaths[1]!)} (open in any browser)`);
  }
  console.log('');
  console.log(summary.resultsMatch ? 'OK: all results match' : 'FAILED: results differ');
  return summary.resultsMatch ? 0 : 1;
}

// Exit explicitly: pooled streams and cached handles need no teardown at exit.
process.exit(await demo());
