import { DeviceArray } from '@cuda-tasks/cudadrv';
import { describeGpu, rng } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { MAX_SCORED_DIM, MAX_SCORED_QUERIES, scoresLoads, searchScores } from './search-scores.js';

/**
 * Checks `scores` (rows x batch, column-major) against float64 dot products of the rows of
 * `embeddings` (rows x dim) with the columns of `queries` (dim x batch): within float32
 * rounding of a sum of dim terms, 1e-5 of the sum of the terms' magnitudes.
 */
function checkScores(
  embeddings: Float32Array,
  queries: Float32Array,
  scores: Float32Array,
  rows: number,
  dim: number,
  batch: number,
): void {
  let worst = 0;
  for (let b = 0; b < batch; b++) {
    for (let i = 0; i < rows; i++) {
      let sum = 0;
      let magnitude = 0;
      for (let j = 0; j < dim; j++) {
        const term = embeddings[i + j * rows]! * queries[j + b * dim]!;
        sum += term;
        magnitude += Math.abs(term);
      }
      const error = Math.abs(scores[i + b * rows]! - sum) / (1e-5 * magnitude + 1e-6);
      worst = Math.max(worst, error);
      if (!(error <= 1)) {
        throw new Error(
          `scores[${i}, ${b}] is ${scores[i + b * rows]}, the float64 dot product ${sum} (rows ${rows}, dim ${dim}, batch ${batch})`,
        );
      }
    }
  }
  expect(worst).toBeLessThanOrEqual(1);
}

function randomMatrix(length: number, seed: number): Float32Array {
  const next = rng(seed);
  return Float32Array.from({ length }, () => next() * 2 - 1);
}

async function scoresOf(rows: number, dim: number, batch: number, seed: number): Promise<void> {
  const e = randomMatrix(rows * dim, seed);
  const q = randomMatrix(dim * batch, seed + 1);
  const embeddings = DeviceArray.fromHost(e, [rows, dim]);
  const queries = DeviceArray.fromHost(q, [dim, batch]);
  const scores = DeviceArray.empty('float32', [rows, batch]);
  try {
    // Fresh allocations are aligned: rows decide the loads.
    expect(scoresLoads(embeddings, scores)).toBe(rows % 4 === 0 ? 'float4' : 'float');
    searchScores(embeddings, queries, scores);
    checkScores(e, q, (await scores.toHost()) as Float32Array, rows, dim, batch);
  } finally {
    embeddings.dispose();
    queries.dispose();
    scores.dispose();
  }
}

describeGpu('searchScores (the search batch kernel)', () => {
  it('scores every batch width 1..16 as float64 dot products do, with float and float4 loads (rows past a block step)', async () => {
    for (let batch = 1; batch <= MAX_SCORED_QUERIES; batch++) {
      await scoresOf(2 * 1024 + 37, 128, batch, 100 + batch);
      await scoresOf(2 * 1024 + 36, 128, batch, 200 + batch);
    }
  });

  it('random shapes agree with float64 dot products (fast-check)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 3000 }),
        fc.integer({ min: 1, max: MAX_SCORED_DIM }),
        fc.integer({ min: 1, max: MAX_SCORED_QUERIES }),
        fc.integer({ min: 0, max: 1_000_000 }),
        fc.boolean(),
        // Half the cases a multiple of 4 rows (the float4 loads), half any number.
        async (rows, dim, batch, seed, whole) =>
          scoresOf(whole ? 4 * Math.ceil(rows / 4) : rows, dim, batch, seed),
      ),
      { numRuns: 16, seed: 45 },
    );
  });

  it.each([
    [1500, 'float4'],
    [1501, 'float'],
  ] as const)(
    'writes nothing past its scores, %i rows (%s loads: a guard column after them stays as it was)',
    async (rows, loads) => {
      const dim = 64;
      const batch = 5;
      const e = randomMatrix(rows * dim, 7);
      const q = randomMatrix(dim * batch, 8);
      const embeddings = DeviceArray.fromHost(e, [rows, dim]);
      const queries = DeviceArray.fromHost(q, [dim, batch]);
      const whole = DeviceArray.fromHost(new Float32Array(rows * (batch + 1)).fill(42), [
        rows,
        batch + 1,
      ]);
      try {
        const scores = whole.block(0, 0, rows, batch);
        expect(scoresLoads(embeddings, scores)).toBe(loads);
        searchScores(embeddings, queries, scores);
        const host = (await whole.toHost()) as Float32Array;
        checkScores(e, q, host.subarray(0, rows * batch), rows, dim, batch);
        expect(host.subarray(rows * batch).every((value) => value === 42)).toBe(true);
      } finally {
        embeddings.dispose();
        queries.dispose();
        whole.dispose();
      }
    },
  );

  it('takes float loads where an array starts off a 16-byte boundary, and writes only its own scores', async () => {
    const rows = 1024;
    const dim = 32;
    const batch = 3;
    const e = randomMatrix(rows * dim, 11);
    const q = randomMatrix(dim * batch, 12);
    const embeddings = DeviceArray.fromHost(e, [rows, dim]);
    const queries = DeviceArray.fromHost(q, [dim, batch]);
    // The scores one float past an aligned start, one guard float before and after them.
    const whole = DeviceArray.fromHost(new Float32Array(rows * batch + 2).fill(42));
    try {
      const scores = whole.slice(1, rows * batch).reshape([rows, batch]);
      expect(scoresLoads(embeddings, scores)).toBe('float');
      searchScores(embeddings, queries, scores);
      const host = (await whole.toHost()) as Float32Array;
      checkScores(e, q, host.subarray(1, 1 + rows * batch), rows, dim, batch);
      expect([host[0], host[rows * batch + 1]]).toEqual([42, 42]);
    } finally {
      embeddings.dispose();
      queries.dispose();
      whole.dispose();
    }
  });

  it('refuses scores that overlap an input, before any GPU call', () => {
    const embeddings = DeviceArray.empty('float32', [100, 4]);
    const queries = DeviceArray.empty('float32', [4, 4]);
    try {
      expect(() => searchScores(embeddings, queries, embeddings)).toThrow(
        /scores overlaps embeddings/,
      );
    } finally {
      embeddings.dispose();
      queries.dispose();
    }
  });
});
