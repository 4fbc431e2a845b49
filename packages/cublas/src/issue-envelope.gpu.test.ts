import { DeviceArray, Stream } from '@cuda-tasks/cudadrv';
import { type OperationObserver, setOperationObserver } from '@cuda-tasks/cudadrv/internal';
import { task } from '@cuda-tasks/task-runtime';
import { describeGpu, randomFloat32 } from '@cuda-tasks/testing';
import { afterEach, expect, it } from 'vitest';
import { check } from './errors.js';
import { cublas } from './ffi/index.js';
import { handle } from './handle.js';
import { axpy, dot } from './level1.js';
import { gemv } from './level2.js';
import { gemm, gemmStridedBatched } from './level3.js';
import { setGemmBackend } from './lt.js';

const N = 48;

/** What the observer saw: each operation's name, the stream it was issued on, and its end. */
interface Seen {
  name: string;
  stream: Stream;
  /** The stream cuBLAS had for the task's handle when the operation began. */
  cublasStream: bigint | null;
  /** The handle's pointer mode when the operation began (0: host, 1: device). */
  pointerMode: number;
  ended: boolean;
}

let previous: OperationObserver | null = null;
afterEach(() => {
  setOperationObserver(previous);
  setGemmBackend('cublaslt');
});

/** Installs an observer that records every operation and the task handle's state at its start. */
function observe(taskHandle: () => bigint): Seen[] {
  const seen: Seen[] = [];
  previous = setOperationObserver({
    begin(name, stream) {
      const h = taskHandle();
      const out: (bigint | null)[] = [null];
      check(cublas().cublasGetStream_v2(h, out), 'cublasGetStream_v2');
      const mode = [-1];
      check(cublas().cublasGetPointerMode_v2(h, mode), 'cublasGetPointerMode_v2');
      seen.push({
        name,
        stream,
        cublasStream: out[0] ?? null,
        pointerMode: mode[0]!,
        ended: false,
      });
      return seen.length - 1;
    },
    end(token) {
      seen[token]!.ended = true;
    },
  });
  return seen;
}

/** Column-major float64 product of float32 matrices: (m x k) (k x n). */
function product(a: Float32Array, b: Float32Array, m: number, n: number, k: number): Float64Array {
  const out = new Float64Array(m * n);
  for (let j = 0; j < n; j++) {
    for (let l = 0; l < k; l++) {
      const bv = b[l + j * k]!;
      for (let i = 0; i < m; i++) out[i + j * m] += a[i + l * m]! * bv;
    }
  }
  return out;
}

function maxRelativeError(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let worst = 0;
  let scale = 0;
  for (let i = 0; i < want.length; i++) {
    worst = Math.max(worst, Math.abs(got[i]! - want[i]!));
    scale = Math.max(scale, Math.abs(want[i]!));
  }
  return worst / scale;
}

describeGpu("cuBLAS calls go through the kit's issue envelope", () => {
  const hostA = randomFloat32(N * N, 71);
  const hostB = randomFloat32(N * N, 72);
  const hostX = randomFloat32(N, 73);
  const hostY = randomFloat32(N, 74);

  it('traces each call on its stream, with the task handle bound there, and computes what the CPU does', async () => {
    const errors: Record<string, number> = {};
    let seen: Seen[] = [];
    await task(async () => {
      using s = Stream.create();
      seen = observe(() => handle(s));
      using a = DeviceArray.fromHost(hostA, [N, N], { stream: s });
      using b = DeviceArray.fromHost(hostB, [N, N], { stream: s });
      using x = DeviceArray.fromHost(hostX, [N], { stream: s });
      using y = DeviceArray.fromHost(hostY, [N], { stream: s });
      using c1 = DeviceArray.zeros('float32', [N, N], { stream: s });
      using c2 = DeviceArray.zeros('float32', [N, N], { stream: s });
      using batched = DeviceArray.zeros('float32', [N, N, 1], { stream: s });
      using z = DeviceArray.zeros('float32', [N], { stream: s });
      seen.length = 0;

      setGemmBackend('cublaslt');
      gemm(a, b, c1, { stream: s });
      setGemmBackend('cublas');
      gemm(a, b, c2, { stream: s });
      gemmStridedBatched(a, b, batched, { stream: s });
      gemv(a, x, z, { stream: s });
      const d = await dot(x, y, { stream: s });
      axpy(2, x, y, { stream: s });

      const want = product(hostA, hostB, N, N, N);
      errors.lt = maxRelativeError(await c1.toHost({ stream: s }), want);
      errors.gemm = maxRelativeError(await c2.toHost({ stream: s }), want);
      errors.batched = maxRelativeError(await batched.toHost({ stream: s }), want);
      errors.gemv = maxRelativeError(await z.toHost({ stream: s }), product(hostA, hostX, N, 1, N));
      let dotWant = 0;
      for (let i = 0; i < N; i++) dotWant += hostX[i]! * hostY[i]!;
      errors.dot = Math.abs(d - dotWant) / Math.max(1, Math.abs(dotWant));
      const axpyWant = Float64Array.from(hostY, (v, i) => v + 2 * hostX[i]!);
      errors.axpy = maxRelativeError(await y.toHost({ stream: s }), axpyWant);

      const ours = seen.filter((op) => op.name.startsWith('cublas.'));
      expect(ours.map((op) => op.name)).toEqual([
        'cublas.sgemm', // through cublasLtMatmul: the trace names the routine
        'cublas.sgemm',
        'cublas.sgemmStridedBatched',
        'cublas.sgemv',
        'cublas.sdot',
        'cublas.saxpy',
      ]);
      for (const op of ours) {
        expect(op.ended).toBe(true);
        expect(op.stream).toBe(s);
      }
      // The task's handle was bound to the call's stream before each cuBLAS routine began
      // (cublasLtMatmul takes its stream as an argument, so the first is not asked).
      for (const op of ours.slice(1)) expect(op.cublasStream).toBe(s.handle);
      // The reduction runs in device pointer mode; every other call in host mode.
      expect(ours.map((op) => op.pointerMode)).toEqual([0, 0, 0, 0, 1, 0]);
    });
    const worst = Math.max(...Object.values(errors));
    console.log(
      `issue envelope: 6 cuBLAS calls traced on their stream, handle bound there; max relative error ${worst.toExponential(2)} (${Object.entries(
        errors,
      )
        .map(([name, e]) => `${name} ${e.toExponential(1)}`)
        .join(', ')})`,
    );
    expect(worst).toBeLessThan(1e-5);
  });
});
