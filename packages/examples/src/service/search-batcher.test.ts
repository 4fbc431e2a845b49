/**
 * The search batcher without a GPU: a stand-in backend answers each batch by a float64 top-k
 * on the CPU, so every search can be checked for getting its own answer, whatever batch it
 * joined; the batch bounds, cancellation, failures and closing. Then the service's `/search`
 * through real sockets with such a backend.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import type { SearchResult } from './search.js';
import {
  type BatchSearchBackend,
  batchSummary,
  DEFAULT_SEARCH_BATCH,
  parseSearchBatchLines,
  SearchBatcher,
  searchBatchLine,
  searchBatchOptions,
} from './search-batcher.js';
import { createServer, type GpuService, type SearchBackend } from './server.js';

/** The k best rows of `query` over `rows` x `dim` column-major `embeddings` (ties: lower row). */
function cpuSearch(
  embeddings: Float32Array,
  rows: number,
  dim: number,
  query: Float32Array,
  k: number,
): SearchResult {
  const scores = Array.from({ length: rows }, (_, i) => {
    let sum = 0;
    for (let j = 0; j < dim; j++) sum += embeddings[i + j * rows]! * query[j]!;
    return sum;
  });
  const order = scores.map((_, i) => i).sort((a, b) => scores[b]! - scores[a]! || a - b);
  const indices = order.slice(0, k);
  return { indices, scores: indices.map((i) => scores[i]!) };
}

/** A backend over small random embeddings, recording each batch and how many run at once. */
function cpuBackend(rows: number, dim: number, seed: number, delayMs: () => number = () => 1) {
  let state = seed >>> 0 || 1;
  const embeddings = Float32Array.from({ length: rows * dim }, () => {
    state = (state * 1103515245 + 12345) >>> 0;
    return (state / 2 ** 32) * 2 - 1;
  });
  const record = { batches: [] as number[], running: 0, most: 0 };
  const backend: BatchSearchBackend & { record: typeof record } = {
    record,
    async searchMany(queries, ks) {
      record.batches.push(queries.length);
      record.running++;
      record.most = Math.max(record.most, record.running);
      try {
        await sleep(delayMs());
        return queries.map((query, j) => cpuSearch(embeddings, rows, dim, query, ks[j]!));
      } finally {
        record.running--;
      }
    },
    checkQuery(query, k) {
      if (!(query instanceof Float32Array) || query.length !== dim) {
        throw new CudaArgumentError(`query must be a Float32Array of ${dim}`);
      }
      if (!Number.isSafeInteger(k) || k < 1 || k > rows) {
        throw new CudaArgumentError(`k must be in 1..${rows}, got ${k}`);
      }
    },
  };
  return { backend, embeddings };
}

function query(dim: number, seed: number): Float32Array {
  return Float32Array.from({ length: dim }, (_, i) => Math.sin(seed * 7.1 + i * 1.3));
}

describe('SearchBatcher', () => {
  it('searches that arrive together run as one batch, each getting its own answer', async () => {
    const { backend, embeddings } = cpuBackend(200, 8, 3);
    const batcher = new SearchBatcher(backend);
    const queries = Array.from({ length: 10 }, (_, i) => query(8, i));
    const answers = await Promise.all(queries.map((q, i) => batcher.search(q, 1 + i)));
    expect(backend.record.batches).toEqual([10]);
    for (const [i, q] of queries.entries()) {
      expect(answers[i]).toEqual(cpuSearch(embeddings, 200, 8, q, 1 + i));
    }
    expect(batcher.statistics()).toEqual({
      searches: 10,
      batches: 1,
      largestBatch: 10,
      waiting: 0,
      inFlight: 0,
    });
  });

  it('random arrivals: every search gets its own answer; batches within maxBatch, maxInFlight at once', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          maxBatch: fc.integer({ min: 1, max: 9 }),
          maxInFlight: fc.integer({ min: 1, max: 3 }),
          // Per search: its query seed, its k, and how many event-loop turns before it arrives.
          searches: fc.array(
            fc.record({
              seed: fc.integer({ min: 0, max: 1000 }),
              k: fc.integer({ min: 1, max: 12 }),
              after: fc.integer({ min: 0, max: 3 }),
            }),
            { minLength: 1, maxLength: 40 },
          ),
          delays: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 8 }),
        }),
        async ({ maxBatch, maxInFlight, searches, delays }) => {
          let call = 0;
          const { backend, embeddings } = cpuBackend(
            60,
            4,
            11,
            () => delays[call++ % delays.length]!,
          );
          const batcher = new SearchBatcher(backend, { maxBatch, maxInFlight });
          const answers = await Promise.all(
            searches.map(async ({ seed, k, after }) => {
              for (let t = 0; t < after; t++) await new Promise((r) => setImmediate(r));
              return batcher.search(query(4, seed), k);
            }),
          );
          for (const [i, { seed, k }] of searches.entries()) {
            expect(answers[i]).toEqual(cpuSearch(embeddings, 60, 4, query(4, seed), k));
          }
          expect(Math.max(...backend.record.batches)).toBeLessThanOrEqual(maxBatch);
          expect(backend.record.batches.reduce((a, b) => a + b, 0)).toBe(searches.length);
          expect(backend.record.most).toBeLessThanOrEqual(maxInFlight);
          expect(batcher.statistics()).toMatchObject({ waiting: 0, inFlight: 0 });
        },
      ),
      { numRuns: 60 },
    );
  });

  it('while maxInFlight batches run, searches wait and go as the next batch', async () => {
    const gates: (() => void)[] = [];
    const batches: number[] = [];
    const backend: BatchSearchBackend = {
      async searchMany(queries, ks) {
        batches.push(queries.length);
        await new Promise<void>((resolve) => gates.push(resolve));
        return ks.map((k) => ({ indices: [k], scores: [k] }));
      },
    };
    const batcher = new SearchBatcher(backend, { maxInFlight: 1, maxBatch: 4 });
    const first = batcher.search(query(2, 0), 1);
    await new Promise((r) => setImmediate(r));
    expect(batches).toEqual([1]);
    // Six more arrive while the first batch runs: they wait.
    const later = Array.from({ length: 6 }, (_, i) => batcher.search(query(2, i), 2 + i));
    await sleep(5);
    expect(batches).toEqual([1]);
    expect(batcher.statistics()).toMatchObject({ waiting: 6, inFlight: 1 });
    gates.shift()!();
    expect(await first).toEqual({ indices: [1], scores: [1] });
    await sleep(5);
    expect(batches).toEqual([1, 4]);
    gates.shift()!();
    await sleep(5);
    expect(batches).toEqual([1, 4, 2]);
    gates.shift()!();
    expect((await Promise.all(later)).map((answer) => answer.indices[0])).toEqual([
      2, 3, 4, 5, 6, 7,
    ]);
  });

  it('a bad query fails its own call at once, never the batch it would have joined', async () => {
    const { backend, embeddings } = cpuBackend(50, 4, 5);
    const batcher = new SearchBatcher(backend);
    const good = batcher.search(query(4, 1), 3);
    const wrongLength = batcher.search(new Float32Array(3), 3);
    const wrongK = batcher.search(query(4, 2), 0);
    await expect(wrongLength).rejects.toThrow(CudaArgumentError);
    await expect(wrongK).rejects.toThrow(/k must be in 1\.\.50, got 0/);
    expect(await good).toEqual(cpuSearch(embeddings, 50, 4, query(4, 1), 3));
    expect(backend.record.batches).toEqual([1]);
  });

  it('an aborted search rejects at once with its reason; waiting, it leaves the line; running, the batch goes on', async () => {
    const gates: (() => void)[] = [];
    const batches: number[][] = [];
    const backend: BatchSearchBackend = {
      async searchMany(_queries, ks) {
        batches.push([...ks]);
        await new Promise<void>((resolve) => gates.push(resolve));
        return ks.map((k) => ({ indices: [k], scores: [k] }));
      },
    };
    const batcher = new SearchBatcher(backend, { maxInFlight: 1 });
    const running = new AbortController();
    const first = batcher.search(query(2, 0), 1, running.signal);
    const firstOther = batcher.search(query(2, 0), 2);
    await new Promise((r) => setImmediate(r));
    expect(batches).toEqual([[1, 2]]);
    const waiting = new AbortController();
    const left = batcher.search(query(2, 1), 3, waiting.signal);
    const stays = batcher.search(query(2, 2), 4);
    running.abort(new Error('client gone'));
    waiting.abort(new Error('deadline'));
    await expect(first).rejects.toThrow('client gone');
    await expect(left).rejects.toThrow('deadline');
    gates.shift()!();
    expect(await firstOther).toEqual({ indices: [2], scores: [2] });
    await sleep(5);
    // The search that left is not in the next batch.
    expect(batches).toEqual([[1, 2], [4]]);
    gates.shift()!();
    expect(await stays).toEqual({ indices: [4], scores: [4] });
    // Already aborted: rejected without joining anything.
    await expect(
      batcher.search(query(2, 3), 1, AbortSignal.abort(new Error('gone'))),
    ).rejects.toThrow('gone');
    expect(batches).toHaveLength(2);
  });

  it('a batch that fails rejects each of its searches; the next batch runs', async () => {
    let calls = 0;
    const backend: BatchSearchBackend = {
      async searchMany(_queries, ks) {
        calls++;
        if (calls === 1) throw new Error('device lost');
        return ks.map((k) => ({ indices: [k], scores: [k] }));
      },
    };
    const batcher = new SearchBatcher(backend);
    const failed = [batcher.search(query(2, 0), 1), batcher.search(query(2, 1), 2)];
    for (const search of failed) await expect(search).rejects.toThrow('device lost');
    expect(await batcher.search(query(2, 2), 5)).toEqual({ indices: [5], scores: [5] });
  });

  it('a backend that answers the wrong number of results fails the batch with a clear error', async () => {
    const backend: BatchSearchBackend = {
      searchMany: async () => [{ indices: [0], scores: [0] }],
    };
    const batcher = new SearchBatcher(backend);
    const answers = [batcher.search(query(2, 0), 1), batcher.search(query(2, 1), 1)];
    for (const answer of answers) {
      await expect(answer).rejects.toThrow('the backend answered 1 results for 2 queries');
    }
  });

  it('runs each batch through its runner, which may fail before the work starts', async () => {
    const { backend } = cpuBackend(20, 2, 1);
    const names: string[] = [];
    const batcher = new SearchBatcher(backend, {}, (work) => {
      names.push('batch');
      return work();
    });
    await Promise.all([batcher.search(query(2, 0), 1), batcher.search(query(2, 1), 1)]);
    expect(names).toEqual(['batch']);
    const refusing = new SearchBatcher(backend, {}, () => {
      throw new Error('no stream');
    });
    await expect(refusing.search(query(2, 0), 1)).rejects.toThrow('no stream');
    expect(refusing.statistics()).toMatchObject({ inFlight: 0, waiting: 0 });
  });

  it('close() rejects the searches that wait and every later one', async () => {
    const { backend } = cpuBackend(20, 2, 1, () => 20);
    const batcher = new SearchBatcher(backend, { maxInFlight: 1 });
    const running = batcher.search(query(2, 0), 1);
    await new Promise((r) => setImmediate(r));
    const waiting = batcher.search(query(2, 1), 1);
    batcher.close(new Error('shutting down'));
    await expect(waiting).rejects.toThrow('shutting down');
    await expect(batcher.search(query(2, 2), 1)).rejects.toThrow('shutting down');
    expect((await running).indices).toHaveLength(1);
  });

  it('options: defaults, and a clear error for an unknown option or a bad bound', () => {
    expect(searchBatchOptions()).toEqual(DEFAULT_SEARCH_BATCH);
    expect(searchBatchOptions({ maxBatch: 8 })).toEqual({ maxBatch: 8, maxInFlight: 2 });
    const { backend } = cpuBackend(4, 2, 1);
    expect(() => new SearchBatcher(backend, { maxBatch: 0 })).toThrow(
      'SearchBatcher: maxBatch must be a positive integer, got 0',
    );
    expect(() => new SearchBatcher(backend, { maxInFlight: 1.5 })).toThrow(CudaArgumentError);
    expect(() => new SearchBatcher(backend, { maxbatch: 4 } as never)).toThrow(
      /unknown option "maxbatch" \(did you mean maxBatch\?\)/,
    );
    expect(() => new SearchBatcher({} as never)).toThrow(/searchMany/);
  });
});

describe('POST /search with batches (a stand-in index, real sockets)', () => {
  const services: GpuService[] = [];
  afterEach(async () => {
    for (const service of services.splice(0)) await service.shutdown({ graceMs: 0 });
  });

  async function serve(backend: SearchBackend, searchBatch?: { maxBatch: number } | false) {
    const service = createServer({
      checkGpu: () => ({ usable: true, devices: 1 }),
      onServerError: () => {},
      // The stand-in runner calls the work itself: no GPU, no task.
      runTask: (work) => work(),
      createSearchIndex: async () => backend,
      search: { rows: 200, dim: 8 },
      ...(searchBatch === undefined ? {} : { searchBatch }),
    });
    services.push(service);
    await new Promise<void>((resolve) => service.listen(0, '127.0.0.1', resolve));
    const address = service.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    return { service, port: address.port };
  }

  async function search(port: number, q: Float32Array, k: number) {
    const response = await fetch(`http://127.0.0.1:${port}/search`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ query: Array.from(q), k }),
    });
    return { status: response.status, body: (await response.json()) as SearchResult };
  }

  it('32 concurrent searches: each answered right, in fewer batches than searches', async () => {
    const { backend, embeddings } = cpuBackend(200, 8, 9, () => 10);
    const singles: number[] = [];
    const { service, port } = await serve({
      ...backend,
      search: async (q, k) => {
        singles.push(k);
        return cpuSearch(embeddings, 200, 8, q, k);
      },
      dispose() {},
    });
    const queries = Array.from({ length: 32 }, (_, i) => query(8, 100 + i));
    const answers = await Promise.all(queries.map((q, i) => search(port, q, 1 + (i % 10))));
    for (const [i, q] of queries.entries()) {
      expect(answers[i]!.status).toBe(200);
      const expected = cpuSearch(embeddings, 200, 8, q, 1 + (i % 10));
      expect(answers[i]!.body.indices).toEqual(expected.indices);
      // JSON carries the float64 scores of the stand-in exactly.
      expect(answers[i]!.body.scores).toEqual(expected.scores);
    }
    expect(singles).toEqual([]);
    const batches = service.statistics().searchBatches!;
    expect(batches.searches).toBe(32);
    expect(batches.batches).toBeLessThan(32);
    expect(batches.largestBatch).toBeGreaterThan(1);
    expect(backend.record.most).toBeLessThanOrEqual(DEFAULT_SEARCH_BATCH.maxInFlight);
  });

  it('searchBatch: false runs one search per request, as does a backend without searchMany', async () => {
    const { backend, embeddings } = cpuBackend(200, 8, 9);
    const singles: number[] = [];
    const single = async (q: Float32Array, k: number) => {
      singles.push(k);
      return cpuSearch(embeddings, 200, 8, q, k);
    };
    const off = await serve({ ...backend, search: single, dispose() {} }, false);
    const answer = await search(off.port, query(8, 1), 4);
    expect(answer.body).toEqual(cpuSearch(embeddings, 200, 8, query(8, 1), 4));
    expect(off.service.statistics().searchBatches).toBeUndefined();
    const plain = await serve({ search: single, dispose() {} });
    expect((await search(plain.port, query(8, 2), 3)).status).toBe(200);
    expect(singles).toEqual([4, 3]);
    expect(backend.record.batches).toEqual([]);
  });

  it('a bad searchBatch option is refused when the server is created', () => {
    expect(() => createServer({ searchBatch: { maxBatch: -1 } })).toThrow(
      /maxBatch must be a positive integer/,
    );
  });
});

describe('the batch reports of server processes (searchBatchLine, parseSearchBatchLines)', () => {
  it('reads back what a process wrote, and sums the processes', () => {
    const text = [
      'loop-delay {"pid":1}',
      searchBatchLine(11, { searches: 80, batches: 10, largestBatch: 12, waiting: 0, inFlight: 0 }),
      searchBatchLine(12, { searches: 40, batches: 10, largestBatch: 9, waiting: 3, inFlight: 1 }),
      '',
    ].join('\n');
    const reports = parseSearchBatchLines(text);
    expect(reports).toEqual([
      { pid: 11, searches: 80, batches: 10, largestBatch: 12 },
      { pid: 12, searches: 40, batches: 10, largestBatch: 9 },
    ]);
    expect(batchSummary(reports)).toBe(
      'server: 120 searches in 20 batches (6.0 a batch, the largest 12; 2 processes)',
    );
    expect(batchSummary([])).toBeUndefined();
    expect(batchSummary([{ pid: 3, searches: 0, batches: 0, largestBatch: 0 }])).toBeUndefined();
  });

  it('leaves out malformed lines (untrusted text)', () => {
    const bad = [
      'search-batches {',
      'search-batches null',
      'search-batches {"pid":0,"searches":1,"batches":1,"largestBatch":1}',
      'search-batches {"pid":5,"searches":-1,"batches":1,"largestBatch":1}',
      'search-batches {"pid":5,"searches":1.5,"batches":1,"largestBatch":1}',
      'search-batches {"pid":5,"searches":2,"batches":3,"largestBatch":1}',
      'search-batches {"pid":5,"searches":2,"batches":1,"largestBatch":3}',
      'search-batches {"pid":5,"searches":"2","batches":1,"largestBatch":1}',
      ' search-batches {"pid":5,"searches":2,"batches":1,"largestBatch":1}',
    ];
    expect(parseSearchBatchLines(bad.join('\n'))).toEqual([]);
  });
});
