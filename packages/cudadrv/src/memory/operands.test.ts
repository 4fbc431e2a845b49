import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { Context } from '../context/device.js';
import { CudaArgumentError } from '../errors.js';
import type { Stream } from '../stream/stream.js';
import {
  assertApart,
  assertSameContext,
  type Footprint,
  footprintsOverlap,
  matrixFootprint,
  newFootprint,
  vectorFootprint,
} from './operands.js';

/** The bytes a footprint covers, listed one by one (the reference: no arithmetic shortcuts). */
function bytesOf(f: Footprint): Set<number> {
  const bytes = new Set<number>();
  for (let block = 0; block < f.blocks; block++) {
    for (let run = 0; run < f.runs; run++) {
      for (let byte = 0; byte < f.runBytes; byte++) {
        bytes.add(f.start + block * f.blockStride + run * f.runStride + byte);
      }
    }
  }
  return bytes;
}

function share(a: Footprint, b: Footprint): boolean {
  if (a.buffer !== b.buffer) return false;
  const bytes = bytesOf(a);
  for (const byte of bytesOf(b)) if (bytes.has(byte)) return true;
  return false;
}

const buffer = { name: 'one allocation' };
const footprint = (buffers: unknown[] = [buffer]) =>
  fc
    .record({
      buffer: fc.constantFrom(...buffers),
      start: fc.integer({ min: 0, max: 64 }),
      runBytes: fc.integer({ min: 0, max: 12 }),
      runs: fc.integer({ min: 0, max: 6 }),
      runStride: fc.integer({ min: 0, max: 20 }),
      blocks: fc.integer({ min: 0, max: 4 }),
      blockStride: fc.integer({ min: 0, max: 60 }),
    })
    .map((f): Footprint => f);

describe('footprintsOverlap', () => {
  it('is true exactly when two footprints share a byte (random runs, blocks and strides)', () => {
    fc.assert(
      fc.property(footprint(), footprint(), (a, b) => {
        const expected = share(a, b);
        expect(footprintsOverlap(a, b)).toBe(expected);
        expect(footprintsOverlap(b, a)).toBe(expected);
      }),
      { numRuns: 3000, seed: 31 },
    );
  });

  it('matrices and vectors built from element offsets, shapes and leading dimensions', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 0, max: 5 }),
        fc.integer({ min: 0, max: 4 }),
        fc.integer({ min: 0, max: 40 }),
        fc.integer({ min: 0, max: 8 }),
        fc.integer({ min: 1, max: 7 }),
        fc.constantFrom(2, 4, 8),
        (offset, rows, columns, extra, vectorOffset, length, increment, elementBytes) => {
          const m = matrixFootprint(
            newFootprint(),
            buffer,
            offset,
            elementBytes,
            rows,
            columns,
            rows + extra,
          );
          const v = vectorFootprint(
            newFootprint(),
            buffer,
            vectorOffset,
            elementBytes,
            length,
            increment,
          );
          // Element sets, enumerated.
          const elements = new Set<number>();
          for (let j = 0; j < columns; j++) {
            for (let i = 0; i < rows; i++) elements.add(offset + i + j * (rows + extra));
          }
          let expected = false;
          for (let k = 0; k < length; k++) {
            if (elements.has(vectorOffset + k * increment)) expected = true;
          }
          expect(footprintsOverlap(m, v)).toBe(expected);
        },
      ),
      { numRuns: 2000, seed: 7 },
    );
  });

  it('never across buffers, never for empty footprints', () => {
    fc.assert(
      fc.property(footprint([{}, {}, {}]), footprint([{}, {}]), (a, b) => {
        expect(footprintsOverlap(a, b)).toBe(false);
      }),
      { numRuns: 200, seed: 3 },
    );
    const whole = matrixFootprint(newFootprint(), buffer, 0, 4, 10, 10, 10);
    expect(footprintsOverlap(whole, matrixFootprint(newFootprint(), buffer, 5, 4, 0, 3, 1))).toBe(
      false,
    );
  });

  it('interleaved row blocks of one matrix are apart; shifted by one row they are not', () => {
    // A 10 x 4 matrix: rows 0..4 and rows 5..9 of every column.
    const top = matrixFootprint(newFootprint(), buffer, 0, 8, 5, 4, 10);
    const bottom = matrixFootprint(newFootprint(), buffer, 5, 8, 5, 4, 10);
    const shifted = matrixFootprint(newFootprint(), buffer, 4, 8, 5, 4, 10);
    expect(footprintsOverlap(top, bottom)).toBe(false);
    expect(footprintsOverlap(top, shifted)).toBe(true);
  });
});

describe('assertApart', () => {
  it('names the call and both operands', () => {
    const a = matrixFootprint(newFootprint(), buffer, 0, 4, 4, 4, 4);
    const c = matrixFootprint(newFootprint(), buffer, 2, 4, 4, 4, 4);
    expect(() => assertApart('gemm', 'c', c, 'a', a)).toThrow(CudaArgumentError);
    expect(() => assertApart('gemm', 'c', c, 'a', a)).toThrow(/gemm: the output c overlaps a/);
    const apart = matrixFootprint(newFootprint(), buffer, 16, 4, 4, 4, 4);
    expect(assertApart('gemm', 'c', apart, 'a', a)).toBeUndefined();
  });
});

describe('assertSameContext', () => {
  const device0 = { ordinal: 0 };
  const context = (device: object, handle: bigint) =>
    ({
      device,
      handle,
      toString: () => `Context(device ${(device as typeof device0).ordinal})`,
    }) as unknown as Context;
  const primary = context(device0, 0x1000n);
  const second = context(device0, 0x2000n);
  const device1 = context({ ordinal: 1 }, 0x3000n);
  const streamOf = (ctx: Context) =>
    ({ context: ctx, toString: () => 'Stream(s)' }) as unknown as Stream;
  const arrayOf = (ctx: Context) => ({ buffer: { context: ctx } });

  it('passes an array of the stream context', () => {
    expect(assertSameContext('gemm', 'a', arrayOf(primary), streamOf(primary))).toBeUndefined();
  });

  it('refuses another device, naming operand, both devices and the stream', () => {
    expect(() => assertSameContext('gemm', 'b', arrayOf(device1), streamOf(primary))).toThrow(
      /gemm: b lives in Context\(device 1\), but Stream\(s\) belongs to Context\(device 0\)/,
    );
  });

  it('refuses another context of the same device, telling them apart by handle', () => {
    expect(() => assertSameContext('solve', 'a', arrayOf(second), streamOf(primary))).toThrow(
      /solve: a lives in Context\(device 0\) \(CUcontext 0x2000\), but Stream\(s\) belongs to Context\(device 0\) \(CUcontext 0x1000\)/,
    );
  });

  it('is refused iff the contexts differ (random pairs)', () => {
    const contexts = [primary, second, device1];
    fc.assert(
      fc.property(fc.nat(2), fc.nat(2), (i, j) => {
        let error: unknown;
        try {
          assertSameContext('f', 'x', arrayOf(contexts[i]!), streamOf(contexts[j]!));
        } catch (caught) {
          error = caught;
        }
        expect(error instanceof CudaArgumentError).toBe(i !== j);
      }),
      { seed: 5, numRuns: 50 },
    );
  });
});
