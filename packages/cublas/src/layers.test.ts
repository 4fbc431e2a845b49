import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeLayers } from '@cuda-tasks/testing';

/**
 * The package reads bottom-up: the bindings (ffi/) and what needs no native call (the routine
 * tables, the host scalar arena, the argument checks); the error module (its status names come
 * from the bindings); the handles and cuBLASLt's plans; the issue envelope every routine goes
 * through; the routines by BLAS level; the entry.
 */
describeLayers({
  name: '@cuda-tasks/cublas',
  source: dirname(fileURLToPath(import.meta.url)),
  layers: [
    [
      'ffi/',
      'routines.ts',
      'scalars.ts',
      'validate.ts',
      'validate-gemm.ts',
      'validate-batched.ts',
      'validate-vectors.ts',
    ],
    ['errors.ts'],
    ['handle.ts', 'lt.ts'],
    ['issue.ts'],
    ['level1.ts', 'level2.ts', 'level3.ts'],
    ['index.ts'],
  ],
  knownEdges: ['level3.ts -> lt.ts', 'handle.ts -> errors.ts', 'ffi/index.ts -> ffi/cublas.ts'],
  siblings: {
    '@cuda-tasks/cudadrv': '*',
    '@cuda-tasks/cudadrv/ffi': '*',
    '@cuda-tasks/cudadrv/internal': '*',
    '@cuda-tasks/task-runtime': '*',
  },
});
