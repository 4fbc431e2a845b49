import type { Stream } from '@cuda-tasks/cudadrv';
import { task } from '@cuda-tasks/task-runtime';
import { describeCancelledEntries, hostOnlyArray } from '@cuda-tasks/testing';
import { vi } from 'vitest';

// In a task whose signal has aborted, every cuSOLVER entry throws the signal's reason before
// any native call, on the task's stream and on an explicit one: cudadrv's native door (koffi,
// and the library loader), through which libcuda and cuSOLVER are reached, is replaced by a
// recorder that fails every use.
const native = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/native-recorder')).createNativeRecorder(),
);
vi.mock('../../cudadrv/src/ffi/library.ts', async (importOriginal) =>
  native.replace(await importOriginal<object>()),
);

import { cholesky, choleskySolve, eigh, handle, lu, luSolve, qr, solve, svd } from './index.js';

const matrix = () => hostOnlyArray('float64', [4, 4], { byteLength: 128 });
const [a, b] = [matrix(), matrix()];
const pivots = hostOnlyArray('int32', [4], { byteLength: 16 });

const entries: Record<string, (options: { stream?: Stream }) => unknown> = {
  cholesky: (options) => cholesky(a, options),
  choleskySolve: (options) => choleskySolve({ factor: a, upper: false }, b, options),
  eigh: (options) => eigh(a, options),
  lu: (options) => lu(a, options),
  luSolve: (options) => luSolve({ lu: a, pivots }, b, options),
  solve: (options) => solve(a, b, options),
  qr: (options) => qr(a, options),
  svd: (options) => svd(a, options),
  handle: (options) => handle(options.stream),
};

describeCancelledEntries('cuSOLVER entries', entries, { task, nativeCalls: () => native.calls });
