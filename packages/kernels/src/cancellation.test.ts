import type { Stream } from '@cuda-tasks/cudadrv';
import { task } from '@cuda-tasks/task-runtime';
import { describeCancelledEntries, hostOnlyArray } from '@cuda-tasks/testing';
import { vi } from 'vitest';

// In a task whose signal has aborted, every kernel of this package throws the signal's reason
// before any native call (NVRTC included), on the task's stream and on an explicit one:
// cudadrv's native door (koffi, and the library loader), through which libcuda and NVRTC are
// reached, is replaced by a recorder that fails every use.
const native = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/native-recorder')).createNativeRecorder(),
);
vi.mock('../../cudadrv/src/ffi/library.ts', async (importOriginal) =>
  native.replace(await importOriginal<object>()),
);

import {
  add,
  arange,
  argmax,
  argmin,
  axpby,
  div,
  elementwise,
  fill,
  map,
  max,
  maximum,
  mean,
  min,
  minimum,
  mul,
  reduction,
  sub,
  sum,
  topk,
} from './index.js';

const vector = () => hostOnlyArray('float32', [8], { byteLength: 32 });
const [x, y] = [vector(), vector()];
const scaled = elementwise('x: T, a: float32 -> z: T', 'z = a * x');
const sumOfSquares = reduction('x: T -> y: T', { map: 'x * x', reduce: 'a + b', identity: '0' });

const entries: Record<string, (options: { stream?: Stream }) => unknown> = {
  map: (options) => map(x, 'sin', options),
  add: (options) => add(x, y, options),
  sub: (options) => sub(x, 1, options),
  mul: (options) => mul(x, y, options),
  div: (options) => div(x, y, options),
  maximum: (options) => maximum(x, y, options),
  minimum: (options) => minimum(x, y, options),
  axpby: (options) => axpby(2, x, 3, y, options),
  fill: (options) => fill(x, 1, options),
  arange: (options) => arange(0, 8, 1, options),
  topk: (options) => topk(x, 3, options),
  elementwise: (options) => scaled(x, 2, options),
  sum: (options) => sum(x, options),
  mean: (options) => mean(x, options),
  max: (options) => max(x, options),
  min: (options) => min(x, options),
  argmax: (options) => argmax(x, options),
  argmin: (options) => argmin(x, options),
  reduction: (options) => sumOfSquares(x, options),
};

describeCancelledEntries('the kernels', entries, { task, nativeCalls: () => native.calls });
