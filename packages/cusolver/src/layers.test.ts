import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeLayers } from '@cuda-tasks/testing';

/**
 * The package reads bottom-up: the bindings (ffi/) and the argument checks; the error module
 * and the helper kernels; the handles; the issue worker (a WorkerPool of one thread); the call
 * envelope (`routines.ts`) and the info check; one file per factorization, and the issue
 * worker's job module; the entry.
 */
describeLayers({
  name: '@cuda-tasks/cusolver',
  source: dirname(fileURLToPath(import.meta.url)),
  layers: [
    ['ffi/', 'validate.ts'],
    ['errors.ts', 'kernels.ts'],
    ['handle.ts'],
    ['issue-worker.ts'],
    ['routines.ts', 'info.ts'],
    ['cholesky.ts', 'eigh.ts', 'lu.ts', 'qr.ts', 'svd.ts', 'issue-jobs.ts'],
    ['index.ts'],
  ],
  knownEdges: ['lu.ts -> routines.ts', 'routines.ts -> handle.ts', 'qr.ts -> kernels.ts'],
  siblings: {
    '@cuda-tasks/cudadrv': '*',
    '@cuda-tasks/cudadrv/ffi': '*',
    '@cuda-tasks/cudadrv/internal': '*',
    '@cuda-tasks/task-runtime': '*',
  },
});
