import { describe, expect, it } from 'vitest';
import { topkScores } from '../src/kernels.js';

describe('topk_1m_x* scores', () => {
  it("are murmur3's 32-bit finalizer of i over 2^32 in float32, as python/peers.py builds them", () => {
    const length = 200_003;
    const scores = topkScores(length);
    // The finalizer in BigInt, as PyTorch's int64 tensors compute it (products masked to 32 bits).
    const mask = 2n ** 32n - 1n;
    const reference = new Float32Array(length);
    for (let i = 0; i < length; i++) {
      let h = BigInt(i);
      h ^= h >> 16n;
      h = (h * 0x85ebca6bn) & mask;
      h ^= h >> 13n;
      h = (h * 0xc2b2ae35n) & mask;
      h ^= h >> 16n;
      reference[i] = Number(h) / 2 ** 32;
    }
    expect(scores).toEqual(reference);
    // Spread over [0, 1) in no order: every tenth of the range holds about a tenth, and a
    // value rises over the one before about half the time.
    const counts = new Array(10).fill(0);
    for (const value of scores) counts[Math.floor(value * 10)]++;
    for (const count of counts) expect(Math.abs(count - length / 10)).toBeLessThan(length / 100);
    let rises = 0;
    for (let i = 1; i < length; i++) if (scores[i]! > scores[i - 1]!) rises++;
    expect(Math.abs(rises / (length - 1) - 0.5)).toBeLessThan(0.01);
  });
});
