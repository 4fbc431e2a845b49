import { DeviceArray, type DType } from '@cuda-tasks/cudadrv';
import { kernelCacheStatistics } from '@cuda-tasks/task-runtime';
import { describeGpu, rng } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import {
  type ElementwiseCase,
  elementwiseBody,
  elementwiseCaseArbitrary,
  evaluate,
  fold,
  MAX_VALUE,
  type ReductionCase,
  reductionCaseArbitrary,
  reductionDefinition,
  signatureOf,
} from '../test/expressions.js';
import { elementwise } from './elementwise.js';
import { arange } from './ops.js';
import { reduction } from './reduction.js';

// User names that met generated ones, on the device: the issue's exact cases, then random
// signatures (tricky names, every dtype, scalars) against a CPU evaluation of the same
// expression. Every value is a small non-negative integer and every result at most 127 (sums
// accumulate in float64 into a wide dtype), exact in every dtype: results must match exactly.

const SEED = 20_260_131;
/** Random kernels of each kind, and calls of each (new data and lengths, the same variant). */
const ELEMENTWISE_KERNELS = 60;
const REDUCTION_KERNELS = 30;
const CALLS = 4;

const host = async (array: DeviceArray) =>
  Array.from((await array.toHost()) as ArrayLike<number>, Number);

/** Where `got` first differs from `expected`, or 'ok'. */
function firstDifference(got: readonly number[], expected: readonly number[]): string {
  if (got.length !== expected.length) return `length ${got.length}, expected ${expected.length}`;
  const k = got.findIndex((value, j) => value !== expected[j]);
  return k < 0 ? 'ok' : `at ${k}: got ${got[k]}, expected ${expected[k]}`;
}

describeGpu('user names never meet generated names (issue 31)', () => {
  it("elementwise 'x: float32, x_1: float32 -> y: float32', 'y = x + x_1' with arange(0, 2**20) and 100", async () => {
    const kernel = elementwise('x: float32, x_1: float32 -> y: float32', 'y = x + x_1');
    const x = arange(0, 2 ** 20, 1, { dtype: 'float32' });
    const y = kernel(x, 100);
    const expected = Array.from({ length: 2 ** 20 }, (_, k) => k + 100);
    expect(firstDifference(await host(y), expected)).toBe('ok');
    // Two arrays x and x_1 (did not compile).
    const x1 = arange(0, 2 ** 20, 1, { dtype: 'float32' });
    const both = kernel(x, x1);
    expect(
      firstDifference(
        await host(both),
        expected.map((_, k) => 2 * k),
      ),
    ).toBe('ok');
    for (const array of [x, y, x1, both]) array.dispose();
  });

  it('elementwise scalars named i1, i2, i3 get their values, not the element index', async () => {
    const x = arange(0, 100_003, 1, { dtype: 'float64' });
    for (const [k, name] of ['i1', 'i2', 'i3'].entries()) {
      const kernel = elementwise(`x: float64, ${name}: float64 -> y: float64`, `y = x + ${name}`);
      const y = kernel(x, 1000 * (k + 1));
      const expected = Array.from({ length: 100_003 }, (_, j) => j + 1000 * (k + 1));
      expect(firstDifference(await host(y), expected)).toBe('ok');
      y.dispose();
    }
    // An output named stride, a kernel named body, an input named body.
    const named = elementwise('x: float64, body: float64 -> stride: float64', 'stride = x * body', {
      name: 'body',
    });
    const s = named(x, 3);
    expect(
      firstDifference(
        await host(s),
        Array.from({ length: 100_003 }, (_, j) => 3 * j),
      ),
    ).toBe('ok');
    s.dispose();
    x.dispose();
  });

  it('reduction inputs named y, partials, vectors, block_reduce; a and b as inputs', async () => {
    const length = 300_001;
    const x = arange(0, length, 1, { dtype: 'float64' });
    const total = (length * (length - 1)) / 2;
    for (const name of ['y', 'partials', 'vectors', 'block_reduce']) {
      const sum = reduction(`${name}: float64, s: float64 -> out: float64`, {
        map: `${name} * s`,
        reduce: 'a + b',
        identity: '0',
        post: 'out = a',
      });
      const result = sum(x, 2);
      expect([name, (await host(result))[0]]).toEqual([name, 2 * total]);
      result.dispose();
    }
    const dot = reduction('a: float64, b: float64 -> y: float64', {
      map: 'a * b',
      reduce: 'a + b',
      identity: '0',
    });
    const ones = DeviceArray.full('float64', [length], 1);
    const result = dot(x, ones);
    expect((await host(result))[0]).toBe(total);
    for (const array of [x, ones, result]) array.dispose();
  });

  it(`random signatures: ${ELEMENTWISE_KERNELS} element-wise and ${REDUCTION_KERNELS} reduction kernels, ${CALLS} calls each, against the CPU`, async () => {
    const started = performance.now();
    const before = kernelCacheStatistics();
    let cases = 0;
    let firstCalls = 0;
    const draw = fc.array(fc.integer({ min: 0, max: 2 ** 31 - 1 }), {
      minLength: CALLS,
      maxLength: CALLS,
    });

    await fc.assert(
      fc.asyncProperty(elementwiseCaseArbitrary, draw, async (c, seeds) => {
        const kernel = elementwise(signatureOf(c.inputs, c.outputs), elementwiseBody(c));
        for (const [call, seed] of seeds.entries()) {
          const t0 = performance.now();
          const problem = await runElementwise(kernel, c, seed);
          if (call === 0) firstCalls += performance.now() - t0;
          cases++;
          expect(problem).toBe('ok');
        }
      }),
      { seed: SEED, numRuns: ELEMENTWISE_KERNELS, endOnFailure: true },
    );
    await fc.assert(
      fc.asyncProperty(reductionCaseArbitrary, draw, async (c, seeds) => {
        const kernel = reduction(signatureOf(c.inputs, [c.output]), reductionDefinition(c));
        for (const [call, seed] of seeds.entries()) {
          const t0 = performance.now();
          const problem = await runReduction(kernel, c, seed);
          if (call === 0) firstCalls += performance.now() - t0;
          cases++;
          expect(problem).toBe('ok');
        }
      }),
      { seed: SEED, numRuns: REDUCTION_KERNELS, endOnFailure: true },
    );
    const after = kernelCacheStatistics();
    const compiled = after.compiled - before.compiled;
    const kernels = ELEMENTWISE_KERNELS + REDUCTION_KERNELS;
    console.log(
      `[names] seed ${SEED}: ${cases} random cases (${kernels} kernels x ${CALLS} calls) passed in ${((performance.now() - started) / 1000).toFixed(1)} s; ` +
        `NVRTC compiles ${compiled}, disk-cache hits ${after.diskHits - before.diskHits}; ` +
        `first calls (compile or load + run) ${(firstCalls / 1000).toFixed(1)} s, ${(firstCalls / kernels).toFixed(0)} ms per kernel`,
    );
    expect(cases).toBe(kernels * CALLS);
  });
});

/** Values 0..MAX_VALUE for each input (arrays of `length`, or one number), from `seed`. */
function inputValues(
  inputs: ElementwiseCase['inputs'],
  length: number,
  seed: number,
): (number | number[])[] {
  const next = rng(seed);
  const value = () => Math.floor(next() * (MAX_VALUE + 1));
  return inputs.map((input) => (input.scalar ? value() : Array.from({ length }, () => value())));
}

function toDevice(values: (number | number[])[], dtypes: readonly DType[], shape: number[]) {
  return values.map((v, k) =>
    typeof v === 'number' ? v : DeviceArray.fromHost(v, shape, { dtype: dtypes[k]! }),
  );
}

async function runElementwise(
  kernel: ReturnType<typeof elementwise>,
  c: ElementwiseCase,
  seed: number,
): Promise<string> {
  const length = 1 + (seed % 3000);
  const values = inputValues(c.inputs, length, seed);
  const args = toDevice(
    values,
    c.inputs.map((input) => input.dtype),
    [length],
  );
  const result = kernel(...args);
  const outputs = Array.isArray(result) ? result : [result];
  const at = (k: number, j: number) => {
    const v = values[k]!;
    return typeof v === 'number' ? v : v[j]!;
  };
  let problem = 'ok';
  for (const [o, output] of outputs.entries()) {
    const expected = Array.from({ length }, (_, j) =>
      evaluate(c.expressions[o]!, (k) => at(k, j), j),
    );
    const difference = firstDifference(await host(output), expected);
    if (difference !== 'ok' && problem === 'ok')
      problem = `output ${c.outputs[o]!.name} (length ${length}): ${difference}`;
  }
  for (const array of [...args, ...outputs]) if (typeof array !== 'number') array.dispose();
  return problem;
}

async function runReduction(
  kernel: ReturnType<typeof reduction>,
  c: ReductionCase,
  seed: number,
): Promise<string> {
  // A vector (up to 20,000 elements: several parts, the vector path where it applies) or a
  // matrix along axis 0 or 1 (short and long columns).
  const shape = seed % 3 === 0 ? [1 + (seed % 20_000)] : [1 + (seed % 97), 1 + ((seed >> 8) % 300)];
  const axis = shape.length === 1 ? undefined : (((seed >> 4) & 1) as 0 | 1);
  const rows = shape[0]!;
  const columns = shape[1] ?? 1;
  const values = inputValues(c.inputs, rows * columns, seed);
  const args = toDevice(
    values,
    c.inputs.map((input) => input.dtype),
    shape,
  );
  const result = kernel(...args, ...(axis === undefined ? [] : [{ axis }]));
  const contribution = (flat: number, i: number) =>
    evaluate(
      c.map,
      (k) => {
        const v = values[k]!;
        return typeof v === 'number' ? v : v[flat]!;
      },
      i,
    );
  let expected: number[];
  if (axis === undefined) {
    expected = [
      fold(
        c,
        Array.from({ length: rows * columns }, (_, k) => contribution(k, k)),
      ),
    ];
  } else if (axis === 0) {
    expected = Array.from({ length: columns }, (_, column) =>
      fold(
        c,
        Array.from({ length: rows }, (_, row) => contribution(row + column * rows, row)),
      ),
    );
  } else {
    expected = Array.from({ length: rows }, (_, row) =>
      fold(
        c,
        Array.from({ length: columns }, (_, column) => contribution(row + column * rows, column)),
      ),
    );
  }
  const difference = firstDifference(await host(result), expected);
  for (const array of [...args, result]) if (typeof array !== 'number') array.dispose();
  return difference === 'ok'
    ? 'ok'
    : `shape [${shape.join(', ')}]${axis === undefined ? '' : ` axis ${axis}`}: ${difference}`;
}
