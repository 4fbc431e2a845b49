import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import { failureOf, hostOnlyArray } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import {
  asum,
  axpy,
  dot,
  gemm,
  gemmEx,
  gemmStridedBatched,
  gemv,
  iamax,
  matmul,
  nrm2,
  scal,
} from './index.js';

// A misspelt option would be ignored, and the call would compute something else without a
// word (`{ transa: true }` would multiply by a instead of a^T): every routine refuses an
// option it does not take, before any native call (these arrays have no device memory).
const m = () => hostOnlyArray('float32', [4, 4], { byteLength: 64 });
const v = () => hostOnlyArray('float32', [4], { byteLength: 16 });

/** The message of the CudaArgumentError a call throws or rejects with. */
async function refusal(call: () => unknown): Promise<string> {
  const error = await failureOf(call);
  expect(error).toBeInstanceOf(CudaArgumentError);
  return (error as Error).message;
}

describe('unknown options', () => {
  const cases: [string, (options: Record<string, unknown>) => unknown, string][] = [
    ['axpy', (o) => axpy(2, v(), v(), o), 'stream'],
    ['scal', (o) => scal(2, v(), o), 'stream'],
    ['dot', (o) => dot(v(), v(), o), 'stream'],
    ['nrm2', (o) => nrm2(v(), o), 'stream'],
    ['asum', (o) => asum(v(), o), 'stream'],
    ['iamax', (o) => iamax(v(), o), 'stream'],
    ['gemv', (o) => gemv(m(), v(), v(), o), 'transA, trans, alpha, beta, stream'],
    ['gemm', (o) => gemm(m(), m(), m(), o), 'transA, transB, alpha, beta, stream'],
    ['matmul', (o) => matmul(m(), m(), o), 'transA, transB, alpha, stream'],
    ['gemmEx', (o) => gemmEx(m(), m(), m(), o), 'transA, transB, alpha, beta, stream'],
    [
      'gemmStridedBatched',
      (o) => gemmStridedBatched(m(), m(), m(), { batch: 1, ...o }),
      'transA, transB, alpha, beta, stream, batch, strideA, strideB, strideC',
    ],
  ];
  it.each(cases)('%s refuses one, listing what it takes', async (name, call, takes) => {
    expect(await refusal(() => call({ gamma: 1 }))).toBe(
      `${name}: unknown option "gamma"; ${name} takes ${takes}`,
    );
  });

  it('a transpose spelt in the wrong case is refused, naming the right one', async () => {
    expect(await refusal(() => gemm(m(), m(), m(), { transa: true } as never))).toContain(
      'unknown option "transa" (did you mean transA?)',
    );
    expect(await refusal(() => matmul(m(), m(), { beta: 1 } as never))).toContain(
      'unknown option "beta"',
    );
  });
});
