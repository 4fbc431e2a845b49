import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import { thrown } from '@cuda-tasks/testing';
import { describe, expect, it } from 'vitest';
import type { OperandLike } from './validate.js';
import { checkGemv } from './validate-vectors.js';

// One spelling of transpose across the libraries: `transA` / `transB` (docs/conventions.md).
// gemv's `trans` is the deprecated spelling of its `transA`: either is accepted, and both
// given must agree. No device memory: plain objects shaped like arrays.
function operand(shape: number[]): OperandLike {
  const strides = shape.length === 1 ? [1] : [1, shape[0]!];
  const elements = shape.reduce((product, d) => product * d, 1);
  return {
    dtype: 'float32',
    shape,
    strides,
    offset: 0,
    disposed: false,
    buffer: { byteLength: elements * 4 },
  };
}

// a is 4 x 3: op(a) x fits x of 3 and y of 4; op(a)^T x fits x of 4 and y of 3.
const a = operand([4, 3]);
const x4 = operand([4]);
const y3 = operand([3]);

describe('gemv: transA, and trans as its deprecated spelling', () => {
  it('transA: true transposes a (reference: the shape rule of y = a^T x)', () => {
    const checked = checkGemv('gemv', a, x4, y3, { transA: true });
    expect(checked).toMatchObject({ trans: true, m: 4, n: 3 });
  });

  it('trans: true still does the same', () => {
    expect(checkGemv('gemv', a, x4, y3, { trans: true })).toMatchObject({ trans: true });
  });

  it('both given and equal is the same option', () => {
    expect(checkGemv('gemv', a, x4, y3, { trans: true, transA: true })).toMatchObject({
      trans: true,
    });
    expect(
      checkGemv('gemv', a, operand([3]), operand([4]), { trans: false, transA: false }),
    ).toMatchObject({ trans: false });
  });

  it('both given and different is a CudaArgumentError naming both', () => {
    for (const [trans, transA] of [
      [true, false],
      [false, true],
    ]) {
      const error = thrown(() => checkGemv('gemv', a, x4, y3, { trans, transA }));
      expect(error).toBeInstanceOf(CudaArgumentError);
      expect(error.message).toMatch(/gemv: .*transA.*trans\b/);
    }
  });

  it('a transA that is not a boolean is a CudaArgumentError', () => {
    const error = thrown(() => checkGemv('gemv', a, x4, y3, { transA: 'yes' as never }));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect(error.message).toMatch(/transA must be true or false/);
  });
});
