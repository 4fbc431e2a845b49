import { defineConfig } from 'vitest/config';
import { probeGpu } from './packages/testing/src/probe-gpu';

// One probe per run: GPU test files run where a CUDA device answers, and skip with one
// clear line (printed here) where none does.
const gpu = probeGpu();
if (!gpu.available) {
  console.log(`[cuda-tasks] GPU tests skipped: ${gpu.reason}`);
}

const shared = {
  resolve: { conditions: ['@cuda-tasks/source'] },
  ssr: { resolve: { conditions: ['@cuda-tasks/source'] } },
};

export default defineConfig({
  test: {
    projects: [
      {
        ...shared,
        test: {
          name: 'unit',
          include: [
            'packages/*/src/**/*.test.ts',
            'packages/*/test/**/*.test.ts',
            'benchmarks/test/**/*.test.ts',
            'test/**/*.test.ts',
          ],
          exclude: ['**/*.gpu.test.ts', '**/node_modules/**'],
          setupFiles: ['./packages/testing/src/fresh-turn.ts'],
          pool: 'forks',
        },
      },
      {
        ...shared,
        test: {
          name: 'gpu',
          include: ['packages/*/src/**/*.gpu.test.ts', 'packages/*/test/**/*.gpu.test.ts'],
          exclude: ['**/node_modules/**'],
          setupFiles: ['./packages/testing/src/fresh-turn.ts'],
          pool: 'forks',
          // One GPU, one file at a time: timing assertions (overlap, event-loop delay) need it.
          fileParallelism: false,
          testTimeout: 120_000,
          hookTimeout: 120_000,
          env: { CUDA_TASKS_GPU: gpu.available ? '1' : '0', CUDA_TASKS_GPU_REASON: gpu.reason },
        },
      },
    ],
  },
});
