/**
 * The protocol of `--cluster-search primary` between a worker's `PrimarySearch` and the
 * primary's `PrimarySearchServer`, over an in-memory channel that clones each message as the
 * `advanced` serialization does (structuredClone), with a CPU index: every answer reaches its
 * own request, in order, from batches that mix requests; malformed messages either way are
 * clear errors; a closed channel rejects what waits.
 */
import { EventEmitter } from 'node:events';
import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import { rng } from '@cuda-tasks/testing';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type MessagePort,
  PrimarySearch,
  PrimarySearchServer,
  packAnswers,
  primaryStreamOf,
  readSearchRequest,
  SEARCH_ANSWER,
  SEARCH_REQUEST,
} from './cluster-search.js';
import type { SearchResult } from './search.js';

const rows = 300;
const dim = 16;

/** A CPU index: float64 dot products, the k best by a full sort. */
function cpuIndex(seed = 5) {
  const next = rng(seed);
  const embeddings = Float32Array.from({ length: rows * dim }, () => next() * 2 - 1);
  const best = (query: Float32Array, k: number): SearchResult => {
    const dots = Array.from({ length: rows }, (_, i) => {
      let sum = 0;
      for (let j = 0; j < dim; j++) sum += embeddings[i + j * rows]! * query[j]!;
      return [i, sum] as const;
    });
    dots.sort((a, b) => b[1] - a[1]);
    const top = dots.slice(0, k);
    return { indices: top.map(([i]) => i), scores: top.map(([, s]) => Math.fround(s)) };
  };
  const batches: number[] = [];
  return {
    dim,
    best,
    batches,
    async searchMany(queries: readonly Float32Array[], ks: readonly number[]) {
      batches.push(queries.length);
      await new Promise((resolve) => setTimeout(resolve, 1));
      return queries.map((query, j) => best(query, ks[j]!));
    },
  };
}

/** A worker's end and the primary's, joined; each message cloned on its way. */
function channel(server: PrimarySearchServer | ((message: unknown) => unknown)) {
  const worker = new EventEmitter() as EventEmitter & MessagePort & { sent: unknown[] };
  worker.sent = [];
  worker.send = (message: unknown) => {
    worker.sent.push(message);
    const copy = structuredClone(message);
    setImmediate(() => {
      if (typeof server === 'function') {
        const answer = server(copy);
        if (answer !== undefined) worker.emit('message', structuredClone(answer));
        return;
      }
      server.handle(copy, (answer) =>
        setImmediate(() => worker.emit('message', structuredClone(answer))),
      );
    });
    return true;
  };
  return worker;
}

function query(seed: number): Float32Array {
  const next = rng(100 + seed);
  return Float32Array.from({ length: dim }, () => next() * 2 - 1);
}

describe('--cluster-search primary: the protocol', () => {
  it("answers every worker's batch, in order, from the primary's batches over all of them", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(
          fc.array(fc.tuple(fc.nat(50), fc.integer({ min: 1, max: 40 })), {
            minLength: 1,
            maxLength: 6,
          }),
          {
            minLength: 1,
            maxLength: 4,
          },
        ),
        fc.integer({ min: 1, max: 8 }),
        async (workersBatches, maxBatch) => {
          const index = cpuIndex();
          const server = new PrimarySearchServer(index, {
            searchBatch: { maxBatch, maxInFlight: 1 },
            streamLabel: () => 'task-stream-9 0x10',
          });
          // Each worker sends its batches at once, over its own channel.
          const answers = await Promise.all(
            workersBatches.map((batch) => {
              const worker = new PrimarySearch(rows, dim, channel(server));
              return worker.searchMany(
                batch.map(([seed]) => query(seed)),
                batch.map(([, k]) => k),
              );
            }),
          );
          workersBatches.forEach((batch, w) => {
            batch.forEach(([seed, k], j) => {
              const result = answers[w]![j]!;
              expect(result).toEqual(index.best(query(seed), k));
              expect(primaryStreamOf(result)).toBe('primary task-stream-9 0x10');
            });
          });
          const searches = workersBatches.reduce((sum, batch) => sum + batch.length, 0);
          expect(index.batches.reduce((a, b) => a + b, 0)).toBe(searches);
          expect(Math.max(...index.batches)).toBeLessThanOrEqual(maxBatch);
          expect(server.statistics().requests).toBe(workersBatches.length);
        },
      ),
      { numRuns: 40 },
    );
  });

  it("batches mix workers' requests: 4 workers x 4 searches at once run as one batch of 16", async () => {
    const index = cpuIndex();
    const server = new PrimarySearchServer(index, {
      searchBatch: { maxBatch: 64, maxInFlight: 1 },
    });
    const first = new PrimarySearch(rows, dim, channel(server));
    await first.search(query(0), 3); // the batcher's first batch goes alone
    index.batches.length = 0;
    const blocker = first.search(query(1), 3); // runs while the others arrive
    while (index.batches.length === 0) await new Promise((resolve) => setImmediate(resolve));
    const workers = Array.from({ length: 4 }, () => new PrimarySearch(rows, dim, channel(server)));
    const results = await Promise.all(
      workers.map((worker, w) =>
        worker.searchMany(
          [0, 1, 2, 3].map((j) => query(10 * w + j)),
          [1, 2, 3, 4],
        ),
      ),
    );
    await blocker;
    expect(index.batches).toEqual([1, 16]);
    for (const [w, answers] of results.entries()) {
      for (const [j, answer] of answers.entries()) {
        expect(answer).toEqual(index.best(query(10 * w + j), j + 1));
      }
    }
  });

  it('refuses a bad query before anything is sent, as the index would', async () => {
    const port = channel(() => undefined);
    const worker = new PrimarySearch(rows, dim, port);
    await expect(worker.search(new Float32Array(dim + 1), 3)).rejects.toThrow(CudaArgumentError);
    await expect(worker.search(query(1), rows + 1)).rejects.toThrow(/k must be in 1\.\.300/);
    const nan = query(1);
    nan[3] = Number.NaN;
    await expect(worker.searchMany([query(2), nan], [1, 1])).rejects.toThrow(
      /queries\[1\]\[?.*finite/,
    );
    await expect(worker.searchMany([query(2)], [1, 2])).rejects.toThrow(CudaArgumentError);
    expect(port.sent).toEqual([]);
    expect(await worker.searchMany([], [])).toEqual([]);
  });

  it("the primary answers a malformed request with its error; the worker's other batches go on", () => {
    const server = new PrimarySearchServer(cpuIndex());
    const replies: unknown[] = [];
    const reply = (answer: unknown) => replies.push(answer);
    const good = { type: SEARCH_REQUEST, id: 1, queries: query(1), ks: Int32Array.of(2) };
    expect(readSearchRequest(good, dim)?.queries[0]).toEqual(query(1));
    expect(server.handle({ type: 'other', id: 3 }, reply)).toBe(false);
    expect(server.handle('text', reply)).toBe(false);
    for (const bad of [
      { ...good, id: 7, queries: Array.from(query(1)) }, // JSON-serialised: not a Float32Array
      { ...good, id: 8, queries: new Float32Array(dim + 1) },
      { ...good, id: 9, ks: Int32Array.of() },
      { ...good, id: 10, ks: [2] },
    ]) {
      expect(server.handle(bad, reply)).toBe(true);
    }
    // Without an id there is nobody to answer: dropped.
    expect(server.handle({ ...good, id: 'x', ks: 'x' }, reply)).toBe(true);
    expect(replies).toHaveLength(4);
    for (const [i, answer] of replies.entries()) {
      expect(answer).toMatchObject({
        type: SEARCH_ANSWER,
        id: 7 + i,
        error: { name: 'CudaArgumentError' },
      });
    }
  });

  it("a batch the primary failed rejects that batch's searches with its reason and type", async () => {
    const failing = {
      dim,
      async searchMany(): Promise<SearchResult[]> {
        throw new CudaArgumentError('the GPU said no');
      },
    };
    const worker = new PrimarySearch(rows, dim, channel(new PrimarySearchServer(failing)));
    const error = await worker.search(query(1), 2).catch((e: unknown) => e);
    expect(CudaArgumentError.isInstance(error)).toBe(true);
    expect(String(error)).toContain("the primary's search failed: the GPU said no");
    const broken = new PrimarySearch(
      rows,
      dim,
      channel(
        new PrimarySearchServer({
          ...failing,
          searchMany: async () => Promise.reject(new RangeError('x')),
        }),
      ),
    );
    await expect(broken.search(query(1), 2)).rejects.toThrow(/^the primary's search failed: x$/);
  });

  it('an answer of the wrong size or types is an error, never a wrong answer', async () => {
    const answers: Array<(id: number) => unknown> = [
      (id) => ({ ...packAnswers(id, [{ indices: [1], scores: [0.5] }]) }), // 1 row for k = 2
      (id) => ({ type: SEARCH_ANSWER, id, indices: [1, 2], scores: [0.5, 0.25] }), // not typed
      (id) => ({
        type: SEARCH_ANSWER,
        id,
        indices: Int32Array.of(1, 2),
        scores: Float64Array.of(1, 2),
      }),
    ];
    for (const answer of answers) {
      const worker = new PrimarySearch(
        rows,
        dim,
        channel((message) => answer((message as { id: number }).id)),
      );
      await expect(worker.search(query(1), 2)).rejects.toThrow(/the primary's answer is malformed/);
      expect(worker.waiting).toBe(0);
    }
  });

  it("an answer naming a row outside the primary's index is an error, never a wrong answer", async () => {
    for (const row of [rows, -1, 2 ** 31 - 1]) {
      const worker = new PrimarySearch(
        rows,
        dim,
        channel((message) =>
          packAnswers((message as { id: number }).id, [{ indices: [0, row], scores: [1, 0.5] }]),
        ),
      );
      await expect(worker.search(query(2), 2)).rejects.toThrow(
        `the primary's answer is malformed: row ${row} of an index of ${rows}`,
      );
      expect(worker.waiting).toBe(0);
    }
    // The last row is a row.
    const worker = new PrimarySearch(
      rows,
      dim,
      channel((message) =>
        packAnswers((message as { id: number }).id, [{ indices: [rows - 1, 0], scores: [1, 0.5] }]),
      ),
    );
    expect((await worker.search(query(2), 2)).indices).toEqual([rows - 1, 0]);
  });

  it('a closed channel rejects the searches that wait and every later one', async () => {
    const port = channel(() => undefined); // the primary never answers
    const worker = new PrimarySearch(rows, dim, port);
    const waiting = worker.searchMany([query(1), query(2)], [1, 1]);
    await new Promise((resolve) => setImmediate(resolve));
    expect(worker.waiting).toBe(1);
    port.emit('disconnect');
    await expect(waiting).rejects.toThrow('the primary process exited');
    await expect(worker.search(query(3), 1)).rejects.toThrow('the primary process exited');
    expect(port.listenerCount('message')).toBe(0);
    // An answer that arrives late or for another batch is ignored.
    expect(() => port.emit('message', packAnswers(1, []))).not.toThrow();
  });

  it('needs a channel: a process that is not a worker gets a clear error', () => {
    expect(() => new PrimarySearch(rows, dim, {} as MessagePort)).toThrow(
      /no channel to a primary/,
    );
  });
});
