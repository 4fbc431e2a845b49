import { DeviceArray, Stream } from '@cuda-tasks/cudadrv';
import { stream, synchronize, task, withStream } from '@cuda-tasks/task-runtime';
import { barrier, describeGpu, randomFloat32 } from '@cuda-tasks/testing';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { check } from './errors.js';
import { cublas } from './ffi/index.js';
import {
  boundStreamOf,
  handle,
  handleCache,
  setMathMode,
  setWorkspaceSize,
  workspaceFor,
  workspaceSize,
} from './handle.js';
import { gemm } from './level3.js';
import { lastPlan, setGemmBackend } from './lt.js';

const N = 64;

/** The stream cuBLAS reports for a handle (cublasGetStream_v2). */
function cublasStreamOf(h: bigint): bigint | null {
  const out: (bigint | null)[] = [null];
  check(cublas().cublasGetStream_v2(h, out), 'cublasGetStream_v2');
  return out[0] ?? null;
}

function cublasMathModeOf(h: bigint): number {
  const out = [-1];
  check(cublas().cublasGetMathMode(h, out), 'cublasGetMathMode');
  return out[0]!;
}

/** N x N float64 product of two float32 column-major matrices. */
function product(a: Float32Array, b: Float32Array): Float64Array {
  const out = new Float64Array(N * N);
  for (let j = 0; j < N; j++) {
    for (let l = 0; l < N; l++) {
      const bv = b[l + j * N]!;
      for (let i = 0; i < N; i++) out[i + j * N] += a[i + l * N]! * bv;
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

describeGpu('cuBLAS handles follow the task stream', () => {
  const hostA = randomFloat32(N * N, 31);
  const hostB = randomFloat32(N * N, 32);
  const reference = product(hostA, hostB);

  // These tests are about the cuBLAS handle, so gemm goes through it here (cublasSgemm). The
  // cuBLASLt backend, which touches the handle only for an algorithm that needs workspace, has
  // its own test at the end.
  beforeEach(() => setGemmBackend('cublas'));

  afterEach(() => {
    setWorkspaceSize(32 * 1024 * 1024);
    setMathMode('default');
    setGemmBackend('cublaslt');
  });

  it('rebinds the task handle under withStream, with one workspace per stream', async () => {
    const s2 = Stream.create({ name: 'cublas-test-s2' });
    let taskHandle = 0n;
    let taskStream: Stream | undefined;
    try {
      await task(async () => {
        using a = DeviceArray.fromHost(hostA, [N, N]);
        using b = DeviceArray.fromHost(hostB, [N, N]);
        using c1 = DeviceArray.zeros('float32', [N, N]);
        using c2 = DeviceArray.zeros('float32', [N, N]);
        const s1 = stream();
        taskStream = s1;
        gemm(a, b, c1);
        const h = handle();
        taskHandle = h;
        expect(cublasStreamOf(h)).toBe(s1.handle);

        withStream(s2, () => {
          gemm(a, b, c2);
          const h2 = handle();
          expect(h2).toBe(h); // one lease per task and context
          expect(cublasStreamOf(h2)).toBe(s2.handle);
          expect(boundStreamOf(h2)).toBe(s2);
        });

        // Two streams never share a workspace.
        const w1 = workspaceFor(h, s1);
        const w2 = workspaceFor(h, s2);
        expect(w1).toBeDefined();
        expect(w2).toBeDefined();
        expect(w1).not.toBe(w2);
        expect(w1!.pointer).not.toBe(w2!.pointer);
        expect(w1!.byteLength).toBe(workspaceSize());
        expect(w2!.byteLength).toBe(workspaceSize());

        // Back on the task stream: rebound, same workspace as before.
        gemm(a, b, c1, { beta: 1 });
        expect(cublasStreamOf(handle())).toBe(s1.handle);
        expect(workspaceFor(h, s1)).toBe(w1);

        await synchronize();
        const first = await c1.toHost();
        const second = await c2.toHost({ stream: s2 });
        expect(maxRelativeError(second, reference)).toBeLessThan(1e-5);
        expect(
          maxRelativeError(
            first,
            reference.map((v) => 2 * v),
          ),
        ).toBeLessThan(1e-5);
      });
      // The task's stream went back to the pool: its workspace was freed.
      expect(workspaceFor(taskHandle, taskStream!)).toBeUndefined();
    } finally {
      s2.synchronize();
      s2.dispose();
    }
  });

  it('frees the workspace of a pooled stream the handle was bound to earlier', async () => {
    await task(async () => {
      using a = DeviceArray.fromHost(hostA, [N, N]);
      using b = DeviceArray.fromHost(hostB, [N, N]);
      using c = DeviceArray.zeros('float32', [N, N]);
      gemm(a, b, c);
      const h = handle();
      const own = stream();
      // Another task holds a pooled stream until we let it go.
      let release!: () => void;
      let other!: Stream;
      let ready!: () => void;
      const otherReady = new Promise<void>((resolve) => {
        ready = resolve;
      });
      const otherTask = task(async () => {
        other = stream();
        ready();
        await new Promise<void>((done) => {
          release = done;
        });
      });
      await otherReady;
      withStream(other, () => gemm(a, b, c));
      gemm(a, b, c); // back on our own stream
      expect(workspaceFor(h, other)).toBeDefined();
      expect(boundStreamOf(h)).toBe(own);
      release();
      await otherTask; // it settles and gives its stream back to the pool
      expect(workspaceFor(h, other)).toBeUndefined();
      expect(workspaceFor(h, own)).toBeDefined();
      await synchronize();
      expect(maxRelativeError(await c.toHost(), reference)).toBeLessThan(1e-5);
    });
  });

  it('keeps handles bounded: 32 concurrent tasks share the 16 made ahead, creating none, twice', async () => {
    const cache = handleCache();
    expect(cache.maxHandlesPerContext).toBe(16);
    using a = DeviceArray.fromHost(hostA, [N, N]);
    using b = DeviceArray.fromHost(hostB, [N, N]);
    const outputs = Array.from({ length: 32 }, () => DeviceArray.zeros('float32', [N, N]));
    try {
      const round = () => {
        // All 32 alive at once (their starts may span event-loop turns).
        const arrive = barrier(outputs.length);
        return Promise.all(
          outputs.map((c, i) =>
            task(
              async () => {
                gemm(a, b, c);
                const h = handle();
                await arrive();
                await synchronize();
                return h;
              },
              { name: `gemm-${i}` },
            ),
          ),
        );
      };
      // Earlier tests may have left fewer than the bound alive (a cache grows one handle per
      // event-loop turn while tasks share): made ahead, as a service does at startup, the
      // bound's 16 serve the burst and it creates none.
      expect(cache.warm()).toBe(16);
      const before = cache.statistics().created;
      const firstHandles = await round();
      const afterFirst = cache.statistics().created;
      expect(afterFirst).toBe(before);
      // Past the bound, tasks share handles (each call rebinds it to the caller's stream, with
      // the caller's workspace): 32 tasks on 16 handles, two each.
      expect(new Set(firstHandles).size).toBe(16);
      const secondHandles = await round();
      expect(cache.statistics().created).toBe(afterFirst);
      expect(new Set(secondHandles).size).toBe(16);
      for (const c of outputs) {
        expect(maxRelativeError(await c.toHost(), reference)).toBeLessThan(1e-5);
      }
    } finally {
      for (const c of outputs) c.dispose();
    }
  });

  it('applies setMathMode and setWorkspaceSize to existing handles on their next use', async () => {
    await task(async () => {
      using a = DeviceArray.fromHost(hostA, [N, N]);
      using b = DeviceArray.fromHost(hostB, [N, N]);
      using c = DeviceArray.zeros('float32', [N, N]);
      gemm(a, b, c);
      const h = handle();
      expect(cublasMathModeOf(h)).toBe(0); // CUBLAS_DEFAULT_MATH
      setMathMode('tf32');
      setWorkspaceSize(1024 * 1024);
      gemm(a, b, c);
      expect(cublasMathModeOf(h)).toBe(3); // CUBLAS_TF32_TENSOR_OP_MATH
      expect(workspaceFor(h, stream())!.byteLength).toBe(1024 * 1024);
      setMathMode('default');
      setWorkspaceSize(32 * 1024 * 1024);
      gemm(a, b, c);
      expect(cublasMathModeOf(h)).toBe(0);
      expect(workspaceFor(h, stream())!.byteLength).toBe(32 * 1024 * 1024);
      await synchronize();
      expect(maxRelativeError(await c.toHost(), reference)).toBeLessThan(1e-5);
    });
  });
  it('gemm through cuBLASLt uses the task handle only for an algorithm that needs workspace', async () => {
    setGemmBackend('cublaslt');
    for (const size of [8, 64, 1024]) {
      const hostX = randomFloat32(size * size, 40 + size);
      const hostY = randomFloat32(size * size, 50 + size);
      await task(async () => {
        using x = DeviceArray.fromHost(hostX, [size, size]);
        using y = DeviceArray.fromHost(hostY, [size, size]);
        using z = DeviceArray.zeros('float32', [size, size]);
        const leasedBefore = handleCache().statistics().leased;
        gemm(x, y, z);
        const plan = lastPlan()!;
        expect(plan.usable).toBe(true);
        expect(plan.m).toBe(size);
        if (plan.workspaceNeeded === 0) {
          // No lease: the task has no cuBLAS handle at all.
          expect(handleCache().statistics().leased).toBe(leasedBefore);
        } else {
          // The (handle, stream) workspace, as large as the algorithm needs.
          expect(handleCache().statistics().leased).toBe(leasedBefore + 1);
          expect(workspaceFor(handle(), stream())!.byteLength).toBeGreaterThanOrEqual(
            plan.workspaceNeeded,
          );
        }
        console.log(`cuBLASLt sgemm ${size}^3: algorithm workspace ${plan.workspaceNeeded} B`);
        const got = await z.toHost();
        // Check a sample of entries against float64 dot products.
        for (const [i, j] of [
          [0, 0],
          [size - 1, size - 1],
          [size >> 1, size >> 2],
        ] as const) {
          let want = 0;
          for (let l = 0; l < size; l++) want += hostX[i + l * size]! * hostY[l + j * size]!;
          expect(Math.abs(got[i + j * size]! - want)).toBeLessThan(1e-4 * Math.sqrt(size));
        }
      });
    }
  });
});
