import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeLayers } from '@cuda-tasks/testing';

/**
 * Below: what the examples share (the command-line parser, from the private testing package,
 * the kernels' file paths, the trace overlap and timeline). Above: the examples, each in its folder and importing nothing
 * of another. They use the packages' public entries: the user library shows what a
 * third-party library can build on them.
 */
describeLayers({
  name: '@cuda-tasks/examples',
  source: dirname(fileURLToPath(import.meta.url)),
  layers: [
    ['cli.ts', 'kernels/', 'trace/'],
    ['seed/', 'service/', 'user-library/'],
  ],
  apart: ['seed/', 'service/', 'user-library/'],
  knownEdges: [
    'seed/demo.ts -> seed/scene.ts',
    'service/server.ts -> cli.ts',
    'user-library/fft.ts -> user-library/plans.ts',
  ],
  siblings: {
    '@cuda-tasks/cudadrv': '*',
    '@cuda-tasks/cudadrv/ffi': '*',
    '@cuda-tasks/task-runtime': '*',
    '@cuda-tasks/cublas': '*',
    '@cuda-tasks/cublas/ffi': '*',
    '@cuda-tasks/curand': '*',
    '@cuda-tasks/curand/ffi': '*',
    '@cuda-tasks/cusolver': '*',
    '@cuda-tasks/cusolver/ffi': '*',
    '@cuda-tasks/kernels': '*',
    '@cuda-tasks/testing/cli': ['cli.ts'],
  },
});
