import { CudaArgumentError, type DType } from '@cuda-tasks/cudadrv';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { OperandLike } from './validate.js';
import { checkStridedBatched } from './validate-batched.js';
import { checkGemm, checkGemmEx } from './validate-gemm.js';
import { checkGemv, checkVectorPair } from './validate-vectors.js';

// Operands as views of one allocation (a plain object standing for its buffer), at random
// offsets, shapes and strides. The reference lists the bytes each routine touches of each
// operand, element by element, and says whether an output shares one with an input.

const BYTES: Record<string, number> = { float32: 4, float64: 8, float16: 2 };

/** A view of `buffer`: `shape` with `strides` from element `offset`. */
function view(
  buffer: { byteLength: number },
  shape: number[],
  strides: number[],
  offset: number,
  dtype: DType = 'float32',
): OperandLike {
  return { dtype, shape, strides, offset, disposed: false, buffer };
}

/** The bytes of elements (i, j, k) of a view, i < rows, j < columns, k < batch. */
function touched(
  operand: OperandLike,
  rows: number,
  columns: number,
  batch = 1,
  batchStride = 0,
): Set<number> {
  const bytes = new Set<number>();
  const size = BYTES[operand.dtype]!;
  const [s0, s1 = 0] = operand.strides;
  for (let k = 0; k < batch; k++) {
    for (let j = 0; j < columns; j++) {
      for (let i = 0; i < rows; i++) {
        const element = operand.offset + i * s0! + j * s1 + k * batchStride;
        for (let byte = 0; byte < size; byte++) bytes.add(element * size + byte);
      }
    }
  }
  return bytes;
}

function meet(a: Set<number>, b: Set<number>): boolean {
  for (const byte of a) if (b.has(byte)) return true;
  return false;
}

/** The error `fn` throws, or undefined. */
function thrownBy(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

const BIG = { byteLength: 1 << 20 };

describe('an output that overlaps an input is refused (regressions)', () => {
  it('gemm(a, b, a)', () => {
    const buffer = { byteLength: 1024 };
    const a = view(buffer, [4, 4], [1, 4], 0);
    const b = view({ byteLength: 1024 }, [4, 4], [1, 4], 0);
    const error = thrownBy(() => checkGemm('gemm', a, b, a));
    expect(error).toBeInstanceOf(CudaArgumentError);
    expect((error as Error).message).toMatch(/gemm: the output c overlaps a/);
  });

  it('gemm(a, b, b) and a C that is another view over A', () => {
    const buffer = { byteLength: 1024 };
    const a = view(buffer, [4, 4], [1, 8], 0);
    const b = view({ byteLength: 1024 }, [4, 4], [1, 4], 0);
    expect(() => checkGemm('gemm', b, a, a)).toThrow(/the output c overlaps b/);
    // C is the right half of A's parent, shifted by one column into A.
    const c = view(buffer, [4, 4], [1, 8], 3 * 8);
    expect(() => checkGemm('gemm', a, b, c)).toThrow(/the output c overlaps a/);
  });

  it('gemv(a, x, x) and gemv(a, x, y) with y a column of a', () => {
    const buffer = { byteLength: 1024 };
    const a = view(buffer, [4, 4], [1, 4], 0);
    const x = view({ byteLength: 64 }, [4], [1], 0);
    expect(() => checkGemv('gemv', a, x, x)).toThrow(/gemv: the output y overlaps x/);
    const column = view(buffer, [4], [1], 8);
    expect(() => checkGemv('gemv', a, x, column)).toThrow(/gemv: the output y overlaps a/);
  });

  it('axpy with x and y overlapping', () => {
    const buffer = { byteLength: 1024 };
    const x = view(buffer, [8], [1], 0);
    const y = view(buffer, [8], [1], 4);
    expect(() => checkVectorPair('axpy', x, y, undefined, true)).toThrow(
      /axpy: the output y overlaps x/,
    );
    // dot reads both: no output, nothing to refuse.
    expect(checkVectorPair('dot', x, y).n).toBe(8);
  });

  it('gemmEx and gemmStridedBatched', () => {
    const buffer = { byteLength: 4096 };
    const a = view(buffer, [4, 4], [1, 4], 0, 'float16');
    const b = view({ byteLength: 4096 }, [4, 4], [1, 4], 0, 'float16');
    // A float32 C over A's bytes (two float16 per float32).
    const c = view(buffer, [4, 4], [1, 4], 4, 'float32');
    expect(() => checkGemmEx('gemmEx', a, b, c)).toThrow(/gemmEx: the output c overlaps a/);
    const a3 = view(buffer, [4, 4, 3], [1, 4, 16], 0);
    const c3 = view(buffer, [4, 4, 3], [1, 4, 16], 40);
    const b3 = view({ byteLength: 4096 }, [4, 4, 3], [1, 4, 16], 0);
    expect(() => checkStridedBatched('gemmStridedBatched', a3, b3, c3)).toThrow(
      /gemmStridedBatched: the output c overlaps a/,
    );
  });
});

describe('interleaved views of one allocation that do not overlap pass unchanged', () => {
  it('gemm into the bottom rows of the matrix whose top rows are A', () => {
    const buffer = { byteLength: 8 * 8 * 8 };
    const top = view(buffer, [4, 8], [1, 8], 0, 'float64');
    const bottom = view(buffer, [4, 8], [1, 8], 4, 'float64');
    const b = view({ byteLength: 8 * 64 }, [8, 8], [1, 8], 0, 'float64');
    expect({ ...checkGemm('gemm', top, b, bottom) }).toEqual({
      dtype: 'float64',
      transA: false,
      transB: false,
      alpha: 1,
      beta: 0,
      m: 4,
      n: 8,
      k: 8,
      lda: 8,
      ldb: 8,
      ldc: 8,
    });
  });

  it('gemv writing every other element of a vector whose others are x', () => {
    const buffer = { byteLength: 1024 };
    const a = view({ byteLength: 1024 }, [4, 4], [1, 4], 0);
    const x = view(buffer, [4], [2], 0);
    const y = view(buffer, [4], [2], 1);
    expect(checkGemv('gemv', a, x, y).incy).toBe(2);
  });
});

// Random views: offsets, shapes, leading dimensions, increments, all in one allocation.
const dims = fc.integer({ min: 1, max: 4 });
const offset = fc.integer({ min: 0, max: 40 });
const extra = fc.integer({ min: 0, max: 3 });

describe('property: refused iff the bytes truly overlap, else the checks return the shape', () => {
  it('gemm: C against A and B (transposes too)', () => {
    fc.assert(
      fc.property(
        fc.record({ m: dims, n: dims, k: dims, transA: fc.boolean(), transB: fc.boolean() }),
        fc.tuple(offset, extra),
        fc.tuple(offset, extra),
        fc.tuple(offset, extra),
        fc.boolean(),
        ({ m, n, k, transA, transB }, [oa, ea], [ob, eb], [oc, ec], bApart) => {
          const [ar, ac] = transA ? [k, m] : [m, k];
          const [br, bc] = transB ? [n, k] : [k, n];
          const a = view(BIG, [ar, ac], [1, ar + ea], oa);
          const b = view(bApart ? { byteLength: 1 << 20 } : BIG, [br, bc], [1, br + eb], ob);
          const c = view(BIG, [m, n], [1, m + ec], oc);
          const written = touched(c, m, n);
          const expected =
            meet(written, touched(a, ar, ac)) || (!bApart && meet(written, touched(b, br, bc)));
          const error = thrownBy(() => checkGemm('gemm', a, b, c, { transA, transB }));
          if (expected) {
            expect(error).toBeInstanceOf(CudaArgumentError);
            expect((error as Error).message).toMatch(/gemm: the output c overlaps [ab]/);
          } else {
            expect(error).toBeUndefined();
            const g = checkGemm('gemm', a, b, c, { transA, transB });
            expect([g.m, g.n, g.k, g.lda, g.ldb, g.ldc]).toEqual([
              m,
              n,
              k,
              ar + (ac > 1 ? ea : 0),
              br + (bc > 1 ? eb : 0),
              m + (n > 1 ? ec : 0),
            ]);
          }
        },
      ),
      { numRuns: 1500, seed: 2 },
    );
  });

  it('gemv: y against A and x', () => {
    fc.assert(
      fc.property(
        dims,
        dims,
        fc.boolean(),
        fc.tuple(offset, extra),
        fc.tuple(offset, fc.integer({ min: 1, max: 3 })),
        fc.tuple(offset, fc.integer({ min: 1, max: 3 })),
        (m, n, trans, [oa, ea], [ox, ix], [oy, iy]) => {
          const a = view(BIG, [m, n], [1, m + ea], oa);
          const [xl, yl] = trans ? [m, n] : [n, m];
          const x = view(BIG, [xl], [ix], ox);
          const y = view(BIG, [yl], [iy], oy);
          const written = touched(y, yl, 1);
          const expected = meet(written, touched(a, m, n)) || meet(written, touched(x, xl, 1));
          const error = thrownBy(() => checkGemv('gemv', a, x, y, { trans }));
          expect(error instanceof CudaArgumentError).toBe(expected);
          if (!expected) {
            const g = checkGemv('gemv', a, x, y, { trans });
            expect([g.m, g.n, g.lda, g.incx, g.incy]).toEqual([m, n, m + (n > 1 ? ea : 0), ix, iy]);
          }
        },
      ),
      { numRuns: 1500, seed: 3 },
    );
  });

  it('axpy: y against x; dot never refuses', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 6 }),
        fc.tuple(offset, fc.integer({ min: 1, max: 3 })),
        fc.tuple(offset, fc.integer({ min: 1, max: 3 })),
        (n, [ox, ix], [oy, iy]) => {
          const x = view(BIG, [n], [ix], ox);
          const y = view(BIG, [n], [iy], oy);
          const expected = meet(touched(y, n, 1), touched(x, n, 1));
          const error = thrownBy(() => checkVectorPair('axpy', x, y, undefined, true));
          expect(error instanceof CudaArgumentError).toBe(expected);
          expect(checkVectorPair('dot', x, y).n).toBe(n);
        },
      ),
      { numRuns: 1000, seed: 4 },
    );
  });

  it('gemmStridedBatched: every C matrix against every A and B matrix', () => {
    fc.assert(
      fc.property(
        fc.record({ m: dims, n: dims, k: dims, batch: fc.integer({ min: 1, max: 3 }) }),
        fc.tuple(offset, fc.integer({ min: 0, max: 30 })),
        fc.tuple(offset, fc.integer({ min: 0, max: 30 })),
        fc.tuple(offset, fc.integer({ min: 0, max: 12 })),
        ({ m, n, k, batch }, [oa, sa], [ob, sb], [oc, gap]) => {
          const sc = m * n + gap; // C's matrices apart (their own overlap is another check)
          const a = view(BIG, [m, k], [1, m], oa);
          const b = view(BIG, [k, n], [1, k], ob);
          const c = view(BIG, [m, n], [1, m], oc);
          const options = { batch, strideA: sa, strideB: sb, strideC: sc };
          const written = touched(c, m, n, batch, sc);
          const expected =
            meet(written, touched(a, m, k, batch, sa)) ||
            meet(written, touched(b, k, n, batch, sb));
          const error = thrownBy(() => checkStridedBatched('gemmStridedBatched', a, b, c, options));
          expect(error instanceof CudaArgumentError).toBe(expected);
          if (!expected) {
            const g = checkStridedBatched('gemmStridedBatched', a, b, c, options);
            expect([g.batch, g.strideA, g.strideB, g.strideC]).toEqual([batch, sa, sb, sc]);
          }
        },
      ),
      { numRuns: 1500, seed: 5 },
    );
  });
});
