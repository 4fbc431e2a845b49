import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import { describe, expect, it } from 'vitest';
import { defaultSeed, mix64, nextSeed, seedAt, seedEpoch, setDefaultSeed } from './seeds.js';

describe('seed sequence', () => {
  it('is SplitMix64 (reference outputs for state 0)', () => {
    // The first three outputs of SplitMix64 seeded with 0 (Vigna's reference splitmix64.c).
    expect(seedAt(0n, 0)).toBe(0xe220a8397b1dcdafn);
    expect(seedAt(0n, 1)).toBe(0x6e789e6aa1b965f4n);
    expect(seedAt(0n, 2)).toBe(0x06c45d188009454fn);
    expect(mix64(0n)).toBe(0n);
  });

  it('stays within 64 bits for any base', () => {
    for (const base of [0n, 1n, 2n ** 64n - 1n, 0x123456789abcdefn]) {
      for (let i = 0; i < 5; i++) {
        const seed = seedAt(base, i);
        expect(seed >= 0n && seed < 2n ** 64n).toBe(true);
      }
    }
  });

  it('restarts on setDefaultSeed and moves to a new epoch', () => {
    const epoch = seedEpoch();
    setDefaultSeed(7);
    expect(seedEpoch()).toBe(epoch + 1);
    expect(defaultSeed()).toBe(7n);
    const first = [nextSeed(), nextSeed(), nextSeed()];
    expect(new Set(first).size).toBe(3);
    expect(first).toEqual([seedAt(7n, 0), seedAt(7n, 1), seedAt(7n, 2)]);
    setDefaultSeed(7n);
    expect([nextSeed(), nextSeed(), nextSeed()]).toEqual(first);
    setDefaultSeed(8);
    expect(nextSeed()).not.toBe(first[0]);
  });

  it('draws a random base without an argument', () => {
    setDefaultSeed();
    const a = defaultSeed();
    setDefaultSeed();
    expect(defaultSeed()).not.toBe(a);
  });

  it('rejects invalid seeds', () => {
    expect(() => setDefaultSeed(-1)).toThrow(CudaArgumentError);
    expect(() => setDefaultSeed(0.5)).toThrow(CudaArgumentError);
    expect(() => setDefaultSeed(2n ** 64n)).toThrow(CudaArgumentError);
  });
});
