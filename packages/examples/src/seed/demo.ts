/**
 * `pnpm demo`: runs the seed example and prints whether the results match and how much the
 * two tasks overlap. With `--trace` (or CUDA_TASKS_TRACE=1) it also records three concurrent
 * iterations and writes a Chrome/Perfetto trace and an SVG timeline. Then a second scene
 * (scene.ts): 16 tasks of smaller GEMMs where the GPU has room, serial against concurrent, the
 * overlap of their GPU work from a trace, and its timeline (many-tasks-timeline.svg, always).
 *
 * Usage: pnpm demo [--trace] [--out DIR] [--n N] [--warmups N] [--help]
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CudaUnavailableError, currentDevice } from '@cuda-tasks/cudadrv';
import { startTrace } from '@cuda-tasks/task-runtime';
import {
  CommandLineError,
  isEntryPoint,
  parseCommandLine,
  parseCommandLineOrExit,
  usage,
} from '../cli.js';
import { gpuOverlap } from '../trace/overlap.js';
import { renderTimelineSvg } from '../trace/timeline.js';
import { manyTasks, type SceneSummary } from './scene.js';
import { concurrentIteration, main, type SeedJob, type SeedSummary } from './seed.js';

/** Concurrent iterations recorded with --trace. */
const TRACED_ITERATIONS = 3;

const defaultOut = fileURLToPath(new URL('../../out', import.meta.url));

/** What the demo was asked to do (see `parseDemoArguments`). */
export interface DemoArguments {
  /** Record three concurrent iterations and write a trace and a timeline. */
  trace: boolean;
  /** Where the trace and the timeline go. */
  out: string;
  /** Matrix size. */
  n: number;
  /** Warm-up iterations before timing. */
  warmups: number;
}

/** The demo's flags (`pnpm demo --help`). */
export const demoCommandLine = {
  command: 'pnpm demo',
  options: {
    trace: { type: 'boolean', description: 'also write a Perfetto trace and an SVG timeline' },
    out: {
      type: 'string',
      placeholder: 'DIR',
      description: 'where the timelines and the trace go',
      default: 'packages/examples/out',
    },
    n: { type: 'string', placeholder: 'N', description: 'matrix size', default: 1024 },
    warmups: { type: 'string', placeholder: 'N', description: 'warm-up iterations', default: 1000 },
  },
} as const;

/**
 * Parses the demo's command line (`CUDA_TASKS_TRACE=1` stands for `--trace`). Throws a
 * `CommandLineError` for an unknown flag (listing the valid ones) or a bad number.
 * @example parseDemoArguments(['--n', '64'], {}).n; // 64
 */
export function parseDemoArguments(
  argv: readonly string[],
  environment: NodeJS.ProcessEnv = process.env,
): DemoArguments {
  const { values } = parseCommandLine(argv, demoCommandLine);
  const integer = (name: 'n' | 'warmups', fallback: number, minimum: number): number => {
    const text = values[name];
    if (text === undefined) return fallback;
    const value = Number(text);
    if (text === '' || !Number.isSafeInteger(value) || value < minimum) {
      throw new CommandLineError(
        `--${name} must be ${minimum === 1 ? 'a positive' : 'a non-negative'} integer, got ${text || 'nothing'}`,
        usage(demoCommandLine),
      );
    }
    return value;
  };
  return {
    trace: values.trace === true || environment.CUDA_TASKS_TRACE === '1',
    out: values.out === undefined ? defaultOut : resolve(values.out),
    n: integer('n', demoCommandLine.options.n.default, 1),
    warmups: integer('warmups', demoCommandLine.options.warmups.default, 0),
  };
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
  parseCommandLineOrExit(process.argv.slice(2), demoCommandLine); // --help, unknown flags
  let options: DemoArguments;
  try {
    options = parseDemoArguments(process.argv.slice(2));
  } catch (error) {
    if (!(error instanceof CommandLineError)) throw error;
    console.error(`${error.message}\n\n${error.usage}`);
    return 2;
  }
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
  console.log(
    `c = sin(a * b), a and b ${n} x ${n} float32 from cuRAND, cuBLAS SGEMM + map(c, 'sin', c)`,
  );
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

  const scene = await manyTasks();
  mkdirSync(options.out, { recursive: true });
  const sceneSvg = join(options.out, 'many-tasks-timeline.svg');
  writeFileSync(
    sceneSvg,
    renderTimelineSvg(scene.trace, {
      title: `${scene.tasks} tasks, each ${scene.rounds} rounds of sgemm ${scene.n} x ${scene.k} x ${scene.n} + sin (one concurrent iteration)`,
    }),
  );
  console.log('');
  printScene(scene, shown(sceneSvg));

  const ok = summary.resultsMatch && scene.resultsMatch;
  console.log('');
  console.log(ok ? 'OK: all results match' : 'FAILED: results differ');
  return ok ? 0 : 1;
}

/** The second scene's lines. */
function printScene(scene: SceneSummary, svgPath: string): void {
  const { overlap } = scene;
  console.log(
    `where the GPU has room: ${scene.tasks} tasks, each ${scene.rounds} rounds of (sgemm ${scene.n} x ${scene.k} x ${scene.n} + sin), awaiting each round; a and b shared`,
  );
  console.log(
    `  every task's output equals the serial run's: ${scene.resultsMatch ? 'yes' : 'NO'}`,
  );
  console.log(
    `  serial, one task:     ${scene.serialUs.toFixed(1).padStart(9)} us   (median of ${scene.iterations})`,
  );
  console.log(
    `  concurrent, ${scene.tasks} tasks: ${scene.concurrentUs.toFixed(1).padStart(9)} us`,
  );
  console.log(`  concurrent / serial:  ${scene.ratio.toFixed(3).padStart(9)}`);
  console.log(
    `  one traced concurrent iteration: GPU work on ${overlap.streams} streams overlapped for ${overlap.overlapUs.toFixed(1)} us of ${overlap.busyUs.toFixed(1)} us busy (${(100 * scene.overlapFraction).toFixed(0)}%)`,
  );
  console.log(`  timeline: ${svgPath} (open in any browser)`);
}

// Exit explicitly: pooled streams and cached handles need no teardown at exit.
if (isEntryPoint(import.meta.url)) process.exit(await demo());
