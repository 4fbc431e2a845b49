import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { makeSearchRequest, searchQuery } from './client.js';
import { checkAgainstReference, searchReference } from './search-reference.js';

// The load script's CPU check of /search answers: the k best rows by float64 dot products,
// float32 scores within a tolerance, rows tied with the k-th exchangeable.

function embeddings(rows: number, dim: number, seed: number): Float32Array {
  let state = seed >>> 0;
  return Float32Array.from({ length: rows * dim }, () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 31 - 1;
  });
}

/** The answer a correct float32 search gives: the k best rows, float32 scores, best first. */
function answer(data: Float32Array, rows: number, dim: number, query: number[], k: number) {
  const dots = Array.from({ length: rows }, (_, i) => {
    let sum = 0;
    for (let j = 0; j < dim; j++)
      sum = Math.fround(sum + Math.fround(data[i + j * rows]! * query[j]!));
    return { row: i, score: sum };
  });
  dots.sort((a, b) => b.score - a.score);
  const best = dots.slice(0, k);
  return { indices: best.map((d) => d.row), scores: best.map((d) => d.score) };
}

describe('searchReference / checkAgainstReference', () => {
  it('accepts what a float32 search finds, for random embeddings, queries and k', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 20, max: 400 }),
        fc.integer({ min: 1, max: 48 }),
        fc.integer({ min: 1, max: 10 }),
        fc.nat(),
        (rows, dim, k, seed) => {
          const data = embeddings(rows, dim, seed);
          const query = searchQuery(dim, seed + 1);
          const reference = searchReference(data, rows, dim, query, k);
          const { indices, scores } = answer(data, rows, dim, query, k);
          expect(checkAgainstReference(reference, indices, scores)).toBeUndefined();
        },
      ),
      { numRuns: 100 },
    );
  });

  it('refuses a row that is not among the best, a wrong score, and a best row left out', () => {
    const rows = 500;
    const dim = 16;
    const data = embeddings(rows, dim, 3);
    const query = searchQuery(dim, 4);
    const reference = searchReference(data, rows, dim, query, 5);
    const { indices, scores } = answer(data, rows, dim, query, 5);
    const worst = answer(data, rows, dim, query, rows);
    const last = worst.indices[rows - 1]!;
    expect(checkAgainstReference(reference, [...indices.slice(0, 4), last], scores)).toMatch(
      /not among the k best/,
    );
    expect(
      checkAgainstReference(reference, indices, [scores[0]! + 0.5, ...scores.slice(1)]),
    ).toMatch(/its dot product on the CPU/);
    expect(checkAgainstReference(reference, indices.slice(1), scores.slice(1))).toMatch(
      /was not returned/,
    );
  });

  it('makeSearchRequest checks answers against a reference it is given', () => {
    const rows = 300;
    const dim = 8;
    const seed = 7001;
    const data = embeddings(rows, dim, 9);
    const reference = searchReference(data, rows, dim, searchQuery(dim, seed), 3);
    const request = makeSearchRequest(dim, rows, 3, seed, reference);
    const right = answer(data, rows, dim, searchQuery(dim, seed), 3);
    expect(request.check(right, 0)).toBeUndefined();
    const other = makeSearchRequest(dim, rows, 3, seed, reference);
    const wrong = { indices: [...right.indices].reverse(), scores: right.scores };
    expect(other.check(wrong, 0)).toMatch(/query 7001: /);
  });
});
