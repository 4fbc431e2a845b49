import { DeviceArray, type DType } from '@cuda-tasks/cudadrv';
import { describeGpu, rng } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { deviceArray, hostData } from '../test/reference.js';
import { topk } from './topk.js';

// topk against a CPU sort with the same total order (larger first, NaN first for the
// largest and last for the smallest, then the smaller index): values and indices exactly.

function before(largest: boolean, av: number, ai: number, bv: number, bi: number): boolean {
  const an = Number.isNaN(av);
  const bn = Number.isNaN(bv);
  if (an || bn) {
    if (an && bn) return ai < bi;
    return largest ? an : bn;
  }
  if (av !== bv) return largest ? av > bv : av < bv;
  return ai < bi;
}

/** How a case's values lie in storage order. */
type Order = 'random' | 'ascending' | 'descending' | 'constant';

/** Per segment, the k best (value, index) pairs; `at(segment, position)` reads the input. */
function reference(
  segments: number,
  length: number,
  k: number,
  largest: boolean,
  at: (segment: number, position: number) => number,
): { values: number[][]; indices: number[][] } {
  const values: number[][] = [];
  const indices: number[][] = [];
  for (let s = 0; s < segments; s++) {
    const order = Array.from({ length }, (_, q) => q);
    order.sort((a, b) =>
      before(largest, at(s, a), a, at(s, b), b)
        ? -1
        : before(largest, at(s, b), b, at(s, a), a)
          ? 1
          : 0,
    );
    values.push(order.slice(0, k).map((q) => at(s, q)));
    indices.push(order.slice(0, k));
  }
  return { values, indices };
}

const sameValues = (a: number[], b: number[]) =>
  a.length === b.length &&
  a.every((v, i) => Object.is(v, b[i]) || (Number.isNaN(v) && Number.isNaN(b[i]!)));

async function check(
  dtype: DType,
  shape: number[],
  k: number,
  options: {
    axis?: number;
    largest?: boolean;
    nan?: boolean;
    range?: number;
    /** The values in storage order: as drawn (default), sorted either way, or all one value. */
    order?: Order;
  },
  seed: number,
): Promise<void> {
  const n = shape.reduce((a, b) => a * b, 1);
  const range = options.range ?? 1;
  const { values } = hostData(dtype, n, seed, -range, range);
  if (options.order === 'ascending') values.sort();
  else if (options.order === 'descending') values.sort().reverse();
  else if (options.order === 'constant') values.fill(values[0]!);
  if (options.nan) {
    const next = rng(seed + 1);
    for (let i = 0; i < n; i++) if (next() < 0.002) values[i] = Number.NaN;
  }
  const x = deviceArray(dtype, values, shape);
  const rows = shape[0]!;
  const columns = shape.length === 2 ? shape[1]! : 1;
  const axis = options.axis ?? shape.length - 1;
  const largest = options.largest ?? true;
  const segments = axis === 0 ? columns : rows;
  const length = axis === 0 ? rows : columns;
  const at = (s: number, q: number) => values[axis === 0 ? q + s * rows : s + q * rows]!;
  const expected = reference(segments, length, k, largest, at);
  const result = topk(x, k, {
    ...(options.axis !== undefined ? { axis: options.axis } : {}),
    largest,
  });
  const outShape = shape.length === 1 ? [k] : axis === 0 ? [k, columns] : [rows, k];
  expect(result.values.shape).toEqual(outShape);
  expect(result.indices.shape).toEqual(outShape);
  expect(result.values.dtype).toBe(dtype);
  expect(result.indices.dtype).toBe('int32');
  const gotValues = Array.from((await result.values.toHost()) as ArrayLike<number>);
  const gotIndices = Array.from((await result.indices.toHost()) as ArrayLike<number>);
  // Column-major result: (segment s, rank r) at r + s * k for axis 0, s + r * rows for axis 1.
  const position = (s: number, r: number) => (axis === 0 ? r + s * k : s + r * rows);
  for (let s = 0; s < segments; s++) {
    const segmentValues = Array.from({ length: k }, (_, r) => gotValues[position(s, r)]!);
    const segmentIndices = Array.from({ length: k }, (_, r) => gotIndices[position(s, r)]!);
    expect(segmentIndices, `segment ${s} indices`).toEqual(expected.indices[s]);
    expect(sameValues(segmentValues, expected.values[s]!), `segment ${s} values`).toBe(true);
  }
  x.dispose();
  result.values.dispose();
  result.indices.dispose();
}

describeGpu('topk', () => {
  it('1,000,000 float32 scores, k = 100 (several passes)', async () => {
    await check('float32', [1_000_000], 100, {}, 1);
  });

  it.each([1, 7, 32, 33, 100, 1000, 1024])(
    'k = %i over 50,000 float32, largest and smallest',
    async (k) => {
      await check('float32', [50_000], k, {}, 10 + k);
      await check('float32', [50_000], k, { largest: false }, 20 + k);
    },
  );

  it('k equal to the length, and lengths just around a tile', async () => {
    await check('float32', [100], 100, {}, 2);
    for (const n of [31, 32, 33, 255, 256, 257])
      await check('float64', [n], Math.min(n, 20), {}, n);
  });

  it('float64 and int32 (many ties: the smaller index first)', async () => {
    await check('float64', [200_000], 50, {}, 3);
    await check('int32', [200_000], 300, { range: 1000 }, 4);
    await check('int32', [200_000], 300, { range: 1000, largest: false }, 5);
  });

  it('NaN counts as the largest value (first for largest, last for smallest)', async () => {
    await check('float32', [20_000], 64, { nan: true }, 6);
    await check('float32', [20_000], 64, { nan: true, largest: false }, 7);
  });

  it('a matrix along each axis', async () => {
    await check('float32', [3000, 5], 10, { axis: 0 }, 8); // per column
    await check('float32', [5, 3000], 10, { axis: 1 }, 9); // per row (the default axis)
    await check('float32', [5, 3000], 10, {}, 9);
    await check('float64', [64, 200], 200, {}, 10);
    await check('int32', [1000, 40], 1, { axis: 0, range: 50 }, 11);
  });

  it('random cases: dtypes, shapes, axes, k, both directions, ties, NaN and sorted inputs', async () => {
    const shapeArbitrary = fc.oneof(
      fc.integer({ min: 1, max: 20_000 }).map((n) => [n]),
      fc.tuple(fc.integer({ min: 1, max: 3000 }), fc.integer({ min: 1, max: 12 })),
      fc.tuple(fc.integer({ min: 1, max: 12 }), fc.integer({ min: 1, max: 3000 })),
    );
    const caseArbitrary = fc
      .record({
        dtype: fc.constantFrom<DType>('float32', 'float64', 'int32'),
        shape: shapeArbitrary,
        axisChoice: fc.integer({ min: 0, max: 1 }),
        kChoice: fc.double({ min: 0, max: 1, noNaN: true }),
        largest: fc.boolean(),
        nan: fc.boolean(),
        range: fc.constantFrom(1, 3, 1000),
        order: fc.constantFrom<Order>('random', 'random', 'ascending', 'descending', 'constant'),
        seed: fc.integer({ min: 1, max: 2 ** 30 }),
      })
      .map((c) => {
        const axis = c.shape.length === 1 ? 0 : c.axisChoice;
        const length = c.shape[axis]!;
        // Small k most often; up to 1024 where the axis is that long.
        const k = Math.max(1, Math.min(length, 1024, Math.round(c.kChoice ** 3 * 1100)));
        return { ...c, axis, k };
      });
    await fc.assert(
      fc.asyncProperty(caseArbitrary, async (c) => {
        await check(
          c.dtype,
          c.shape,
          c.k,
          {
            ...(c.shape.length === 2 ? { axis: c.axis } : {}),
            largest: c.largest,
            nan: c.nan && c.dtype !== 'int32',
            range: c.dtype === 'int32' ? c.range : c.range === 1000 ? 1 : c.range,
            order: c.order,
          },
          c.seed,
        );
      }),
      { seed: 36, numRuns: 60 },
    );
  });

  it('writes into given outputs', async () => {
    const x = deviceArray('float32', [5, 1, 4, 2, 3]);
    const values = DeviceArray.zeros('float32', [2]);
    const indices = DeviceArray.zeros('int32', [2]);
    const result = topk(x, 2, { values, indices });
    expect(result.values).toBe(values);
    expect(result.indices).toBe(indices);
    expect(Array.from((await values.toHost()) as Float32Array)).toEqual([5, 4]);
    expect(Array.from((await indices.toHost()) as Int32Array)).toEqual([0, 2]);
    for (const array of [x, values, indices]) array.dispose();
  });
});
