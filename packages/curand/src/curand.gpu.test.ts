import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  CudaArgumentError,
  CudaError,
  DeviceArray,
  DisposedError,
  type Kernel,
  launch,
  Module,
  Stream,
} from '@cuda-tasks/cudadrv';
import { cuda } from '@cuda-tasks/cudadrv/ffi';
import { stream as currentStream, synchronize, task, withStream } from '@cuda-tasks/task-runtime';
import { describeGpu } from '@cuda-tasks/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { curand, curandStatus } from './ffi/index.js';
import {
  CurandError,
  check,
  defaultGenerator,
  type FloatDType,
  Generator,
  type GeneratorKind,
  generatorStatistics,
  rand,
  randn,
  setDefaultSeed,
  version,
} from './index.js';

const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));

const KINDS: readonly GeneratorKind[] = ['philox', 'curand-philox', 'xorwow', 'mrg32k3a'];
const DTYPES: readonly FloatDType[] = ['float32', 'float64'];
const N = 1_000_000;

/** Sample mean, variance and 4th central moment, in float64 (the independent reference). */
function centralMoments(values: ArrayLike<number>): { mean: number; variance: number; m4: number } {
  const n = values.length;
  let sum = 0;
  for (let i = 0; i < n; i++) sum += values[i]!;
  const mean = sum / n;
  let m2 = 0;
  let m4 = 0;
  for (let i = 0; i < n; i++) {
    const d = values[i]! - mean;
    const d2 = d * d;
    m2 += d2;
    m4 += d2 * d2;
  }
  return { mean, variance: m2 / (n - 1), m4: m4 / n };
}

/**
 * Asserts that the sample mean and variance are within 5 standard errors of the
 * distribution's: SE(mean) = sigma / sqrt(n), SE(variance) = sqrt((mu4 - sigma^4) / n).
 */
function expectMoments(
  values: ArrayLike<number>,
  expected: { mean: number; variance: number; mu4: number },
): void {
  const n = values.length;
  const sample = centralMoments(values);
  const meanError = Math.sqrt(expected.variance / n);
  const varianceError = Math.sqrt((expected.mu4 - expected.variance ** 2) / n);
  expect(Math.abs(sample.mean - expected.mean)).toBeLessThan(5 * meanError);
  expect(Math.abs(sample.variance - expected.variance)).toBeLessThan(5 * varianceError);
}

/** Log-normal moments from the raw moments E[X^k] = exp(k mu + k^2 s^2 / 2). */
function logNormalMoments(mu: number, s: number): { mean: number; variance: number; mu4: number } {
  const raw = (k: number) => Math.exp(k * mu + (k * k * s * s) / 2);
  const mean = raw(1);
  const variance = (Math.exp(s * s) - 1) * Math.exp(2 * mu + s * s);
  const mu4 = raw(4) - 4 * raw(3) * mean + 6 * raw(2) * mean ** 2 - 3 * mean ** 4;
  return { mean, variance, mu4 };
}

function expectAll(values: ArrayLike<number>, predicate: (value: number) => boolean): void {
  let bad = -1;
  for (let i = 0; i < values.length && bad < 0; i++) if (!predicate(values[i]!)) bad = i;
  expect(bad < 0 ? 'all ok' : `element ${bad} is ${values[bad]}`).toBe('all ok');
}

function differ(a: ArrayLike<number>, b: ArrayLike<number>): boolean {
  if (a.length !== b.length) return true;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return true;
  return false;
}

describeGpu('cuRAND on the GPU', () => {
  let spin: Kernel;
  const streams: Stream[] = [];
  const newStream = () => {
    const s = Stream.create();
    streams.push(s);
    return s;
  };

  beforeAll(() => {
    spin = Module.fromPtx(readFileSync(ptxPath, 'utf8')).kernel('spin_ns', ['uint64']);
  });
  afterAll(() => {
    for (const s of streams) s.dispose();
  });

  it('reports the library version', () => {
    expect(version()).toBeGreaterThanOrEqual(10_000);
  });

  for (const kind of KINDS) {
    describe(`${kind}: distributions of ${N} variates`, () => {
      let generator: Generator;
      beforeAll(() => {
        generator = new Generator({ kind, seed: 20_240_601 });
      });
      afterAll(() => generator.dispose());

      for (const dtype of DTYPES) {
        it(`uniform ${dtype}: in (0, 1], mean 1/2, variance 1/12`, async () => {
          using x = DeviceArray.empty(dtype, N);
          const values = await generator.uniform(x).toHost();
          expectAll(values, (v) => v > 0 && v <= 1);
          expectMoments(values, { mean: 0.5, variance: 1 / 12, mu4: 1 / 80 });
        });

        it(`normal ${dtype}: mean 2, stddev 3`, async () => {
          using x = DeviceArray.empty(dtype, N);
          const values = await generator.normal(x, { mean: 2, stddev: 3 }).toHost();
          expectAll(values, Number.isFinite);
          expectMoments(values, { mean: 2, variance: 9, mu4: 3 * 81 });
        });

        it(`logNormal ${dtype}: mu 0, s 0.5`, async () => {
          using x = DeviceArray.empty(dtype, N);
          const values = await generator.logNormal(x, { mean: 0, stddev: 0.5 }).toHost();
          expectAll(values, (v) => v > 0 && Number.isFinite(v));
          const expected = logNormalMoments(0, 0.5);
          // Conservative: the larger of the exact and the sample 4th central moment.
          const mu4 = Math.max(expected.mu4, centralMoments(values).m4);
          expectMoments(values, { ...expected, mu4 });
        });
      }

      it('poisson uint32: lambda 4 gives mean 4, variance 4', async () => {
        using x = DeviceArray.empty('uint32', N);
        const values = await generator.poisson(x, 4).toHost();
        expectAll(values, (v) => Number.isInteger(v) && v < 100);
        expectMoments(values, { mean: 4, variance: 4, mu4: 4 + 3 * 16 });
      });

      it('bits uint32: uniform 32-bit integers', async () => {
        using x = DeviceArray.empty('uint32', N);
        const values = await generator.bits(x).toHost();
        const scaled = new Float64Array(values.length);
        for (let i = 0; i < values.length; i++) scaled[i] = values[i]! / 2 ** 32;
        // Discrete uniform on 2^32 points: the continuous moments hold to ~1e-10.
        expectMoments(scaled, { mean: 0.5, variance: 1 / 12, mu4: 1 / 80 });
      });
    });
  }

  it('gives the same numbers for seed 42 in two concurrent tasks, under withStream, and on the root stream', async () => {
    for (const kind of KINDS) {
      const draw = async () => {
        using generator = new Generator({ kind, seed: 42 });
        using x = DeviceArray.empty('float32', 10_001);
        using y = DeviceArray.empty('float64', 4096);
        generator.normal(x, { mean: 1, stddev: 2 });
        generator.uniform(y);
        return { x: await x.toHost(), y: await y.toHost() };
      };
      const [a, b] = await Promise.all([task(draw), task(draw)]);
      const scoped = await withStream(newStream(), draw);
      const root = await draw();
      for (const other of [b, scoped, root]) {
        expect(other.x).toEqual(a.x);
        expect(other.y).toEqual(a.y);
      }
      using different = new Generator({ kind, seed: 43 });
      using z = DeviceArray.empty('float32', 10_001);
      expect(differ(await different.normal(z, { mean: 1, stddev: 2 }).toHost(), a.x)).toBe(true);
    }
  });

  it('advances one generator in stream order when it moves between streams and tasks', async () => {
    for (const kind of KINDS) {
      // Reference: the same seed, all calls on one stream.
      using reference = new Generator({ kind, seed: 7 });
      using r1 = DeviceArray.empty('float64', 4096);
      using r2 = DeviceArray.empty('float64', 4096);
      using r3 = DeviceArray.empty('float64', 4096);
      reference.uniform(r1);
      reference.uniform(r2);
      reference.uniform(r3);

      using generator = new Generator({ kind, seed: 7 });
      using x1 = DeviceArray.empty('float64', 4096);
      using x2 = DeviceArray.empty('float64', 4096);
      using x3 = DeviceArray.empty('float64', 4096);
      const first = newStream();
      // The first use waits 20 ms behind a kernel: without the hand-off the second stream
      // would run its generation before the first (and before the seeding).
      withStream(first, () => {
        launch(spin, { grid: 1, block: 1 }, 20_000_000);
        generator.uniform(x1);
      });
      // Two concurrent tasks (two pool streams): the first task's call is issued first, behind
      // another delay; the second task's call must wait for it on the GPU.
      await Promise.all([
        task(() => {
          launch(spin, { grid: 1, block: 1 }, 10_000_000);
          generator.uniform(x2);
        }),
        task(() => {
          generator.uniform(x3);
        }),
      ]);
      expect(await x1.toHost()).toEqual(await r1.toHost());
      expect(await x2.toHost()).toEqual(await r2.toHost());
      expect(await x3.toHost()).toEqual(await r3.toHost());
    }
  });

  it('moves generators between the streams of tasks that awaited their work without GPU-side waits, in sequence', async () => {
    // 16 generators drawn by 16 tasks a round, each task awaiting its stream, the order
    // rotated each round so that a generator comes to another pool stream: its earlier work is
    // known complete, so the move needs no event and no wait. Each draw goes into an array
    // made on the task's own stream (no buffer hand-off either). The draws are the sequence a
    // generator of the same seed gives on one stream.
    const slots = 16;
    const rounds = 4;
    const n = 1001;
    const generators = Array.from(
      { length: slots },
      (_, i) => new Generator({ kind: 'curand-philox', seed: 500 + i }),
    );
    const drawn: Float32Array[][] = generators.map(() => []);
    const api = cuda() as unknown as Record<string, (...args: unknown[]) => number>;
    const original = api.cuStreamWaitEvent!;
    let waits = 0;
    let moves = 0;
    const last: (Stream | undefined)[] = [];
    const runRound = (round: number) =>
      Promise.all(
        generators.map((_, j) =>
          task(async () => {
            const i = (j + round * 5) % slots;
            const on = currentStream();
            if (last[i] !== undefined && last[i] !== on) moves++;
            last[i] = on;
            using x = DeviceArray.empty('float32', n);
            generators[i]!.uniform(x);
            await synchronize();
            drawn[i]![round] = await x.toHost();
          }),
        ),
      );
    // The first round moves each generator from the stream it was seeded on (not awaited).
    await runRound(0);
    api.cuStreamWaitEvent = (...args: unknown[]) => {
      waits++;
      return original(...args);
    };
    try {
      for (let round = 1; round < rounds; round++) await runRound(round);
    } finally {
      api.cuStreamWaitEvent = original;
    }
    for (let i = 0; i < slots; i++) {
      using reference = new Generator({ kind: 'curand-philox', seed: 500 + i });
      using x = DeviceArray.empty('float32', n);
      for (let round = 0; round < rounds; round++) {
        expect(drawn[i]![round]).toEqual(await reference.uniform(x).toHost());
      }
    }
    console.log(
      `[curand] ${slots} generators x ${rounds - 1} rounds of tasks: ${moves} moves to another stream, ${waits} GPU-side waits`,
    );
    expect(moves).toBeGreaterThan(0);
    expect(waits).toBe(0);
    for (const generator of generators) generator.dispose();
  });

  it('generates odd lengths (1, 3, 1001) for normal and log-normal, both dtypes', async () => {
    for (const kind of KINDS) {
      for (const dtype of DTYPES) {
        for (const n of [1, 3, 1001]) {
          using generator = new Generator({ kind, seed: 99 });
          using x = DeviceArray.empty(dtype, n);
          const values = await generator.normal(x).toHost();
          expectAll(values, Number.isFinite);
          using y = DeviceArray.empty(dtype, n);
          expectAll(await generator.logNormal(y).toHost(), (v) => v > 0 && Number.isFinite(v));
          // The even part is generated straight into the array: it equals an even draw.
          if (n > 1) {
            using twin = new Generator({ kind, seed: 99 });
            using even = DeviceArray.empty(dtype, n - 1);
            const evenValues = await twin.normal(even).toHost();
            expect(Array.from(values.subarray(0, n - 1))).toEqual(Array.from(evenValues));
          }
        }
      }
    }
  });

  it('has the right statistics for a large odd length', async () => {
    for (const dtype of DTYPES) {
      using generator = new Generator({ seed: 5 });
      using x = DeviceArray.empty(dtype, N + 1);
      const values = await generator.normal(x, { mean: 2, stddev: 3 }).toHost();
      expectAll(values, Number.isFinite);
      expectMoments(values, { mean: 2, variance: 9, mu4: 3 * 81 });
      using z = randn(dtype, [999, 1001]);
      const standard = await z.toHost();
      expectAll(standard, Number.isFinite);
      expectMoments(standard, { mean: 0, variance: 1, mu4: 3 });
    }
  });

  it('fills misaligned slices and 2-D blocks in place, with the numbers of a contiguous draw', async () => {
    for (const kind of KINDS) {
      // float32 slice at element 1: 4 bytes past an aligned address.
      using backing = DeviceArray.full('float32', 1003, -7);
      using generator = new Generator({ kind, seed: 11 });
      generator.normal(backing.slice(1, 1001), { mean: 0, stddev: 1 });
      using twin = new Generator({ kind, seed: 11 });
      using reference = DeviceArray.empty('float32', 1001);
      const expected = await twin.normal(reference).toHost();
      const filled = await backing.toHost();
      expect(filled[0]).toBe(-7);
      expect(filled[1002]).toBe(-7);
      expect(Array.from(filled.subarray(1, 1002))).toEqual(Array.from(expected));

      using counts = DeviceArray.full('uint32', 12, 1234);
      generator.poisson(counts.slice(3, 7), 4);
      using countsReference = DeviceArray.empty('uint32', 7);
      const expectedCounts = await twin.poisson(countsReference, 4).toHost();
      const gotCounts = await counts.toHost();
      expect(Array.from(gotCounts.subarray(0, 3))).toEqual([1234, 1234, 1234]);
      expect(Array.from(gotCounts.subarray(3, 10))).toEqual(Array.from(expectedCounts));
      expect(Array.from(gotCounts.subarray(10))).toEqual([1234, 1234]);

      // A 4 x 3 block of an 8 x 6 float64 matrix (column-major, leading dimension 8).
      using matrix = DeviceArray.zeros('float64', [8, 6]);
      generator.uniform(matrix.block(1, 1, 4, 3));
      using blockReference = DeviceArray.empty('float64', 12);
      const expectedBlock = await twin.uniform(blockReference).toHost();
      const m = await matrix.toHost();
      for (let column = 0; column < 6; column++) {
        for (let row = 0; row < 8; row++) {
          const inside = row >= 1 && row < 5 && column >= 1 && column < 4;
          const value = m[row + 8 * column]!;
          if (inside) expect(value).toBe(expectedBlock[row - 1 + 4 * (column - 1)]);
          else expect(value).toBe(0);
        }
      }
    }
  });

  it('gives 8 concurrent tasks different default generators: rand and randn differ and are in range', async () => {
    const results = await Promise.all(
      Array.from({ length: 8 }, () =>
        task(async () => {
          const u = rand('float32', 4096);
          const z = randn('float64', 4097);
          const out = { u: await u.toHost(), z: await z.toHost() };
          u.dispose();
          z.dispose();
          return out;
        }),
      ),
    );
    for (const { u, z } of results) {
      expectAll(u, (v) => v > 0 && v <= 1);
      expectAll(z, Number.isFinite);
    }
    for (let i = 0; i < results.length; i++) {
      for (let j = i + 1; j < results.length; j++) {
        expect(differ(results[i]!.u, results[j]!.u)).toBe(true);
        expect(differ(results[i]!.z, results[j]!.z)).toBe(true);
      }
    }
    expect(generatorStatistics().created).toBeGreaterThanOrEqual(8);
  });

  it('reproduces default-generator draws after setDefaultSeed', async () => {
    const draw = () =>
      task(async () => {
        using z = randn('float32', 999, { mean: 1, stddev: 2 });
        using u = rand('float64', [10, 10]);
        return { z: await z.toHost(), u: await u.toHost() };
      });
    setDefaultSeed(123);
    const first = await draw();
    setDefaultSeed(123);
    const second = await draw();
    setDefaultSeed(124);
    const third = await draw();
    expect(second.z).toEqual(first.z);
    expect(second.u).toEqual(first.u);
    expect(differ(third.z, first.z)).toBe(true);
    setDefaultSeed();
  });

  it('uses an explicit generator in rand/randn and the task default through defaultGenerator()', async () => {
    using a = new Generator({ seed: 3 });
    using b = new Generator({ seed: 3 });
    using x = rand('float32', 100, { generator: a });
    using y = DeviceArray.empty('float32', 100);
    b.uniform(y);
    expect(await x.toHost()).toEqual(await y.toHost());
    const values = await task(async () => {
      using w = DeviceArray.empty('float64', 1000);
      defaultGenerator().uniform(w);
      return w.toHost();
    });
    expectAll(values, (v) => v > 0 && v <= 1);
    defaultGenerator().dispose(); // no-op: the runtime owns the default generators
    expect(defaultGenerator().disposed).toBe(false);
  });

  it('rejects bad input with CudaArgumentError before calling cuRAND', () => {
    using generator = new Generator({ seed: 1 });
    using ints = DeviceArray.empty('int32', 4);
    using floats = DeviceArray.empty('float32', 4);
    using counts = DeviceArray.empty('uint32', 4);
    expect(() => generator.uniform(ints as never)).toThrow(CudaArgumentError);
    expect(() => generator.normal(counts as never)).toThrow(CudaArgumentError);
    expect(() => generator.poisson(floats as never, 4)).toThrow(CudaArgumentError);
    expect(() => generator.poisson(counts, 0)).toThrow(CudaArgumentError);
    expect(() => generator.poisson(counts, -1)).toThrow(CudaArgumentError);
    expect(() => generator.poisson(counts, Number.NaN)).toThrow(CudaArgumentError);
    expect(() => generator.normal(floats, { stddev: 0 })).toThrow(CudaArgumentError);
    expect(() => generator.logNormal(floats, { stddev: -1 })).toThrow(CudaArgumentError);
    expect(() => generator.normal(floats, { mean: Number.POSITIVE_INFINITY })).toThrow(
      CudaArgumentError,
    );
    expect(() => rand('int32' as never, 4)).toThrow(CudaArgumentError);
    expect(() => randn('float32', [2, -1])).toThrow(CudaArgumentError);
    expect(() => new Generator({ kind: 'sobol32' as never })).toThrow(CudaArgumentError);
    const gone = DeviceArray.empty('float32', 4);
    gone.dispose();
    expect(() => generator.uniform(gone)).toThrow(DisposedError);
    const disposed = new Generator({ seed: 2 });
    disposed.dispose();
    disposed.dispose();
    expect(() => disposed.uniform(floats)).toThrow(DisposedError);
    expect(() => rand('float32', 4, { generator: disposed })).toThrow(DisposedError);
  });

  it('surfaces cuRAND failures as CurandError', () => {
    // curand.h: curandCreateGenerator returns CURAND_STATUS_TYPE_ERROR for an invalid rng_type.
    const out: (bigint | null)[] = [null];
    const status = curand().curandCreateGenerator(out, 12_345);
    expect(status).toBe(curandStatus.CURAND_STATUS_TYPE_ERROR);
    let error: unknown;
    try {
      check(status, 'curandCreateGenerator');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(CurandError);
    expect(error).toBeInstanceOf(CudaError);
    expect((error as CurandError).status).toBe('CURAND_STATUS_TYPE_ERROR');
    expect((error as CurandError).call).toBe('curandCreateGenerator');
  });
});
