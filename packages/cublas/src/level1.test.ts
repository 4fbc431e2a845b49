import { recordingOperand, standInStream } from '@cuda-tasks/testing';
import { describe, expect, it, vi } from 'vitest';

// cuBLAS replaced by a double whose handle creation fails (as it does after a sticky error, or
// out of memory), and the one-element result array by a stand-in. What is tested: a reduction
// (dot, nrm2, asum, iamax) that fails to get its handle leaves no trace on its operands (no
// buffer use declared, so no stream waits for it), and frees its result array.
const fake = vi.hoisted(() => ({ disposed: 0 }));

vi.mock('./ffi/cublas.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./ffi/cublas.js')>()),
  cublas: () => ({
    cublasCreate_v2: () => 1, // CUBLAS_STATUS_NOT_INITIALIZED
    cublasDestroy_v2: () => 0,
  }),
}));
vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => {
  const original = await importOriginal<typeof import('@cuda-tasks/cudadrv')>();
  class DeviceArray extends original.DeviceArray {
    static override empty(): never {
      return {
        ffiAddressOn: () => 0x20_0000,
        dispose: () => {
          fake.disposed++;
        },
      } as never;
    }
  }
  return { ...original, DeviceArray };
});

import { CublasError } from './errors.js';
import { asum, dot, iamax, nrm2 } from './index.js';

const stream = standInStream();

/** A float32 vector whose uses on a stream are counted. */
function vector(length: number) {
  const { array, uses } = recordingOperand([length]);
  return { array: array as any, uses };
}

describe('a reduction that cannot get its cuBLAS handle leaves no trace on its operands', () => {
  const calls = {
    dot: (x: any, y: any) => dot(x, y, { stream }),
    nrm2: (x: any) => nrm2(x, { stream }),
    asum: (x: any) => asum(x, { stream }),
    iamax: (x: any) => iamax(x, { stream }),
  };
  for (const [name, call] of Object.entries(calls)) {
    it(`${name}: rejects with a CublasError, declares no use and frees its result`, async () => {
      const x = vector(8);
      const y = vector(8);
      const before = fake.disposed;
      await expect(call(x.array, y.array)).rejects.toThrow(CublasError);
      expect([x.uses(), y.uses()]).toEqual([0, 0]);
      expect(fake.disposed).toBe(before + 1);
    });
  }
});
