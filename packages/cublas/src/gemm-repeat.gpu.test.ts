import { DeviceArray, DisposedError, Stream } from '@cuda-tasks/cudadrv';
import { synchronize, task, withStream } from '@cuda-tasks/task-runtime';
import { describeGpu, multiply, randomFloat32, relativeError } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import { gemm, setGemmBackend, setMathMode } from './index.js';

// The second and later gemm of the same three arrays with the default options skips the
// checks of the first (level3.ts, `lastGemm`): what changes in between must still count.

describeGpu('gemm of the same arrays again', () => {
  it('follows their contents, the current stream, the backend, the math mode and disposal', async () => {
    const [m, n, k] = [96, 80, 48];
    const hosts = [0, 1, 2, 3].map((i) => randomFloat32(m * k, 61 + i));
    const hostB = randomFloat32(k * n, 65);
    const want = hosts.map((hostA) => multiply(hostA, m, k, hostB, n));
    await task(async () => {
      using a = DeviceArray.fromHost(hosts[0]!, [m, k]);
      using b = DeviceArray.fromHost(hostB, [k, n]);
      using c = DeviceArray.zeros('float32', [m, n]);
      const error = async (index: number) =>
        relativeError(Float64Array.from(await c.toHost()), want[index]!);
      gemm(a, b, c);
      gemm(a, b, c);
      expect(await error(0)).toBeLessThan(1e-5);
      // New contents of A, the same arrays: the product of the new A.
      a.copyFromHost(hosts[1]!);
      gemm(a, b, c);
      expect(await error(1)).toBeLessThan(1e-5);
      // Another current stream: the gemm goes there, ordered after A's upload on this task's
      // stream, and C's read-back here waits for it.
      const other = Stream.create({ name: 'gemm-again' });
      try {
        a.copyFromHost(hosts[2]!);
        await withStream(other, async () => {
          gemm(a, b, c);
          gemm(a, b, c);
          await synchronize();
        });
        expect(await error(2)).toBeLessThan(1e-5);
      } finally {
        other.dispose();
      }
      // The other backend for the same arrays, then back; TF32 for them, then back.
      a.copyFromHost(hosts[3]!);
      setGemmBackend('cublas');
      try {
        gemm(a, b, c);
      } finally {
        setGemmBackend('cublaslt');
      }
      expect(await error(3)).toBeLessThan(1e-5);
      setMathMode('tf32');
      try {
        gemm(a, b, c);
        // TF32 rounds the inputs to 10 bits of mantissa: within 1e-2, not within 1e-5.
        expect(await error(3)).toBeLessThan(1e-2);
      } finally {
        setMathMode('default');
      }
      gemm(a, b, c);
      expect(await error(3)).toBeLessThan(1e-5);
      // A disposed operand is refused every time, before anything is issued.
      const d = DeviceArray.fromHost(hostB, [k, n]);
      gemm(a, d, c);
      d.dispose();
      expect(() => gemm(a, d, c)).toThrow(DisposedError);
      expect(() => gemm(a, d, c)).toThrow(DisposedError);
      expect(await error(3)).toBeLessThan(1e-5);
    });
  });
});
