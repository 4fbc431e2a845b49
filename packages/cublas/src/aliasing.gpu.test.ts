/**
 * On the device: an output that overlaps an input is refused before anything runs, views of
 * one allocation that touch different elements compute the right answer, and an array of
 * another context than the stream is refused (a second Context object of device 0 on one
 * GPU; device 1's memory on a device-0 stream where there are two).
 */
import {
  Context,
  CudaArgumentError,
  Device,
  DeviceArray,
  deviceCount,
  Stream,
} from '@cuda-tasks/cudadrv';
import { describeGpu, gpuAvailable, rng, streamDouble } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import { gemm, gemv, setGemmBackend } from './index.js';

const devices = gpuAvailable ? deviceCount() : 0;

function random(n: number, seed: number): Float64Array {
  const next = rng(seed);
  return Float64Array.from({ length: n }, () => next() * 2 - 1);
}

/** Largest |x - y| over two lists. */
function maxDifference(x: ArrayLike<number>, y: ArrayLike<number>): number {
  let worst = 0;
  for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i]! - y[i]!));
  return worst;
}

describeGpu('cuBLAS operands that overlap, on the device', () => {
  const n = 64;

  it('gemm(a, b, a) and gemv(a, x, x) throw CudaArgumentError and leave a and x as they were', async () => {
    const hostA = random(n * n, 1);
    const hostX = random(n, 2);
    using a = DeviceArray.fromHost(hostA, [n, n]);
    using b = DeviceArray.fromHost(random(n * n, 3), [n, n]);
    using x = DeviceArray.fromHost(hostX);
    let gemmError: unknown;
    try {
      gemm(a, b, a);
    } catch (error) {
      gemmError = error;
    }
    let gemvError: unknown;
    try {
      gemv(a, x, x);
    } catch (error) {
      gemvError = error;
    }
    console.log(`[aliasing] gemm(a, b, a): ${(gemmError as Error).message}`);
    console.log(`[aliasing] gemv(a, x, x): ${(gemvError as Error).message}`);
    expect(gemmError).toBeInstanceOf(CudaArgumentError);
    expect((gemmError as Error).message).toMatch(/gemm: the output c overlaps a/);
    expect(gemvError).toBeInstanceOf(CudaArgumentError);
    expect((gemvError as Error).message).toMatch(/gemv: the output y overlaps x/);
    expect(Array.from(await a.toHost())).toEqual(Array.from(hostA));
    expect(Array.from(await x.toHost())).toEqual(Array.from(hostX));
  });

  for (const backend of ['cublaslt', 'cublas'] as const) {
    it(`gemm into the bottom rows of the matrix whose top rows are A (${backend}), against float64 CPU`, async () => {
      setGemmBackend(backend);
      try {
        // parent: 2n x n; top = rows 0..n-1 (A), bottom = rows n..2n-1 (C), ld 2n for both.
        const hostParent = random(2 * n * n, 4);
        const hostB = random(n * n, 5);
        using parent = DeviceArray.fromHost(hostParent, [2 * n, n]);
        using b = DeviceArray.fromHost(hostB, [n, n]);
        const top = parent.block(0, 0, n, n);
        const bottom = parent.block(n, 0, n, n);
        gemm(top, b, bottom);
        const result = await parent.toHost();
        const expected = new Float64Array(n * n);
        const got = new Float64Array(n * n);
        for (let j = 0; j < n; j++) {
          for (let i = 0; i < n; i++) {
            let sum = 0;
            for (let k = 0; k < n; k++) sum += hostParent[i + k * 2 * n]! * hostB[k + j * n]!;
            expected[i + j * n] = sum;
            got[i + j * n] = result[n + i + j * 2 * n]!;
          }
        }
        const topAfter = new Float64Array(n * n);
        const topBefore = new Float64Array(n * n);
        for (let j = 0; j < n; j++) {
          for (let i = 0; i < n; i++) {
            topAfter[i + j * n] = result[i + j * 2 * n]!;
            topBefore[i + j * n] = hostParent[i + j * 2 * n]!;
          }
        }
        const difference = maxDifference(got, expected);
        console.log(
          `[aliasing] gemm top -> bottom of one allocation (${backend}): max |C - C64| = ${difference.toExponential(2)}`,
        );
        expect(difference).toBeLessThan(1e-12);
        expect(Array.from(topAfter)).toEqual(Array.from(topBefore));
      } finally {
        setGemmBackend('cublaslt');
      }
    });
  }

  it('gemv with x and y the two rows of one 2 x n array (increment 2, interleaved)', async () => {
    const hostA = random(n * n, 6);
    const hostRows = random(2 * n, 7);
    using a = DeviceArray.fromHost(hostA, [n, n]);
    using rows = DeviceArray.fromHost(hostRows, [2, n]);
    const x = rows.block(0, 0, 1, n);
    const y = rows.block(1, 0, 1, n);
    gemv(a, x, y);
    const result = await rows.toHost();
    let worst = 0;
    for (let i = 0; i < n; i++) {
      let sum = 0;
      for (let k = 0; k < n; k++) sum += hostA[i + k * n]! * hostRows[2 * k]!;
      worst = Math.max(worst, Math.abs(result[2 * i + 1]! - sum));
      expect(result[2 * i]).toBe(hostRows[2 * i]);
    }
    console.log(
      `[aliasing] gemv x, y interleaved in one allocation: max |y - y64| = ${worst.toExponential(2)}`,
    );
    expect(worst).toBeLessThan(1e-12);
  });
});

describeGpu('an array of another context than the stream, on the device', () => {
  it('a second Context object of device 0 (a stream naming it) is refused before anything native', async () => {
    const device = Device.get(0);
    const primary = device.primaryContext();
    // Another context of the same device, as cudadrv types it; its handle is never used: the
    // check refuses the call before anything reaches the driver.
    const other = new Context(device, primary.handle + 1n);
    const stream = streamDouble({
      context: other,
      disposed: false,
      assertUsable() {},
      toString: () => 'Stream(other context)',
    });
    using a = DeviceArray.fromHost(random(16, 8), [4, 4]);
    using b = DeviceArray.fromHost(random(16, 9), [4, 4]);
    using c = DeviceArray.zeros('float64', [4, 4]);
    let error: unknown;
    try {
      gemm(a, b, c, { stream });
    } catch (caught) {
      error = caught;
    }
    console.log(`[aliasing] second context: ${(error as Error).message}`);
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect((error as Error).message).toMatch(/gemm: a lives in Context\(device 0\) \(CUcontext 0x/);
    // The process goes on: the same gemm on the arrays' own context computes.
    gemm(a, b, c);
    expect(Array.from(await c.toHost()).some((value) => value !== 0)).toBe(true);
  });

  if (gpuAvailable && devices < 2) {
    console.log(
      `[aliasing] two-device context check skipped: this machine has ${devices} CUDA device`,
    );
  }
  it.runIf(devices >= 2)(
    'device 1 memory on a device-0 stream: refused, and both devices go on computing',
    async () => {
      const stream0 = Stream.create({ context: Device.get(0).primaryContext() });
      const stream1 = Stream.create({ context: Device.get(1).primaryContext() });
      try {
        const hostA = random(64 * 64, 10);
        using a1 = DeviceArray.fromHost(hostA, [64, 64], { stream: stream1 });
        using b0 = DeviceArray.fromHost(random(64 * 64, 11), [64, 64], { stream: stream0 });
        using c0 = DeviceArray.zeros('float64', [64, 64], { stream: stream0 });
        expect(() => gemm(a1, b0, c0, { stream: stream0 })).toThrow(
          /gemm: a lives in Context\(device 1\)/,
        );
        using a0 = DeviceArray.fromHost(hostA, [64, 64], { stream: stream0 });
        gemm(a0, b0, c0, { stream: stream0 });
        expect(Array.from(await c0.toHost({ stream: stream0 })).some((v) => v !== 0)).toBe(true);
      } finally {
        stream0.dispose();
        stream1.dispose();
      }
    },
  );
});
