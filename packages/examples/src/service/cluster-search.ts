/**
 * The cluster's searches run in the primary (`serve --processes N`, the default
 * `--cluster-search primary`): the workers read requests, check them and write the answers;
 * the primary, which built the index, runs every worker's searches in its own batches on the
 * GPU. One process's batches hold the searches of all workers (about as many as one process
 * serving alone holds), and the GPU runs one context's work instead of switching between N
 * (decision 0046). `--cluster-search workers` keeps the other design: each worker opens the
 * index (CUDA IPC) and runs its own batches.
 *
 * The protocol is two messages on node:cluster's channel, sent with the `advanced`
 * serialization so typed arrays travel as bytes, not as JSON arrays:
 * - worker to primary: `{ type: 'cuda-tasks/search', id, queries, ks }`, the batch's queries
 *   packed in one Float32Array (query j at j * dim) and their k in an Int32Array;
 * - primary to worker: `{ type: 'cuda-tasks/search-answer', id, indices, scores, stream }`, the
 *   answers packed in order (ks[j] each), or `{ type, id, error: { name, message } }`.
 * Each side checks what it receives (the other process's bugs must not become wrong answers).
 */
import { CudaArgumentError } from '@cuda-tasks/cudadrv';
import { checkSearchQuery, type SearchResult } from './search.js';
import {
  type BatchSearchBackend,
  type RunBatch,
  SearchBatcher,
  type SearchBatchOptions,
  type SearchBatchStatistics,
} from './search-batcher.js';

/** The `type` of a worker's search request. */
export const SEARCH_REQUEST = 'cuda-tasks/search';
/** The `type` of the primary's answer. */
export const SEARCH_ANSWER = 'cuda-tasks/search-answer';

/** A worker's batch of searches, as it travels to the primary. */
export interface SearchRequestMessage {
  /** `SEARCH_REQUEST`. */
  type: typeof SEARCH_REQUEST;
  /** The worker's number for the batch (its answer carries it back). */
  id: number;
  /** The queries packed: query j is `queries.subarray(j * dim, (j + 1) * dim)`. */
  queries: Float32Array;
  /** k of each query. */
  ks: Int32Array;
}

/** The primary's answer to one `SearchRequestMessage`. */
export interface SearchAnswerMessage {
  /** `SEARCH_ANSWER`. */
  type: typeof SEARCH_ANSWER;
  /** The request's `id`. */
  id: number;
  /** The answers packed in order, `ks[j]` rows each (absent with `error`). */
  indices?: Int32Array;
  /** Their scores, packed as `indices`. */
  scores?: Float32Array;
  /** The `x-cuda-stream` label of the primary's stream that ran the batch. */
  stream?: string;
  /** Why the batch failed. */
  error?: { name: string; message: string };
}

/** One end of a message channel: `process` in a worker (what the tests replace). */
export interface MessagePort {
  /** Sends a message to the other end. */
  send(message: unknown): unknown;
  /** Listens for the other end's messages, or for the channel's end. */
  on(event: 'message', listener: (message: unknown) => void): unknown;
  on(event: 'disconnect', listener: () => void): unknown;
  /** Stops listening. */
  off(event: 'message', listener: (message: unknown) => void): unknown;
  off(event: 'disconnect', listener: () => void): unknown;
}

// The primary's stream of each answer a worker received, for the x-cuda-stream header.
const answerStreams = new WeakMap<SearchResult, string>();

/**
 * The label of the primary's stream that found `result`, where it came from the primary
 * (`PrimarySearch`); undefined for any other result.
 */
export function primaryStreamOf(result: SearchResult): string | undefined {
  return answerStreams.get(result);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

interface Pending {
  ks: readonly number[];
  resolve: (results: SearchResult[]) => void;
  reject: (error: unknown) => void;
}

/**
 * In a cluster worker: searches of the primary's `rows` x `dim` index, run by the primary
 * (`PrimarySearchServer`). Checks each query as `SearchIndex.checkQuery` does, before it goes;
 * a batch's answers come back over `port` (the worker's `process`). When the channel closes
 * (the primary exited) every search waiting and every later one rejects.
 * @example const backend = new PrimarySearch(1_000_000, 128); await backend.search(query, 10);
 */
export class PrimarySearch implements BatchSearchBackend {
  /** Rows of the primary's index. */
  readonly rows: number;
  /** Its dimension. */
  readonly dim: number;
  readonly #port: MessagePort;
  readonly #pending = new Map<number, Pending>();
  #next = 1;
  #closed: Error | undefined;
  readonly #onMessage = (message: unknown) => this.#receive(message);
  readonly #onDisconnect = () => this.#close(new Error('the primary process exited'));

  constructor(rows: number, dim: number, port: MessagePort = process as unknown as MessagePort) {
    if (typeof port?.send !== 'function') {
      throw new Error('PrimarySearch: this process has no channel to a primary (not a worker)');
    }
    this.rows = rows;
    this.dim = dim;
    this.#port = port;
    port.on('message', this.#onMessage);
    port.on('disconnect', this.#onDisconnect);
  }

  /** Throws a CudaArgumentError where the primary's index would refuse `query` and `k`. */
  checkQuery(query: Float32Array, k: number, call = 'search'): void {
    checkSearchQuery(query, k, this.rows, this.dim, call);
  }

  /** One search (a batch of one). */
  async search(query: Float32Array, k: number): Promise<SearchResult> {
    const [result] = await this.searchMany([query], [k]);
    return result!;
  }

  /** The batch's answers from the primary, in order. */
  searchMany(queries: readonly Float32Array[], ks: readonly number[]): Promise<SearchResult[]> {
    if (this.#closed !== undefined) return Promise.reject(this.#closed);
    if (!Array.isArray(queries) || !Array.isArray(ks) || ks.length !== queries.length) {
      return Promise.reject(
        new CudaArgumentError('searchMany: queries and ks must be arrays of one length'),
      );
    }
    const batch = queries.length;
    const packed = new Float32Array(batch * this.dim);
    const packedKs = new Int32Array(batch);
    try {
      for (let j = 0; j < batch; j++) {
        this.checkQuery(queries[j]!, ks[j]!, `searchMany: queries[${j}]`);
        packed.set(queries[j]!, j * this.dim);
        packedKs[j] = ks[j]!;
      }
    } catch (error) {
      return Promise.reject(error);
    }
    if (batch === 0) return Promise.resolve([]);
    const id = this.#next++;
    return new Promise<SearchResult[]>((resolve, reject) => {
      this.#pending.set(id, { ks, resolve, reject });
      const message: SearchRequestMessage = {
        type: SEARCH_REQUEST,
        id,
        queries: packed,
        ks: packedKs,
      };
      try {
        this.#port.send(message);
      } catch (error) {
        this.#pending.delete(id);
        reject(error);
      }
    });
  }

  /** Batches sent and not answered yet. */
  get waiting(): number {
    return this.#pending.size;
  }

  /** Stops listening; the searches waiting reject. */
  dispose(): void {
    this.#close(new Error('PrimarySearch: disposed'));
  }

  #close(reason: Error): void {
    if (this.#closed !== undefined) return;
    this.#closed = reason;
    this.#port.off('message', this.#onMessage);
    this.#port.off('disconnect', this.#onDisconnect);
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    for (const waiting of pending) waiting.reject(reason);
  }

  #receive(message: unknown): void {
    if (!isObject(message) || message.type !== SEARCH_ANSWER) return;
    const id = message.id as number;
    const waiting = this.#pending.get(id);
    if (waiting === undefined) return; // not ours, or answered already
    this.#pending.delete(id);
    const error = message.error;
    if (error !== undefined) {
      const { name, message: text } = isObject(error) ? error : { name: '', message: '' };
      const reason = `the primary's search failed: ${String(text)}`;
      waiting.reject(
        name === 'CudaArgumentError' ? new CudaArgumentError(reason) : new Error(reason),
      );
      return;
    }
    try {
      waiting.resolve(unpackAnswers(message, waiting.ks, this.rows));
    } catch (failure) {
      waiting.reject(failure);
    }
  }
}

/**
 * The results of an answer message for queries with `ks`: throws where the message is not an
 * answer of exactly sum(ks) rows (typed arrays, row numbers in 0..rows - 1, finite or not
 * scores as the GPU computed them).
 */
export function unpackAnswers(
  message: Record<string, unknown>,
  ks: readonly number[],
  rows = 2 ** 31 - 1,
): SearchResult[] {
  const { indices, scores, stream } = message;
  let total = 0;
  for (const k of ks) total += k;
  if (
    !(indices instanceof Int32Array) ||
    !(scores instanceof Float32Array) ||
    indices.length !== total ||
    scores.length !== total
  ) {
    throw new Error(
      `the primary's answer is malformed: expected ${total} rows as an Int32Array and a Float32Array`,
    );
  }
  for (let i = 0; i < total; i++) {
    const row = indices[i]!;
    if (row < 0 || row >= rows) {
      throw new Error(`the primary's answer is malformed: row ${row} of an index of ${rows}`);
    }
  }
  const results: SearchResult[] = new Array(ks.length);
  let at = 0;
  for (let j = 0; j < ks.length; j++) {
    const to = at + ks[j]!;
    const result: SearchResult = {
      indices: Array.from(indices.subarray(at, to)),
      scores: Array.from(scores.subarray(at, to)),
    };
    if (typeof stream === 'string') answerStreams.set(result, `primary ${stream}`);
    results[j] = result;
    at = to;
  }
  return results;
}

/**
 * The message that answers `results` (in order; answer j has at most `ks[j]` rows, padded
 * nowhere: a result with another length is an error the worker sees).
 */
export function packAnswers(
  id: number,
  results: readonly SearchResult[],
  stream?: string,
): SearchAnswerMessage {
  let total = 0;
  for (const result of results) total += result.indices.length;
  const indices = new Int32Array(total);
  const scores = new Float32Array(total);
  let at = 0;
  for (const result of results) {
    indices.set(result.indices, at);
    scores.set(result.scores, at);
    at += result.indices.length;
  }
  return { type: SEARCH_ANSWER, id, indices, scores, ...(stream === undefined ? {} : { stream }) };
}

/** The most queries one request message may carry. */
export const MAX_REQUEST_QUERIES = 4096;

/**
 * A worker's request, checked: its id, and its queries as views of the packed array. Throws a
 * CudaArgumentError where the message is of our type but malformed; undefined for a message of
 * another type (not ours to answer).
 */
export function readSearchRequest(
  message: unknown,
  dim: number,
): { id: number; queries: Float32Array[]; ks: number[] } | undefined {
  if (!isObject(message) || message.type !== SEARCH_REQUEST) return undefined;
  const { id, queries, ks } = message;
  if (!Number.isSafeInteger(id)) {
    throw new CudaArgumentError('search request: id must be an integer');
  }
  if (!(ks instanceof Int32Array) || ks.length < 1 || ks.length > MAX_REQUEST_QUERIES) {
    throw new CudaArgumentError(
      `search request: ks must be an Int32Array of 1..${MAX_REQUEST_QUERIES}`,
    );
  }
  if (!(queries instanceof Float32Array) || queries.length !== ks.length * dim) {
    throw new CudaArgumentError(
      `search request: queries must be a Float32Array of ${ks.length} x ${dim}`,
    );
  }
  const views: Float32Array[] = new Array(ks.length);
  for (let j = 0; j < ks.length; j++) views[j] = queries.subarray(j * dim, (j + 1) * dim);
  return { id: id as number, queries: views, ks: Array.from(ks) };
}

/** Options of `PrimarySearchServer`. */
export interface PrimarySearchOptions {
  /** Batches over all workers' searches (default: the batcher's), or false: each request alone. */
  searchBatch?: SearchBatchOptions | false;
  /** Runs a batch's GPU work (the primary: in a task of its own). */
  run?: RunBatch;
  /** The label of the stream a batch runs on, asked inside `run` (default: none sent). */
  streamLabel?: () => string;
}

/**
 * In the primary: answers the workers' search requests from `index`, gathering the searches
 * of every worker into its own batches (`SearchBatcher`). `handle(message, reply)` takes one
 * message from a worker; `reply` sends the answer back to that worker.
 * @example cluster.on('message', (worker, m) => server.handle(m, (a) => worker.send(a)));
 */
export class PrimarySearchServer {
  readonly #index: BatchSearchBackend & { dim: number };
  readonly #batcher: SearchBatcher | undefined;
  readonly #run: RunBatch;
  readonly #labels = new WeakMap<SearchResult, string>();
  #requests = 0;

  constructor(index: BatchSearchBackend & { dim: number }, options: PrimarySearchOptions = {}) {
    this.#index = index;
    const run = options.run ?? ((work) => work());
    const labelOf = options.streamLabel;
    // Each batch's stream, for the answer's `stream`.
    this.#run =
      labelOf === undefined
        ? run
        : (work) =>
            run(async () => {
              const results = await work();
              const label = labelOf();
              for (const result of results) this.#labels.set(result, label);
              return results;
            });
    this.#batcher =
      options.searchBatch === false
        ? undefined
        : new SearchBatcher(index, options.searchBatch, this.#run);
  }

  /**
   * Answers `message` if it is a search request (through `reply`); false for any other message.
   * A malformed request is answered with its error where it has an id.
   */
  handle(message: unknown, reply: (answer: SearchAnswerMessage) => void): boolean {
    let request: ReturnType<typeof readSearchRequest>;
    try {
      request = readSearchRequest(message, this.#index.dim);
    } catch (error) {
      const id =
        isObject(message) && Number.isSafeInteger(message.id) ? (message.id as number) : undefined;
      if (id !== undefined) reply(failure(id, error));
      return true;
    }
    if (request === undefined) return false;
    this.#requests++;
    const { id, queries, ks } = request;
    const answers =
      this.#batcher === undefined
        ? this.#run(() => this.#index.searchMany(queries, ks))
        : Promise.all(queries.map((query, j) => this.#batcher!.search(query, ks[j]!)));
    answers.then(
      (results) => reply(packAnswers(id, results, this.#labels.get(results[0]!))),
      (error: unknown) => reply(failure(id, error)),
    );
    return true;
  }

  /** Request messages received; the batches over them (undefined without batches). */
  statistics(): { requests: number; batches: SearchBatchStatistics | undefined } {
    return { requests: this.#requests, batches: this.#batcher?.statistics() };
  }

  /** Rejects the searches that wait, and every later one, with `reason`. */
  close(reason?: unknown): void {
    this.#batcher?.close(reason);
  }
}

function failure(id: number, error: unknown): SearchAnswerMessage {
  const name = CudaArgumentError.isInstance(error)
    ? 'CudaArgumentError'
    : error instanceof Error
      ? error.name
      : 'Error';
  const message = error instanceof Error ? error.message : String(error);
  return { type: SEARCH_ANSWER, id, error: { name, message } };
}
