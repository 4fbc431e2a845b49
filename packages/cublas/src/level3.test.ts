import { recordingOperand, standInStream } from '@cuda-tasks/testing';
import { afterEach, describe, expect, it, vi } from 'vitest';

// cuBLAS and cuBLASLt replaced by doubles whose handle creation fails (as it does after a
// sticky error, or out of memory), and cuBLASLt's planner by one that can return a plan
// needing a workspace. What is tested: a gemm that fails to get its handle or plan leaves no
// trace on its operands (no buffer use declared, so no stream waits for it and no buffer
// remembers it).
const fake = vi.hoisted(() => ({
  createStatus: 1, // CUBLAS_STATUS_NOT_INITIALIZED
  plan: undefined as undefined | { usable: boolean; workspaceNeeded: number },
}));

vi.mock('./ffi/cublas.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./ffi/cublas.js')>()),
  cublas: () => ({
    cublasCreate_v2: () => fake.createStatus,
    cublasDestroy_v2: () => 0,
  }),
}));
vi.mock('./ffi/cublaslt.js', async (importOriginal) => ({
  ...(await importOriginal<typeof import('./ffi/cublaslt.js')>()),
  cublasLt: () => ({ cublasLtCreate: () => fake.createStatus }),
}));
vi.mock('./lt.js', async (importOriginal) => {
  const original = await importOriginal<typeof import('./lt.js')>();
  return {
    ...original,
    ltPlan: (...args: Parameters<typeof original.ltPlan>) =>
      fake.plan === undefined ? original.ltPlan(...args) : fake.plan,
  };
});

import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import { CublasError } from './errors.js';
import { axpy, dot, gemm, gemv, scal, setGemmBackend } from './index.js';

const stream = standInStream();

/** A float32 operand whose uses on a stream are counted. */
function operand(rows: number, columns: number) {
  const { array, uses } = recordingOperand([rows, columns]);
  return { array: array as any, uses };
}

afterEach(() => {
  fake.plan = undefined;
  setGemmBackend('cublaslt');
});

describe('a gemm that cannot get its handle or plan leaves no trace on its operands', () => {
  for (const backend of ['cublas', 'cublaslt'] as const) {
    it(`through ${backend}: handle or plan creation fails, and no operand was declared used`, () => {
      setGemmBackend(backend);
      const a = operand(4, 3);
      const b = operand(3, 5);
      const c = operand(4, 5);
      expect(() => gemm(a.array, b.array, c.array, { stream })).toThrow(CublasError);
      expect([a.uses(), b.uses(), c.uses()]).toEqual([0, 0, 0]);
    });
  }

  it('through cublaslt with a plan that needs the cuBLAS handle’s workspace', () => {
    setGemmBackend('cublaslt');
    fake.plan = { usable: true, workspaceNeeded: 1 << 20 };
    const a = operand(4, 3);
    const b = operand(3, 5);
    const c = operand(4, 5);
    expect(() => gemm(a.array, b.array, c.array, { stream })).toThrow(CublasError);
    expect([a.uses(), b.uses(), c.uses()]).toEqual([0, 0, 0]);
  });
});

describe('an operand of another context than the stream is refused before anything native', () => {
  const otherContext = {
    makeCurrent() {},
    device: { ordinal: 1 },
    toString: () => 'Context(device 1)',
  };
  /** A float32 operand whose memory belongs to device 1's context (the stream is device 0's). */
  function foreign(rows: number, columns: number) {
    const { array, uses } = recordingOperand([rows, columns]);
    const record = array as { buffer: object };
    record.buffer = { ...record.buffer, context: otherContext };
    return { array: array as any, uses };
  }

  for (const name of ['a', 'b', 'c'] as const) {
    it(`gemm with ${name} of device 1 on a device-0 stream: CudaArgumentError naming ${name}`, () => {
      fake.createStatus = 0;
      const operands = {
        a: name === 'a' ? foreign(4, 3) : operand(4, 3),
        b: name === 'b' ? foreign(3, 5) : operand(3, 5),
        c: name === 'c' ? foreign(4, 5) : operand(4, 5),
      };
      const call = () => gemm(operands.a.array, operands.b.array, operands.c.array, { stream });
      expect(call).toThrow(CudaArgumentError);
      expect(call).toThrow(new RegExp(`gemm: ${name} lives in Context\\(device 1\\)`));
      expect([operands.a.uses(), operands.b.uses(), operands.c.uses()]).toEqual([0, 0, 0]);
      fake.createStatus = 1;
    });
  }

  it('gemv, axpy, scal and dot likewise', async () => {
    const a = operand(4, 4);
    const x = foreign(4, 1);
    const y = operand(4, 1);
    expect(() => gemv(a.array, x.array, y.array, { stream })).toThrow(/gemv: x lives in/);
    expect(() => axpy(2, x.array, y.array, { stream })).toThrow(/axpy: x lives in/);
    expect(() => scal(2, x.array, { stream })).toThrow(/scal: x lives in/);
    await expect(dot(y.array, x.array, { stream })).rejects.toThrow(/dot: y lives in/);
    expect([a.uses(), x.uses(), y.uses()]).toEqual([0, 0, 0]);
  });
});
