import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describeLayers } from '@cuda-tasks/testing';

/**
 * The package reads bottom-up: the bindings (ffi/), the process-wide state and what needs no
 * native call (the generation table, seed derivation, argument checks, the counter-based
 * generator's state); the error module, the version query and the
 * Philox kernels; one native generator and the tasks' generators; the user's `Generator` and
 * the task-local `rand`/`randn`; the entry.
 */
describeLayers({
  name: '@cuda-tasks/curand',
  source: dirname(fileURLToPath(import.meta.url)),
  layers: [
    [
      'ffi/',
      'process.ts',
      'routines.ts',
      'seeds.ts',
      'validation.ts',
      'counter.ts',
      'philox-fatbin.generated.ts',
    ],
    ['errors.ts', 'version.ts', 'philox-kernels.ts'],
    ['core.ts', 'handle.ts'],
    ['generator.ts', 'random.ts'],
    ['index.ts'],
  ],
  knownEdges: ['generator.ts -> core.ts', 'handle.ts -> seeds.ts', 'random.ts -> generator.ts'],
  siblings: {
    '@cuda-tasks/cudadrv': '*',
    '@cuda-tasks/cudadrv/ffi': '*',
    '@cuda-tasks/cudadrv/internal': '*',
    '@cuda-tasks/task-runtime': '*',
  },
});
