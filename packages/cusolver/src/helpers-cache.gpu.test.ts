import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { currentStream } from '@cuda-tasks/cudadrv';
import {
  clearKernelCache,
  kernelCacheDirectory,
  kernelCacheStatistics,
  setKernelCacheDirectory,
} from '@cuda-tasks/task-runtime';
import { describeGpu, Rng, randomMatrix } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { download, upload } from '../test/device.js';
import { transpose, zeroTriangle } from './kernels.js';

// cuSOLVER's helper kernels come from the task runtime's compile cache (decision 0040): the
// first use compiles them once and writes one entry to the disk cache; their results match a
// CPU transpose and a CPU zeroing of the strict triangle exactly.
describeGpu("cuSOLVER's helpers through the shared compile cache", () => {
  let folder: string;
  let before: string | null;
  beforeAll(() => {
    before = kernelCacheDirectory();
    folder = mkdtempSync(join(tmpdir(), 'cuda-tasks-cusolver-helpers-'));
    setKernelCacheDirectory(folder);
    clearKernelCache();
  });
  afterAll(() => {
    setKernelCacheDirectory(before);
    rmSync(folder, { recursive: true, force: true });
  });

  it('compiles once into the cache, then transposes and zeroes exactly', async () => {
    const rng = new Rng(40);
    const rows = 37;
    const columns = 300;
    const stream = currentStream();
    const { array: a, host } = upload('float64', randomMatrix(rng, rows, columns), [rows, columns]);
    const t = transpose(a, stream);
    const transposed = await download(t);
    let transposeErrors = 0;
    for (let j = 0; j < columns; j++)
      for (let i = 0; i < rows; i++)
        if (transposed[j + i * columns] !== host[i + j * rows]) transposeErrors++;
    const n = 70;
    const { array: square, host: squareHost } = upload('float32', randomMatrix(rng, n, n), [n, n]);
    zeroTriangle(square, 'upper', stream);
    const zeroed = await download(square);
    let zeroErrors = 0;
    for (let j = 0; j < n; j++)
      for (let i = 0; i < n; i++) {
        const expected = i < j ? 0 : squareHost[i + j * n]!;
        if (zeroed[i + j * n] !== expected) zeroErrors++;
      }
    const statistics = kernelCacheStatistics();
    const entries = readdirSync(folder).filter((name) =>
      /^cuda-tasks-[0-9a-f]{64}\.kernel$/.test(name),
    );
    console.log(
      `cusolver helpers via compile cache: compiled ${statistics.compiled}, disk writes ${statistics.diskWrites}, entries ${entries.length}, transpose errors ${transposeErrors}, zeroTriangle errors ${zeroErrors}`,
    );
    expect(transposeErrors).toBe(0);
    expect(zeroErrors).toBe(0);
    expect(statistics.compiled).toBe(1);
    expect(statistics.diskWrites).toBe(1);
    expect(entries).toHaveLength(1);
    for (const array of [a, t, square]) array.dispose();
  });
});
