import {
  CudaArgumentError,
  CudaUnavailableError,
  DisposedError,
  driver,
} from '@cuda-tasks/cudadrv';
import { hostOnlyArray } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import { cholesky, choleskySolve, eigh, lu, luSolve, qr, solve, svd } from './index.js';

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
      /option transpose must be true or false/,
    );
  });

  it('solve takes overwriteA / overwriteB as true or false only', async () => {
    await expect(solve(f64([4, 4]), f64([4]), { overwriteA: 1 as never })).rejects.toThrow(
      /solve: option overwriteA must be true or false/,
    );
    await expect(solve(f64([4, 4]), f64([4]), { overwriteB: 'yes' as never })).rejects.toThrow(
      /solve: option overwriteB must be true or false/,
    );
  });

  it('cholesky and choleskySolve', async () => {
    await expect(cholesky(f32([3, 2]))).rejects.toThrow(/cholesky: a must be square/);
    await expect(cholesky(f32([3, 3]), { upper: 'yes' as never })).rejects.toThrow(
      /option upper must be true or false/,
    );
    const lower = { upper: false };
    expect(() => choleskySolve(f32([3, 3]), f32([2]), lower)).toThrow(
      /b has 2 rows but factor is 3 x 3/,
    );
    expect(() => choleskySolve(f32([3, 3]), f64([3]) as never, lower)).toThrow(/same dtype/);
    expect(() => choleskySolve({ factor: f32([3, 2]), upper: true }, f32([3]))).toThrow(
      /factor must be square/,
    );
    // A bare factor array must say which triangle it holds.
    expect(() =>
      (choleskySolve as (f: unknown, b: unknown) => unknown)(f32([3, 3]), f32([3])),
    ).toThrow(CudaArgumentError);
  });

  it('qr, svd and eigh', async () => {
    expect(() => qr(hostOnlyArray('float16', [3, 3]) as never)).toThrow(/float32 or float64/);
    expect(() => qr(f64([0, 3]))).toThrow(/empty/);
    await expect(svd(f64([2, 2, 2]))).rejects.toThrow(/2-D/);
    await expect(svd(f64([3, 3]), { full: 1 as never })).rejects.toThrow(
      /option full must be true or false/,
    );
    await expect(eigh(f64([3, 4]))).rejects.toThrow(/eigh: a must be square/);
    await expect(eigh(hostOnlyArray('float64', [3, 3], { disposed: true }))).rejects.toThrow(
      DisposedError,
    );
  });

  it('valid arguments get past the checks, to the stream lookup that follows them', async () => {
    // The first thing each routine does after its checks is `resolveStream(options.stream)`.
    // A getter that throws a sentinel there stops the call at that point on any machine (the
    // fake arrays never reach a native call), whether or not a driver is loaded; a rejection
    // by the checks would be a CudaArgumentError instead, and never read the option.
    class PastTheChecks extends Error {}
    let reads = 0;
    const stopAtStream = <T extends object>(options: T): T =>
      Object.defineProperty({ ...options }, 'stream', {
        enumerable: true,
        get() {
          reads++;
          throw new PastTheChecks('stream looked up');
        },
      }) as T;
    await expect(lu(f64([3, 3]), stopAtStream({}))).rejects.toThrow(PastTheChecks);
    await expect(solve(f64([3, 3]), f64([3, 2]), stopAtStream({}))).rejects.toThrow(PastTheChecks);
    await expect(eigh(f32([3, 3]), stopAtStream({ upper: true }))).rejects.toThrow(PastTheChecks);
    expect(() => qr(f32([5, 3]), stopAtStream({}))).toThrow(PastTheChecks);
    expect(() => choleskySolve(f32([3, 3]), f32([3, 2]), stopAtStream({ upper: false }))).toThrow(
      PastTheChecks,
    );
    expect(reads).toBe(5);
    // Invalid arguments with the same options: rejected by the checks, the stream never read.
    await expect(lu(f64([4]), stopAtStream({}))).rejects.toThrow(CudaArgumentError);
    await expect(solve(f64([3, 3]), f64([4]), stopAtStream({}))).rejects.toThrow(CudaArgumentError);
    await expect(eigh(f32([3, 4]), stopAtStream({ upper: true }))).rejects.toThrow(
      CudaArgumentError,
    );
    expect(() => qr(f64([0, 3]), stopAtStream({}))).toThrow(CudaArgumentError);
    expect(() => choleskySolve(f32([3, 3]), f32([2]), stopAtStream({ upper: false }))).toThrow(
      CudaArgumentError,
    );
    expect(reads).toBe(5);
  });

  it('valid arguments stop at the driver when none can be loaded', async () => {
    // Point the driver loader at nothing (read on first use, in this test file's own process):
    // with no driver loaded yet, the stream lookup after the checks fails with
    // CudaUnavailableError. Where an earlier test of this process loaded it already, the
    // fake arrays must not reach it: the test above covers the same path then, and this one
    // asserts that the driver really is the loaded one (cuInit answered).
    const saved = process.env.CUDA_TASKS_LIBCUDA;
    process.env.CUDA_TASKS_LIBCUDA = '/nonexistent/libcuda.so.1';
    try {
      let loadError: unknown;
      try {
        driver();
      } catch (error) {
        loadError = error;
      }
      if (loadError === undefined) {
        expect(typeof driver().cuInit).toBe('function');
        return;
      }
      expect(loadError).toBeInstanceOf(CudaUnavailableError);
      await expect(lu(f64([3, 3]))).rejects.toThrow(CudaUnavailableError);
      await expect(solve(f64([3, 3]), f64([3, 2]))).rejects.toThrow(CudaUnavailableError);
      await expect(eigh(f32([3, 3]), { upper: true })).rejects.toThrow(CudaUnavailableError);
      expect(() => qr(f32([5, 3]))).toThrow(CudaUnavailableError);
      expect(() => choleskySolve({ factor: f32([3, 3]), upper: false }, f32([3, 2]))).toThrow(
        CudaUnavailableError,
      );
    } finally {
      if (saved === undefined) delete process.env.CUDA_TASKS_LIBCUDA;
      else process.env.CUDA_TASKS_LIBCUDA = saved;
    }
  });
});
