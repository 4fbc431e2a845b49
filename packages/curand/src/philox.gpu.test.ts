/**
 * The counter-based 'philox' kind on the GPU: bit-exact against the JavaScript reference
 * (test/philox-reference.ts, itself checked against Random123's known answers), the
 * distributions' formulas, Poisson statistics, seeding that never waits for the GPU, sharing
 * across tasks, and graph capture.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import {
  CaptureError,
  DeviceArray,
  type Kernel,
  launch,
  Module,
  Stream,
} from '@cuda-tasks/cudadrv';
import { capture, stream, synchronize, task, withStream } from '@cuda-tasks/task-runtime';
import { describeGpu, watchEventLoop } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { referenceBits, referenceNormal, referenceUniform } from '../test/philox-reference.js';
import { Generator } from './index.js';

const ptxPath = fileURLToPath(new URL('../../cudadrv/test/fixtures/kernels.ptx', import.meta.url));

/** The first index where `got` and `want` differ beyond `tolerance(want)`, or -1. */
function firstMismatch(
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  tolerance: (value: number) => number = () => 0,
): number {
  expect(got.length).toBe(want.length);
  for (let i = 0; i < want.length; i++) {
    if (!(Math.abs(got[i]! - want[i]!) <= tolerance(want[i]!))) return i;
  }
  return -1;
}

/** The elements of a rows x columns block at (row, column) of a column-major matrix of `ld` rows. */
function blockOf(
  values: ArrayLike<number>,
  ld: number,
  row: number,
  column: number,
  rows: number,
  columns: number,
): number[] {
  const out: number[] = [];
  for (let c = 0; c < columns; c++) {
    for (let r = 0; r < rows; r++) out.push(values[row + r + ld * (column + c)]!);
  }
  return out;
}

describeGpu("the counter-based 'philox' generator", () => {
  let spin: Kernel;
  const streams: Stream[] = [];

  beforeAll(() => {
    spin = Module.fromPtx(readFileSync(ptxPath, 'utf8')).kernel('spin_ns', ['uint64']);
  });
  afterAll(() => {
    for (const s of streams) s.dispose();
  });

  it('bits are bit-exact against the reference, any seed, offset and length, 2-D blocks too', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        fc.oneof(fc.bigInt({ min: 0n, max: 1000n }), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n })),
        fc.integer({ min: 1, max: 5000 }),
        fc.record({
          rows: fc.integer({ min: 1, max: 40 }),
          columns: fc.integer({ min: 1, max: 9 }),
        }),
        async (seed, offset, length, shape) => {
          using generator = new Generator({ seed, offset });
          using x = DeviceArray.empty('uint32', length);
          generator.bits(x);
          expect(firstMismatch(await x.toHost(), referenceBits(seed, offset, length))).toBe(-1);
          // Then a block of a larger matrix, from where the first call left the offset.
          const next = offset + BigInt(length);
          expect(generator.offset).toBe(next % 2n ** 64n);
          const ld = shape.rows + 3;
          using matrix = DeviceArray.full('uint32', [ld, shape.columns + 2], 7);
          generator.bits(matrix.block(1, 1, shape.rows, shape.columns));
          const m = await matrix.toHost();
          const want = referenceBits(seed, next % 2n ** 64n, shape.rows * shape.columns);
          expect(firstMismatch(blockOf(m, ld, 1, 1, shape.rows, shape.columns), want)).toBe(-1);
          // Untouched around the block.
          expect(m[0]).toBe(7);
          expect(m[ld * (shape.columns + 2) - 1]).toBe(7);
        },
      ),
      { numRuns: 40, seed: 32 },
    );
  });

  it('uniform float32 and float64 equal the reference formula exactly (odd lengths, odd offsets)', async () => {
    for (const dtype of ['float32', 'float64'] as const) {
      for (const [offset, length] of [
        [0n, 1],
        [1n, 7],
        [3n, 1001],
        [2n ** 40n + 5n, 65_537],
      ] as const) {
        using generator = new Generator({ seed: 0xdeadbeefcafen, offset });
        using x = DeviceArray.empty(dtype, length);
        const got = await generator.uniform(x).toHost();
        expect(firstMismatch(got, referenceUniform(dtype, 0xdeadbeefcafen, offset, length))).toBe(
          -1,
        );
      }
    }
  });

  it('normal and log-normal are within tolerance of the float64 reference', async () => {
    // float32: logf, sincosf and sqrtf are within 2 ulp each; s <= 6.7, so 1e-5 absolute on a
    // standard normal covers them with room. float64: within 1e-12.
    const tolerance = { float32: 1e-5, float64: 1e-12 };
    const worst = { float32: 0, float64: 0 };
    for (const dtype of ['float32', 'float64'] as const) {
      for (const [offset, length] of [
        [0n, 1],
        [5n, 1001],
        [6n, 200_000],
      ] as const) {
        const z = referenceNormal(dtype, 77n, offset, length);
        using generator = new Generator({ seed: 77, offset });
        using x = DeviceArray.empty(dtype, length);
        const got = await generator.normal(x, { mean: 2, stddev: 3 }).toHost();
        const want = z.map((value) => 2 + 3 * value);
        expect(firstMismatch(got, want, (v) => 3 * tolerance[dtype] * (1 + Math.abs(v)))).toBe(-1);
        for (let i = 0; i < length; i++) {
          worst[dtype] = Math.max(worst[dtype], Math.abs(got[i]! - want[i]!) / 3);
        }
        using twin = new Generator({ seed: 77, offset });
        using y = DeviceArray.empty(dtype, length);
        const logNormal = await twin.logNormal(y, { mean: 0.5, stddev: 0.5 }).toHost();
        const wantLog = z.map((value) => Math.exp(0.5 + 0.5 * value));
        expect(firstMismatch(logNormal, wantLog, (v) => Math.abs(v) * 4 * tolerance[dtype])).toBe(
          -1,
        );
      }
    }
    console.log(
      `philox normal: largest difference from the float64 reference, float32 ${worst.float32.toExponential(2)}, float64 ${worst.float64.toExponential(2)}`,
    );
  });

  it('Poisson: mean and variance for small and large lambda, chi-square against the pmf', async () => {
    const n = 1_000_000;
    for (const lambda of [0.05, 1, 4, 9.99, 10, 30, 1000, 1e6]) {
      using generator = new Generator({ seed: 4242 });
      using counts = DeviceArray.empty('uint32', n);
      const values = await generator.poisson(counts, lambda).toHost();
      let sum = 0;
      for (const v of values) sum += v;
      const mean = sum / n;
      let m2 = 0;
      for (const v of values) m2 += (v - mean) ** 2;
      const variance = m2 / (n - 1);
      // 5 standard errors: sqrt(lambda / n) for the mean, sqrt((lambda + 2 lambda^2) / n) for the variance.
      expect(Math.abs(mean - lambda)).toBeLessThan(5 * Math.sqrt(lambda / n));
      expect(Math.abs(variance - lambda)).toBeLessThan(
        5 * Math.sqrt((lambda + 2 * lambda ** 2) / n),
      );
      if (lambda <= 30) {
        // Bins of expected count >= 5, the tail lumped into the last.
        const histogram = new Map<number, number>();
        for (const v of values) histogram.set(v, (histogram.get(v) ?? 0) + 1);
        let p = Math.exp(-lambda);
        let cumulative = 0;
        let chi2 = 0;
        let bins = 0;
        let k = 0;
        let lowTail = 0;
        let lowObserved = 0;
        for (; ; k++) {
          if (k > 0) p *= lambda / k;
          if (n * (1 - cumulative - p) < 5) break;
          cumulative += p;
          const observed = histogram.get(k) ?? 0;
          if (n * p < 5) {
            lowTail += p;
            lowObserved += observed;
            continue;
          }
          chi2 += (observed - n * p) ** 2 / (n * p);
          bins++;
        }
        let tailObserved = 0;
        for (const [value, count] of histogram) if (value >= k) tailObserved += count;
        const tail = 1 - cumulative;
        chi2 += (tailObserved - n * tail) ** 2 / (n * tail);
        bins++;
        if (lowTail > 0) {
          chi2 += (lowObserved - n * lowTail) ** 2 / (n * lowTail);
          bins++;
        }
        const df = bins - 1;
        // Wilson-Hilferty: the chi-square quantile of p = 1e-4 (z = 3.719).
        const critical = df * (1 - 2 / (9 * df) + 3.719 * Math.sqrt(2 / (9 * df))) ** 3;
        console.log(
          `philox poisson lambda ${lambda}: chi2 ${chi2.toFixed(1)} on ${df} df (critical ${critical.toFixed(1)}), mean ${mean.toFixed(4)}, variance ${variance.toFixed(4)}`,
        );
        expect(chi2).toBeLessThan(critical);
      } else {
        console.log(
          `philox poisson lambda ${lambda}: mean ${mean.toFixed(2)}, variance ${variance.toFixed(2)}`,
        );
      }
    }
    // Each element has its own subsequence: a 2-D block holds what a contiguous draw holds.
    using a = new Generator({ seed: 5, offset: 3 });
    using b = new Generator({ seed: 5, offset: 3 });
    using matrix = DeviceArray.zeros('uint32', [50, 4]);
    a.poisson(matrix.block(2, 1, 37, 3), 12.5);
    using flat = DeviceArray.empty('uint32', 37 * 3);
    const want = await b.poisson(flat, 12.5).toHost();
    expect(blockOf(await matrix.toHost(), 50, 2, 1, 37, 3)).toEqual(Array.from(want));
  });

  it('creating, seeding and filling do not wait for a 50 ms kernel on another stream', async () => {
    // The kernels are loaded once per context: done here first, as any earlier draw does.
    using warm = new Generator({ seed: 1 });
    using w = DeviceArray.empty('float32', 1024);
    warm.uniform(w);
    await synchronize();
    const busy = Stream.create();
    streams.push(busy);
    using x = DeviceArray.empty('float32', 1 << 20);
    launch(spin, { grid: 1, block: 1, stream: busy }, 50_000_000);
    const start = performance.now();
    const generator = new Generator({ seed: 123 });
    generator.setSeed(124);
    generator.uniform(x);
    generator.dispose();
    const elapsed = performance.now() - start;
    console.log(
      `philox: new Generator + setSeed + uniform fill of 2^20 during a 50 ms kernel on another stream: ${elapsed.toFixed(3)} ms on the host`,
    );
    expect(elapsed).toBeLessThan(2);
    expect(busy.query()).toBe(false);
    await synchronize();
    const values = await x.toHost();
    expect(
      firstMismatch(values.subarray(0, 4096), referenceUniform('float32', 124n, 0n, 4096)),
    ).toBe(-1);
    busy.synchronize();
  });

  it('64 tasks, each seeding its own generator, never hold the event loop 10 ms', async () => {
    for (const round of ['cold', 'warm']) {
      const watch = watchEventLoop();
      const start = performance.now();
      const results = await Promise.all(
        Array.from({ length: 64 }, (_, i) =>
          task(async () => {
            using generator = new Generator({ seed: 7000 + i });
            using x = DeviceArray.empty('float32', 4096);
            generator.uniform(x);
            return (await x.toHost())[0]!;
          }),
        ),
      );
      const burst = performance.now() - start;
      const largestGap = watch.stop();
      console.log(
        `philox burst of 64 tasks with their own generators (${round}): ${burst.toFixed(1)} ms, largest event-loop gap ${largestGap.toFixed(1)} ms`,
      );
      for (let i = 0; i < 64; i++) {
        expect(results[i]).toBe(referenceUniform('float32', BigInt(7000 + i), 0n, 1)[0]);
      }
      if (round === 'warm') expect(largestGap).toBeLessThan(10);
    }
  });

  it('two tasks sharing a generator draw what one stream issuing the same calls draws', async () => {
    using shared = new Generator({ seed: 99 });
    using a = DeviceArray.empty('float64', 3000);
    using b = DeviceArray.empty('float64', 3001);
    await Promise.all([
      task(() => {
        // Issued first (the task body runs at once), behind 20 ms of spinning on its stream.
        launch(spin, { grid: 1, block: 1 }, 20_000_000);
        shared.normal(a);
      }),
      task(() => {
        shared.normal(b);
      }),
    ]);
    using single = new Generator({ seed: 99 });
    using c = DeviceArray.empty('float64', 3000);
    using d = DeviceArray.empty('float64', 3001);
    const s = stream();
    withStream(s, () => {
      single.normal(c);
      single.normal(d);
    });
    expect(await a.toHost()).toEqual(await c.toHost());
    expect(await b.toHost()).toEqual(await d.toHost());
    expect(shared.offset).toBe(single.offset);
  });

  it('a draw inside a capture is refused with a CaptureError (replays would repeat its numbers); the generator and the stream go on', async () => {
    using generator = new Generator({ seed: 2024, offset: 10 });
    using x = DeviceArray.zeros('float32', 5000);
    let caught: unknown;
    const graph = await capture(() => {
      try {
        generator.normal(x);
      } catch (error) {
        caught = error;
      }
    });
    expect(caught).toBeInstanceOf(CaptureError);
    expect(String((caught as Error).message)).toMatch(/every replay would draw the same numbers/);
    expect(generator.offset).toBe(10n); // nothing drawn
    graph.dispose();
    generator.normal(x);
    await synchronize();
    const want = referenceNormal('float32', 2024n, 10n, 5000);
    expect(firstMismatch(await x.toHost(), want, (v) => 1e-5 * (1 + Math.abs(v)))).toBe(-1);
  });
});
