import type { Context, DeviceArray, Stream } from '@cuda-tasks/cudadrv';
import { describe, expect, it, vi } from 'vitest';

// cuSOLVER's helper kernels come from the task runtime's compile cache (the kit's one NVRTC
// cache, decision 0040), not from a compile of their own: recorded here with stand-ins.
const recorded = vi.hoisted(() => ({
  loads: [] as { context: unknown; name: string; source: string }[],
  launches: [] as { kernel: string; grid: unknown; args: unknown[] }[],
}));

vi.mock('@cuda-tasks/task-runtime', () => ({
  loadCachedModule(source: string, context: unknown, name: string) {
    recorded.loads.push({ context, name, source });
    return { disposed: false, context, kernel: (kernel: string) => ({ name: kernel }) };
  },
}));

vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => ({
  ...(await importOriginal<object>()),
  launch(kernel: { name: string }, config: { grid: unknown }, ...args: unknown[]) {
    recorded.launches.push({ kernel: kernel.name, grid: config.grid, args });
  },
}));

import { zeroTriangle } from './kernels.js';

const matrix = (dtype: 'float32' | 'float64') =>
  ({ dtype, rows: 300, columns: 4, leadingDimension: 300 }) as unknown as DeviceArray<
    'float32' | 'float64'
  >;

describe('cuSOLVER helper kernels', () => {
  it('load once per context through the shared compile cache', () => {
    const first = { context: { name: 'c0' } as unknown as Context } as Stream;
    const second = { context: { name: 'c1' } as unknown as Context } as Stream;
    zeroTriangle(matrix('float32'), 'upper', first);
    zeroTriangle(matrix('float64'), 'lower', first);
    zeroTriangle(matrix('float32'), 'lower', second);
    expect(recorded.loads.map((load) => [load.context, load.name])).toEqual([
      [first.context, 'cusolver-helpers.cu'],
      [second.context, 'cusolver-helpers.cu'],
    ]);
    expect(recorded.loads[0]!.source).toContain('cusolver_zero_triangle_f32');
    expect(recorded.launches.map((l) => [l.kernel, l.grid, l.args.slice(1)])).toEqual([
      ['cusolver_zero_triangle_f32', [2, 4], [300, 4, 300, 1]],
      ['cusolver_zero_triangle_f64', [2, 4], [300, 4, 300, 0]],
      ['cusolver_zero_triangle_f32', [2, 4], [300, 4, 300, 0]],
    ]);
  });
});
