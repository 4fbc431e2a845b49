import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeLayers } from '@cuda-tasks/testing';

/**
 * The package reads bottom-up: C types, signatures, argument checks and the disk cache; the
 * code generators and NVRTC compilation; the compiled-kernel cache; the kernel families
 * (elementwise, reduction, top-k); the operations built on them; the entry. The entry alone
 * imports the task runtime, so that importing the package gives task-local streams.
 */
describeLayers({
  name: '@cuda-tasks/kernels',
  source: dirname(fileURLToPath(import.meta.url)),
  layers: [
    ['ctypes.ts', 'signature.ts', 'arguments.ts', 'disk-cache.ts'],
    ['codegen-elementwise.ts', 'codegen-reduction.ts', 'codegen-topk.ts', 'compile.ts'],
    ['compiled.ts'],
    ['elementwise.ts', 'reduction.ts', 'topk.ts'],
    ['ops.ts', 'reductions.ts'],
    ['index.ts'],
  ],
  knownEdges: [
    'reduction.ts -> codegen-reduction.ts',
    'compiled.ts -> compile.ts',
    'ops.ts -> elementwise.ts',
  ],
  siblings: {
    '@cuda-tasks/cudadrv': '*',
    '@cuda-tasks/cudadrv/ffi': '*',
    // Launches go through cudadrv's public `launchOn`; only the operand check is internal.
    '@cuda-tasks/cudadrv/internal': ['arguments.ts'],
    '@cuda-tasks/task-runtime': ['index.ts'],
  },
});
