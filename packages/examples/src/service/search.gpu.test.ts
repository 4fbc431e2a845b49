import type { AddressInfo } from 'node:net';
import { stream, task } from '@cuda-tasks/task-runtime';
import { describeGpu, rng } from '@cuda-tasks/testing';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { SearchIndex, type SearchResult } from './search.js';
import { createServer, STREAM_HEADER } from './server.js';

/**
 * Checks a search result against float64 dot products on the CPU, allowing for float32
 * rounding: each returned score is its row's dot product (within `tolerance`), best first, and
 * the returned rows are exactly the k best up to ties closer than the tolerance: every row
 * returned scores at least the k-th best, and every row scoring clearly above it is returned.
 */
function checkAgainstCpu(
  embeddings: Float32Array,
  rows: number,
  dim: number,
  query: Float32Array,
  k: number,
  result: SearchResult,
): void {
  const reference = new Float64Array(rows);
  const tolerance = new Float64Array(rows);
  for (let i = 0; i < rows; i++) {
    let sum = 0;
    let magnitude = 0;
    for (let j = 0; j < dim; j++) {
      const term = embeddings[i + j * rows]! * query[j]!;
      sum += term;
      magnitude += Math.abs(term);
    }
    reference[i] = sum;
    // float32 sums of `dim` terms: well within 1e-5 of the sum of magnitudes for dim 128.
    tolerance[i] = 1e-5 * magnitude + 1e-6;
  }
  expect(result.indices).toHaveLength(k);
  expect(result.scores).toHaveLength(k);
  expect(new Set(result.indices).size).toBe(k);
  for (let r = 0; r < k; r++) {
    const row = result.indices[r]!;
    expect(Math.abs(result.scores[r]! - reference[row]!)).toBeLessThanOrEqual(tolerance[row]!);
    if (r > 0) expect(result.scores[r]!).toBeLessThanOrEqual(result.scores[r - 1]!);
  }
  const kth = [...reference].sort((x, y) => y - x)[k - 1]!;
  const slack = 2 * Math.max(...tolerance);
  const returned = new Set(result.indices);
  for (const row of returned) expect(reference[row]!).toBeGreaterThanOrEqual(kth - slack);
  for (let i = 0; i < rows; i++) {
    if (reference[i]! > kth + slack) expect(returned.has(i)).toBe(true);
  }
}

function randomQuery(dim: number, seed: number): Float32Array {
  const next = rng(seed);
  return Float32Array.from({ length: dim }, () => next() * 2 - 1);
}

describeGpu('the search index (GEMV + topk over embeddings on the device)', () => {
  const rows = 20_000;
  const dim = 128;
  let index: SearchIndex;
  let host: Float32Array;

  beforeAll(async () => {
    index = await SearchIndex.create({ rows, dim, seed: 3 });
    host = (await index.embeddings.toHost()) as Float32Array;
  });

  afterAll(() => index.dispose());

  it('draws the same embeddings from the same seed, and standard normal ones', async () => {
    const again = await SearchIndex.create({ rows, dim, seed: 3 });
    const other = await SearchIndex.create({ rows, dim, seed: 4 });
    try {
      expect((await again.embeddings.toHost()) as Float32Array).toEqual(host);
      expect((await other.embeddings.toHost()) as Float32Array).not.toEqual(host);
    } finally {
      again.dispose();
      other.dispose();
    }
    let sum = 0;
    let squares = 0;
    for (const value of host) {
      sum += value;
      squares += value * value;
    }
    const mean = sum / host.length;
    expect(Math.abs(mean)).toBeLessThan(0.01);
    expect(Math.abs(squares / host.length - mean * mean - 1)).toBeLessThan(0.01);
  });

  it('finds the k rows with the largest dot product, as the CPU does (k = 1, 10, 100)', async () => {
    for (const [k, seed] of [
      [1, 21],
      [10, 22],
      [100, 23],
    ] as const) {
      const query = randomQuery(dim, seed);
      checkAgainstCpu(host, rows, dim, query, k, await index.search(query, k));
    }
  });

  it('16 concurrent tasks read the embeddings on their own streams and get the serial answers', async () => {
    const queries = Array.from({ length: 16 }, (_, i) => randomQuery(dim, 100 + i));
    const serial: SearchResult[] = [];
    for (const query of queries) serial.push(await index.search(query, 10));
    const streams = new Set<unknown>();
    const concurrent = await Promise.all(
      queries.map((query) =>
        task(async () => {
          streams.add(stream());
          return index.search(query, 10);
        }),
      ),
    );
    expect(concurrent).toEqual(serial);
    expect(streams.size).toBeGreaterThan(1);
    // Only reads: the embeddings keep their writer, and the task streams are among the readers.
    const buffer = index.embeddings.buffer;
    for (const s of streams) {
      if (s !== buffer.lastStream) expect(buffer.readers).toContain(s);
    }
    checkAgainstCpu(host, rows, dim, queries[5]!, 10, concurrent[5]!);
  });

  it('rejects a query of the wrong length and a bad k before any native call', async () => {
    await expect(index.search(new Float32Array(3), 5)).rejects.toThrow(/Float32Array of 128/);
    await expect(index.search(new Float32Array(dim), 0)).rejects.toThrow(/k must be in 1\.\.1024/);
    await expect(
      index.searchMany([randomQuery(dim, 1), new Float32Array(3)], [5, 5]),
    ).rejects.toThrow(/searchMany: queries\[1\]: query must be a Float32Array of 128/);
    await expect(index.searchMany([randomQuery(dim, 1)], [5, 6])).rejects.toThrow(
      /queries and ks must be arrays of one length/,
    );
  });

  it('searchMany: one SGEMM and a top-k per column answer each query as the CPU does (batches of 2..64, mixed k)', async () => {
    const started = performance.now();
    let checked = 0;
    for (const [batch, seed] of [
      [2, 500],
      [7, 600],
      [64, 700],
    ] as const) {
      const queries = Array.from({ length: batch }, (_, j) => randomQuery(dim, seed + j));
      const ks = queries.map((_, j) => 1 + ((j * 37) % 100));
      const answers = await index.searchMany(queries, ks);
      expect(answers).toHaveLength(batch);
      for (let j = 0; j < batch; j++) {
        checkAgainstCpu(host, rows, dim, queries[j]!, ks[j]!, answers[j]!);
        checked++;
      }
    }
    console.log(
      `[search] searchMany: ${checked} answers in batches of 2, 7 and 64 (k 1..100) agree with float64 CPU dot products; ${(performance.now() - started).toFixed(0)} ms with the checks`,
    );
  });

  it('searchMany of one query is search; of none, nothing', async () => {
    const query = randomQuery(dim, 900);
    expect(await index.searchMany([query], [7])).toEqual([await index.search(query, 7)]);
    expect(await index.searchMany([], [])).toEqual([]);
  });
});

describeGpu('POST /search on the service', () => {
  it('answers the k nearest rows of its resident embeddings, on a stream per request', async () => {
    const rows = 20_000;
    const dim = 128;
    const errors: unknown[] = [];
    const server = createServer({
      search: { rows, dim, seed: 5 },
      onServerError: (error) => errors.push(error),
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // The same seed draws the same embeddings: the reference copy.
    const reference = await SearchIndex.create({ rows, dim, seed: 5 });
    try {
      const host = (await reference.embeddings.toHost()) as Float32Array;
      const queries = Array.from({ length: 8 }, (_, i) => randomQuery(dim, 300 + i));
      const answers = await Promise.all(
        queries.map(async (query, i) => {
          const response = await fetch(`${base}/search`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ query: Array.from(query), k: 5 + i }),
          });
          return {
            status: response.status,
            stream: response.headers.get(STREAM_HEADER),
            body: (await response.json()) as SearchResult,
          };
        }),
      );
      for (const [i, answer] of answers.entries()) {
        expect(answer.status).toBe(200);
        // Batched on the server (one SGEMM): checked against float64 dot products, which
        // allow for float32 rounding and for rows tied within it.
        checkAgainstCpu(host, rows, dim, queries[i]!, 5 + i, answer.body);
      }
      const batches = server.statistics().searchBatches!;
      expect(batches.searches).toBe(8);
      console.log(
        `[search] service: 8 concurrent searches answered in ${batches.batches} batches (largest ${batches.largestBatch}), each checked against the CPU`,
      );
      // Each answer names the task stream it ran on. Requests that do not overlap in time may
      // run on the same pooled stream (the pool hands back its most recent idle stream), so
      // how many distinct streams show up depends on timing and is not asserted here.
      for (const answer of answers) expect(answer.stream).toMatch(/\S/);
      expect(errors).toEqual([]);
    } finally {
      reference.dispose();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    }
  });
});
