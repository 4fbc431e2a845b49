import type { Context } from '@cuda-tasks/cudadrv';
import { describe, expect, it, vi } from 'vitest';

// Where the driver cannot load the prebuilt fat binary, the philox kernels are compiled
// through the task runtime's compile cache (the kit's one NVRTC cache, decision 0040).
const recorded = vi.hoisted(() => ({ fromCubin: 0, cached: [] as [string, unknown, string][] }));

vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => {
  const original = await importOriginal<typeof import('@cuda-tasks/cudadrv')>();
  return {
    ...original,
    Module: {
      fromCubin() {
        recorded.fromCubin++;
        throw new original.ModuleLoadError(209, 'CUDA_ERROR_NO_BINARY_FOR_GPU', '');
      },
    },
  };
});

vi.mock('@cuda-tasks/task-runtime', () => ({
  loadCachedModule(source: string, context: unknown, name: string) {
    recorded.cached.push([source, context, name]);
    return { disposed: false, kernel: (kernel: string) => ({ name: kernel }) };
  },
}));

import { PHILOX_SOURCE } from './philox-fatbin.generated.js';
import { philoxKernels } from './philox-kernels.js';

describe('philox kernels', () => {
  it('fall back to the shared compile cache when the fat binary does not load', () => {
    const context = { name: 'c0' } as unknown as Context;
    const kernels = philoxKernels(context);
    expect(recorded.fromCubin).toBe(1);
    expect(recorded.cached).toEqual([[PHILOX_SOURCE, context, 'philox.cu']]);
    expect(kernels.uniform.float32.name).toBe('curand_philox_uniform_f32');
    philoxKernels(context); // kept per context
    expect(recorded.cached).toHaveLength(1);
  });
});
