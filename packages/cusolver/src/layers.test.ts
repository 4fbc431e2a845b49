import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeLayers } from '@cuda-tasks/testing';

/**
 * The package reads bottom-up: the bindings (ffi/), the argument checks and the issue
 * worker's message protocol; the error module and the helper kernels; the handles and the
 * worker thread's program; the issue worker; the call envelope (`routines.ts`) and the info
 * check; one file per factorization; the entry.
 */
describeLayers({
  name: '@cuda-tasks/cusolver',
  source: dirname(fileURLToPath(import.meta.url)),
  layers: [
    ['ffi/', 'validate.ts', 'issue-worker-protocol.ts'],
    ['errors.ts', 'kernels.ts'],
    ['handle.ts', 'issue-worker-thread.ts'],
    ['issue-worker.ts'],
    ['routines.ts', 'info.ts'],
    ['cholesky.ts', 'eigh.ts', 'lu.ts', 'qr.ts', 'svd.ts'],
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
