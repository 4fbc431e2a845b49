/**
 * cuBLAS, cuRAND and cuSOLVER inside a graph capture: C = A B (gemm, through cuBLASLt and
 * through cuBLAS, whose handle then works in a workspace the graph owns), R ~ N(0, 1) (a
 * generator of its own), X = A \ C (getrf + getrs, status kept on the device with { info }),
 * captured once and replayed, against the same work run eagerly. And a routine that cannot be
 * captured gives a CaptureError naming it, with the stream usable afterwards.
 */

import { type GemmBackend, gemm, gemmBackend, setGemmBackend } from '@cuda-tasks/cublas';
import { CaptureError, DeviceArray, type Stream, waitForStream } from '@cuda-tasks/cudadrv';
import { Generator } from '@cuda-tasks/curand';
import { solve, svd } from '@cuda-tasks/cusolver';
import { capture, stream, synchronize, task } from '@cuda-tasks/task-runtime';
import { describeGpu, rng } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';

const n = 64;

/** A diagonally dominant random matrix (well conditioned) and a right-hand side, column-major. */
function inputs(seed: number): { a: Float64Array; b: Float64Array } {
  const next = rng(seed);
  const a = Float64Array.from({ length: n * n }, () => next() * 2 - 1);
  for (let i = 0; i < n; i++) a[i + i * n]! += n;
  const b = Float64Array.from({ length: n * n }, () => next() * 2 - 1);
  return { a, b };
}

interface Outputs {
  c: DeviceArray<'float64'>;
  r: DeviceArray<'float64'>;
  x: DeviceArray<'float64'>;
  status: DeviceArray<'int32'>;
}

function outputs(): Outputs {
  return {
    c: DeviceArray.zeros('float64', [n, n]),
    r: DeviceArray.zeros('float64', 10_001),
    x: DeviceArray.zeros('float64', [n, n]),
    status: DeviceArray.full('int32', 2, -1),
  };
}

/** The work: C = A B, R ~ N(0, 1), X = A \ C (so X = B up to rounding). */
async function step(
  a: DeviceArray<'float64'>,
  b: DeviceArray<'float64'>,
  out: Outputs,
  generator: Generator,
): Promise<void> {
  gemm(a, b, out.c);
  generator.normal(out.r);
  using x = await solve(a, out.c, { info: out.status });
  out.x.copyFrom(x);
}

async function read(out: Outputs) {
  const [c, r, x, status] = await Promise.all([
    out.c.toHost(),
    out.r.toHost(),
    out.x.toHost(),
    out.status.toHost(),
  ]);
  return { c, r, x, status };
}

function maxDifference(a: Float64Array, b: Float64Array): number {
  let worst = 0;
  for (let i = 0; i < a.length; i++) worst = Math.max(worst, Math.abs(a[i]! - b[i]!));
  return worst;
}

/** How many positions hold the same value in both draws. */
function sharedValues(a: Float64Array, b: Float64Array): number {
  let same = 0;
  for (let i = 0; i < a.length; i++) if (a[i] === b[i]) same++;
  return same;
}

/** Mean within 5 standard errors of 0, variance within 6% of 1 (10,001 draws: about 4 standard errors). */
function expectStandardNormal(values: Float64Array): void {
  let sum = 0;
  for (const value of values) sum += value;
  const mean = sum / values.length;
  let squares = 0;
  for (const value of values) squares += (value - mean) ** 2;
  expect(Math.abs(mean)).toBeLessThan(5 / Math.sqrt(values.length));
  expect(Math.abs(squares / (values.length - 1) - 1)).toBeLessThan(0.06);
}

describeGpu('cuBLAS, cuRAND and cuSOLVER inside a graph capture', () => {
  for (const backend of ['cublaslt', 'cublas'] as const satisfies readonly GemmBackend[]) {
    it(`gemm (${backend}) + cuRAND fill + solve captured and replayed give the eager results`, async () => {
      const previous = gemmBackend();
      setGemmBackend(backend);
      try {
        await task(async () => {
          const { a, b } = inputs(backend === 'cublas' ? 2 : 1);
          using da = DeviceArray.fromHost(a, [n, n]);
          using db = DeviceArray.fromHost(b, [n, n]);
          const eager = outputs();
          const eagerGenerator = new Generator({ kind: 'curand-philox', seed: 77 });
          await step(da, db, eager, eagerGenerator);
          await synchronize();
          const expected = await read(eager);
          expect(Array.from(expected.status)).toEqual([0, 0]);
          expect(maxDifference(expected.x, b)).toBeLessThan(1e-10);

          const captured = outputs();
          const capturedGenerator = new Generator({ kind: 'curand-philox', seed: 77 });
          const graph = await capture(() => step(da, db, captured, capturedGenerator));
          // Nothing ran during the capture.
          expect(Array.from(await captured.status.toHost())).toEqual([-1, -1]);
          expect(graph.nodeCount).toBeGreaterThanOrEqual(4);
          let previousDraw: Float64Array | undefined;
          for (let replay = 0; replay < 3; replay++) {
            graph.launch();
            await synchronize();
            const got = await read(captured);
            expect(Array.from(got.status)).toEqual([0, 0]);
            expect(maxDifference(got.c, expected.c)).toBeLessThanOrEqual(1e-12 * n);
            // The first launch draws what the eager call drew; cuRAND keeps the generator's
            // state on the device and each launch advances it, so later launches draw new
            // standard normal numbers.
            if (replay === 0) expect(got.r).toEqual(expected.r);
            else {
              expect(sharedValues(got.r, previousDraw!)).toBeLessThan(got.r.length / 100);
              expectStandardNormal(got.r);
            }
            previousDraw = got.r;
            expect(maxDifference(got.x, expected.x)).toBeLessThan(1e-12);
            expect(maxDifference(got.x, b)).toBeLessThan(1e-10);
          }
          graph.dispose();
          for (const out of [eager, captured])
            for (const array of Object.values(out)) array.dispose();
          eagerGenerator.dispose();
          capturedGenerator.dispose();
        });
      } finally {
        setGemmBackend(previous);
      }
    });
  }

  it('solve told it may overwrite its inputs works on copies inside a capture: every replay solves the same system', async () => {
    await task(async () => {
      const { a, b } = inputs(5);
      using da = DeviceArray.fromHost(a, [n, n]);
      using db = DeviceArray.fromHost(b, [n, n]);
      using status = DeviceArray.full('int32', 2, -1);
      using xs = DeviceArray.zeros('float64', [n, n]);
      using eager = await solve(da, db);
      const expected = await eager.toHost();
      const graph = await capture(async () => {
        // Were the overwrites taken here, x would be db itself (and disposed below), and each
        // replay would factor the factors of the one before.
        using x = await solve(da, db, { info: status, overwriteA: true, overwriteB: true });
        xs.copyFrom(x);
      });
      for (let replay = 0; replay < 3; replay++) {
        graph.launch();
        await synchronize();
        expect(Array.from(await status.toHost())).toEqual([0, 0]);
        expect(maxDifference(await xs.toHost(), expected)).toBeLessThan(1e-12);
      }
      expect(maxDifference(await da.toHost(), a)).toBe(0);
      expect(maxDifference(await db.toHost(), b)).toBe(0);
      graph.dispose();
    });
  });

  it('a routine that cannot be captured gives a CaptureError naming it; the stream goes on', async () => {
    await task(async () => {
      const { a } = inputs(3);
      using da = DeviceArray.fromHost(a, [n, n]);
      using c = DeviceArray.zeros('float64', [n, n]);
      using generator = new Generator({ kind: 'curand-philox', seed: 1 });
      using counts = DeviceArray.empty('uint32', 16);
      using reseeded = new Generator({ kind: 'curand-philox', seed: 4 });
      using noise = DeviceArray.zeros('float64', 64);
      let captureStream: Stream | undefined;
      const refused: string[] = [];
      // Refused inside the capture (caught): the capture goes on to a working graph.
      const graph = await capture(async () => {
        captureStream = stream();
        gemm(da, da, c);
        for (const attempt of [
          () => svd(da),
          () => solve(da, c), // without { info }: its status would be read back
          async () => generator.poisson(counts, 4),
          // Reseeded inside: cuRAND would set the new state up with calls a capture forbids.
          async () => {
            reseeded.setSeed(5);
            reseeded.normal(noise);
          },
        ]) {
          try {
            await attempt();
          } catch (error) {
            if (CaptureError.isInstance(error)) refused.push(error.call);
            else throw error;
          }
        }
      });
      expect(refused).toEqual([
        'cusolverDnDgesvd',
        'cusolverDnDgetrf and cusolverDnDgetrs',
        'curandGeneratePoisson',
        'curandGenerateNormalDouble',
      ]);
      // Prepared outside, the reseeded generator then captures and replays what it draws eagerly.
      reseeded.prepare();
      const drawing = await capture(() => {
        reseeded.normal(noise);
      });
      drawing.launch();
      await synchronize();
      const replayed = await noise.toHost();
      using eager = new Generator({ kind: 'curand-philox', seed: 5 });
      using expected = eager.normal(DeviceArray.zeros('float64', 64));
      expect(replayed).toEqual(await expected.toHost());
      drawing.dispose();
      graph.launch();
      await synchronize();
      const product = await c.toHost();
      let worst = 0;
      for (let i = 0; i < n; i++) {
        for (let j = 0; j < n; j++) {
          let sum = 0;
          for (let k = 0; k < n; k++) sum += a[i + k * n]! * a[k + j * n]!;
          worst = Math.max(worst, Math.abs(product[i + j * n]! - sum));
        }
      }
      expect(worst).toBeLessThan(1e-9);
      graph.dispose();

      // Not caught: the capture ends cleanly with the error, and no stream is left capturing.
      const error = await capture(async () => {
        captureStream = stream();
        await svd(da);
      }).then(
        () => undefined,
        (thrown: unknown) => thrown,
      );
      expect(CaptureError.isInstance(error)).toBe(true);
      expect((error as Error).message).toMatch(/svd \(cusolverDnDgesvd\)/);
      expect(captureStream!.capturing).toBe(false);
      // That stream, and the task's, run the routine eagerly afterwards.
      const there = await svd(da, { stream: captureStream! });
      await waitForStream(captureStream!);
      const values = await there.s.toHost({ stream: captureStream! });
      // The singular values' squares add up to the squared Frobenius norm of A.
      let frobenius = 0;
      for (const value of a) frobenius += value * value;
      let squares = 0;
      for (const value of values) squares += value * value;
      expect(Math.abs(squares - frobenius) / frobenius).toBeLessThan(1e-12);
      const here = await svd(da);
      expect(maxDifference(await here.s.toHost(), values)).toBeLessThan(1e-12 * n);
      for (const array of [...Object.values(there), ...Object.values(here)]) array.dispose();
    });
  });
});
