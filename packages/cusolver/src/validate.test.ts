import {
  assertSameContext,
  assertSameDType,
  CudaArgumentError,
  DisposedError,
} from '@cuda-tasks/cudadrv';
import { hostOnlyArray, standInStream, thrown } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { cholesky, choleskySolve } from './cholesky.js';
import { eigh } from './eigh.js';
import { lu, luSolve, solve } from './lu.js';
import { qr } from './qr.js';
import { svd } from './svd.js';
import {
  assertPivots,
  assertSquare,
  INT_MAX,
  matrixLayout,
  rightHandSideLayout,
} from './validate.js';

describe('matrixLayout', () => {
  it('returns rows, columns and the leading dimension of a contiguous matrix', () => {
    expect(matrixLayout('lu', 'a', hostOnlyArray('float64', [5, 3]))).toEqual({
      rows: 5,
      columns: 3,
      leadingDimension: 5,
    });
  });

  it('passes a block view with the parent leading dimension', () => {
    const parent = hostOnlyArray('float32', [10, 8]);
    const view = parent.block(2, 1, 4, 5);
    expect(view.contiguous).toBe(false);
    expect(matrixLayout('lu', 'a', view)).toEqual({ rows: 4, columns: 5, leadingDimension: 10 });
  });

  it('uses the row count as the leading dimension of a single column', () => {
    const column = hostOnlyArray('float64', [10, 8]).block(0, 3, 10, 1);
    expect(matrixLayout('solve', 'b', column, true)).toEqual({
      rows: 10,
      columns: 1,
      leadingDimension: 10,
    });
  });

  it('accepts vectors only where allowed', () => {
    const v = hostOnlyArray('float32', [7]);
    expect(matrixLayout('solve', 'b', v, true)).toEqual({
      rows: 7,
      columns: 1,
      leadingDimension: 7,
    });
    expect(() => matrixLayout('lu', 'a', v)).toThrow(/lu: a must be a 2-D array/);
    expect(() => matrixLayout('solve', 'b', hostOnlyArray('float32', [2, 2, 2]), true)).toThrow(
      /1-D or 2-D/,
    );
  });

  it('rejects what is not a DeviceArray', () => {
    for (const value of [undefined, null, 3, 'a', new Float64Array(4), { dtype: 'float32' }]) {
      expect(() => matrixLayout('lu', 'a', value)).toThrow(CudaArgumentError);
    }
    expect(() => matrixLayout('lu', 'a', new Float64Array(4))).toThrow(
      /lu: a must be a DeviceArray, got Float64Array/,
    );
  });

  it('rejects dtypes other than float32 and float64', () => {
    for (const dtype of ['int32', 'uint8', 'float16', 'bfloat16'] as const) {
      expect(() => matrixLayout('qr', 'a', hostOnlyArray(dtype, [2, 2]))).toThrow(
        new RegExp(`qr: a must be float32 or float64, got ${dtype}`),
      );
    }
  });

  it('rejects disposed arrays with DisposedError', () => {
    const a = hostOnlyArray('float64', [3, 3], { disposed: true });
    expect(() => matrixLayout('cholesky', 'a', a)).toThrow(DisposedError);
    expect(() => matrixLayout('cholesky', 'a', a)).toThrow(/cholesky: a has been disposed/);
  });

  it('rejects empty matrices', () => {
    expect(() => matrixLayout('lu', 'a', hostOnlyArray('float64', [0, 3]))).toThrow(/empty/);
    expect(() => matrixLayout('lu', 'a', hostOnlyArray('float64', [3, 0]))).toThrow(/empty/);
  });

  it('rejects layouts cuSOLVER cannot take', () => {
    // Rows not adjacent (a row-major-like view).
    const rowMajor = hostOnlyArray('float32', [3, 4], { strides: [4, 1] });
    expect(() => matrixLayout('svd', 'a', rowMajor)).toThrow(/column-major 2-D view/);
    // Leading dimension below the row count.
    const overlapping = hostOnlyArray('float32', [4, 3], { strides: [1, 2] });
    expect(() => matrixLayout('svd', 'a', overlapping)).toThrow(/leading dimension of 2/);
    // A strided vector.
    const strided = hostOnlyArray('float32', [4], { strides: [2] });
    expect(() => matrixLayout('solve', 'b', strided, true)).toThrow(/contiguous/);
  });

  it('rejects dimensions beyond a C int', () => {
    const wide = hostOnlyArray('float32', [1, INT_MAX + 1]);
    expect(() => matrixLayout('qr', 'a', wide)).toThrow(/up to 2147483647/);
  });
});

describe('other checks', () => {
  it('assertSquare', () => {
    expect(() =>
      assertSquare('lu', 'a', { rows: 3, columns: 3, leadingDimension: 3 }),
    ).not.toThrow();
    expect(() => assertSquare('eigh', 'a', { rows: 3, columns: 2, leadingDimension: 3 })).toThrow(
      /eigh: a must be square, got 3 x 2/,
    );
  });

  it('assertSameDType', () => {
    const a = hostOnlyArray('float32', [2, 2]);
    const b = hostOnlyArray('float64', [2]);
    expect(() => assertSameDType('solve', 'b', b, 'a', a)).toThrow(
      /solve: b is float64 but a is float32/,
    );
  });

  it('rightHandSideLayout checks rows and dtype', () => {
    const a = hostOnlyArray('float64', [4, 4]);
    expect(rightHandSideLayout('solve', hostOnlyArray('float64', [4, 3]), a, 4).columns).toBe(3);
    expect(rightHandSideLayout('solve', hostOnlyArray('float64', [4]), a, 4).columns).toBe(1);
    expect(() => rightHandSideLayout('solve', hostOnlyArray('float64', [5, 1]), a, 4)).toThrow(
      /solve: b has 5 rows but a is 4 x 4/,
    );
    expect(() => rightHandSideLayout('solve', hostOnlyArray('float32', [4]), a, 4)).toThrow(
      /same dtype/,
    );
  });

  it('assertPivots', () => {
    expect(() => assertPivots('luSolve', hostOnlyArray('int32', [4]), 4)).not.toThrow();
    expect(() => assertPivots('luSolve', hostOnlyArray('int32', [3]), 4)).toThrow(/4 elements/);
    expect(() => assertPivots('luSolve', hostOnlyArray('uint32', [4]), 4)).toThrow(
      /pivots must be int32/,
    );
    expect(() =>
      assertPivots('luSolve', hostOnlyArray('int32', [4], { disposed: true }), 4),
    ).toThrow(DisposedError);
    expect(() => assertPivots('luSolve', undefined, 4)).toThrow(/pivots must be a DeviceArray/);
  });
});

describe("every routine reads its options with cudadrv's option checks, before anything native", () => {
  const square = () => hostOnlyArray('float64', [4, 4]);
  const column = () => hostOnlyArray('float64', [4]);
  const factorization = () => ({ lu: square(), pivots: hostOnlyArray('int32', [4]) });

  it('refuses options that are not an object', async () => {
    await expect(lu(square(), 'fast' as never)).rejects.toThrow(
      'lu: options must be an object, got "fast"',
    );
    expect(() => qr(square(), null as never)).toThrow('qr: options must be an object, got null');
    expect(() => luSolve(factorization(), column(), 1 as never)).toThrow(
      'luSolve: options must be an object, got 1',
    );
  });

  it('refuses a flag that is not true or false, naming the value', async () => {
    await expect(eigh(square(), { upper: 1 as never })).rejects.toThrow(
      'eigh: option upper must be true or false, got 1',
    );
    await expect(cholesky(square(), { upper: 'yes' as never })).rejects.toThrow(
      'cholesky: option upper must be true or false, got "yes"',
    );
    await expect(svd(square(), { full: null as never })).rejects.toThrow(
      'svd: option full must be true or false, got null',
    );
    expect(() => choleskySolve(square(), column(), { upper: 'U' as never })).toThrow(
      'choleskySolve: option upper must be true or false, got "U"',
    );
    expect(() => luSolve(factorization(), column(), { transA: true, transpose: false })).toThrow(
      'luSolve: option transA is true but transpose (its deprecated spelling) is false: pass transA only',
    );
  });

  it('refuses a stream option that is not a Stream (not a TypeError from inside)', async () => {
    const bad = { stream: null } as never;
    const message = (call: string) => `${call}: option stream must be a Stream, got null`;
    await expect(lu(square(), bad)).rejects.toThrow(message('lu'));
    await expect(solve(square(), column(), bad)).rejects.toThrow(message('solve'));
    expect(() => luSolve(factorization(), column(), bad)).toThrow(message('luSolve'));
    await expect(cholesky(square(), bad)).rejects.toThrow(message('cholesky'));
    expect(() => choleskySolve(square(), column(), { upper: true, stream: 5n } as never)).toThrow(
      'choleskySolve: option stream must be a Stream, got 5n',
    );
    expect(() => qr(square(), bad)).toThrow(message('qr'));
    await expect(svd(square(), bad)).rejects.toThrow(message('svd'));
    await expect(eigh(square(), bad)).rejects.toThrow(message('eigh'));
    for (const call of [() => qr(square(), bad), () => luSolve(factorization(), column(), bad)]) {
      expect(thrown(call)).toBeInstanceOf(CudaArgumentError);
    }
  });
});

describe('an array of another context than the stream', () => {
  const stream = standInStream();
  const device1 = { device: { ordinal: 1 }, toString: () => 'Context(device 1)' };
  const foreign = () => hostOnlyArray('float64', [4, 4], { byteLength: 128, context: device1 });

  it('is refused by qr, eigh and svd with a CudaArgumentError, before anything native', async () => {
    expect(thrown(() => qr(foreign(), { stream }))).toBeInstanceOf(CudaArgumentError);
    expect(thrown(() => qr(foreign(), { stream })).message).toMatch(
      /qr: a lives in Context\(device 1\), but .* belongs to Context\(device 0\)/,
    );
    await expect(eigh(foreign(), { stream })).rejects.toThrow(
      /eigh: a lives in Context\(device 1\)/,
    );
    await expect(svd(foreign(), { stream })).rejects.toThrow(/svd: a lives in Context\(device 1\)/);
  });

  it('is refused by lu, luSolve, solve, cholesky and choleskySolve, naming the operand', async () => {
    const local = () => hostOnlyArray('float64', [4, 4], { byteLength: 128 });
    const pivots = hostOnlyArray('int32', [4], { byteLength: 16 });
    const foreignPivots = hostOnlyArray('int32', [4], { byteLength: 16, context: device1 });
    await expect(lu(foreign(), { stream })).rejects.toThrow(/lu: a lives in Context\(device 1\)/);
    await expect(solve(foreign(), local(), { stream })).rejects.toThrow(/solve: a lives in/);
    await expect(solve(local(), foreign(), { stream })).rejects.toThrow(/solve: b lives in/);
    expect(() => luSolve({ lu: foreign(), pivots }, local(), { stream })).toThrow(
      /luSolve: lu lives in/,
    );
    expect(() => luSolve({ lu: local(), pivots: foreignPivots }, local(), { stream })).toThrow(
      /luSolve: pivots lives in/,
    );
    expect(() => luSolve({ lu: local(), pivots }, foreign(), { stream })).toThrow(
      /luSolve: b lives in/,
    );
    await expect(cholesky(foreign(), { stream })).rejects.toThrow(/cholesky: a lives in/);
    expect(() => choleskySolve(foreign(), local(), { stream, upper: false })).toThrow(
      /choleskySolve: factor lives in/,
    );
    expect(() => choleskySolve(local(), foreign(), { stream, upper: true })).toThrow(
      /choleskySolve: b lives in/,
    );
  });

  it('assertSameContext: refused iff the contexts differ', () => {
    const same = hostOnlyArray('float64', [4, 4], { byteLength: 128 });
    expect(assertSameContext('solve', 'b', same, stream)).toBeUndefined();
    expect(() => assertSameContext('solve', 'b', foreign(), stream)).toThrow(/solve: b lives in/);
  });
});

describe('property: matrixLayout of random blocks of one allocation', () => {
  it('gives the block rows, columns and the parent leading dimension; inputs may share memory', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 9 }),
        fc.nat(8),
        fc.nat(8),
        fc.integer({ min: 1, max: 9 }),
        fc.integer({ min: 1, max: 9 }),
        (rows, columns, row, column, height, width) => {
          const parent = hostOnlyArray('float64', [rows, columns], {
            byteLength: rows * columns * 8,
          });
          const r = row % rows;
          const c = column % columns;
          const h = Math.min(height, rows - r);
          const w = Math.min(width, columns - c);
          const block = parent.block(r, c, h, w);
          expect(matrixLayout('lu', 'a', block)).toEqual({
            rows: h,
            columns: w,
            leadingDimension: w > 1 ? rows : h,
          });
          // A right-hand side that is a column of the same block: an input beside an input.
          if (h === w) {
            const b = parent.block(r, c, h, 1);
            expect(rightHandSideLayout('solve', b, block, h).rows).toBe(h);
          }
        },
      ),
      { numRuns: 400, seed: 13 },
    );
  });
});
