import { describe, expect, it } from 'vitest';
import { latencyReference } from '../src/paired.js';

// The same-process latency-bound job's CPU reference (the GPU rows run only on a GPU machine).

describe('latencyReference', () => {
  it('runs the 20 steps of y <- a x + b, x <- a y + b and returns x', () => {
    // From 0 with a = 1/2, b = 1: the k-th step's value is 2 - 2^(1 - k), exact in float32;
    // the 20th (the last, writing x) is 2 - 2^-19.
    const x = latencyReference(new Float32Array(3), 0.5, 1);
    expect(Array.from(x)).toEqual([2 - 2 ** -19, 2 - 2 ** -19, 2 - 2 ** -19]);
    // 2 is the fixed point; other starts approach it as 2 + (s - 2) / 2^20.
    expect(Array.from(latencyReference(Float32Array.of(2), 0.5, 1))).toEqual([2]);
    const s = 1.25;
    expect(latencyReference(Float32Array.of(s), 0.5, 1)[0]).toBeCloseTo(2 + (s - 2) / 2 ** 20, 6);
    // With a = 1, b = 0.25: x gains 0.25 a step, 20 steps in all (x and y take turns).
    expect(Array.from(latencyReference(Float32Array.of(1), 1, 0.25))).toEqual([6]);
  });

  it('rounds each step to float32, as the kernel stores it', () => {
    // 0.1 is not a float32; one step's value is a float32 however it started.
    const [x] = latencyReference(Float32Array.of(0.1), 0.3, 0.7);
    expect(Math.fround(x!)).toBe(x);
  });
});
