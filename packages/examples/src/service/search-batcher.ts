/**
 * Searches that arrive together run as one batch. One search reads every embedding (a GEMV over
 * the whole index) to answer one query, so searches at once share the GPU's memory bandwidth
 * and the service's throughput stops at bandwidth / index size, whatever the number of streams
 * or processes. A batch of B queries reads the index once for all of them (one SGEMM, then one
 * top-k per column), so the bytes read per search fall about B-fold.
 *
 * The batcher keeps at most `maxInFlight` batches on the GPU. While they run, new searches
 * wait in line; when a batch ends, the line (up to `maxBatch`) goes as the next one. A search
 * on an idle service goes at once, alone, in the next turn of the event loop: batching adds no
 * wait of its own, the batches grow only as the load does.
 */
import { assertOptions, CudaArgumentError } from '@cuda-tasks/cudadrv';
import { prefixedJsonLines } from './loop-monitor.js';
import type { SearchResult } from './search.js';

/** What a batcher searches: many queries in one pass. */
export interface BatchSearchBackend {
  /**
   * The `ks[j]` rows nearest `queries[j]` for each j, best first, in one pass over the
   * embeddings (see `SearchIndex.searchMany`).
   */
  searchMany(queries: readonly Float32Array[], ks: readonly number[]): Promise<SearchResult[]>;
  /**
   * Throws (a CudaArgumentError) where `search(query, k)` would refuse its input, so that a bad
   * query fails its own call, never the batch it would have joined.
   */
  checkQuery?(query: Float32Array, k: number): void;
}

/** Options of `SearchBatcher` (`createServer`'s `searchBatch`). */
export interface SearchBatchOptions {
  /** The most queries in one batch (default 64). */
  maxBatch?: number;
  /** The most batches whose GPU work runs at once (default 2). */
  maxInFlight?: number;
}

/** The batcher's defaults: batches of up to 64 queries, 2 at once on the GPU. */
export const DEFAULT_SEARCH_BATCH: Readonly<Required<SearchBatchOptions>> = Object.freeze({
  maxBatch: 64,
  maxInFlight: 2,
});

const SEARCH_BATCH_OPTIONS = ['maxBatch', 'maxInFlight'];

/** What a batcher has done (`SearchBatcher.statistics()`). */
export interface SearchBatchStatistics {
  /** Searches answered or failed by a batch. */
  searches: number;
  /** Batches run. */
  batches: number;
  /** The most searches one batch held. */
  largestBatch: number;
  /** Searches waiting for a batch now. */
  waiting: number;
  /** Batches running now. */
  inFlight: number;
}

/** Runs one batch's work (the service: in a `task()` of its own, so on a stream of its own). */
export type RunBatch = (work: () => Promise<SearchResult[]>) => Promise<SearchResult[]>;

interface Waiting {
  query: Float32Array;
  k: number;
  resolve: (result: SearchResult) => void;
  reject: (error: unknown) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

/**
 * `options` over `DEFAULT_SEARCH_BATCH`, checked: a CudaArgumentError for an unknown option or
 * a bound that is not a positive integer.
 * @example searchBatchOptions({ maxBatch: 16 }); // { maxBatch: 16, maxInFlight: 2 }
 */
export function searchBatchOptions(options: SearchBatchOptions = {}): Required<SearchBatchOptions> {
  assertOptions('SearchBatcher', options, SEARCH_BATCH_OPTIONS);
  return {
    maxBatch: bound('maxBatch', options.maxBatch, DEFAULT_SEARCH_BATCH.maxBatch),
    maxInFlight: bound('maxInFlight', options.maxInFlight, DEFAULT_SEARCH_BATCH.maxInFlight),
  };
}

function bound(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new CudaArgumentError(
      `SearchBatcher: ${name} must be a positive integer, got ${String(value)}`,
    );
  }
  return value;
}

/**
 * Gathers concurrent `search(query, k)` calls into batches for a `BatchSearchBackend`.
 * Each search settles with its own result, in the order of its batch's answer; a batch that
 * fails rejects each of its searches with that error. A search whose signal aborts rejects at
 * once with the signal's reason (see `search`).
 * @example
 * const batcher = new SearchBatcher(index, { maxBatch: 32 }, (work) => task(work));
 * const [a, b] = await Promise.all([batcher.search(q1, 10), batcher.search(q2, 5)]); // one batch
 */
export class SearchBatcher {
  readonly #backend: BatchSearchBackend;
  readonly #run: RunBatch;
  readonly #maxBatch: number;
  readonly #maxInFlight: number;
  #line: Waiting[] = [];
  #scheduled = false;
  #inFlight = 0;
  #closed: unknown;
  #isClosed = false;
  readonly #statistics = { searches: 0, batches: 0, largestBatch: 0 };

  /**
   * @param backend What the batches search.
   * @param options `maxBatch` (default 64) and `maxInFlight` (default 2).
   * @param run Runs a batch's work (default: as it is, on the caller's stream).
   */
  constructor(
    backend: BatchSearchBackend,
    options: SearchBatchOptions = {},
    run: RunBatch = (work) => work(),
  ) {
    if (typeof backend?.searchMany !== 'function') {
      throw new CudaArgumentError('SearchBatcher: the backend must have searchMany(queries, ks)');
    }
    this.#backend = backend;
    this.#run = run;
    const bounds = searchBatchOptions(options);
    this.#maxBatch = bounds.maxBatch;
    this.#maxInFlight = bounds.maxInFlight;
  }

  /**
   * The `k` rows nearest `query`, best first, found in a batch with the searches that wait
   * beside it. The backend's `checkQuery` refuses bad input here, at this call. When `signal`
   * aborts, the search rejects at once with its reason: one that waits leaves the line; one
   * whose batch runs has its answer dropped, and the batch goes on for the others.
   */
  search(query: Float32Array, k: number, signal?: AbortSignal): Promise<SearchResult> {
    if (this.#isClosed) return Promise.reject(this.#closed);
    try {
      this.#backend.checkQuery?.(query, k);
    } catch (error) {
      return Promise.reject(error);
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise<SearchResult>((resolve, reject) => {
      const waiting: Waiting = { query, k, resolve, reject, signal, onAbort: undefined };
      if (signal !== undefined) {
        waiting.onAbort = () => {
          const at = this.#line.indexOf(waiting);
          if (at >= 0) this.#line.splice(at, 1);
          reject(signal.reason);
        };
        signal.addEventListener('abort', waiting.onAbort, { once: true });
      }
      this.#line.push(waiting);
      this.#schedule();
    });
  }

  /** Counts of searches and batches, and what waits and runs now. */
  statistics(): SearchBatchStatistics {
    return { ...this.#statistics, waiting: this.#line.length, inFlight: this.#inFlight };
  }

  /**
   * Rejects the searches that wait with `reason`, and every later one; the batches running
   * finish.
   */
  close(reason: unknown = new Error('SearchBatcher: closed')): void {
    if (this.#isClosed) return;
    this.#isClosed = true;
    this.#closed = reason;
    const line = this.#line;
    this.#line = [];
    for (const waiting of line) {
      this.#leaveSignal(waiting);
      waiting.reject(reason);
    }
  }

  #schedule(): void {
    if (this.#scheduled || this.#inFlight >= this.#maxInFlight || this.#line.length === 0) return;
    this.#scheduled = true;
    // The next turn of the event loop: the searches whose requests arrived in this one join.
    setImmediate(() => {
      this.#scheduled = false;
      while (this.#inFlight < this.#maxInFlight && this.#line.length > 0) {
        this.#dispatch(this.#line.splice(0, this.#maxBatch));
      }
    });
  }

  #leaveSignal(waiting: Waiting): void {
    if (waiting.onAbort !== undefined) {
      waiting.signal!.removeEventListener('abort', waiting.onAbort);
      waiting.onAbort = undefined;
    }
  }

  #dispatch(batch: Waiting[]): void {
    this.#inFlight++;
    this.#statistics.batches++;
    this.#statistics.searches += batch.length;
    if (batch.length > this.#statistics.largestBatch) this.#statistics.largestBatch = batch.length;
    const queries = batch.map((waiting) => waiting.query);
    const ks = batch.map((waiting) => waiting.k);
    let running: Promise<SearchResult[]>;
    try {
      running = this.#run(() => this.#backend.searchMany(queries, ks));
    } catch (error) {
      running = Promise.reject(error);
    }
    running.then(
      (results) => this.#settle(batch, results, false, undefined),
      (error: unknown) => this.#settle(batch, undefined, true, error),
    );
  }

  #settle(
    batch: Waiting[],
    results: SearchResult[] | undefined,
    failed: boolean,
    error: unknown,
  ): void {
    this.#inFlight--;
    if (!failed && (!Array.isArray(results) || results.length !== batch.length)) {
      failed = true;
      error = new Error(
        `SearchBatcher: the backend answered ${Array.isArray(results) ? results.length : typeof results} results for ${batch.length} queries`,
      );
    }
    for (let j = 0; j < batch.length; j++) {
      const waiting = batch[j]!;
      this.#leaveSignal(waiting);
      if (failed) waiting.reject(error);
      else waiting.resolve(results![j]!);
    }
    this.#schedule();
  }
}

/** What a server process reports of its batches when it exits (`searchBatchLine`). */
export interface SearchBatchReport {
  /** The server process. */
  pid: number;
  /** Searches its batches answered or failed. */
  searches: number;
  /** Batches it ran. */
  batches: number;
  /** The most searches one of them held. */
  largestBatch: number;
}

const BATCH_LINE_PREFIX = 'search-batches ';

/**
 * The line a server process writes to stderr at exit for the load script (no newline): its
 * pid and `statistics`' counts.
 * @example searchBatchLine(process.pid, batcher.statistics());
 */
export function searchBatchLine(pid: number, statistics: SearchBatchStatistics): string {
  const { searches, batches, largestBatch } = statistics;
  return BATCH_LINE_PREFIX + JSON.stringify({ pid, searches, batches, largestBatch });
}

/** Whether `x` is a count: a non-negative safe integer. */
function count(x: unknown): x is number {
  return Number.isSafeInteger(x) && (x as number) >= 0;
}

/**
 * The reports in `text` (the service's stderr): each `search-batches {...}` line whose pid is a
 * positive integer and whose counts are non-negative integers, the largest batch at most the
 * searches; other lines and malformed reports are left out.
 * @example parseSearchBatchLines(service.stderr()).length; // one per server process
 */
export function parseSearchBatchLines(text: string): SearchBatchReport[] {
  const reports: SearchBatchReport[] = [];
  for (const value of prefixedJsonLines(text, BATCH_LINE_PREFIX)) {
    if (typeof value !== 'object' || value === null) continue;
    const { pid, searches, batches, largestBatch } = value as Record<string, unknown>;
    if (!count(pid) || pid < 1 || !count(searches) || !count(batches) || !count(largestBatch)) {
      continue;
    }
    if (largestBatch > searches || batches > searches) continue;
    reports.push({ pid, searches, batches, largestBatch });
  }
  return reports;
}

/**
 * One line on the batches of `reports` together (the mean size, the largest), or undefined
 * where none ran a batch.
 * @example batchSummary([{ pid: 7, searches: 80, batches: 10, largestBatch: 12 }]); // 'server: 80 searches in 10 batches (8.0 a batch, the largest 12; 1 process)'
 */
export function batchSummary(reports: readonly SearchBatchReport[]): string | undefined {
  let searches = 0;
  let batches = 0;
  let largest = 0;
  for (const report of reports) {
    searches += report.searches;
    batches += report.batches;
    largest = Math.max(largest, report.largestBatch);
  }
  if (batches === 0) return undefined;
  const processes = `${reports.length} process${reports.length === 1 ? '' : 'es'}`;
  return `server: ${searches} searches in ${batches} batches (${(searches / batches).toFixed(1)} a batch, the largest ${largest}; ${processes})`;
}
