import { hostOnlyArray } from '@cuda-tasks/testing';
import { describe, expect, it, vi } from 'vitest';

// What luSolve hands its option check when called without options, recorded; the check then
// throws, so nothing further (no stream lookup, no native call) runs.
const seen: unknown[] = [];
vi.mock('@cuda-tasks/cudadrv', async (importOriginal) => {
  const original = await importOriginal<typeof import('@cuda-tasks/cudadrv')>();
  return {
    ...original,
    assertOptions: (_call: string, options: unknown) => {
      seen.push(options);
      throw new Error('options recorded');
    },
  };
});

import { luSolve } from './index.js';

describe('luSolve without options', () => {
  it('passes one shared frozen empty object, not a new one per call', () => {
    const factorization = {
      lu: hostOnlyArray('float64', [4, 4]),
      pivots: hostOnlyArray('int32', [4]),
    };
    const b = hostOnlyArray('float64', [4]);
    for (let i = 0; i < 2; i++) {
      expect(() => luSolve(factorization, b)).toThrow('options recorded');
    }
    expect(seen).toHaveLength(2);
    expect(seen[1]).toBe(seen[0]);
    expect(Object.isFrozen(seen[0])).toBe(true);
    expect(Object.keys(seen[0] as object)).toEqual([]);
  });
});
