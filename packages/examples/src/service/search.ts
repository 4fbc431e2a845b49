/**
 * A nearest-neighbour search over embeddings that live on the GPU and that every request
 * reads: the scores of a query against all rows are one GEMV, then `topk` from
 * `@cuda-tasks/kernels` picks the k best; `searchMany` answers a batch of queries with one
 * pass over the embeddings for all of them (this example's own kernel for up to 16 queries,
 * search-scores.ts; a cuBLAS SGEMM for more) and a top-k per column. Each search runs on the
 * current stream (the request's task stream in the service), allocates its own query and score
 * buffers, and only reads the shared embeddings, so concurrent searches on different streams
 * do not wait for each other.
 */
import { gemm, gemv } from '@cuda-tasks/cublas';
import {
  CudaArgumentError,
  DeviceArray,
  openSharedMemory,
  type SharedMemoryError,
  type SharedMemoryHandle,
  shareableArray,
  shareMemory,
} from '@cuda-tasks/cudadrv';
import { Generator } from '@cuda-tasks/curand';
import { MAX_TOPK, topk } from '@cuda-tasks/kernels';
import { synchronize } from '@cuda-tasks/task-runtime';
import { MAX_SCORED_DIM, MAX_SCORED_QUERIES, searchScores } from './search-scores.js';

/** Options of `SearchIndex.create`. */
export interface SearchIndexOptions {
  /** Embeddings (default 1,000,000). */
  rows?: number;
  /** Their dimension (default 128). */
  dim?: number;
  /** Seed of the Philox generator that draws them (default 7). */
  seed?: number;
  /**
   * Put the embeddings in memory other processes can open (`share()`, `SearchIndex.open`), as
   * the service's cluster mode does (default false: the stream-ordered pool).
   */
  shareable?: boolean;
}

/** What a search found: the best first. */
export interface SearchResult {
  /** Row numbers of the k embeddings with the largest dot product with the query. */
  indices: number[];
  /** Their dot products with the query (float32 on the GPU). */
  scores: number[];
}

function positiveInteger(name: string, value: number): number {
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new CudaArgumentError(`SearchIndex: ${name} must be a positive integer, got ${value}`);
  }
  return value;
}

/**
 * Throws a CudaArgumentError naming `call` unless `query` is a Float32Array of `dim` finite
 * values and k is in 1..min(rows, MAX_TOPK): what a search of a rows x dim index refuses, for
 * code that checks a query where the index is not (a cluster worker whose searches run in the
 * primary, cluster-search.ts).
 * @example checkSearchQuery(new Float32Array(128), 10, 1_000_000, 128, 'search'); // passes
 */
export function checkSearchQuery(
  query: Float32Array,
  k: number,
  rows: number,
  dim: number,
  call: string,
): void {
  if (!(query instanceof Float32Array) || query.length !== dim) {
    throw new CudaArgumentError(`${call}: query must be a Float32Array of ${dim}`);
  }
  for (let i = 0; i < query.length; i++) {
    if (!Number.isFinite(query[i]!)) {
      throw new CudaArgumentError(
        `${call}: query[${i}] is ${query[i]}: every value must be finite`,
      );
    }
  }
  const most = Math.min(rows, MAX_TOPK);
  if (!Number.isSafeInteger(k) || k < 1 || k > most) {
    throw new CudaArgumentError(`${call}: k must be in 1..${most}, got ${k}`);
  }
}

/** Embeddings resident on the device, searched by dot product. */
export class SearchIndex {
  /** Number of embeddings. */
  readonly rows: number;
  /** Their dimension. */
  readonly dim: number;
  /** rows x dim float32, column-major: row i is embedding i. Read by every search, never written. */
  readonly embeddings: DeviceArray<'float32'>;

  private constructor(embeddings: DeviceArray<'float32'>) {
    this.embeddings = embeddings;
    this.rows = embeddings.shape[0]!;
    this.dim = embeddings.shape[1]!;
  }

  /**
   * Draws `rows` embeddings of `dim` standard normal float32 values from a Philox generator
   * seeded `seed`, on the current stream, and resolves once they are on the device.
   * @example const index = await SearchIndex.create({ rows: 100_000 });
   */
  static async create(options: SearchIndexOptions = {}): Promise<SearchIndex> {
    const rows = positiveInteger('rows', options.rows ?? 1_000_000);
    const dim = positiveInteger('dim', options.dim ?? 128);
    const generator = new Generator({ kind: 'philox', seed: options.seed ?? 7 });
    const embeddings = options.shareable
      ? shareableArray('float32', [rows, dim])
      : DeviceArray.empty('float32', [rows, dim]);
    try {
      generator.normal(embeddings);
      await synchronize();
    } catch (error) {
      embeddings.dispose();
      throw error;
    } finally {
      generator.dispose();
    }
    return new SearchIndex(embeddings);
  }

  /**
   * Throws a CudaArgumentError, before any GPU call, unless `query` is a Float32Array of `dim`
   * finite values and k is in 1..min(rows, MAX_TOPK): what `search` and `searchMany` refuse.
   */
  checkQuery(query: Float32Array, k: number, call = 'SearchIndex.search'): void {
    checkSearchQuery(query, k, this.rows, this.dim, call);
  }

  /**
   * The `k` rows with the largest dot product with `query` (length `dim`, finite values),
   * best first, on the current stream: scores = embeddings x query (cuBLAS SGEMV), then
   * `topk`. k <= min(rows, 1024). A CudaArgumentError, before any GPU call, for anything else.
   * @example const { indices, scores } = await index.search(query, 10);
   */
  async search(query: Float32Array, k: number): Promise<SearchResult> {
    this.checkQuery(query, k);
    const q = DeviceArray.fromHost(query);
    const scores = DeviceArray.empty('float32', this.rows);
    let best: { values: DeviceArray<'float32'>; indices: DeviceArray<'int32'> } | undefined;
    try {
      gemv(this.embeddings, q, scores);
      best = topk(scores, k);
      const [values, indices] = await Promise.all([best.values.toHost(), best.indices.toHost()]);
      return { indices: Array.from(indices), scores: Array.from(values) };
    } finally {
      q.dispose();
      scores.dispose();
      best?.values.dispose();
      best?.indices.dispose();
    }
  }

  /**
   * Many searches in one pass over the embeddings, on the current stream: the queries as the
   * columns of a dim x B matrix, scores = embeddings x queries (rows x B: `searchScores` for B
   * up to 16 and dim up to 256, else one cuBLAS SGEMM), then `topk` per column with the
   * largest `ks[j]`, each answer cut to its own k. The index is read once for all B queries
   * instead of once each. Answers agree with `search`'s to float32 rounding (the batch may sum
   * in another order than the SGEMV); rows whose scores tie within that rounding may come in
   * another order. One query goes through `search`.
   * @example const [a, b] = await index.searchMany([q1, q2], [10, 5]);
   */
  async searchMany(
    queries: readonly Float32Array[],
    ks: readonly number[],
  ): Promise<SearchResult[]> {
    const call = 'SearchIndex.searchMany';
    if (!Array.isArray(queries) || !Array.isArray(ks) || queries.length !== ks.length) {
      throw new CudaArgumentError(
        `${call}: queries and ks must be arrays of one length, got ${queries?.length} and ${ks?.length}`,
      );
    }
    const batch = queries.length;
    let kMax = 0;
    for (let j = 0; j < batch; j++) {
      this.checkQuery(queries[j]!, ks[j]!, `${call}: queries[${j}]`);
      kMax = Math.max(kMax, ks[j]!);
    }
    if (batch === 0) return [];
    if (batch === 1) return [await this.search(queries[0]!, ks[0]!)];
    const dim = this.dim;
    const packed = new Float32Array(dim * batch);
    for (let j = 0; j < batch; j++) packed.set(queries[j]!, j * dim);
    const q = DeviceArray.fromHost(packed, [dim, batch]);
    let scores: DeviceArray<'float32'> | undefined;
    let best: { values: DeviceArray<'float32'>; indices: DeviceArray<'int32'> } | undefined;
    try {
      scores = DeviceArray.empty('float32', [this.rows, batch]);
      // Up to 16 queries: one pass over the index at any width (search-scores.ts, decision
      // 0045); more: cuBLAS's SGEMM.
      if (batch <= MAX_SCORED_QUERIES && dim <= MAX_SCORED_DIM) {
        searchScores(this.embeddings, q, scores);
      } else {
        gemm(this.embeddings, q, scores);
      }
      // Column j holds query j's scores; its kMax best are column j of [kMax, batch].
      best = topk(scores, kMax, { axis: 0 });
      const [values, indices] = await Promise.all([best.values.toHost(), best.indices.toHost()]);
      const results: SearchResult[] = new Array(batch);
      for (let j = 0; j < batch; j++) {
        const from = j * kMax;
        const to = from + ks[j]!;
        results[j] = {
          indices: Array.from(indices.subarray(from, to)),
          scores: Array.from(values.subarray(from, to)),
        };
      }
      return results;
    } finally {
      q.dispose();
      scores?.dispose();
      best?.values.dispose();
      best?.indices.dispose();
    }
  }

  /**
   * A handle of the embeddings for other processes (`SearchIndex.open`); the index must have
   * been created `shareable`. Its embeddings are complete once `create` has resolved.
   */
  share(): SharedMemoryHandle {
    return shareMemory(this.embeddings);
  }

  /**
   * The index another process created `shareable` and `share()`d, opened read-only: its
   * searches read the other process's embeddings, no copy made. The handle is checked as
   * untrusted input; it must hold a 2-D float32 array.
   * @example const index = SearchIndex.open(JSON.parse(process.env.INDEX!));
   */
  static open(
    handle: SharedMemoryHandle | string,
    options: { onExporterExit?: (error: SharedMemoryError) => void } = {},
  ): SearchIndex {
    // Read-only whatever a JavaScript caller's options hold: the index is the other process's.
    const embeddings = openSharedMemory<'float32'>(handle, {
      access: 'read',
      onExporterExit: options.onExporterExit,
    });
    if (embeddings.dtype !== 'float32' || embeddings.shape.length !== 2) {
      embeddings.dispose();
      throw new CudaArgumentError(
        `SearchIndex.open: the shared memory is ${embeddings}, not a 2-D float32 array`,
      );
    }
    return new SearchIndex(embeddings);
  }

  /** Frees the embeddings (after the searches in flight, which are ordered before the free). */
  dispose(): void {
    this.embeddings.dispose();
  }
}
