/**
 * A disposed stream under `withStream` (issue 14, bug 5). Seen on the H200 before the fix: a
 * launch failed with CUDA_ERROR_CONTEXT_IS_DESTROYED and a gemm with
 * CUBLAS_STATUS_EXECUTION_FAILED; a DisposedError naming the stream belongs there, before the
 * driver or cuBLAS sees the destroyed handle.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { DeviceArray, DisposedError, launch, Module, Stream } from '@cuda-tasks/cudadrv';
import { synchronize, task, withStream } from '@cuda-tasks/task-runtime';
import { describeGpu, randomFloat32, thrown } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { gemm } from './level3.js';

const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));
const N = 32;

describeGpu('a disposed stream under withStream', () => {
  let module: Module;
  beforeAll(() => {
    module = Module.fromPtx(readFileSync(ptxPath, 'utf8'));
  });
  afterAll(() => module.dispose());

  it('withStream refuses a disposed stream with a DisposedError naming it', () => {
    const gone = Stream.create({ name: 'gone' });
    gone.dispose();
    let ran = false;
    const error = thrown(() =>
      withStream(gone, () => {
        ran = true;
      }),
    );
    expect(ran).toBe(false);
    expect(error).toBeInstanceOf(DisposedError);
    expect(error.message).toBe('withStream: Stream(gone) has been disposed and cannot be used');
  });

  it('a frame whose stream is disposed while it runs: launch, copy and gemm give DisposedError', async () => {
    const fill = module.kernel('spin_then_fill', ['int32*', 'int32', 'uint64', 'uint64']);
    const hostA = randomFloat32(N * N, 71);
    const hostB = randomFloat32(N * N, 72);
    const result = await task(async () => {
      const a = DeviceArray.fromHost(hostA, [N, N]);
      const b = DeviceArray.fromHost(hostB, [N, N]);
      const c = DeviceArray.zeros('float32', [N, N]);
      const counts = DeviceArray.zeros('int32', 16);
      await synchronize();
      const s = Stream.create({ name: 'short-lived' });
      // The ordinary way in: work scheduled inside the frame runs after the stream is gone.
      const late = withStream(
        s,
        () =>
          new Promise<Error[]>((resolve) =>
            setTimeout(
              () =>
                resolve([
                  thrown(() => launch(fill, { grid: 1, block: 16 }, counts, 5, 16, 0)),
                  thrown(() => counts.copyFromHost(new Int32Array(16).fill(9))),
                  thrown(() => gemm(a, b, c)),
                ]),
              10,
            ),
          ),
      );
      s.dispose();
      const errors = await late;
      // None of it reached the buffers: they read back as they were.
      const [countsAfter, cAfter] = [await counts.toHost(), await c.toHost()];
      for (const x of [a, b, c, counts]) x.dispose();
      return { errors, countsAfter, cAfter };
    });
    for (const error of result.errors) {
      expect(error).toBeInstanceOf(DisposedError);
      expect(error.message).toBe('Stream(short-lived) has been disposed and cannot be used');
    }
    expect(Array.from(result.countsAfter)).toEqual(new Array(16).fill(0));
    expect(Array.from(result.cAfter)).toEqual(new Array(N * N).fill(0));
  });
});
