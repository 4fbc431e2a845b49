import {
  CudaArgumentError,
  CudaUnavailableError,
  DisposedError,
  driver,
} from '@cuda-tasks/cudadrv';
import { describe, expect, it } from 'vitest';
import { cholesky, choleskySolve, eigh, lu, luSolve, qr, solve, svd } from './index.js';
import { hostOnlyArray } from './testing/fake.js';

// These arrays have no device memory, and this machine may have no GPU: every rejection
// below must come from the argument checks, before the current stream is even looked up.
const f64 = (shape: number[]) => hostOnlyArray('float64', shape);
const f32 = (shape: number[]) => hostOnlyArray('float32', shape);

describe('argument checks run before any native call', () => {
  it('lu', async () => {
    await expect(lu(hostOnlyArray('int32', [3, 3]) as never)).rejects.toThrow(CudaArgumentError);
    await expect(lu(f64([4]))).rejects.toThrow(/lu: a must be a 2-D array/);
    await expect(lu(hostOnlyArray('float64', [3, 3], { disposed: true }))).rejects.toThrow(
      DisposedError,
    );
    await expect(lu(f64([3, 3]), 'fast' as never)).rejects.toThrow(/options must be an object/);
  });

  it('solve', async () => {
    await expect(solve(f64([3, 4]), f64([3]))).rejects.toThrow(/a must be square, got 3 x 4/);
    await expect(solve(f64([3, 3]), f64([4]))).rejects.toThrow(/b has 4 rows but a is 3 x 3/);
    await expect(solve(f64([3, 3]), f32([3]) as never)).rejects.toThrow(/same dtype/);
    await expect(solve(f64([3, 3]), undefined as never)).rejects.toThrow(
      /solve: b must be a DeviceArray/,
    );
  });

  it('luSolve', () => {
    const factors = f64([4, 4]);
    const pivots = hostOnlyArray('int32', [4]);
    expect(() => luSolve(null as never, f64([4]))).toThrow(/\{ lu, pivots \}/);
    expect(() => luSolve({ lu: f64([4, 3]), pivots }, f64([4]))).toThrow(/lu must be square/);
    expect(() => luSolve({ lu: factors, pivots: hostOnlyArray('int32', [3]) }, f64([4]))).toThrow(
      /pivots must be a contiguous 1-D array of 4 elements/,
    );
    expect(() => luSolve({ lu: factors, pivots }, f64([5, 2]))).toThrow(/b has 5 rows/);
    expect(() => luSolve({ lu: factors, pivots }, f32([4]) as never)).toThrow(/same dtype/);
    expect(() => luSolve({ lu: factors, pivots }, f64([4]), { transpose: 'yes' as never })).toThrow(
      /transpose must be a boolean/,
    );
  });

  it('cholesky and choleskySolve', async () => {
    await expect(cholesky(f32([3, 2]))).rejects.toThrow(/cholesky: a must be square/);
    await expect(cholesky(f32([3, 3]), { upper: 'yes' as never })).rejects.toThrow(
      /upper must be a boolean/,
    );
    expect(() => choleskySolve(f32([3, 3]), f32([2]))).toThrow(/b has 2 rows but factor is 3 x 3/);
    expect(() => choleskySolve(f32([3, 3]), f64([3]) as never)).toThrow(/same dtype/);
  });

  it('qr, svd and eigh', async () => {
    expect(() => qr(hostOnlyArray('float16', [3, 3]) as never)).toThrow(/float32 or float64/);
    expect(() => qr(f64([0, 3]))).toThrow(/empty/);
    await expect(svd(f64([2, 2, 2]))).rejects.toThrow(/2-D/);
    await expect(svd(f64([3, 3]), { full: 1 as never })).rejects.toThrow(/full must be a boolean/);
    await expect(eigh(f64([3, 4]))).rejects.toThrow(/eigh: a must be square/);
    await expect(eigh(hostOnlyArray('float64', [3, 3], { disposed: true }))).rejects.toThrow(
      DisposedError,
    );
  });

  it('valid arguments get past the checks (and stop at the driver, hidden here)', async () => {
    // Point the driver loader at nothing (read on first use, in this test file's own process),
    // so that this holds on a GPU machine too and no native call sees the fake arrays.
    const saved = process.env.CUDA_TASKS_LIBCUDA;
    process.env.CUDA_TASKS_LIBCUDA = '/nonexistent/libcuda.so.1';
    try {
      let driverLoaded = true;
      try {
        driver();
      } catch {
        driverLoaded = false;
      }
      // Loaded before this test in the same process: the fakes must not reach it.
      if (driverLoaded) return;
      await expect(lu(f64([3, 3]))).rejects.toThrow(CudaUnavailableError);
      await expect(solve(f64([3, 3]), f64([3, 2]))).rejects.toThrow(CudaUnavailableError);
      await expect(eigh(f32([3, 3]), { upper: true })).rejects.toThrow(CudaUnavailableError);
      expect(() => qr(f32([5, 3]))).toThrow(CudaUnavailableError);
      expect(() => choleskySolve(f32([3, 3]), f32([3, 2]))).toThrow(CudaUnavailableError);
    } finally {
      if (saved === undefined) delete process.env.CUDA_TASKS_LIBCUDA;
      else process.env.CUDA_TASKS_LIBCUDA = saved;
    }
  });
});
