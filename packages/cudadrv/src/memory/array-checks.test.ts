import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DTYPES, type DType } from '../dtype.js';
import { CudaArgumentError, DisposedError } from '../errors.js';
import {
  assertDType,
  assertOperand,
  assertSameDType,
  describeValue,
  isFloatDType,
  isOperand,
  sharedDType,
} from './array-checks.js';

function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

const ALL = Object.keys(DTYPES) as DType[];
const dtype = fc.constantFrom<DType>(...ALL);
const holder = (d: DType) => ({ dtype: d });

describe('sharedDType and assertSameDType: operands agree iff every dtype is the first one', () => {
  it('agrees with a plain comparison of the dtypes', () => {
    fc.assert(
      fc.property(
        dtype,
        fc.option(dtype, { nil: undefined }),
        fc.option(dtype, { nil: undefined }),
        (a, b, c) => {
          const given = [a, b, c].filter((d) => d !== undefined);
          const expected = given.every((d) => d === a) ? a : undefined;
          expect(
            sharedDType(
              holder(a),
              b === undefined ? undefined : holder(b),
              c === undefined ? undefined : holder(c),
            ),
          ).toBe(expected);
          if (b === undefined) return;
          const error = thrownBy(() => assertSameDType('solve', 'b', holder(b), 'a', holder(a)));
          expect(error === undefined).toBe(a === b);
          if (error !== undefined) {
            expect(error).toBeInstanceOf(CudaArgumentError);
            expect((error as Error).message).toBe(
              `solve: b is ${b} but a is ${a}; both must have the same dtype`,
            );
          }
        },
      ),
      { numRuns: 500, seed: 3 },
    );
  });
});

describe('assertDType', () => {
  it('passes iff the dtype is allowed, naming the allowed ones otherwise', () => {
    fc.assert(
      fc.property(dtype, fc.subarray(ALL, { minLength: 1 }), (d, allowed) => {
        const error = thrownBy(() => assertDType('qr', 'a', holder(d), allowed));
        expect(error === undefined).toBe(allowed.includes(d));
        if (error !== undefined) {
          expect((error as Error).message).toBe(`qr: a must be ${allowed.join(' or ')}, got ${d}`);
        }
      }),
      { numRuns: 300, seed: 9 },
    );
    expect(isFloatDType('float32') && isFloatDType('float64')).toBe(true);
    expect(ALL.filter(isFloatDType)).toEqual(['float32', 'float64']);
  });
});

describe('assertOperand', () => {
  const operand = (disposed: boolean) => ({
    dtype: 'float32' as DType,
    shape: [2],
    strides: [1],
    offset: 0,
    disposed,
    buffer: { byteLength: 8 },
  });

  it('passes a usable operand, refuses a disposed one with DisposedError and anything else with CudaArgumentError', () => {
    expect(thrownBy(() => assertOperand('gemm', 'a', operand(false)))).toBeUndefined();
    const disposed = thrownBy(() => assertOperand('gemm', 'c', operand(true)));
    expect(disposed).toBeInstanceOf(DisposedError);
    expect((disposed as Error).message).toMatch(/^gemm: c has been disposed/);
    for (const [value, got] of [
      [null, 'null'],
      [undefined, 'undefined'],
      [3, '3'],
      ['x', '"x"'],
      [2n, '2n'],
      [new Float32Array(2), 'Float32Array'],
      [{ dtype: 'float32', shape: [2] }, 'Object'],
    ] as const) {
      expect(isOperand(value)).toBe(false);
      const error = thrownBy(() => assertOperand('gemm', 'b', value));
      expect(error).toBeInstanceOf(CudaArgumentError);
      expect(error).not.toBeInstanceOf(DisposedError);
      expect((error as Error).message).toBe(`gemm: b must be a DeviceArray, got ${got}`);
      expect(describeValue(value)).toBe(got);
    }
  });
});
