import type { DType, Stream } from '@cuda-tasks/cudadrv';
import { task } from '@cuda-tasks/task-runtime';
import { describeCancelledEntries, hostOnlyArray } from '@cuda-tasks/testing';
import { vi } from 'vitest';

// In a task whose signal has aborted, every cuBLAS entry throws the signal's reason before any
// native call, on the task's stream and on an explicit one: cudadrv's native door (koffi, and
// the library loader), through which libcuda and cuBLAS are reached, is replaced by a recorder
// that fails every use.
const native = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/native-recorder')).createNativeRecorder(),
);
vi.mock('../../cudadrv/src/ffi/library.ts', async (importOriginal) =>
  native.replace(await importOriginal<object>()),
);

import {
  asum,
  axpy,
  dot,
  gemm,
  gemmEx,
  gemmStridedBatched,
  gemv,
  handle,
  iamax,
  matmul,
  nrm2,
  scal,
} from './index.js';

/** A DeviceArray over a stand-in buffer that passes the argument checks and holds no memory. */
const array = (shape: number[], dtype: DType = 'float32') =>
  hostOnlyArray(dtype, shape, { byteLength: 1024 });

const [a, b, c] = [array([4, 4]), array([4, 4]), array([4, 4])];
const [x, y] = [array([4]), array([4])];
const batched = [array([4, 4, 2]), array([4, 4, 2]), array([4, 4, 2])] as const;

const entries: Record<string, (options: { stream?: Stream }) => unknown> = {
  axpy: (options) => axpy(2, x, y, options),
  scal: (options) => scal(2, x, options),
  dot: (options) => dot(x, y, options),
  nrm2: (options) => nrm2(x, options),
  asum: (options) => asum(x, options),
  iamax: (options) => iamax(x, options),
  gemv: (options) => gemv(a, x, y, options),
  gemm: (options) => gemm(a, b, c, options),
  matmul: (options) => matmul(a, b, options),
  gemmStridedBatched: (options) => gemmStridedBatched(...batched, options),
  gemmEx: (options) => gemmEx(a, b, c, options),
  handle: (options) => handle(options.stream),
};

describeCancelledEntries('cuBLAS entries', entries, { task, nativeCalls: () => native.calls });
