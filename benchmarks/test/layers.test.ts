import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeLayers } from '@cuda-tasks/testing';

/**
 * The suite reads bottom-up: the timing harness, the report, the scaling configuration, the
 * bare koffi baseline; the task batches, the scaling report,
 * the scaling jobs (run by the main thread's tasks and by worker tasks) and their bare koffi
 * floor; the benchmarks themselves (the scaling worker tasks' job module, the floor's worker
 * thread and the interprocess event's reader among them); the runs that gather them; `pnpm bench` (run.ts). It measures the
 * packages through their public entries, and the seed demo's workload and kernels from the
 * examples; it parses its command line with the parser the examples use too, from the private
 * testing package, rather than import the examples' command lines.
 */
describeLayers({
  name: '@cuda-tasks/benchmarks',
  source: join(dirname(fileURLToPath(import.meta.url)), '..', 'src'),
  layers: [
    ['harness.ts', 'report.ts', 'scaling-config.ts', 'bare.ts'],
    ['batches.ts', 'scaling-report.ts', 'scaling-work.ts', 'scaling-floor.ts'],
    [
      'core.ts',
      'host.ts',
      'ipc.ts',
      'ipc-reader.ts',
      'kernels.ts',
      'libraries.ts',
      'paired.ts',
      'scaling.ts',
      'scaling-chart.ts',
      'scaling-floor-worker.ts',
      'scaling-jobs.ts',
    ],
    ['ours.ts', 'scaling-run.ts'],
    ['run.ts'],
  ],
  knownEdges: ['run.ts -> report.ts', 'paired.ts -> batches.ts', 'ours.ts -> libraries.ts'],
  siblings: {
    '@cuda-tasks/cudadrv': '*',
    '@cuda-tasks/task-runtime': '*',
    '@cuda-tasks/cublas': '*',
    '@cuda-tasks/cublas/ffi': '*',
    '@cuda-tasks/curand': '*',
    '@cuda-tasks/curand/ffi': '*',
    '@cuda-tasks/cusolver': '*',
    '@cuda-tasks/kernels': '*',
    '@cuda-tasks/examples/kernels': '*',
    '@cuda-tasks/examples/seed': '*',
    '@cuda-tasks/testing/cli': ['run.ts'],
    '@cuda-tasks/testing/native': ['host.ts'],
  },
});
