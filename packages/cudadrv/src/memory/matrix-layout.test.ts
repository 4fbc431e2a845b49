import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type DType, dtypeBytes } from '../dtype.js';
import { CudaArgumentError } from '../errors.js';
import type { Operand } from './array-checks.js';
import {
  assertFits,
  elementCapacity,
  matrixExtent,
  newMatrixLayout,
  newVectorLayout,
  operandMatrixFootprint,
  operandVectorFootprint,
  readMatrixLayout,
  readVectorLayout,
  vectorExtent,
} from './matrix-layout.js';
import { byteRangesOverlap, footprintsOverlap, newFootprint } from './operands.js';

/** The element indices (from the buffer's start) a strided view touches, listed one by one. */
function elementsOf(
  offset: number,
  shape: readonly number[],
  strides: readonly number[],
): number[] {
  let indices = [offset];
  for (let d = 0; d < shape.length; d++) {
    const next: number[] = [];
    for (const base of indices)
      for (let i = 0; i < shape[d]!; i++) next.push(base + i * strides[d]!);
    indices = next;
  }
  return shape.some((n) => n === 0) ? [] : indices;
}

function operand(
  dtype: DType,
  shape: number[],
  strides: number[],
  offset: number,
  capacity: number,
): Operand {
  return {
    dtype,
    shape,
    strides,
    offset,
    disposed: false,
    buffer: { byteLength: capacity * dtypeBytes(dtype) },
  };
}

const dtypes = fc.constantFrom<DType>('float32', 'float64', 'float16', 'int8');

/** A 1-D or 2-D view with adjacent rows (strides[0] = 1) and a leading dimension of at least the rows. */
const columnMajorView = fc
  .record({
    dtype: dtypes,
    rank: fc.constantFrom(1, 2),
    rows: fc.integer({ min: 0, max: 6 }),
    columns: fc.integer({ min: 0, max: 5 }),
    pad: fc.integer({ min: 0, max: 4 }),
    offset: fc.integer({ min: 0, max: 10 }),
    slack: fc.integer({ min: -8, max: 8 }),
  })
  .map(({ dtype, rank, rows, columns, pad, offset, slack }) => {
    const shape = rank === 1 ? [rows] : [rows, columns];
    const strides = rank === 1 ? [1] : [1, rows + pad];
    const reach = elementsOf(offset, shape, strides).reduce((max, i) => Math.max(max, i + 1), 0);
    return operand(dtype, shape, strides, offset, Math.max(0, reach + slack));
  });

describe('readMatrixLayout', () => {
  it('describes exactly the elements of the view: (i, j) at i + j ld from the first', () => {
    fc.assert(
      fc.property(columnMajorView, (view) => {
        const layout = readMatrixLayout(view.shape, view.strides, newMatrixLayout());
        const listed: number[] = [];
        for (let j = 0; j < layout.columns; j++) {
          for (let i = 0; i < layout.rows; i++)
            listed.push(view.offset + i + j * layout.leadingDimension);
        }
        expect(listed.sort((a, b) => a - b)).toEqual(
          elementsOf(view.offset, view.shape, view.strides).sort((a, b) => a - b),
        );
        expect(layout.leadingDimension).toBeGreaterThanOrEqual(Math.max(1, layout.rows));
      }),
      { numRuns: 600, seed: 7 },
    );
  });
});

describe('assertFits: a matrix view fits its buffer iff every element it touches lies in the buffer', () => {
  it('agrees with the listed elements', () => {
    fc.assert(
      fc.property(columnMajorView, (view) => {
        const layout = readMatrixLayout(view.shape, view.strides, newMatrixLayout());
        const capacity = Math.floor(view.buffer.byteLength / dtypeBytes(view.dtype));
        const fits = elementsOf(view.offset, view.shape, view.strides).every((i) => i < capacity);
        let thrown: unknown;
        try {
          assertFits('t', 'a', view, matrixExtent(layout));
        } catch (error) {
          thrown = error;
        }
        expect(thrown === undefined).toBe(fits);
        if (!fits) {
          expect(thrown).toBeInstanceOf(CudaArgumentError);
          expect((thrown as Error).message).toMatch(/^t: a would reach element \d+ past its first/);
        }
        expect(elementCapacity(view)).toBe(capacity - view.offset);
      }),
      { numRuns: 800, seed: 17 },
    );
  });
});

describe('readVectorLayout', () => {
  it('reads a vector iff the view has one dimension above one element; its elements are the view', () => {
    fc.assert(
      fc.property(
        dtypes,
        fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 3 }),
        fc.array(fc.integer({ min: 0, max: 7 }), { minLength: 3, maxLength: 3 }),
        fc.integer({ min: 0, max: 5 }),
        (dtype, shape, allStrides, offset) => {
          const strides = allStrides.slice(0, shape.length);
          const out = newVectorLayout();
          const isVector =
            shape.length === 1 || (shape.length === 2 && (shape[0] === 1 || shape[1] === 1));
          expect(readVectorLayout(shape, strides, out)).toBe(isVector);
          if (!isVector) return;
          const listed: number[] = [];
          for (let k = 0; k < out.length; k++) listed.push(offset + k * out.increment);
          expect(listed).toEqual(elementsOf(offset, shape, strides));
          expect(vectorExtent(out)).toBe(listed.length === 0 ? 0 : listed.at(-1)! - offset + 1);
          // The footprint of the vector covers its elements' bytes.
          const view = operand(dtype, shape, strides, offset, 64);
          const footprint = operandVectorFootprint(newFootprint(), view, out);
          expect(footprint.start).toBe(offset * dtypeBytes(dtype));
          expect(footprint.runs).toBe(out.length);
        },
      ),
      { numRuns: 600, seed: 23 },
    );
  });
});

describe('byteRangesOverlap: two byte ranges overlap iff they share a byte', () => {
  it('agrees with the listed bytes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 12 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 12 }),
        (aStart, aBytes, bStart, bBytes) => {
          let share = false;
          for (let byte = aStart; byte < aStart + aBytes; byte++) {
            if (byte >= bStart && byte < bStart + bBytes) share = true;
          }
          expect(byteRangesOverlap(aStart, aBytes, bStart, bBytes)).toBe(share);
          expect(byteRangesOverlap(bStart, bBytes, aStart, aBytes)).toBe(share);
        },
      ),
      { numRuns: 2000, seed: 5 },
    );
  });
});

describe('operandMatrixFootprint: two views of one buffer overlap iff they share an element', () => {
  it('agrees with the listed elements', () => {
    const buffer = { byteLength: 4096 };
    const view = fc
      .record({
        rows: fc.integer({ min: 0, max: 4 }),
        columns: fc.integer({ min: 0, max: 4 }),
        pad: fc.integer({ min: 0, max: 3 }),
        offset: fc.integer({ min: 0, max: 20 }),
      })
      .map(({ rows, columns, pad, offset }) => ({
        dtype: 'float32' as DType,
        shape: [rows, columns],
        strides: [1, rows + pad],
        offset,
        disposed: false,
        buffer,
      }));
    fc.assert(
      fc.property(view, view, (a, b) => {
        const la = readMatrixLayout(a.shape, a.strides, newMatrixLayout());
        const lb = readMatrixLayout(b.shape, b.strides, newMatrixLayout());
        const fa = operandMatrixFootprint(newFootprint(), a, la);
        const fb = operandMatrixFootprint(newFootprint(), b, lb);
        const elements = new Set(elementsOf(a.offset, a.shape, a.strides));
        const share = elementsOf(b.offset, b.shape, b.strides).some((i) => elements.has(i));
        expect(footprintsOverlap(fa, fb)).toBe(share);
      }),
      { numRuns: 1500, seed: 29 },
    );
  });
});
