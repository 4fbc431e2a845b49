import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeLayers } from '@cuda-tasks/testing';

/**
 * The package reads bottom-up: C types, signatures and argument checks; the code generators;
 * the compiled kernels (loaded through the task runtime's compile cache, the kit's one NVRTC
 * cache); the kernel families (elementwise, reduction, top-k); the operations built on them;
 * the entry. The entry imports the task runtime too, so that importing the package gives
 * task-local streams.
 */
describeLayers({
  name: '@cuda-tasks/kernels',
  source: dirname(fileURLToPath(import.meta.url)),
  layers: [
    ['ctypes.ts', 'signature.ts', 'arguments.ts'],
    ['codegen-elementwise.ts', 'codegen-reduction.ts', 'codegen-topk.ts'],
    ['compiled.ts'],
    ['elementwise.ts', 'reduction.ts', 'topk.ts'],
    ['ops.ts', 'reductions.ts'],
    ['index.ts'],
  ],
  knownEdges: ['reduction.ts -> codegen-reduction.ts', 'ops.ts -> elementwise.ts'],
  siblings: {
    '@cuda-tasks/cudadrv': '*',
    // Launches (`launchOn`) and the operand checks are cudadrv's public API: nothing internal.
    '@cuda-tasks/cudadrv/internal': [],
    '@cuda-tasks/task-runtime': ['index.ts', 'compiled.ts'],
  },
});
