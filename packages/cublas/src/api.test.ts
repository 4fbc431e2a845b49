import { CudaArgumentError, DisposedError, type DType } from '@cuda-tasks/cudadrv';
import { afterEach, describe, expect, it } from 'vitest';
import {
  asum,
  axpy,
  dot,
  gemm,
  gemmEx,
  gemmStridedBatched,
  gemv,
  iamax,
  mathMode,
  matmul,
  nrm2,
  scal,
  setMathMode,
  setWorkspaceSize,
  workspaceSize,
} from './index.js';

// No GPU or cuBLAS here: any native call would throw CudaUnavailableError, so a
// CudaArgumentError proves that validation ran before anything native.

/** A plain object shaped like a dense DeviceArray. */
function fake(shape: number[], dtype: DType = 'float32', disposed = false): any {
  const strides: number[] = [];
  let stride = 1;
  for (const d of shape) {
    strides.push(stride);
    stride *= d;
  }
  return { dtype, shape, strides, offset: 0, disposed, buffer: { byteLength: stride * 8 } };
}

describe('wrappers reject bad input before any native call', () => {
  it('gemm, matmul, gemmStridedBatched, gemmEx', () => {
    expect(() => gemm(fake([4, 3]), fake([4, 5]), fake([4, 5]))).toThrow(CudaArgumentError);
    expect(() => gemm(fake([4, 3]), fake([3, 5], 'float64'), fake([4, 5]))).toThrow(/dtype/);
    expect(() => gemm(fake([4, 3], 'float32', true), fake([3, 5]), fake([4, 5]))).toThrow(
      DisposedError,
    );
    expect(() => matmul(fake([4, 3]), fake([2, 5]))).toThrow(/inner dimensions/);
    expect(() => gemmStridedBatched(fake([4, 3, 2]), fake([3, 5, 3]), fake([4, 5, 2]))).toThrow(
      CudaArgumentError,
    );
    expect(() => gemmEx(fake([4, 3], 'float16'), fake([3, 5], 'bfloat16'), fake([4, 5]))).toThrow(
      CudaArgumentError,
    );
  });

  it('gemv and the vector routines', async () => {
    expect(() => gemv(fake([4, 3]), fake([4]), fake([4]))).toThrow(/x has 4 elements/);
    expect(() => axpy(1, fake([4]), fake([5]))).toThrow(CudaArgumentError);
    expect(() => axpy('2' as any, fake([4]), fake([4]))).toThrow(/alpha must be a number/);
    expect(() => scal(2, fake([4], 'int32'))).toThrow(CudaArgumentError);
    await expect(dot(fake([4]), fake([5]))).rejects.toThrow(CudaArgumentError);
    await expect(nrm2(fake([4, 4]))).rejects.toThrow(/vector/);
    await expect(asum(fake([4], 'float32', true))).rejects.toThrow(DisposedError);
    await expect(iamax(fake([4], 'uint8'))).rejects.toThrow(CudaArgumentError);
  });
});

describe("every routine reads its options with cudadrv's option checks", () => {
  const bad = { stream: 7 } as any;
  it('refuses a stream option that is not a Stream, naming the call, before anything native', async () => {
    const message = (call: string) => `${call}: option stream must be a Stream, got 7`;
    expect(() => gemm(fake([2, 2]), fake([2, 2]), fake([2, 2]), bad)).toThrow(message('gemm'));
    expect(() => matmul(fake([2, 2]), fake([2, 2]), bad)).toThrow(message('matmul'));
    expect(() =>
      gemmStridedBatched(fake([2, 2, 2]), fake([2, 2, 2]), fake([2, 2, 2]), bad),
    ).toThrow(message('gemmStridedBatched'));
    expect(() => gemmEx(fake([2, 2]), fake([2, 2]), fake([2, 2]), bad)).toThrow(message('gemmEx'));
    expect(() => gemv(fake([2, 2]), fake([2]), fake([2]), bad)).toThrow(message('gemv'));
    expect(() => axpy(1, fake([2]), fake([2]), bad)).toThrow(message('axpy'));
    expect(() => scal(1, fake([2]), bad)).toThrow(message('scal'));
    await expect(dot(fake([2]), fake([2]), bad)).rejects.toThrow(message('dot'));
    await expect(nrm2(fake([2]), bad)).rejects.toThrow(message('nrm2'));
    await expect(asum(fake([2]), bad)).rejects.toThrow(message('asum'));
    await expect(iamax(fake([2]), { stream: null } as any)).rejects.toThrow(
      'iamax: option stream must be a Stream, got null',
    );
  });

  it('refuses options that are not an object, and bad flags and scalars, with one wording', async () => {
    expect(() => axpy(1, fake([2]), fake([2]), 'fast' as any)).toThrow(
      'axpy: options must be an object, got "fast"',
    );
    await expect(dot(fake([2]), fake([2]), null as any)).rejects.toThrow(
      'dot: options must be an object, got null',
    );
    expect(() => gemm(fake([2, 2]), fake([2, 2]), fake([2, 2]), { transB: 1 as any })).toThrow(
      'gemm: option transB must be true or false, got 1',
    );
    expect(() => gemv(fake([2, 2]), fake([2]), fake([2]), { beta: '0' as any })).toThrow(
      'gemv: option beta must be a number, got "0"',
    );
    expect(() => gemv(fake([2, 2]), fake([2]), fake([2]), { transA: true, trans: false })).toThrow(
      'gemv: option transA is true but trans (its deprecated spelling) is false: pass transA only',
    );
  });
});

describe('settings', () => {
  const initialWorkspace = workspaceSize();
  afterEach(() => {
    setWorkspaceSize(initialWorkspace);
    setMathMode('default');
  });

  it('defaults to a 32 MiB workspace and the default math mode', () => {
    expect(initialWorkspace).toBe(32 * 1024 * 1024);
    expect(mathMode()).toBe('default');
  });

  it('setWorkspaceSize takes non-negative integers', () => {
    setWorkspaceSize(4 << 20);
    expect(workspaceSize()).toBe(4 << 20);
    setWorkspaceSize(0);
    expect(workspaceSize()).toBe(0);
    expect(() => setWorkspaceSize(-1)).toThrow(CudaArgumentError);
    expect(() => setWorkspaceSize(1.5)).toThrow(CudaArgumentError);
    expect(() => setWorkspaceSize(Number.NaN)).toThrow(CudaArgumentError);
  });

  it("setMathMode takes 'default' or 'tf32'", () => {
    setMathMode('tf32');
    expect(mathMode()).toBe('tf32');
    setMathMode('default');
    expect(mathMode()).toBe('default');
    expect(() => setMathMode('fast' as any)).toThrow(CudaArgumentError);
  });
});
