/**
 * A host (JavaScript) reference of the 'philox' generator kind: Philox4x32-10 and the
 * formulas of each distribution, as src/philox.cu computes them. The tests check the kernels
 * against it; the package does not ship it.
 */

const TWO_32 = 2 ** 32;
const MASK_64 = (1n << 64n) - 1n;

/** The high 32 bits of the 64-bit product of two uint32 values. */
export function mulhi32(a: number, b: number): number {
  const al = a & 0xffff;
  const ah = a >>> 16;
  const bl = b & 0xffff;
  const bh = b >>> 16;
  const lo = al * bl;
  const mid1 = ah * bl;
  const mid2 = al * bh;
  const carry = ((lo >>> 16) + (mid1 & 0xffff) + (mid2 & 0xffff)) >>> 16;
  return (ah * bh + (mid1 >>> 16) + (mid2 >>> 16) + carry) >>> 0;
}

/**
 * Philox4x32-10 of a counter (four uint32) and a key (two uint32): four uint32 outputs.
 * @example philox4x32(0, 0, 0, 0, 0, 0); // [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]
 */
export function philox4x32(
  c0: number,
  c1: number,
  c2: number,
  c3: number,
  k0: number,
  k1: number,
): [number, number, number, number] {
  let x = c0 >>> 0;
  let y = c1 >>> 0;
  let z = c2 >>> 0;
  let w = c3 >>> 0;
  let key0 = k0 >>> 0;
  let key1 = k1 >>> 0;
  for (let round = 0; round < 10; round++) {
    const hi0 = mulhi32(0xd2511f53, x);
    const lo0 = Math.imul(0xd2511f53, x) >>> 0;
    const hi1 = mulhi32(0xcd9e8d57, z);
    const lo1 = Math.imul(0xcd9e8d57, z) >>> 0;
    const nx = (hi1 ^ y ^ key0) >>> 0;
    const nz = (hi0 ^ w ^ key1) >>> 0;
    x = nx;
    y = lo1;
    z = nz;
    w = lo0;
    key0 = (key0 + 0x9e3779b9) >>> 0;
    key1 = (key1 + 0xbb67ae85) >>> 0;
  }
  return [x, y, z, w];
}

/** The Philox block (four outputs) of counter (q lo, q hi, c2, 0) under `seed`. */
export function philoxBlock(seed: bigint, q: bigint, c2 = 0): [number, number, number, number] {
  return philox4x32(
    Number(q & 0xffffffffn),
    Number((q >> 32n) & 0xffffffffn),
    c2,
    0,
    Number(seed & 0xffffffffn),
    Number((seed >> 32n) & 0xffffffffn),
  );
}

/** `count` consecutive 32-bit outputs of the sequence of `seed`, from output `offset` on. */
export function referenceOutputs(seed: bigint, offset: bigint, count: number): Uint32Array {
  const out = new Uint32Array(count);
  let j = offset & MASK_64;
  let block: number[] = [];
  let blockIndex = -1n;
  for (let i = 0; i < count; i++) {
    const q = j >> 2n;
    if (q !== blockIndex) {
      block = philoxBlock(seed, q);
      blockIndex = q;
    }
    out[i] = block[Number(j & 3n)]!;
    j = (j + 1n) & MASK_64;
  }
  return out;
}

/** cuRAND's float uniform of one output: x 2^-32 + 2^-33 in float32 (in (0, 1]). */
export function uniformFloat(x: number): number {
  return Math.fround(Math.fround(x) * 2 ** -32 + 2 ** -33);
}

/** cuRAND's double uniform of two outputs: (x ^ (y << 21)) 2^-53 + 2^-54 (in (0, 1]). */
export function uniformDouble(x: number, y: number): number {
  // x ^ (y << 21) as 53 bits: y's bits 0..10 overlap x's bits 21..31.
  const low = (x ^ ((y & 0x7ff) << 21)) >>> 0;
  const z = (y >>> 11) * TWO_32 + low;
  return z * 2 ** -53 + 2 ** -54;
}

/** (s sin v, s cos v) of cuRAND's float Box-Muller of (x, y), computed in float64. */
export function boxMullerFloat(x: number, y: number): [number, number] {
  const u = uniformFloat(x);
  const v = Math.fround(
    Math.fround(y) * Math.fround(2 ** -32 * 2 * Math.PI) + Math.fround(2 ** -32 * Math.PI),
  );
  const s = Math.sqrt(-2 * Math.log(u));
  return [s * Math.sin(v), s * Math.cos(v)];
}

/** (s sin pi v, s cos pi v) of cuRAND's double Box-Muller of one block (x0, x1, y0, y1). */
export function boxMullerDouble(x0: number, x1: number, y0: number, y1: number): [number, number] {
  const u = uniformDouble(x0, x1);
  // zy 2^-52 + 2^-53 is exactly twice the uniform (doubling commutes with rounding).
  const v = 2 * uniformDouble(y0, y1);
  const s = Math.sqrt(-2 * Math.log(u));
  return [s * Math.sin(Math.PI * v), s * Math.cos(Math.PI * v)];
}

/** What `Generator.bits` writes for `count` elements from `offset`. */
export function referenceBits(seed: bigint, offset: bigint, count: number): Uint32Array {
  return referenceOutputs(seed, offset, count);
}

/** What `Generator.uniform` writes, in float64 (float32: each value exactly as the kernel rounds it). */
export function referenceUniform(
  dtype: 'float32' | 'float64',
  seed: bigint,
  offset: bigint,
  count: number,
): Float64Array {
  const out = new Float64Array(count);
  if (dtype === 'float32') {
    const outputs = referenceOutputs(seed, offset, count);
    for (let i = 0; i < count; i++) out[i] = uniformFloat(outputs[i]!);
  } else {
    const outputs = referenceOutputs(seed, offset, 2 * count);
    for (let i = 0; i < count; i++) out[i] = uniformDouble(outputs[2 * i]!, outputs[2 * i + 1]!);
  }
  return out;
}

/** What `Generator.normal` writes (standard normal, before mean and stddev), in float64. */
export function referenceNormal(
  dtype: 'float32' | 'float64',
  seed: bigint,
  offset: bigint,
  count: number,
): Float64Array {
  const out = new Float64Array(count);
  const pairs = Math.ceil(count / 2);
  if (dtype === 'float32') {
    const outputs = referenceOutputs(seed, offset, 2 * pairs);
    for (let p = 0; p < pairs; p++) {
      const [a, b] = boxMullerFloat(outputs[2 * p]!, outputs[2 * p + 1]!);
      out[2 * p] = a;
      if (2 * p + 1 < count) out[2 * p + 1] = b;
    }
  } else {
    const outputs = referenceOutputs(seed, offset, 4 * pairs);
    for (let p = 0; p < pairs; p++) {
      const [a, b] = boxMullerDouble(
        outputs[4 * p]!,
        outputs[4 * p + 1]!,
        outputs[4 * p + 2]!,
        outputs[4 * p + 3]!,
      );
      out[2 * p] = a;
      if (2 * p + 1 < count) out[2 * p + 1] = b;
    }
  }
  return out;
}
