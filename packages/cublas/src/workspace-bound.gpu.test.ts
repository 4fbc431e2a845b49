import { Device, DeviceArray } from '@cuda-tasks/cudadrv';
import { task } from '@cuda-tasks/task-runtime';
import { describeGpu, randomFloat32, relativeError } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import { handleCache, workspaceSize } from './handle.js';
import { gemv } from './level2.js';

const N = 256;
const MiB = 1024 * 1024;

/** y = A x in float64, A column-major N x N. */
function reference(a: Float32Array, x: Float32Array): Float64Array {
  const y = new Float64Array(N);
  for (let j = 0; j < N; j++) for (let i = 0; i < N; i++) y[i]! += a[i + j * N]! * x[j]!;
  return y;
}

describeGpu('cuBLAS workspaces under a long churn of tasks (issue 31 item 15)', () => {
  it('3,200 tasks, 32 at once: the workspaces stay within 2 per handle, the pool reserve stays flat, every answer right', async () => {
    const context = Device.get(0).primaryContext();
    const pool = context.memoryPool;
    const hostA = randomFloat32(N * N, 31);
    const hostX = randomFloat32(N, 32);
    const want = reference(hostA, hostX);
    using a = DeviceArray.fromHost(hostA, [N, N]);
    using x = DeviceArray.fromHost(hostX);
    const cache = handleCache();
    const created = cache.statistics().created;
    let worst = 0;
    const wave = () =>
      Promise.all(
        Array.from({ length: 32 }, () =>
          task(async () => {
            using y = DeviceArray.zeros('float32', [N]);
            gemv(a, x, y);
            worst = Math.max(worst, relativeError(await y.toHost(), want));
          }),
        ),
      );
    for (let i = 0; i < 10; i++) await wave(); // warm-up: handles, workspaces, the pool
    const warm = pool.statistics();
    const warmWorkspaces = cache.statistics().workspaces;
    const bound = cache.maxHandlesPerContext * cache.maxWorkspacesPerHandle;
    let peakWorkspaces = cache.statistics().workspaces;
    const reserved: number[] = [];
    for (let i = 0; i < 90; i++) {
      await wave();
      peakWorkspaces = Math.max(peakWorkspaces, cache.statistics().workspaces);
      if (i % 10 === 9) reserved.push(pool.statistics().reservedBytes / MiB);
    }
    const after = pool.statistics();
    const statistics = cache.statistics();
    console.log(
      `3,200 gemv tasks (32 at once): cuBLAS handles ${statistics.handles} (created ${statistics.created - created} here), workspaces ${warmWorkspaces} after warm-up, at most ${peakWorkspaces} (bound ${bound}) of ${workspaceSize() / MiB} MiB; pool used ${(warm.usedBytes / MiB).toFixed(1)} -> ${(after.usedBytes / MiB).toFixed(1)} MiB, reserved after warm-up ${(warm.reservedBytes / MiB).toFixed(1)} MiB, then every 320 tasks ${reserved.map((r) => r.toFixed(0)).join(', ')} MiB; worst relative error ${worst.toExponential(2)}`,
    );
    expect(worst).toBeLessThan(1e-5);
    expect(peakWorkspaces).toBeLessThanOrEqual(bound);
    // Flat: the reserve grows after warm-up only by the workspaces made since (up to the bound,
    // which a warm-up on a fast GPU may not reach), plus one workspace's worth.
    expect(Math.max(...reserved)).toBeLessThanOrEqual(
      warm.reservedBytes / MiB + ((peakWorkspaces - warmWorkspaces + 1) * workspaceSize()) / MiB,
    );
    // The spares go back with releaseCached().
    pool.releaseCached();
    expect(cache.statistics().workspaces).toBe(0);
  }, 120_000);
});
