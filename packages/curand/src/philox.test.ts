import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { CaptureError, CudaArgumentError, DisposedError, type DType } from '@cuda-tasks/cudadrv';
import { hostOnlyArray, standInStream } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// The kernel launch replaced by a recorder: what each call would draw (distribution, dtype,
// length, layout, offset, seed, parameters), with nothing native.
const launches = vi.hoisted(
  () =>
    [] as {
      distribution: string;
      dtype: string;
      length: number;
      rows: number;
      ld: number;
      offset: bigint;
      seed: bigint;
      a: number;
      b: number;
    }[],
);
vi.mock('./philox-kernels.js', () => ({
  launchPhilox(
    distribution: string,
    array: { dtype: string; length: number },
    _stream: unknown,
    rows: number,
    ld: number,
    offset: number | bigint,
    seed: number | bigint,
    a: number,
    b: number,
  ) {
    launches.push({
      distribution,
      dtype: array.dtype,
      length: array.length,
      rows,
      ld,
      offset: BigInt(offset),
      seed: BigInt(seed),
      a,
      b,
    });
  },
}));

import {
  mulhi32,
  philox4x32,
  referenceBits,
  referenceNormal,
  referenceOutputs,
  referenceUniform,
  uniformDouble,
  uniformFloat,
} from '../test/philox-reference.js';
import { CounterState, outputsConsumed } from './counter.js';
import { Generator } from './generator.js';
import { PHILOX_SOURCE, PHILOX_SOURCE_SHA256 } from './philox-fatbin.generated.js';

const hex = (words: readonly number[]) => words.map((w) => w.toString(16).padStart(8, '0'));
const stream = standInStream();

beforeEach(() => {
  launches.length = 0;
});

describe('the JavaScript Philox4x32-10 reference', () => {
  it('gives the Random123 known-answer vectors', () => {
    expect(hex(philox4x32(0, 0, 0, 0, 0, 0))).toEqual([
      '6627e8d5',
      'e169c58d',
      'bc57ac4c',
      '9b00dbd8',
    ]);
    const ones = 0xffffffff;
    expect(hex(philox4x32(ones, ones, ones, ones, ones, ones))).toEqual([
      '408f276d',
      '41c83b0e',
      'a20bc7c6',
      '6d5451fd',
    ]);
    expect(
      hex(philox4x32(0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0)),
    ).toEqual(['d16cfe09', '94fdcceb', '5001e420', '24126ea1']);
  });

  it('multiplies high words exactly (against BigInt)', () => {
    fc.assert(
      fc.property(fc.nat({ max: 0xffffffff }), fc.nat({ max: 0xffffffff }), (a, b) => {
        expect(mulhi32(a, b)).toBe(Number((BigInt(a) * BigInt(b)) >> 32n));
      }),
      { numRuns: 2000, seed: 1 },
    );
  });

  it('numbers outputs as lanes of consecutive counters, from any offset (modulo 2^64)', () => {
    const seed = 0x0123456789abcdefn;
    const block0 = philox4x32(0, 0, 0, 0, 0x89abcdef, 0x01234567);
    const block1 = philox4x32(1, 0, 0, 0, 0x89abcdef, 0x01234567);
    expect([...referenceOutputs(seed, 0n, 8)]).toEqual([...block0, ...block1]);
    expect([...referenceOutputs(seed, 3n, 3)]).toEqual([block0[3], ...block1.slice(0, 2)]);
    // The last output of the sequence is followed by the first.
    const last = philox4x32(0xffffffff, 0x3fffffff, 0, 0, 0x89abcdef, 0x01234567);
    expect([...referenceOutputs(seed, 2n ** 64n - 1n, 2)]).toEqual([last[3], block0[0]]);
  });

  it('forms uniforms in (0, 1] as cuRAND does', () => {
    expect(uniformFloat(0)).toBe(2 ** -33);
    expect(uniformFloat(0xffffffff)).toBe(1);
    expect(uniformDouble(0, 0)).toBe(2 ** -54);
    // z = x ^ (y << 21): 53 bits, all ones here (2^53 - 1 is rounded up to 1).
    expect(uniformDouble(0x1fffff, 0xffffffff)).toBe(1);
    expect(uniformDouble(1 << 21, 1)).toBe(2 ** -54); // the overlapping bits cancel
    fc.assert(
      fc.property(fc.nat({ max: 0xffffffff }), fc.nat({ max: 0xffffffff }), (x, y) => {
        const z = BigInt(x) ^ (BigInt(y) << 21n);
        expect(uniformDouble(x, y)).toBe(Number(z) * 2 ** -53 + 2 ** -54);
        const u = uniformFloat(x);
        expect(u > 0 && u <= 1).toBe(true);
      }),
      { numRuns: 2000, seed: 2 },
    );
  });

  it('gives standard normals of the right moments (200,000 draws)', () => {
    for (const dtype of ['float32', 'float64'] as const) {
      const z = referenceNormal(dtype, 99n, 5n, 200_001);
      let sum = 0;
      let squares = 0;
      for (const value of z) {
        sum += value;
        squares += value * value;
      }
      const mean = sum / z.length;
      const variance = squares / z.length - mean * mean;
      // 5 standard errors: 5 / sqrt(n) for the mean, 5 sqrt(2 / n) for the variance.
      expect(Math.abs(mean)).toBeLessThan(5 / Math.sqrt(z.length));
      expect(Math.abs(variance - 1)).toBeLessThan(5 * Math.sqrt(2 / z.length));
    }
  });
});

describe('the generated fat binary', () => {
  it('was generated from the current src/philox.cu (else run pnpm --filter @cuda-tasks/curand gen:philox)', () => {
    const source = readFileSync(new URL('./philox.cu', import.meta.url), 'utf8');
    expect(createHash('sha256').update(source).digest('hex')).toBe(PHILOX_SOURCE_SHA256);
    expect(PHILOX_SOURCE).toBe(source);
  });
});

describe('the offset of a counter-based generator', () => {
  it('moves on by the outputs each call consumes', () => {
    expect(outputsConsumed('bits', 'uint32', 7)).toBe(7);
    expect(outputsConsumed('poisson', 'uint32', 7)).toBe(7);
    expect(outputsConsumed('uniform', 'float32', 7)).toBe(7);
    expect(outputsConsumed('uniform', 'float64', 7)).toBe(14);
    expect(outputsConsumed('normal', 'float32', 7)).toBe(8);
    expect(outputsConsumed('normal', 'float64', 7)).toBe(16);
    expect(outputsConsumed('logNormal', 'float32', 6)).toBe(6);
    expect(outputsConsumed('logNormal', 'float64', 6)).toBe(12);
  });

  it('advances modulo 2^64 and passes safe offsets as numbers', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        fc.array(fc.nat({ max: 2 ** 40 }), { maxLength: 8 }),
        (start, steps) => {
          const counter = new CounterState(5n, start);
          let expected = start;
          for (const step of steps) {
            counter.advance(step);
            expected = (expected + BigInt(step)) % 2n ** 64n;
            expect(counter.offset).toBe(expected);
            const argument = counter.offsetArgument;
            expect(BigInt(argument)).toBe(expected);
            expect(typeof argument).toBe(expected < 2n ** 53n ? 'number' : 'bigint');
          }
        },
      ),
      { numRuns: 500, seed: 3 },
    );
  });

  /** What a sequence of calls draws, from the recorded launches and the reference. */
  function drawn(dtype: DType, distribution: 'bits' | 'uniform'): number[] {
    return launches.flatMap((launch) => {
      expect(launch.distribution).toBe(distribution);
      return [
        ...(distribution === 'bits'
          ? referenceBits(launch.seed, launch.offset, launch.length)
          : referenceUniform(dtype as 'float32', launch.seed, launch.offset, launch.length)),
      ];
    });
  }

  it('filling n then m draws what filling n + m draws (bits, uniform float32 and float64)', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(
          ['bits', 'uint32'] as const,
          ['uniform', 'float32'] as const,
          ['uniform', 'float64'] as const,
        ),
        fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }),
        fc.nat({ max: 37 }),
        fc.nat({ max: 37 }),
        ([distribution, dtype], seed, offset, n, m) => {
          const split = new Generator({ seed, offset });
          launches.length = 0;
          for (const length of [n, m]) {
            const array = hostOnlyArray(dtype, [length], { byteLength: 8 * length });
            if (distribution === 'bits') split.bits(array as never, { stream });
            else split.uniform(array as never, { stream });
          }
          const parts = drawn(dtype, distribution);
          const whole = new Generator({ seed, offset });
          launches.length = 0;
          const array = hostOnlyArray(dtype, [n + m], { byteLength: 8 * (n + m) });
          if (distribution === 'bits') whole.bits(array as never, { stream });
          else whole.uniform(array as never, { stream });
          expect(parts).toEqual(drawn(dtype, distribution));
          expect(split.offset).toBe(whole.offset);
        },
      ),
      { numRuns: 200, seed: 4 },
    );
  });

  it('setOffset(k) draws what skipping k outputs draws; setSeed restarts at 0', () => {
    fc.assert(
      fc.property(fc.nat({ max: 1000 }), fc.integer({ min: 1, max: 20 }), (k, n) => {
        const skipping = new Generator({ seed: 17 });
        skipping.bits(hostOnlyArray('uint32', [k], { byteLength: 4 * k }), { stream });
        skipping.bits(hostOnlyArray('uint32', [n], { byteLength: 4 * n }), { stream });
        const skipped = launches.at(-1)!;
        const moved = new Generator({ seed: 17 });
        moved.setOffset(k);
        moved.bits(hostOnlyArray('uint32', [n], { byteLength: 4 * n }), { stream });
        expect(launches.at(-1)).toEqual(skipped);
        moved.setSeed(17);
        expect(moved.offset).toBe(0n);
        expect(moved.seed).toBe(17n);
      }),
      { numRuns: 100, seed: 5 },
    );
  });

  it('normal and log-normal count whole pairs; float64 ones whole blocks', () => {
    const generator = new Generator({ seed: 1, offset: 3 });
    generator.normal(hostOnlyArray('float32', [5], { byteLength: 20 }), {
      stream,
      mean: 2,
      stddev: 3,
    });
    expect(generator.offset).toBe(3n + 6n);
    generator.logNormal(hostOnlyArray('float64', [3], { byteLength: 24 }), { stream });
    expect(generator.offset).toBe(9n + 8n);
    generator.poisson(hostOnlyArray('uint32', [4], { byteLength: 16 }), 2.5, { stream });
    expect(generator.offset).toBe(17n + 4n);
    expect(
      launches.map((launch) => [launch.distribution, launch.offset, launch.a, launch.b]),
    ).toEqual([
      ['normal', 3n, 2, 3],
      ['logNormal', 9n, 0, 1],
      ['poisson', 17n, 2.5, 0],
    ]);
  });

  it('passes a 2-D block its rows and leading dimension, and writes into it directly', () => {
    const parent = hostOnlyArray('float32', [10, 6], { byteLength: 240 });
    const generator = new Generator({ seed: 1 });
    generator.uniform(parent.block(2, 1, 3, 4), { stream });
    expect(launches).toEqual([
      expect.objectContaining({ length: 12, rows: 3, ld: 10, offset: 0n }),
    ]);
    generator.uniform(parent, { stream });
    expect(launches.at(-1)).toEqual(expect.objectContaining({ length: 60, rows: 60, ld: 60 }));
  });

  it('an empty array launches nothing and leaves the offset', () => {
    const generator = new Generator({ seed: 1, offset: 9 });
    generator.normal(hostOnlyArray('float64', [0]), { stream });
    expect(launches).toEqual([]);
    expect(generator.offset).toBe(9n);
  });
});

describe('a counter-based generator', () => {
  it('is made, seeded, moved and disposed with no native call', () => {
    // No driver is loaded in this file: any native call would throw.
    const generator = new Generator({ seed: 2n ** 64n - 1n, offset: 12 });
    expect(generator.kind).toBe('philox');
    expect(generator.seed).toBe(2n ** 64n - 1n);
    expect(generator.offset).toBe(12n);
    generator.setSeed(3);
    generator.setOffset(2n ** 64n - 1n);
    generator.prepare();
    expect(generator.offset).toBe(2n ** 64n - 1n);
    expect(String(generator)).toBe('Generator(philox)');
    generator.dispose();
    expect(generator.disposed).toBe(true);
    expect(String(generator)).toBe('Generator(philox, disposed)');
    generator.dispose();
  });

  it('refuses a draw inside a graph capture (replays would repeat its numbers), before any launch', () => {
    const generator = new Generator({ seed: 5, offset: 3 });
    const capturing = { ...(stream as object), capturing: true } as unknown as typeof stream;
    const x = hostOnlyArray('float32', [8], { byteLength: 32 });
    expect(() => generator.uniform(x, { stream: capturing })).toThrow(CaptureError);
    expect(() => generator.normal(x, { stream: capturing })).toThrow(
      /every replay would draw the same numbers/,
    );
    expect(generator.offset).toBe(3n);
    expect(launches).toEqual([]);
  });

  it('refuses calls once disposed, and bad arguments, before any launch', () => {
    const generator = new Generator({ seed: 1 });
    const counts = hostOnlyArray('uint32', [4], { byteLength: 16 });
    expect(() => generator.poisson(counts, 2 ** 31 + 1, { stream })).toThrow(
      /lambda must be at most 2147483648/,
    );
    expect(() => generator.poisson(counts, 0, { stream })).toThrow(CudaArgumentError);
    expect(() => generator.handle).toThrow(/has no curandGenerator_t/);
    expect(() => new Generator({ ordering: 'legacy' })).toThrow(/ordering applies to cuRAND/);
    generator.dispose();
    expect(() => generator.bits(counts, { stream })).toThrow(DisposedError);
    expect(() => generator.setSeed(1)).toThrow(DisposedError);
    expect(() => generator.seed).toThrow(DisposedError);
    expect(launches).toEqual([]);
  });
});
