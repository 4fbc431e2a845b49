import type { Stream } from '@cuda-tasks/cudadrv';
import { task } from '@cuda-tasks/task-runtime';
import { describeCancelledEntries, hostOnlyArray } from '@cuda-tasks/testing';
import { vi } from 'vitest';

// In a task whose signal has aborted, every cuRAND entry throws the signal's reason before any
// native call, on the task's stream and on an explicit one: cudadrv's native door (koffi, and
// the library loader), through which libcuda and cuRAND are reached, is replaced by a recorder
// that fails every use.
const native = await vi.hoisted(async () =>
  (await import('@cuda-tasks/testing/native-recorder')).createNativeRecorder(),
);
vi.mock('../../cudadrv/src/ffi/library.ts', async (importOriginal) =>
  native.replace(await importOriginal<object>()),
);

import { defaultGenerator, Generator, handle, rand, randn } from './index.js';

const x = hostOnlyArray('float32', [8], { byteLength: 32 });
const counts = hostOnlyArray('uint32', [8], { byteLength: 32 });
const generator = defaultGenerator();

const entries: Record<string, (options: { stream?: Stream }) => unknown> = {
  rand: (options) => rand('float32', [8], options),
  randn: (options) => randn('float64', 8, options),
  uniform: (options) => generator.uniform(x, options),
  normal: (options) => generator.normal(x, options),
  logNormal: (options) => generator.logNormal(x, options),
  poisson: (options) => generator.poisson(counts, 3, options),
  bits: (options) => generator.bits(counts, options),
  setSeed: (options) => generator.setSeed(1, options),
  setOffset: (options) => generator.setOffset(1, options),
  handle: (options) => handle(options.stream),
  'generator.handle': () => generator.handle,
  // A 'philox' generator is pure JavaScript (a seed and an offset): only cuRAND's reach native code.
  'new Generator': () => new Generator({ kind: 'curand-philox' }),
};

describeCancelledEntries('cuRAND entries', entries, { task, nativeCalls: () => native.calls });
