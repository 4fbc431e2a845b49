import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BodyBytes, MIN_ADOPTED_BYTES } from './body.js';

/** A chunk of `length` bytes counting from `start`: its own ArrayBuffer, or a view into a larger one. */
function chunk(length: number, start: number, own: boolean): Uint8Array {
  const bytes = own ? new Uint8Array(length) : new Uint8Array(length + 8).subarray(3, 3 + length);
  for (let i = 0; i < length; i++) bytes[i] = (start + i) & 0xff;
  return bytes;
}

function joined(segments: readonly Uint8Array[]): Buffer {
  return Buffer.concat(segments);
}

describe('BodyBytes', () => {
  it('keeps a large chunk that owns its ArrayBuffer as a segment, without a copy', () => {
    const body = new BodyBytes(3 * MIN_ADOPTED_BYTES);
    const first = chunk(MIN_ADOPTED_BYTES, 0, true);
    const second = chunk(2 * MIN_ADOPTED_BYTES, MIN_ADOPTED_BYTES, true);
    body.append(first);
    body.append(second);
    const segments = body.segments();
    expect(segments).toHaveLength(2);
    expect(segments[0]).toBe(first);
    expect(segments[1]).toBe(second);
    expect(body.length).toBe(3 * MIN_ADOPTED_BYTES);
  });

  it('copies a chunk that shares its ArrayBuffer, or a small one', () => {
    const body = new BodyBytes();
    const shared = chunk(MIN_ADOPTED_BYTES, 0, false);
    const small = chunk(100, MIN_ADOPTED_BYTES, true);
    body.append(shared);
    body.append(small);
    const segments = body.segments();
    expect(segments).toHaveLength(1);
    expect(segments[0]!.buffer).not.toBe(shared.buffer);
    expect(segments[0]!.buffer).not.toBe(small.buffer);
    expect(segments[0]!.byteOffset).toBe(0);
    expect(joined(segments).equals(joined([shared, small]))).toBe(true);
  });

  it('fills a segment with room before it takes a chunk over', () => {
    const body = new BodyBytes(1000 + MIN_ADOPTED_BYTES);
    body.append(chunk(1000, 0, true));
    const large = chunk(MIN_ADOPTED_BYTES, 1000, true);
    body.append(large);
    const segments = body.segments();
    expect(segments).toHaveLength(1);
    expect(segments[0]!.buffer).not.toBe(large.buffer);
    expect(joined(segments).equals(joined([chunk(1000 + MIN_ADOPTED_BYTES, 0, true)]))).toBe(true);
  });

  it('holds any sequence of chunks in order, each segment over its own ArrayBuffer', () => {
    const chunkSpec = fc.record({
      length: fc.oneof(
        fc.integer({ min: 1, max: 300 }),
        fc.integer({ min: MIN_ADOPTED_BYTES - 2, max: MIN_ADOPTED_BYTES + 70_000 }),
      ),
      own: fc.boolean(),
    });
    fc.assert(
      fc.property(
        fc.array(chunkSpec, { minLength: 1, maxLength: 12 }),
        fc.boolean(),
        (specs, declared) => {
          let start = 0;
          const chunks = specs.map(({ length, own }) => {
            const made = chunk(length, start, own);
            start += length;
            return made;
          });
          const expected = joined(chunks); // before append: adopted chunks are the body's after
          const body = new BodyBytes(declared ? start : undefined);
          for (const made of chunks) body.append(made);
          const segments = body.segments();
          expect(body.length).toBe(start);
          expect(joined(segments).equals(expected)).toBe(true);
          for (const [i, segment] of segments.entries()) {
            expect(segment.byteOffset).toBe(0);
            if (i < segments.length - 1) expect(segment.buffer.byteLength).toBe(segment.length);
          }
          // Copied bytes take at most twice what they hold (segments grow with the body).
          const held = segments.reduce((sum, s) => sum + s.buffer.byteLength, 0);
          expect(held).toBeLessThanOrEqual(2 * start + 64 * 1024);
        },
      ),
      { numRuns: 200 },
    );
  });
});
