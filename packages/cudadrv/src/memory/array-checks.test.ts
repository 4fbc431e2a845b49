import { thrown } from '@cuda-tasks/testing';
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
          const check = () => assertSameDType('solve', 'b', holder(b), 'a', holder(a));
          if (a === b) {
            expect(check).not.toThrow();
            return;
          }
          const error = thrown(check);
          expect(error).toBeInstanceOf(CudaArgumentError);
          expect(error.message).toBe(
            `solve: b is ${b} but a is ${a}; both must have the same dtype`,
          );
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
        const check = () => assertDType('qr', 'a', holder(d), allowed);
        if (allowed.includes(d)) {
          expect(check).not.toThrow();
          return;
        }
        expect(thrown(check).message).toBe(`qr: a must be ${allowed.join(' or ')}, got ${d}`);
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
    expect(() => assertOperand('gemm', 'a', operand(false))).not.toThrow();
    const disposed = thrown(() => assertOperand('gemm', 'c', operand(true)));
    expect(disposed).toBeInstanceOf(DisposedError);
    expect(disposed.message).toMatch(/^gemm: c has been disposed/);
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
      const error = thrown(() => assertOperand('gemm', 'b', value));
      expect(error).toBeInstanceOf(CudaArgumentError);
      expect(error).not.toBeInstanceOf(DisposedError);
      expect(error.message).toBe(`gemm: b must be a DeviceArray, got ${got}`);
      expect(describeValue(value)).toBe(got);
    }
  });
});
