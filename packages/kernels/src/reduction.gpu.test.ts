import { DeviceArray, type DType } from '@cuda-tasks/cudadrv';
import { describeGpu } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import { deviceArray, randomArray, roundTo } from '../test/reference.js';
import { reduction } from './reduction.js';
import { argmax, argmin, max, mean, min, type ReductionOperation, sum } from './reductions.js';

// Reductions against a float64 CPU reference (sums compensated, so the reference's own error
// is negligible). Stated tolerances, per output element over the n elements it combines:
//   float64 sum:  |error| <= n * 2^-52 * sum|x| + 2^-52 * |sum|  (any summation order meets it)
//   float32 sum:  the same plus one float32 rounding of the result: 2^-23 * |sum|
//   mean:         the sum's bound divided by n
//   int32 sum:    exact, wrapped to int32; int32 mean: exact sum / n in float64
//   max, min, argmax, argmin: exact (the first index of the extreme; NaN wins)

const EPS64 = 2 ** -52;
const EPS32 = 2 ** -23;

/** Neumaier's compensated sum: the float64 reference. */
function compensatedSum(values: ArrayLike<number>, indices: readonly number[]): number {
  let total = 0;
  let compensation = 0;
  for (const i of indices) {
    const x = values[i]!;
    const t = total + x;
    compensation += Math.abs(total) >= Math.abs(x) ? total - t + x : x - t + total;
    total = t;
  }
  return total + compensation;
}

/** Per output element, the indices of the input elements it combines (column-major). */
function segmentsOf(shape: number[], axis: number | undefined): number[][] {
  const rows = shape[0]!;
  const columns = shape.length === 2 ? shape[1]! : 1;
  const n = rows * columns;
  if (axis === undefined || shape.length === 1) return [Array.from({ length: n }, (_, i) => i)];
  if (axis === 0) {
    return Array.from({ length: columns }, (_, c) =>
      Array.from({ length: rows }, (_, r) => r + c * rows),
    );
  }
  return Array.from({ length: rows }, (_, r) =>
    Array.from({ length: columns }, (_, c) => r + c * rows),
  );
}

function expectedOf(
  operation: ReductionOperation,
  dtype: DType,
  values: Float64Array,
  indices: number[],
) {
  switch (operation) {
    case 'sum':
    case 'mean': {
      if (dtype === 'int32') {
        const exact = indices.reduce((total, i) => total + values[i]!, 0);
        return operation === 'sum'
          ? { value: Number(BigInt.asIntN(32, BigInt(exact))), tolerance: 0 }
          : { value: exact / indices.length, tolerance: 0 };
      }
      const total = compensatedSum(values, indices);
      const absolute = indices.reduce((t, i) => t + Math.abs(values[i]!), 0);
      const n = indices.length;
      let tolerance = n * EPS64 * absolute + EPS64 * Math.abs(total);
      if (dtype === 'float32') tolerance += EPS32 * Math.abs(total);
      return operation === 'sum'
        ? { value: roundTo(dtype, total), tolerance }
        : { value: roundTo(dtype, total / n), tolerance: tolerance / n };
    }
    default: {
      let best = -1;
      for (const i of indices) {
        const v = values[i]!;
        if (best < 0) {
          best = i;
          continue;
        }
        const b = values[best]!;
        if (Number.isNaN(b)) continue;
        if (Number.isNaN(v)) best = i;
        else if (operation === 'max' || operation === 'argmax' ? v > b : v < b) best = i;
      }
      const position = indices.indexOf(best);
      return operation.startsWith('arg')
        ? { value: position, tolerance: 0 }
        : { value: values[best]!, tolerance: 0 };
    }
  }
}

const OPERATIONS = { sum, mean, max, min, argmax, argmin } as const;

async function check(
  operation: ReductionOperation,
  dtype: DType,
  shape: number[],
  axis: number | undefined,
  seed: number,
  nanEvery = 0,
): Promise<void> {
  const integer = dtype === 'int32';
  const { values } = randomArray(dtype, shape, seed, integer ? -1000 : -1, integer ? 1000 : 1);
  if (nanEvery > 0)
    for (let i = nanEvery >> 1; i < values.length; i += nanEvery) values[i] = Number.NaN;
  const x = deviceArray(dtype, values, shape);
  const result = OPERATIONS[operation](x, axis === undefined ? {} : { axis });
  const segments = segmentsOf(shape, axis);
  expect(result.shape).toEqual([segments.length]);
  const got = Array.from((await result.toHost()) as ArrayLike<number>);
  for (let s = 0; s < segments.length; s++) {
    const { value, tolerance } = expectedOf(operation, dtype, values, segments[s]!);
    const have = got[s]!;
    const ok = Number.isNaN(value) ? Number.isNaN(have) : Math.abs(have - value) <= tolerance;
    expect(
      ok,
      `${operation} ${dtype} [${shape}] axis ${axis} segment ${s}: got ${have}, expected ${value} +- ${tolerance}`,
    ).toBe(true);
  }
  x.dispose();
  result.dispose();
}

describeGpu(
  'ready-made reductions: every operation and dtype, all elements and along each axis',
  () => {
    const cases: [ReductionOperation, DType][] = [];
    for (const operation of Object.keys(OPERATIONS) as ReductionOperation[]) {
      for (const dtype of ['float32', 'float64', 'int32'] as DType[])
        cases.push([operation, dtype]);
    }
    it.each(cases)('%s %s', async (operation, dtype) => {
      await check(operation, dtype, [3_000_017], undefined, 1); // full, several parts
      await check(operation, dtype, [1000], undefined, 2); // one block
      await check(operation, dtype, [1300, 700], undefined, 3); // full over a matrix
      await check(operation, dtype, [1300, 700], 0, 4); // per column (a block each)
      await check(operation, dtype, [1300, 700], 1, 5); // per row (a thread each)
      await check(operation, dtype, [5, 200_000], 0, 6); // short columns (a thread each)
      await check(operation, dtype, [5, 200_000], 1, 7); // few long rows (split into parts)
      await check(operation, dtype, [200_000, 3], 0, 8); // few long columns (split into parts)
      await check(operation, dtype, [1, 1], 1, 9);
    });

    it('NaN propagates through max and min; argmax and argmin give the first NaN', async () => {
      for (const operation of ['max', 'min', 'argmax', 'argmin'] as ReductionOperation[]) {
        await check(operation, 'float32', [100_003], undefined, 10, 40_000);
        await check(operation, 'float64', [300, 200], 0, 11, 777);
        await check(operation, 'float32', [300, 200], 1, 12, 777);
      }
    });

    it('ties: argmax and argmin give the first occurrence', async () => {
      const x = deviceArray('int32', [3, 9, 1, 9, 1, 9]);
      expect(Array.from((await argmax(x).toHost()) as Int32Array)).toEqual([1]);
      expect(Array.from((await argmin(x).toHost()) as Int32Array)).toEqual([2]);
      x.dispose();
    });

    it('int32 sums wrap to int32; int32 means are float64', async () => {
      const x = deviceArray('int32', [2 ** 31 - 1, 2 ** 31 - 1, 5]);
      expect(Array.from((await sum(x).toHost()) as Int32Array)).toEqual([
        Number(BigInt.asIntN(32, BigInt(2 ** 32 + 3))),
      ]);
      const average = mean(x);
      expect(average.dtype).toBe('float64');
      expect(Array.from((await average.toHost()) as Float64Array)).toEqual([(2 ** 32 + 3) / 3]);
      x.dispose();
    });

    it('empty inputs: sum 0, mean NaN; per-column sums of zero rows', async () => {
      const empty = DeviceArray.empty('float32', [0]);
      expect(Array.from((await sum(empty).toHost()) as Float32Array)).toEqual([0]);
      expect(Number.isNaN(((await mean(empty).toHost()) as Float32Array)[0]!)).toBe(true);
      const noRows = DeviceArray.empty('float64', [0, 4]);
      expect(Array.from((await sum(noRows, { axis: 0 }).toHost()) as Float64Array)).toEqual([
        0, 0, 0, 0,
      ]);
      empty.dispose();
      noRows.dispose();
    });

    it('deterministic: the same bits on every run (10,000,019 float32, and per row)', async () => {
      const { array } = randomArray('float32', [10_000_019], 13);
      const runs = await Promise.all([0, 1, 2].map(() => sum(array).toHost()));
      expect(new Set(runs.map((r) => r[0])).size).toBe(1);
      const matrix = array.slice(0, 10_000_000).reshape([1000, 10_000]);
      const rows = await Promise.all([0, 1].map(() => sum(matrix, { axis: 1 }).toHost()));
      expect(Buffer.from(rows[0]!.buffer).equals(Buffer.from(rows[1]!.buffer))).toBe(true);
      array.dispose();
    });

    it('writes into a given output', async () => {
      const x = deviceArray('float64', [1, 2, 3, 4, 5, 6], [2, 3]);
      const out = DeviceArray.zeros('float64', [3]);
      expect(sum(x, { axis: 0, out })).toBe(out);
      expect(Array.from((await out.toHost()) as Float64Array)).toEqual([3, 7, 11]);
      x.dispose();
      out.dispose();
    });
  },
);

/**
 * `operation` over the view `start..start + length` of a larger array against the reference
 * of the view's values: the vectorized full reduction's head (elements before a 16-byte
 * boundary), vectors and tail; indices are the view's own.
 */
async function checkView(
  operation: ReductionOperation,
  dtype: DType,
  start: number,
  length: number,
  seed: number,
): Promise<void> {
  const integer = dtype === 'int32';
  const whole = randomArray(
    dtype,
    [start + length + 5],
    seed,
    integer ? -1000 : -1,
    integer ? 1000 : 1,
  );
  const view = whole.array.slice(start, length);
  const values = whole.values.subarray(start, start + length);
  const result = OPERATIONS[operation](view);
  const have = ((await result.toHost()) as ArrayLike<number>)[0]!;
  const indices = Array.from({ length }, (_, i) => i);
  const { value, tolerance } = expectedOf(operation, dtype, values, indices);
  const ok = Number.isNaN(value) ? Number.isNaN(have) : Math.abs(have - value) <= tolerance;
  expect(
    ok,
    `${operation} ${dtype} elements ${start}..${start + length}: got ${have}, expected ${value} +- ${tolerance}`,
  ).toBe(true);
  whole.array.dispose();
  result.dispose();
}

describeGpu('full reductions read in 16-byte vectors: head, vectors and tail', () => {
  // Starts 0..3 put the view at every offset from a 16-byte boundary (float64: 0 and 8 bytes);
  // lengths below, at and above multiples of the vector width and of a block's share, tiny
  // ones (all head or tail), one block's worth, and several blocks' (a partial each).
  const lengths = [1, 2, 3, 4, 5, 7, 8, 9, 31, 1023, 1024, 1025, 4099, 65_537, 1_000_003];
  const cases: [ReductionOperation, DType][] = [];
  for (const operation of Object.keys(OPERATIONS) as ReductionOperation[]) {
    for (const dtype of ['float32', 'float64', 'int32'] as DType[]) cases.push([operation, dtype]);
  }
  it.each(cases)('%s %s at every start and length', async (operation, dtype) => {
    let seed = 100;
    for (const start of [0, 1, 2, 3]) {
      for (const length of lengths) await checkView(operation, dtype, start, length, seed++);
    }
  });

  it('argmax and argmin find an extreme in the head, in a vector and in the tail', async () => {
    const n = 4096 + 6;
    for (const start of [1, 2, 3]) {
      for (const position of [0, 1, 2, 2049, n - 1, n - 2]) {
        const host = new Float32Array(start + n).fill(0.5);
        host[start + position] = 2;
        host[start + ((position + 7) % n)] = -2;
        const whole = DeviceArray.fromHost(host);
        const view = whole.slice(start, n);
        expect(Array.from((await argmax(view).toHost()) as Int32Array)).toEqual([position]);
        expect(Array.from((await argmin(view).toHost()) as Int32Array)).toEqual([
          (position + 7) % n,
        ]);
        whole.dispose();
      }
    }
  });

  it('deterministic on an unaligned view: the same bits on every run', async () => {
    const { array } = randomArray('float32', [10_000_021], 31);
    const view = array.slice(3, 10_000_017);
    const runs = await Promise.all([0, 1, 2].map(() => sum(view).toHost()));
    expect(new Set(runs.map((r) => r[0])).size).toBe(1);
    array.dispose();
  });
});

describeGpu('user reductions', () => {
  it('an L2 norm with post, over all elements and along both axes', async () => {
    const l2norm = reduction('x: T -> y: T', {
      map: 'x * x',
      reduce: 'a + b',
      identity: '0',
      post: 'y = sqrt(a)',
    });
    const { array, values } = randomArray('float64', [400, 300], 14);
    for (const axis of [undefined, 0, 1]) {
      const result = l2norm(array, axis === undefined ? {} : { axis });
      const got = (await result.toHost()) as Float64Array;
      const segments = segmentsOf([400, 300], axis);
      segments.forEach((indices, s) => {
        const expected = Math.sqrt(indices.reduce((t, i) => t + values[i]! ** 2, 0));
        expect(Math.abs(got[s]! - expected)).toBeLessThanOrEqual(1e-13 * expected);
      });
      result.dispose();
    }
    array.dispose();
  });

  it('a weighted dot product of two arrays and a scalar, accumulated in float64', async () => {
    const dot = reduction('x: float32, w: float32, s: float32 -> y: float32', {
      map: 'x * w * s',
      reduce: 'a + b',
      identity: '0',
      accumulate: 'float64',
    });
    const x = randomArray('float32', [1_000_003], 15);
    const w = randomArray('float32', [1_000_003], 16);
    const got = ((await dot(x.array, w.array, 0.5).toHost()) as Float32Array)[0]!;
    const products = x.values.map((v, i) => Math.fround(Math.fround(v * w.values[i]!) * 0.5));
    const expected = compensatedSum(
      products,
      Array.from({ length: products.length }, (_, i) => i),
    );
    const absolute = products.reduce((t, v) => t + Math.abs(v), 0);
    expect(Math.abs(got - expected)).toBeLessThanOrEqual(
      EPS32 * Math.abs(expected) + 1e6 * EPS64 * absolute,
    );
    x.array.dispose();
    w.array.dispose();
  });

  it('half inputs computed in float, with the count n in post (a mean)', async () => {
    const average = reduction('x: float16 -> y: float32', {
      map: 'x',
      reduce: 'a + b',
      identity: '0',
      post: 'y = a / n',
      accumulate: 'float64',
    });
    const { array, values } = randomArray('float16', [50_001], 17, 0, 4);
    const got = ((await average(array).toHost()) as Float32Array)[0]!;
    const expected = values.reduce((t, v) => t + v, 0) / values.length;
    expect(Math.abs(got - expected)).toBeLessThanOrEqual(EPS32 * expected * 2);
    array.dispose();
  });
});
