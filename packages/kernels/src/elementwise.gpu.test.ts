import { DeviceArray, type DType } from '@cuda-tasks/cudadrv';
import { synchronize } from '@cuda-tasks/task-runtime';
import { describeGpu } from '@cuda-tasks/testing';
import { expect, it } from 'vitest';
import {
  deviceArray,
  firstMismatch,
  mismatchReport,
  randomArray,
  roundTo,
} from '../test/reference.js';
import { elementwise } from './elementwise.js';
import {
  add,
  arange,
  axpby,
  type BinaryOperation,
  div,
  fill,
  map,
  maximum,
  minimum,
  mul,
  sub,
  type UnaryFunction,
} from './ops.js';

// Every result against a float64 CPU reference computed from the values the inputs hold.
// Tolerances: float64 4 ulp and float32 4 ulp for the math functions (CUDA's are within 2 ulp,
// the reference within 1); the half types compute in float and round once, so 1 ulp of the
// half type. IEEE operations (+ - * / in float32, and in float for the half types, which the
// double-rounding theorem makes exact) must match the rounded reference exactly.

const FLOATS: DType[] = ['float32', 'float64', 'float16', 'bfloat16'];
const ALL: DType[] = ['float32', 'float64', 'int32', 'float16', 'bfloat16'];

/** 1_000_003 elements: more than one grid-stride sweep and an odd tail. */
const N = 1_000_003;

const host = async (array: DeviceArray) =>
  Float64Array.from((await array.toHost()) as ArrayLike<number>);

describeGpu('elementwise kernels', () => {
  it('a user kernel with a type variable: z = sinf(x) * y over 1,000,003 floats, allocated and given outputs', async () => {
    const kernel = elementwise('x: float32, y: T -> z: T', 'z = sinf(x) * y');
    const x = randomArray('float32', [N], 1, -3, 3);
    const y = randomArray('float32', [N], 2);
    const expected = x.values.map((v, i) => Math.sin(v) * y.values[i]!);
    const z = kernel(x.array, y.array);
    expect(z).toBeInstanceOf(DeviceArray);
    expect(z.shape).toEqual([N]);
    expect(z.dtype).toBe('float32');
    const given = DeviceArray.full('float32', [N], Number.NaN);
    expect(kernel(x.array, y.array, given)).toBe(given);
    for (const result of [await host(z), await host(given)]) {
      const bad = firstMismatch(result, expected, 'float32', 4, 1e-30);
      expect(mismatchReport(bad, result, expected, { x: x.values, y: y.values })).toBe('ok');
    }
    for (const array of [x.array, y.array, z, given]) array.dispose();
  });

  it('scalars, the index i, the count n, and two outputs of different dtypes', async () => {
    const kernel = elementwise(
      'x: float64, a: float64 -> s: float64, index: int32',
      's = a * x + (double)n; index = (int)i * 3',
    );
    const n = 5_000_000;
    const x = randomArray('float64', [2500, 2000], 3);
    const [s, index] = kernel(x.array, 2) as DeviceArray[];
    expect(s!.shape).toEqual([2500, 2000]);
    expect(index!.dtype).toBe('int32');
    const sValues = await host(s!);
    const indexValues = await host(index!);
    const expectedS = x.values.map((v) => 2 * v + n);
    expect(
      mismatchReport(firstMismatch(sValues, expectedS, 'float64', 0), sValues, expectedS),
    ).toBe('ok');
    const expectedIndex = Float64Array.from({ length: n }, (_, i) => i * 3);
    expect(
      mismatchReport(
        firstMismatch(indexValues, expectedIndex, 'int32', 0),
        indexValues,
        expectedIndex,
      ),
    ).toBe('ok');
    for (const array of [x.array, s!, index!]) array.dispose();
  });

  it('an output the body reads (y += x), in place, on a stream given as an option', async () => {
    const accumulate = elementwise('x: T -> y: T', 'y += x');
    const x = randomArray('float32', [4097], 4);
    const y = randomArray('float32', [4097], 5);
    const expected = x.values.map((v, i) => Math.fround(v + y.values[i]!));
    const { stream } = await import('@cuda-tasks/task-runtime');
    expect(accumulate(x.array, y.array, { stream: stream() })).toBe(y.array);
    const got = await host(y.array);
    expect(mismatchReport(firstMismatch(got, expected, 'float32', 0), got, expected)).toBe('ok');
    x.array.dispose();
    y.array.dispose();
  });

  it('half types compute in float and round once; a half output the body reads is loaded first', async () => {
    const kernel = elementwise(
      'x: float16, s: float32 -> y: bfloat16, w: float16',
      'y = x * s; w += x',
    );
    const x = randomArray('float16', [10_001], 6, -4, 4);
    const w = randomArray('float16', [10_001], 7);
    const [y, wOut] = kernel(x.array, 0.3, undefined, w.array) as DeviceArray[];
    expect(wOut).toBe(w.array);
    expect(y!.dtype).toBe('bfloat16');
    const yValues = await host(y!);
    const wValues = await host(w.array);
    const s = Math.fround(0.3);
    const expectedY = x.values.map((v) => roundTo('bfloat16', Math.fround(v * s)));
    const expectedW = x.values.map((v, i) => roundTo('float16', v + w.values[i]!));
    expect(
      mismatchReport(firstMismatch(yValues, expectedY, 'bfloat16', 1), yValues, expectedY),
    ).toBe('ok');
    expect(
      mismatchReport(firstMismatch(wValues, expectedW, 'float16', 0), wValues, expectedW),
    ).toBe('ok');
    for (const array of [x.array, y!, w.array]) array.dispose();
  });

  it('in place: an output that is one of the inputs shares its pointer (any input, any output)', async () => {
    const difference = elementwise('x: T, y: T -> z: T', 'z = x - y');
    const a = randomArray('float64', [100_001], 8);
    const b = randomArray('float64', [100_001], 9);
    expect(difference(a.array, b.array, b.array)).toBe(b.array); // z is y
    const got = await host(b.array);
    const expected = a.values.map((v, i) => v - b.values[i]!);
    expect(mismatchReport(firstMismatch(got, expected, 'float64', 0), got, expected)).toBe('ok');
    const sinCos = elementwise('x: float32 -> s: float32, c: float32', 's = sinf(x); c = cosf(x)');
    const x = randomArray('float32', [70_001], 10);
    const [s, c] = sinCos(x.array, undefined, x.array) as DeviceArray[]; // c is x
    expect(c).toBe(x.array);
    const sines = await host(s!);
    const cosines = await host(c!);
    const expectedSines = x.values.map((v) => Math.sin(v));
    const expectedCosines = x.values.map((v) => Math.cos(v));
    expect(
      mismatchReport(
        firstMismatch(sines, expectedSines, 'float32', 4, 1e-30),
        sines,
        expectedSines,
      ),
    ).toBe('ok');
    expect(
      mismatchReport(
        firstMismatch(cosines, expectedCosines, 'float32', 4, 1e-30),
        cosines,
        expectedCosines,
      ),
    ).toBe('ok');
    for (const array of [a.array, b.array, s!]) array.dispose();
    x.array.dispose();
  });

  it('empty arrays give empty outputs without a launch', async () => {
    const kernel = elementwise('x: float32 -> y: float32', 'y = x + 1');
    const x = DeviceArray.empty('float32', [0, 3]);
    const y = kernel(x);
    expect(y.shape).toEqual([0, 3]);
    await synchronize();
    x.dispose();
    y.dispose();
  });
});

// Inputs per function: where it is defined and well conditioned.
const RANGES: Record<UnaryFunction, [number, number]> = {
  sin: [-6, 6],
  cos: [-6, 6],
  exp: [-8, 8],
  log: [0.001, 100],
  sqrt: [0, 100],
  abs: [-50, 50],
  tanh: [-5, 5],
};
const MATH: Record<UnaryFunction, (x: number) => number> = {
  sin: Math.sin,
  cos: Math.cos,
  exp: Math.exp,
  log: Math.log,
  sqrt: Math.sqrt,
  abs: Math.abs,
  tanh: Math.tanh,
};

describeGpu('map: every function and dtype', () => {
  const cases: [UnaryFunction, DType][] = [];
  for (const fn of Object.keys(MATH) as UnaryFunction[]) {
    for (const dtype of fn === 'abs' ? ALL : FLOATS) cases.push([fn, dtype]);
  }
  it.each(cases)('%s %s', async (fn, dtype) => {
    const [low, high] = RANGES[fn];
    const x = randomArray(dtype, [300_007], 11, low, high);
    const expected = x.values.map((v) => roundTo(dtype, MATH[fn](v)));
    const y = map(x.array, fn);
    expect(y.dtype).toBe(dtype);
    const got = await host(y);
    // Float math: 4 ulp (float32, float64); the half types round a float result: 1 ulp.
    const ulps =
      dtype === 'int32' || fn === 'abs' ? 0 : dtype === 'float16' || dtype === 'bfloat16' ? 1 : 4;
    const bad = firstMismatch(got, expected, dtype, ulps, dtype === 'float64' ? 1e-300 : 1e-30);
    expect(mismatchReport(bad, got, expected, { x: x.values })).toBe('ok');
    // In place: the same values.
    expect(map(x.array, fn, x.array)).toBe(x.array);
    const inPlace = await host(x.array);
    expect(mismatchReport(firstMismatch(inPlace, got, dtype, 0), inPlace, got)).toBe('ok');
    x.array.dispose();
    y.dispose();
  });
});

const BINARY: Record<BinaryOperation, typeof add> = { add, sub, mul, div, maximum, minimum };

function binaryReference(operation: BinaryOperation, dtype: DType, x: number, y: number): number {
  if (dtype === 'int32') {
    switch (operation) {
      case 'add':
        return (x + y) | 0;
      case 'sub':
        return (x - y) | 0;
      case 'mul':
        return Math.imul(x, y);
      case 'div':
        return Math.trunc(x / y);
      case 'maximum':
        return Math.max(x, y);
      default:
        return Math.min(x, y);
    }
  }
  switch (operation) {
    case 'add':
      return roundTo(dtype, x + y);
    case 'sub':
      return roundTo(dtype, x - y);
    case 'mul':
      return roundTo(dtype, x * y);
    case 'div':
      return roundTo(dtype, x / y);
    case 'maximum':
      return Number.isNaN(x) || Number.isNaN(y) ? Number.NaN : Math.max(x, y);
    default:
      return Number.isNaN(x) || Number.isNaN(y) ? Number.NaN : Math.min(x, y);
  }
}

describeGpu('binary operations: every operation and dtype, arrays and scalars', () => {
  const cases: [BinaryOperation, DType][] = [];
  for (const operation of Object.keys(BINARY) as BinaryOperation[]) {
    for (const dtype of ALL) cases.push([operation, dtype]);
  }
  it.each(cases)('%s %s', async (operation, dtype) => {
    const n = 100_003;
    const integer = dtype === 'int32';
    const x = randomArray(dtype, [n], 21, integer ? -70_000 : -10, integer ? 70_000 : 10);
    const yData = randomArray(dtype, [n], 22, integer ? -70_000 : -10, integer ? 70_000 : 10);
    if (operation === 'div' || !integer) {
      // No zero divisors; some NaN for the float maximum/minimum.
      for (let i = 0; i < n; i++) {
        if (yData.values[i] === 0) yData.values[i] = 1;
        if (!integer && i % 997 === 0) yData.values[i] = Number.NaN;
      }
    }
    if (!integer && operation !== 'maximum' && operation !== 'minimum') {
      for (let i = 0; i < n; i += 997) yData.values[i] = 3;
    }
    yData.array.dispose();
    const y = deviceArray(dtype, yData.values);
    const fn = BINARY[operation];
    const both = await host(fn(x.array, y));
    const expected = x.values.map((v, i) => binaryReference(operation, dtype, v, yData.values[i]!));
    expect(
      mismatchReport(firstMismatch(both, expected, dtype, 0), both, expected, {
        x: x.values,
        y: yData.values,
      }),
    ).toBe('ok');
    // A scalar on either side.
    const scalar = integer ? 7 : roundTo(dtype, 1.5);
    const right = await host(fn(x.array, scalar));
    const left = await host(fn(scalar, x.array));
    const expectedRight = x.values.map((v) => binaryReference(operation, dtype, v, scalar));
    const expectedLeft = x.values.map((v) => binaryReference(operation, dtype, scalar, v));
    expect(
      mismatchReport(firstMismatch(right, expectedRight, dtype, 0), right, expectedRight),
    ).toBe('ok');
    if (operation !== 'div') {
      // (x may hold zeros: no scalar / x.)
      expect(mismatchReport(firstMismatch(left, expectedLeft, dtype, 0), left, expectedLeft)).toBe(
        'ok',
      );
    }
    x.array.dispose();
    y.dispose();
  });

  it('int32 wraps on overflow', async () => {
    const x = deviceArray('int32', [2 ** 31 - 1, -(2 ** 31), 65536]);
    expect(Array.from(await x.toHost())).toEqual([2 ** 31 - 1, -(2 ** 31), 65536]);
    expect(Array.from((await add(x, 1).toHost()) as Int32Array)).toEqual([
      -(2 ** 31),
      -(2 ** 31) + 1,
      65537,
    ]);
    expect(Array.from((await mul(x, x).toHost()) as Int32Array)).toEqual([1, 0, 0]);
    expect(Array.from((await map(x, 'abs').toHost()) as Int32Array)).toEqual([
      2 ** 31 - 1,
      -(2 ** 31),
      65536,
    ]);
    x.dispose();
  });
});

describeGpu('axpby, fill, arange', () => {
  it.each(FLOATS)('axpby %s', async (dtype) => {
    const n = 200_001;
    const x = randomArray(dtype, [n], 31);
    const y = randomArray(dtype, [n], 32);
    const a = 1.25;
    const b = -0.75;
    const z = axpby(a, x.array, b, y.array);
    const got = await host(z);
    const expected = x.values.map((v, i) => roundTo(dtype, a * v + b * y.values[i]!));
    // Rounded once to the dtype, the products perhaps fused: within 2 ulp of the terms' size
    // (not of the result, which cancellation can make tiny).
    const size = x.values.map((v, i) => Math.abs(a * v) + Math.abs(b * y.values[i]!));
    const bad = firstMismatch(got, expected, dtype, 2, 1e-30, size);
    expect(mismatchReport(bad, got, expected)).toBe('ok');
    expect(axpby(a, x.array, b, y.array, y.array)).toBe(y.array);
    for (const array of [x.array, y.array, z]) array.dispose();
  });

  it.each(ALL)('fill %s', async (dtype) => {
    const value = dtype === 'int32' ? -123_456 : 0.1;
    const out = DeviceArray.zeros(dtype, [1000, 3]);
    expect(fill(out, value)).toBe(out);
    const got = await host(out);
    expect(got.every((v) => v === roundTo(dtype, value))).toBe(true);
    out.dispose();
  });

  it.each(ALL)('arange %s', async (dtype) => {
    const [start, stop, step] = dtype === 'int32' ? [-50, 100_000, 3] : [-2, 10, 0.001];
    const array = arange(start, stop, step, { dtype });
    const count = Math.ceil((stop - start) / step);
    expect(array.shape).toEqual([count]);
    const got = await host(array);
    const expected = Float64Array.from({ length: count }, (_, i) =>
      roundTo(dtype, start + i * step),
    );
    expect(mismatchReport(firstMismatch(got, expected, dtype, 0), got, expected)).toBe('ok');
    array.dispose();
  });

  it('arange defaults: int32 for integers, float32 otherwise; an empty range', async () => {
    const integers = arange(5);
    expect(integers.dtype).toBe('int32');
    expect(Array.from((await integers.toHost()) as Int32Array)).toEqual([0, 1, 2, 3, 4]);
    const fractions = arange(1, 0, -0.25);
    expect(fractions.dtype).toBe('float32');
    expect(Array.from((await fractions.toHost()) as Float32Array)).toEqual([1, 0.75, 0.5, 0.25]);
    const empty = arange(3, 3);
    expect(empty.shape).toEqual([0]);
    for (const array of [integers, fractions, empty]) array.dispose();
  });
});

describeGpu('repeated calls: each call of its own pattern', () => {
  it('one kernel called in place, into another output, on another dtype, with a number, and back', async () => {
    const shift = elementwise('x: T, s: T -> y: T', 'y = x * 2 + s');
    const n = 4099;
    const a = randomArray('float32', [n], 41);
    const b = randomArray('float32', [n], 42);
    const d = randomArray('float64', [n], 43);
    const out = DeviceArray.empty('float32', [n]);
    // Every call's result against the reference of the values its inputs hold then.
    const expectValues = async (array: DeviceArray, expected: Float64Array, dtype: DType) => {
      const got = await host(array);
      expect(mismatchReport(firstMismatch(got, expected, dtype, 0), got, expected)).toBe('ok');
    };
    const twice = (x: Float64Array, s: ArrayLike<number> | number, dtype: DType) =>
      x.map((v, i) => roundTo(dtype, roundTo(dtype, v * 2) + (typeof s === 'number' ? s : s[i]!)));

    const other = DeviceArray.empty('float32', [n]);
    shift(a.array, b.array, out); // into another output
    shift(b.array, a.array, other); // the same pattern again, other arrays
    await expectValues(out, twice(a.values, b.values, 'float32'), 'float32');
    await expectValues(other, twice(b.values, a.values, 'float32'), 'float32');
    shift(a.array, b.array, a.array); // in place
    const inPlace = twice(a.values, b.values, 'float32');
    await expectValues(a.array, inPlace, 'float32');
    shift(a.array, 0.5, a.array); // a number, in place
    const withNumber = twice(inPlace, 0.5, 'float32');
    await expectValues(a.array, withNumber, 'float32');
    shift(d.array, 0.25, d.array); // another dtype
    await expectValues(d.array, twice(d.values, 0.25, 'float64'), 'float64');
    shift(b.array, a.array, out); // back to separate arrays, the roles swapped
    await expectValues(out, twice(b.values, withNumber, 'float32'), 'float32');
    for (const array of [a.array, b.array, d.array, out, other]) array.dispose();
  });
});
