import { describe, expect, it } from 'vitest';
import {
  assertDType,
  bfloat16BitsToFloat32,
  DTYPES,
  decodeHalf,
  dtypeBytes,
  dtypeOfHost,
  encodeHalf,
  float16BitsToFloat32,
  float32ToBfloat16Bits,
  float32ToFloat16Bits,
} from './dtype.js';
import { CudaArgumentError } from './errors.js';

/** A small seeded PRNG (mulberry32), so failures reproduce. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Random float32 values spread over exponents 2^low .. 2^high, both signs. */
function randomFloat32s(count: number, low: number, high: number, seed: number): number[] {
  const random = prng(seed);
  const values: number[] = [];
  for (let i = 0; i < count; i++) {
    const exponent = low + Math.floor(random() * (high - low + 1));
    const sign = random() < 0.5 ? -1 : 1;
    values.push(Math.fround(sign * (1 + random()) * 2 ** exponent));
  }
  return values;
}

/** binary16 value from its fields, written independently of the code under test. */
function referenceHalf(bits: number): number {
  const sign = bits >> 15 ? -1 : 1;
  const exponent = (bits >> 10) & 31;
  const fraction = bits & 1023;
  if (exponent === 31) return fraction === 0 ? sign * Infinity : Number.NaN;
  if (exponent === 0) return sign * (fraction / 1024) * 2 ** -14;
  return sign * (fraction / 1024 + 1) * 2 ** (exponent - 15);
}

/** bfloat16 value from its fields (8 exponent bits, 7 fraction bits). */
function referenceBfloat(bits: number): number {
  const sign = bits >> 15 ? -1 : 1;
  const exponent = (bits >> 7) & 255;
  const fraction = bits & 127;
  if (exponent === 255) return fraction === 0 ? sign * Infinity : Number.NaN;
  if (exponent === 0) return sign * (fraction / 128) * 2 ** -126;
  return sign * (fraction / 128 + 1) * 2 ** (exponent - 127);
}

/**
 * Round-to-nearest-even by search: `table[i]` is the value of positive bit pattern `i`
 * (the last entry is the first value past the largest finite one, which stands for infinity).
 */
function nearestBits(table: number[], value: number): number {
  const sign = value < 0 || Object.is(value, -0) ? 0x8000 : 0;
  const magnitude = Math.abs(value);
  let low = 0;
  let high = table.length - 1;
  if (magnitude >= table[high]!) return sign | high;
  while (high - low > 1) {
    const middle = (low + high) >> 1;
    if (table[middle]! <= magnitude) low = middle;
    else high = middle;
  }
  const below = magnitude - table[low]!;
  const above = table[high]! - magnitude;
  if (below < above) return sign | low;
  if (above < below) return sign | high;
  return sign | (low % 2 === 0 ? low : high);
}

const halfTable = Array.from({ length: 0x7c00 }, (_, i) => referenceHalf(i));
halfTable.push(2 ** 16); // 0x7c00: where rounding goes to infinity
const bfloatTable = Array.from({ length: 0x7f80 }, (_, i) => referenceBfloat(i));
bfloatTable.push(2 ** 128); // 0x7f80: infinity

describe('float16', () => {
  it.each([
    [1, 0x3c00],
    [-2, 0xc000],
    [0.5, 0x3800],
    [65504, 0x7bff],
    [65519, 0x7bff],
    [65520, 0x7c00],
    [1e6, 0x7c00],
    [-1e6, 0xfc00],
    [Infinity, 0x7c00],
    [-Infinity, 0xfc00],
    [2 ** -24, 0x0001],
    [2 ** -14, 0x0400],
    [1023 * 2 ** -24, 0x03ff],
    [0.1, 0x2e66],
    [1 / 3, 0x3555],
    [0, 0x0000],
    [-0, 0x8000],
    [2 ** -26, 0x0000],
    [-(2 ** -26), 0x8000],
  ])('encodes %d to bits %i', (value, bits) => {
    expect(float32ToFloat16Bits(value)).toBe(bits);
  });

  it('rounds ties to even', () => {
    // Halfway between 1 (0x3c00, even) and 1 + 2^-10 (0x3c01): stays 0x3c00.
    expect(float32ToFloat16Bits(1 + 2 ** -11)).toBe(0x3c00);
    // Halfway between 0x3c01 and 0x3c02 (even): goes up.
    expect(float32ToFloat16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02);
    // Just above the tie rounds up.
    expect(float32ToFloat16Bits(Math.fround(1 + 2 ** -11 + 2 ** -20))).toBe(0x3c01);
    // Subnormal ties: 2^-25 is halfway between 0 and 2^-24 -> 0; 3 * 2^-25 -> 2 * 2^-24.
    expect(float32ToFloat16Bits(2 ** -25)).toBe(0x0000);
    expect(float32ToFloat16Bits(3 * 2 ** -25)).toBe(0x0002);
    expect(float32ToFloat16Bits(Math.fround(2 ** -25 + 2 ** -35))).toBe(0x0001);
    // Rounding that carries from the largest subnormal into the smallest normal.
    expect(float32ToFloat16Bits(1023.5 * 2 ** -24)).toBe(0x0400);
    // Rounding that carries into the exponent: 2 - 2^-12 -> 2.
    expect(float32ToFloat16Bits(2 - 2 ** -12)).toBe(0x4000);
  });

  it('NaN stays NaN', () => {
    const bits = float32ToFloat16Bits(Number.NaN);
    expect(bits & 0x7c00).toBe(0x7c00);
    expect(bits & 0x3ff).not.toBe(0);
    expect(float16BitsToFloat32(bits)).toBeNaN();
    expect(float16BitsToFloat32(0x7e00)).toBeNaN();
    expect(float16BitsToFloat32(0xfc01)).toBeNaN();
  });

  it('decodes every bit pattern to the value its fields stand for', () => {
    for (let bits = 0; bits < 0x10000; bits++) {
      const expected = referenceHalf(bits);
      const actual = float16BitsToFloat32(bits);
      if (Number.isNaN(expected)) expect(actual).toBeNaN();
      else if (actual !== expected || Object.is(actual, -0) !== Object.is(expected, -0)) {
        expect.fail(`0x${bits.toString(16)} decoded to ${actual}, expected ${expected}`);
      }
    }
  });

  it('encode(decode(bits)) is the identity on every non-NaN pattern', () => {
    for (let bits = 0; bits < 0x10000; bits++) {
      const value = float16BitsToFloat32(bits);
      if (Number.isNaN(value)) continue;
      const back = float32ToFloat16Bits(value);
      if (back !== bits) expect.fail(`0x${bits.toString(16)} came back as 0x${back.toString(16)}`);
    }
  });

  it('encodes random float32 values to the nearest half (ties to even)', () => {
    const values = randomFloat32s(20000, -27, 17, 1);
    for (const value of values) {
      const expected = nearestBits(halfTable, value);
      const actual = float32ToFloat16Bits(value);
      if (actual !== expected) {
        expect.fail(`${value}: 0x${actual.toString(16)}, expected 0x${expected.toString(16)}`);
      }
    }
  });

  it('round trips within half precision error bounds', () => {
    for (const value of randomFloat32s(5000, -24, 15, 2)) {
      const back = float16BitsToFloat32(float32ToFloat16Bits(value));
      const magnitude = Math.abs(value);
      // Half an ulp: 2^-11 relative for normals, 2^-25 absolute for subnormals.
      const bound = magnitude >= 2 ** -14 ? magnitude * 2 ** -11 : 2 ** -25;
      expect(Math.abs(back - value)).toBeLessThanOrEqual(bound);
      expect(Math.sign(back) === Math.sign(value) || back === 0).toBe(true);
    }
  });
});

describe('bfloat16', () => {
  it.each([
    [1, 0x3f80],
    [-2, 0xc000],
    [0.1, 0x3dcd],
    [3.140625, 0x4049],
    [0, 0x0000],
    [-0, 0x8000],
    [Infinity, 0x7f80],
    [-Infinity, 0xff80],
    [3.3895313892515355e38, 0x7f7f],
    [3.4028234663852886e38, 0x7f80], // float32 max rounds past the largest bfloat16
  ])('encodes %d to bits %i', (value, bits) => {
    expect(float32ToBfloat16Bits(value)).toBe(bits);
  });

  it('rounds ties to even', () => {
    const fromBits = (bits: number) => {
      const view = new DataView(new ArrayBuffer(4));
      view.setUint32(0, bits);
      return view.getFloat32(0);
    };
    expect(float32ToBfloat16Bits(fromBits(0x3f808000))).toBe(0x3f80); // tie, even below
    expect(float32ToBfloat16Bits(fromBits(0x3f818000))).toBe(0x3f82); // tie, even above
    expect(float32ToBfloat16Bits(fromBits(0x3f808001))).toBe(0x3f81); // above the tie
    expect(float32ToBfloat16Bits(fromBits(0x3f807fff))).toBe(0x3f80); // below the tie
    expect(float32ToBfloat16Bits(fromBits(0xbf818000))).toBe(0xbf82); // negative tie
  });

  it('NaN stays NaN', () => {
    const bits = float32ToBfloat16Bits(Number.NaN);
    expect(bits & 0x7f80).toBe(0x7f80);
    expect(bits & 0x7f).not.toBe(0);
    expect(bfloat16BitsToFloat32(bits)).toBeNaN();
  });

  it('decodes every bit pattern to the value its fields stand for', () => {
    for (let bits = 0; bits < 0x10000; bits++) {
      const expected = referenceBfloat(bits);
      const actual = bfloat16BitsToFloat32(bits);
      if (Number.isNaN(expected)) expect(actual).toBeNaN();
      else if (actual !== expected || Object.is(actual, -0) !== Object.is(expected, -0)) {
        expect.fail(`0x${bits.toString(16)} decoded to ${actual}, expected ${expected}`);
      }
    }
  });

  it('encodes random float32 values to the nearest bfloat16 (ties to even)', () => {
    const values = randomFloat32s(20000, -133, 127, 3);
    for (const value of values) {
      const expected = nearestBits(bfloatTable, value);
      const actual = float32ToBfloat16Bits(value);
      if (actual !== expected) {
        expect.fail(`${value}: 0x${actual.toString(16)}, expected 0x${expected.toString(16)}`);
      }
    }
  });

  it('round trips within bfloat16 error bounds', () => {
    for (const value of randomFloat32s(5000, -120, 120, 4)) {
      const back = bfloat16BitsToFloat32(float32ToBfloat16Bits(value));
      expect(Math.abs(back - value)).toBeLessThanOrEqual(Math.abs(value) * 2 ** -8);
    }
  });
});

describe('encodeHalf / decodeHalf', () => {
  it('convert whole arrays element by element', () => {
    const values = [1, -2, 0.1, 65504];
    expect(Array.from(encodeHalf('float16', values))).toEqual([0x3c00, 0xc000, 0x2e66, 0x7bff]);
    expect(Array.from(encodeHalf('bfloat16', values))).toEqual([
      0x3f80,
      0xc000,
      0x3dcd,
      float32ToBfloat16Bits(65504),
    ]);
    const decoded = decodeHalf('float16', new Uint16Array([0x3c00, 0xc000, 0x0001, 0x7c00]));
    expect(decoded).toBeInstanceOf(Float32Array);
    expect(Array.from(decoded)).toEqual([1, -2, Math.fround(2 ** -24), Infinity]);
    expect(Array.from(decodeHalf('bfloat16', new Uint16Array([0x3f80, 0x4049])))).toEqual([
      1, 3.140625,
    ]);
  });
});

describe('dtype table and checks', () => {
  it('dtypeBytes', () => {
    expect(dtypeBytes('float32')).toBe(4);
    expect(dtypeBytes('float64')).toBe(8);
    expect(dtypeBytes('int32')).toBe(4);
    expect(dtypeBytes('uint32')).toBe(4);
    expect(dtypeBytes('int8')).toBe(1);
    expect(dtypeBytes('uint8')).toBe(1);
    expect(dtypeBytes('float16')).toBe(2);
    expect(dtypeBytes('bfloat16')).toBe(2);
    expect(DTYPES.float16.host).toBe(Float32Array);
    expect(DTYPES.bfloat16.host).toBe(Float32Array);
  });

  it('dtypeOfHost maps each typed array to its dtype', () => {
    expect(dtypeOfHost(new Float32Array(1))).toBe('float32');
    expect(dtypeOfHost(new Float64Array(1))).toBe('float64');
    expect(dtypeOfHost(new Int32Array(1))).toBe('int32');
    expect(dtypeOfHost(new Uint32Array(1))).toBe('uint32');
    expect(dtypeOfHost(new Int8Array(1))).toBe('int8');
    expect(dtypeOfHost(new Uint8Array(1))).toBe('uint8');
  });

  it('dtypeOfHost rejects other views with the type name', () => {
    expect(() => dtypeOfHost(new Int16Array(1))).toThrow(CudaArgumentError);
    expect(() => dtypeOfHost(new Int16Array(1))).toThrow(/unsupported host array Int16Array/);
    expect(() => dtypeOfHost(new BigInt64Array(1))).toThrow(/BigInt64Array/);
    expect(() => dtypeOfHost(new DataView(new ArrayBuffer(4)))).toThrow(/DataView/);
  });

  it('assertDType accepts the supported names and rejects others with the list', () => {
    for (const name of Object.keys(DTYPES)) expect(() => assertDType(name)).not.toThrow();
    expect(() => assertDType('float33')).toThrow(CudaArgumentError);
    expect(() => assertDType('float33')).toThrow(
      'unknown dtype "float33"; expected one of float32, float64, int32, uint32, int8, uint8, float16, bfloat16',
    );
    expect(() => assertDType(42)).toThrow('unknown dtype 42');
    expect(() => assertDType(undefined)).toThrow(CudaArgumentError);
    expect(() => assertDType('Float32')).toThrow(CudaArgumentError);
  });
});
