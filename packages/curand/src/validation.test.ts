import { CudaArgumentError, DisposedError, type Stream } from '@cuda-tasks/cudadrv';
import { hostOnlyArray, STAND_IN_CONTEXT, standInStream, thrown } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { defaultGenerator } from './index.js';
import {
  type ArrayLayout,
  checkLambda,
  checkNormalParameters,
  checkShape,
  checkTarget,
  FLOATING_DTYPES,
  OUTPUT_ALIGNMENT,
  orderingOf,
  planGeneration,
  rngTypeOf,
  toUint64,
  UINT32_DTYPES,
  UINT64_MAX,
} from './validation.js';

function layout(overrides: Partial<ArrayLayout> = {}): ArrayLayout {
  return {
    dtype: 'float32',
    shape: [8],
    strides: [1],
    length: 8,
    contiguous: true,
    disposed: false,
    ...overrides,
  };
}

describe('toUint64', () => {
  it('accepts non-negative safe integers and BigInts below 2^64', () => {
    expect(toUint64(0, 'seed')).toBe(0n);
    expect(toUint64(42, 'seed')).toBe(42n);
    expect(toUint64(Number.MAX_SAFE_INTEGER, 'seed')).toBe(2n ** 53n - 1n);
    expect(toUint64(UINT64_MAX, 'seed')).toBe(2n ** 64n - 1n);
  });

  it('rejects negatives, fractions, unsafe numbers, out-of-range BigInts and other types', () => {
    for (const bad of [
      -1,
      1.5,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      2 ** 53,
      -1n,
      2n ** 64n,
      '1',
      null,
      undefined,
    ]) {
      expect(() => toUint64(bad, 'seed')).toThrow(CudaArgumentError);
    }
    expect(() => toUint64(-1, 'Generator: seed')).toThrow(/Generator: seed/);
  });
});

describe('generator kinds and orderings', () => {
  it('maps kinds to curand.h rng types', () => {
    expect(rngTypeOf('curand-philox')).toBe(161);
    // This package's counter-based Philox is not cuRAND's.
    expect(() => rngTypeOf('philox')).toThrow(/got philox/);
    expect(rngTypeOf('xorwow')).toBe(101);
    expect(rngTypeOf('mrg32k3a')).toBe(121);
  });

  it('rejects unknown kinds, including inherited property names', () => {
    for (const bad of ['sobol32', 'PHILOX', 'toString', '__proto__', 161, undefined]) {
      expect(() => rngTypeOf(bad)).toThrow(CudaArgumentError);
    }
  });

  it('maps orderings to curand.h values', () => {
    expect(orderingOf('best')).toBe(100);
    expect(orderingOf('default')).toBe(101);
    expect(orderingOf('seeded')).toBe(102);
    expect(orderingOf('legacy')).toBe(103);
    expect(orderingOf('dynamic')).toBe(104);
    expect(() => orderingOf('quasi')).toThrow(CudaArgumentError);
    expect(() => orderingOf('hasOwnProperty')).toThrow(CudaArgumentError);
  });
});

describe('checkTarget', () => {
  it('accepts contiguous arrays of an allowed dtype', () => {
    expect(checkTarget('op', layout(), FLOATING_DTYPES)).toBe('contiguous');
    expect(checkTarget('op', layout({ dtype: 'float64' }), FLOATING_DTYPES)).toBe('contiguous');
    expect(checkTarget('op', layout({ dtype: 'uint32' }), UINT32_DTYPES)).toBe('contiguous');
  });

  it('rejects other dtypes, naming the operation and the allowed ones', () => {
    for (const dtype of ['int32', 'uint32', 'int8', 'uint8', 'float16', 'bfloat16'] as const) {
      expect(() => checkTarget('Generator.normal', layout({ dtype }), FLOATING_DTYPES)).toThrow(
        /Generator\.normal: needs a float32 or float64 array/,
      );
    }
    for (const dtype of ['float32', 'float64', 'int32'] as const) {
      expect(() => checkTarget('Generator.poisson', layout({ dtype }), UINT32_DTYPES)).toThrow(
        CudaArgumentError,
      );
    }
  });

  it('rejects disposed arrays with DisposedError, before the dtype check', () => {
    expect(() =>
      checkTarget('op', layout({ disposed: true, dtype: 'int8' }), FLOATING_DTYPES),
    ).toThrow(DisposedError);
  });

  it('fills 2-D column-major blocks through a temporary and rejects other strided views', () => {
    const block = layout({ shape: [4, 3], strides: [1, 8], length: 12, contiguous: false });
    expect(checkTarget('op', block, FLOATING_DTYPES)).toBe('strided');
    const everyOther = layout({ shape: [4], strides: [2], length: 4, contiguous: false });
    expect(() => checkTarget('op', everyOther, FLOATING_DTYPES)).toThrow(/strided view/);
    const rowMajor = layout({ shape: [4, 3], strides: [3, 1], length: 12, contiguous: false });
    expect(() => checkTarget('op', rowMajor, FLOATING_DTYPES)).toThrow(CudaArgumentError);
    const threeD = layout({ shape: [2, 2, 2], strides: [1, 4, 16], length: 8, contiguous: false });
    expect(() => checkTarget('op', threeD, FLOATING_DTYPES)).toThrow(CudaArgumentError);
  });
});

describe('parameter checks', () => {
  it('checks mean and stddev', () => {
    expect(() => checkNormalParameters('op', 0, 1)).not.toThrow();
    expect(() => checkNormalParameters('op', -5, 1e-30)).not.toThrow();
    for (const [mean, stddev] of [
      [0, 0],
      [0, -1],
      [0, Number.NaN],
      [0, Number.POSITIVE_INFINITY],
      [Number.NaN, 1],
      [Number.NEGATIVE_INFINITY, 1],
      ['0', 1],
      [0, '1'],
    ]) {
      expect(() => checkNormalParameters('op', mean, stddev)).toThrow(CudaArgumentError);
    }
  });

  it('checks lambda', () => {
    expect(() => checkLambda('op', 4)).not.toThrow();
    expect(() => checkLambda('op', 1e-6)).not.toThrow();
    for (const bad of [0, -1, Number.NaN, Number.POSITIVE_INFINITY, '4', undefined]) {
      expect(() => checkLambda('op', bad)).toThrow(CudaArgumentError);
    }
  });

  it('checks shapes', () => {
    expect(() => checkShape('rand', 5)).not.toThrow();
    expect(() => checkShape('rand', 0)).not.toThrow();
    expect(() => checkShape('rand', [3, 4])).not.toThrow();
    for (const bad of [-1, 1.5, [], [2, -1], [2, 0.5], '4', null, [Number.NaN]]) {
      expect(() => checkShape('rand', bad)).toThrow(CudaArgumentError);
    }
  });
});

describe('planGeneration', () => {
  it('issues one call straight into an aligned output when no pairing is needed', () => {
    expect(planGeneration(7, 4, true, false)).toEqual({
      body: 7,
      tail: 0,
      direct: true,
      scratchBytes: 0,
      tailByteOffset: 0,
    });
    expect(planGeneration(1_000_000, 8, true, true)).toMatchObject({
      body: 1_000_000,
      tail: 0,
      scratchBytes: 0,
    });
  });

  it('splits odd normal counts into an even body and a 2-element tail in scratch', () => {
    expect(planGeneration(1001, 4, true, true)).toEqual({
      body: 1000,
      tail: 1,
      direct: true,
      scratchBytes: 8,
      tailByteOffset: 0,
    });
    expect(planGeneration(3, 8, true, true)).toEqual({
      body: 2,
      tail: 1,
      direct: true,
      scratchBytes: 16,
      tailByteOffset: 0,
    });
  });

  it('generates a single element entirely in scratch', () => {
    expect(planGeneration(1, 4, false, true)).toEqual({
      body: 0,
      tail: 1,
      direct: true,
      scratchBytes: 8,
      tailByteOffset: 0,
    });
  });

  it('routes a misaligned body through aligned scratch, with the tail after it', () => {
    const plan = planGeneration(1001, 4, false, true);
    expect(plan).toEqual({
      body: 1000,
      tail: 1,
      direct: false,
      scratchBytes: 4000 + 8,
      tailByteOffset: 4000,
    });
    expect(plan.tailByteOffset % OUTPUT_ALIGNMENT).toBe(0);
    const odd = planGeneration(7, 4, false, false);
    expect(odd).toEqual({ body: 7, tail: 0, direct: false, scratchBytes: 32, tailByteOffset: 32 });
    const doubles = planGeneration(5, 8, false, true);
    expect(doubles).toEqual({
      body: 4,
      tail: 1,
      direct: false,
      scratchBytes: 48,
      tailByteOffset: 32,
    });
  });

  it('makes the same cuRAND calls whatever the alignment (so the same numbers)', () => {
    for (const length of [1, 2, 3, 4, 5, 1000, 1001]) {
      for (const pairs of [false, true]) {
        const aligned = planGeneration(length, 4, true, pairs);
        const misaligned = planGeneration(length, 4, false, pairs);
        expect([misaligned.body, misaligned.tail]).toEqual([aligned.body, aligned.tail]);
        expect(aligned.body + aligned.tail).toBe(length);
        if (pairs) expect(aligned.body % 2).toBe(0);
      }
    }
  });

  it('writes into and returns the object it is given (no allocation on the hot path)', () => {
    const into = { body: -1, tail: -1, direct: false, scratchBytes: -1, tailByteOffset: -1 };
    expect(planGeneration(4, 4, true, true, into)).toBe(into);
    expect(into).toEqual({ body: 4, tail: 0, direct: true, scratchBytes: 0, tailByteOffset: 0 });
  });
});

describe('property: checkTarget on random views of one allocation', () => {
  it('contiguous iff the view is dense, strided iff a 2-D column-major block, else refused', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 8 }),
        fc.integer({ min: 1, max: 8 }),
        fc.nat(7),
        fc.nat(7),
        fc.integer({ min: 0, max: 8 }),
        fc.integer({ min: 0, max: 8 }),
        fc.boolean(),
        (rows, columns, row, column, height, width, asSlice) => {
          const parent = hostOnlyArray('float32', [rows, columns], {
            byteLength: rows * columns * 4,
          });
          const r = row % rows;
          const c = column % columns;
          const h = Math.min(height, rows - r);
          const w = Math.min(width, columns - c);
          const view = asSlice
            ? parent.reshape([rows * columns]).slice(r, h)
            : parent.block(r, c, h, w);
          // The reference: dense when every dimension above one element steps by the product of those before.
          let dense = true;
          let step = 1;
          for (let i = 0; i < view.shape.length; i++) {
            if (view.shape[i]! > 1 && view.strides[i] !== step) dense = false;
            step *= view.shape[i]!;
          }
          const expected = dense
            ? 'contiguous'
            : view.shape.length === 2 && view.strides[0] === 1
              ? 'strided'
              : 'refused';
          let got: string;
          try {
            got = checkTarget('Generator.uniform', view, FLOATING_DTYPES);
          } catch (error) {
            expect(error).toBeInstanceOf(CudaArgumentError);
            got = 'refused';
          }
          expect(got).toBe(expected);
        },
      ),
      { numRuns: 500, seed: 11 },
    );
  });
});

describe('an output of another context than the stream', () => {
  const stream: Stream = standInStream();
  const otherContext = { device: { ordinal: 1 }, toString: () => 'Context(device 1)' };
  function arrayIn(context: object) {
    const array = hostOnlyArray('float32', [8], { byteLength: 32 });
    (array.buffer as unknown as { context: object }).context = context;
    return array;
  }

  it('is refused with a CudaArgumentError naming both contexts, before anything native', () => {
    const error = thrown(() => defaultGenerator().uniform(arrayIn(otherContext), { stream }));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toMatch(
      /curand\.uniform: the output lives in Context\(device 1\), but .* belongs to /,
    );
  });

  it('of the stream context passes the check (and goes on to the native generator)', () => {
    const error = thrown(() => defaultGenerator().uniform(arrayIn(STAND_IN_CONTEXT), { stream }));
    expect(error).not.toBeInstanceOf(CudaArgumentError);
  });
});
