/**
 * A small GPU HTTP service: every request runs in its own `task()`, so concurrent requests
 * get their own CUDA streams (and cuSOLVER / cuBLAS handles) and overlap on the GPU, while
 * the event loop keeps serving. Small requests run at high priority, so their kernels go ahead
 * of a large request's; a request whose client disconnects, or that runs past its route's
 * deadline, is cancelled: its task stops issuing GPU work (request-policy.ts). `POST /solve` solves A X = B with cuSOLVER (float64 LU),
 * `POST /matmul` multiplies with cuBLAS (dgemm), `POST /search` finds the k embeddings nearest a
 * query among a million that stay on the device (a GEMV and a top-k; search.ts). With
 * `sharedStream: true` every request is forced onto one stream instead, for comparison (see
 * `load.ts`).
 *
 * Run: `pnpm --filter @cuda-tasks/examples serve [--port 8080] [--shared-stream] [--processes N]`
 * (`--processes N`: N worker processes share the port and one search index on the GPU; see
 * cluster.ts).
 */
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { type AddressInfo, Server as NetServer, type Socket } from 'node:net';
import { constants as osConstants } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { gemv, matmul, nrm2 } from '@cuda-tasks/cublas';
import {
  availability,
  CudaArgumentError,
  CudaError,
  CudaOutOfMemoryError,
  CudaUnavailableError,
  currentStream,
  Device,
  DeviceArray,
  Stream,
} from '@cuda-tasks/cudadrv';
import { SingularMatrixError, solve, startIssueWorker } from '@cuda-tasks/cusolver';
import { prewarm, type TaskOptions, task, withStream } from '@cuda-tasks/task-runtime';
import {
  CommandLineError,
  isEntryPoint,
  parseCommandLine,
  parseCommandLineOrExit,
  usage,
} from '../cli.js';
import { Admission, AdmissionRefused } from './admission.js';
import { BodyBudget, readBody } from './body.js';
import {
  type ClusterService,
  DEFAULT_SEARCH_ROWS,
  isClusterWorker,
  openClusterSearchIndex,
  parseClusterArguments,
  searchesInPrimary,
  startClusterPrimary,
  stopClusterOnSignals,
} from './cluster.js';
import { PrimarySearch, primaryStreamOf } from './cluster-search.js';
import { drawUniform } from './draw.js';
import { IdleTrim, type IdleTrimOptions, type TrimmablePool } from './idle-trim.js';
import { LOOP_DELAY_VARIABLE, reportLoopDelayOnExit } from './loop-monitor.js';
import { ParsePool, type ParsePoolOptions, type ParsePoolStatistics } from './parse-pool.js';
import {
  DEFAULT_DEADLINES_MS,
  estimatedGpuBytes,
  type RequestCancellation,
  requestPriority,
  requestSignal,
} from './request-policy.js';
import { SearchIndex, type SearchIndexOptions, type SearchResult } from './search.js';
import {
  type BatchSearchBackend,
  DEFAULT_SEARCH_BATCH,
  type RunBatch,
  SearchBatcher,
  type SearchBatchOptions,
  type SearchBatchStatistics,
  searchBatchLine,
  searchBatchOptions,
} from './search-batcher.js';
import { memoryStatistics } from './stats.js';
import { streamLabel } from './stream-label.js';
import {
  type BodyContext,
  type BodyRoute,
  DEFAULT_LIMITS,
  type MatmulRequest,
  type ParsedBody,
  RequestError,
  type RequestLimits,
  type SearchRequest,
  type SolveRandomRequest,
  type SolveRequest,
} from './validation.js';

/** What the service searches: resident embeddings (`SearchIndex`), or a stand-in in tests. */
export interface SearchBackend {
  /** The `k` rows nearest `query`, best first (see `SearchIndex.search`). */
  search(query: Float32Array, k: number): Promise<SearchResult>;
  /**
   * Many searches in one pass (see `SearchIndex.searchMany`): with it, concurrent searches run
   * in batches (`ServerOptions.searchBatch`); without it, one `search` per request.
   */
  searchMany?(queries: readonly Float32Array[], ks: readonly number[]): Promise<SearchResult[]>;
  /** Throws where `search` would refuse the query (see `SearchIndex.checkQuery`). */
  checkQuery?(query: Float32Array, k: number): void;
  /** Frees what it holds. */
  dispose(): void;
}

/** Options of `createServer`. */
export interface ServerOptions {
  /**
   * Run every request on ONE shared stream (`withStream(shared, ...)`) instead of each task's
   * own stream: requests then queue behind each other on the GPU. For comparison only.
   */
  sharedStream?: boolean;
  /** Largest matrix dimension accepted (default 2048). */
  maxDimension?: number;
  /** Largest request body in bytes (default 64 MiB). */
  maxBodyBytes?: number;
  /**
   * The most bytes of request bodies buffered at once, across all requests (default 256 MiB):
   * a body that would pass it is answered 503 with `Retry-After`.
   */
  maxBufferedBodyBytes?: number;
  /**
   * The most time to read a request body, ms (default 10,000): past it, 408 and the connection
   * closes. The route's deadline bounds it too (503).
   */
  bodyTimeoutMs?: number;
  /**
   * The least bytes a second a request body must arrive at once `bodyRateGraceMs` passed
   * (default 65,536; 0: no minimum): each second must bring this many, or the rest of the body,
   * else 408 and the connection closes.
   */
  minBodyBytesPerSecond?: number;
  /** How long a body may take before its rate is checked, ms (default 1000). */
  bodyRateGraceMs?: number;
  /** The most open connections (default 8192); Node closes the ones past it at once. */
  maxConnections?: number;
  /** Called with errors answered with a 5xx status (default: `console.error`). */
  onServerError?: (error: unknown) => void;
  /**
   * Whether the GPU can run requests (default: `gpuHealth`): asked by `GET /health` and before
   * each GPU request, which is answered 503 without running when it says no.
   */
  checkGpu?: () => GpuHealth;
  /**
   * The embeddings `POST /search` searches (default 1,000,000 x 128 float32, seed 7): made on
   * the device by the first search request, then read by every one.
   */
  search?: SearchIndexOptions;
  /**
   * Builds what `/search` searches (default `SearchIndex.create`), in a task of its own that
   * no request's signal cancels (the service's shutdown does). A stand-in for tests.
   */
  createSearchIndex?: (
    options: SearchIndexOptions & { rows: number; dim: number },
  ) => Promise<SearchBackend>;
  /**
   * Searches that arrive together run as one batch (search-batcher.ts): one SGEMM over the
   * embeddings for up to `maxBatch` queries (default 64) and a top-k per query, with at most
   * `maxInFlight` batches on the GPU at once (default 2), each in a task of its own. A search
   * on an idle service goes at once, alone. False: each request runs its own GEMV, at most
   * `DEFAULT_GPU_IN_FLIGHT['/search']` at once.
   */
  searchBatch?: SearchBatchOptions | false;
  /**
   * Runs GPU work (a request's, the index build) with its task options instead of `task` (the
   * default, which also names the request's stream in the `x-cuda-stream` header). A stand-in
   * for tests without a GPU: it may call `work` (the route's own code) or answer for it.
   */
  runTask?: (work: () => Promise<unknown>, options: TaskOptions) => Promise<unknown>;
  /**
   * Give small requests high priority (default true): each request's task gets
   * `requestPriority(path, body)`, so a small request's kernels go ahead of the pending work of
   * a large one. False: every request at normal priority.
   */
  priorities?: boolean;
  /**
   * Per-route deadlines in milliseconds, over `DEFAULT_DEADLINES_MS` (`Infinity`: none). A
   * request past its deadline (reading its body included) is cancelled (its task's signal
   * aborts: it issues no more GPU work) and answered 503.
   */
  deadlinesMs?: Readonly<Record<string, number>>;
  /**
   * Called when a request's task was cancelled: its client disconnected before the answer
   * (`reason.status` 499), it ran past its deadline (503), or the service shut down (503).
   * Default: nothing.
   */
  onCancelled?: (path: string, reason: RequestError) => void;
  /**
   * Options for a request's task, from its route and its validated body (the route's request:
   * `{ n, k, a, b }` for `/solve`, its arrays as Float64Array; see validation.ts), merged over
   * the ones the service sets (name, priority, signal). The hook for per-request task options,
   * such as the load script's own rule for which requests are small.
   */
  taskOptionsFor?: (path: string, body: unknown) => TaskOptions;
  /**
   * Decoding, parsing and validating request bodies off the event loop (`ParsePool`): bodies
   * of `inlineBelowBytes` (16 KiB) or more go to a pool of worker threads
   * (`defaultParseWorkers()` by default, 6 on 16 cores), the rest are parsed inline. A body
   * that takes more than `timeoutMs` (5000) to parse or exhausts a worker's heap is a 413.
   * False: every body is parsed on the event loop.
   */
  bodyParsing?: ParsePoolOptions | false;
  /**
   * Per route, how many requests may run their GPU work at once, over
   * `DEFAULT_GPU_IN_FLIGHT` (`Infinity`: no bound). The others wait in line (see `maxWaiting`,
   * `maxWaitMs`).
   */
  gpuInFlight?: Readonly<Record<string, number>>;
  /**
   * The device memory that the GPU work in flight of all routes together may hold, in bytes as
   * `estimatedGpuBytes` counts them (default `DEFAULT_GPU_MEMORY_BUDGET`, 8 GiB; `Infinity`: no
   * bound). Requests past it wait in line.
   */
  gpuMemoryBudget?: number;
  /**
   * Requests that may wait in each admission line (default 256): past it, 503 with
   * `Retry-After` at once.
   */
  maxWaiting?: number;
  /**
   * How long a request may wait in an admission line, ms (default 2000; its deadline also
   * bounds it): then 503 with `Retry-After`.
   */
  maxWaitMs?: number;
  /**
   * Giving the device memory pool's reserve back once the GPU is idle (`IdleTrim`): when no GPU
   * work has been in flight for `idleMs` (default 2000) after some ran, an unref'd timer trims
   * the pool to the bytes in use plus `headroomBytes` (default 256 MiB); never while work runs.
   * `pool` replaces device 0's pool, which is the default only with the default `runTask`.
   * False: never trims.
   */
  idleTrim?: (IdleTrimOptions & { pool?: TrimmablePool }) | false;
}

/** The service's defaults for the bounds of `ServerOptions`. */
export const DEFAULT_SERVICE_BOUNDS: Readonly<{
  maxBufferedBodyBytes: number;
  bodyTimeoutMs: number;
  minBodyBytesPerSecond: number;
  bodyRateGraceMs: number;
  maxConnections: number;
  maxWaiting: number;
  maxWaitMs: number;
  headersTimeoutMs: number;
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
}> = Object.freeze({
  maxBufferedBodyBytes: 256 * 1024 * 1024,
  bodyTimeoutMs: 10_000,
  minBodyBytesPerSecond: 64 * 1024,
  bodyRateGraceMs: 1000,
  maxConnections: 8192,
  maxWaiting: 256,
  maxWaitMs: 2000,
  /** Node's `headersTimeout`: the most time to receive a request's headers. */
  headersTimeoutMs: 10_000,
  /** Node's `requestTimeout`: the most time to receive a whole request (a coarse last guard). */
  requestTimeoutMs: 60_000,
  /** Node's `keepAliveTimeout`: how long an idle connection stays open. */
  keepAliveTimeoutMs: 5_000,
});

/**
 * The device memory the GPU work in flight may hold by default, in estimated bytes
 * (`estimatedGpuBytes`): 8 GiB, about 124 `/solve-random` requests of n = 2048 at once. Enough
 * to keep the GPU busy; far below a device's memory, so requests wait on the host (or are
 * refused) instead of failing allocations on the device.
 */
export const DEFAULT_GPU_MEMORY_BUDGET = 8 * 1024 ** 3;

/**
 * How many requests of a route run their GPU work at once by default, besides the bound in
 * bytes that every GPU route has (`DEFAULT_GPU_MEMORY_BUDGET`): `/search`'s GEMV reads all the
 * embeddings, so a few searches fill the GPU's memory bandwidth and more only share it (each
 * then takes longer). It applies to searches that run one by one (`searchBatch: false`);
 * batched searches are bounded by batches in flight instead (`DEFAULT_SEARCH_BATCH`).
 */
export const DEFAULT_GPU_IN_FLIGHT: Readonly<Record<string, number>> = { '/search': 4 };

/** An HTTP answer for an error: the status and the message of the `{ "error" }` body. */
export interface ErrorResponse {
  /** The HTTP status code. */
  status: number;
  /** The message of the `{ "error" }` body. */
  message: string;
  /** Seconds for the `Retry-After` header, where a retry later may succeed. */
  retryAfterSeconds?: number;
}

/**
 * A message fit for a client: its first line, with every file path cut to its last part
 * (`/opt/cuda/lib64/libcublas.so.12` becomes `libcublas.so.12`), so that an answer never shows
 * where things are installed on the server.
 * @example withoutDirectories('could not load /opt/x/libcuda.so.1'); // 'could not load libcuda.so.1'
 */
export function withoutDirectories(message: string): string {
  return (message.split('\n')[0] ?? '').replace(
    /(?:[A-Za-z]:)?(?:[\\/][^\s\\/'"`(),;]+)+[\\/]([^\s\\/'"`(),;]+)/g,
    '$1',
  );
}

/**
 * Maps anything a request can throw to an HTTP status and the message of its body:
 * RequestError keeps its own (400, 404, 405, 408, 413, 422, 503, with its Retry-After); an
 * exactly singular matrix is 422; bad input caught by the libraries is 400 (these messages are
 * about the request). No GPU / driver / library is 503, device memory exhausted 503 with
 * Retry-After: 1, both with the error's first line, file paths cut to their last part; any
 * other error is 500 with no more than a CUDA status and call (the full error goes to the
 * server's log).
 * @example errorResponse(new SingularMatrixError('cusolverDnDgetrf', 3)).status; // 422
 */
export function errorResponse(error: unknown): ErrorResponse {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof RequestError) {
    return error.retryAfterSeconds === undefined
      ? { status: error.status, message }
      : { status: error.status, message, retryAfterSeconds: error.retryAfterSeconds };
  }
  if (SingularMatrixError.isInstance(error)) return { status: 422, message };
  if (CudaArgumentError.isInstance(error)) return { status: 400, message };
  if (CudaUnavailableError.isInstance(error)) {
    return { status: 503, message: withoutDirectories(message) };
  }
  if (
    error instanceof CudaOutOfMemoryError ||
    (CudaError.isInstance(error) && error.name === 'CudaOutOfMemoryError')
  ) {
    return { status: 503, message: withoutDirectories(message), retryAfterSeconds: 1 };
  }
  if (CudaError.isInstance(error)) {
    return {
      status: 500,
      message: `the GPU work failed: ${error.status} in ${error.call} (details in the server log)`,
    };
  }
  return { status: 500, message: 'internal server error (details in the server log)' };
}

/** What `GET /health` says about the GPU. */
export interface GpuHealth {
  /** Whether GPU requests can run: a driver, a device, and no sticky error in the context. */
  usable: boolean;
  /** CUDA devices found (when usable). */
  devices?: number;
  /** Why not (when not usable), without file paths. */
  reason?: string;
}

/**
 * Whether the GPU is usable: cudadrv's `availability()` (the driver loads and reports a
 * device, without creating a context, and no sticky error such as an illegal address has made
 * the context unusable), its reason cut to the first line without file paths.
 */
export function gpuHealth(): GpuHealth {
  const gpu = availability();
  if (gpu.available) return { usable: true, devices: gpu.deviceCount };
  return { usable: false, reason: withoutDirectories(gpu.reason ?? 'unknown reason') };
}

/**
 * The response header that names the CUDA stream a GPU request ran on (set on the answers of
 * `/solve`, `/solve-random`, `/matmul` and `/search` that reached the GPU, errors included): the stream's
 * name and its CUstream handle in hex, e.g. `task-stream-3 0x5581c0a3e2f0`. Concurrent requests
 * show distinct streams in the default mode and the same one with `sharedStream: true`.
 */
export const STREAM_HEADER = 'x-cuda-stream';

export { streamLabel } from './stream-label.js';

/**
 * Sends a JSON answer (nothing to a client that left). The connection closes after it when the
 * request's body was not read to its end (a refused or stalled body: what is left of it is
 * never read) or the service is closing.
 */
function send(
  request: IncomingMessage,
  response: ServerResponse,
  status: number,
  body: unknown,
  options: { close?: boolean; retryAfterSeconds?: number | undefined } = {},
): void {
  if (response.headersSent || response.destroyed) return;
  const text = JSON.stringify(body);
  const headers: Record<string, string | number> = {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  };
  if (options.retryAfterSeconds !== undefined) headers['retry-after'] = options.retryAfterSeconds;
  const unread = bodyLeft(request);
  if (options.close === true || unread) headers.connection = 'close';
  response.writeHead(status, headers);
  response.end(text);
  if (unread) response.once('finish', () => request.socket.destroy());
}

/** Whether some of the request's body was not read (a request without a body has none left). */
function bodyLeft(request: IncomingMessage): boolean {
  if (request.complete) return false;
  const length = request.headers['content-length'];
  return (
    request.headers['transfer-encoding'] !== undefined ||
    (length !== undefined && Number(length) !== 0)
  );
}

function finite(values: Float64Array, what: string): number[] {
  for (let i = 0; i < values.length; i++) {
    if (!Number.isFinite(values[i]!)) {
      throw new RequestError(
        422,
        `${what}[${i}] is not finite: the matrix is numerically singular (or the values overflow float64)`,
      );
    }
  }
  return Array.from(values);
}

/** Solves on the current stream (the request's task stream, or the shared one). */
async function runSolve(request: SolveRequest): Promise<{ x: number[] }> {
  const { n, k } = request;
  const a = DeviceArray.fromHost(request.a, [n, n], { dtype: 'float64' });
  let b: DeviceArray<'float64'> | undefined;
  let x: DeviceArray<'float64'> | undefined;
  try {
    b = DeviceArray.fromHost(request.b, [n, k], { dtype: 'float64' });
    // a and b are this request's own: the solve works in them instead of in copies.
    x = await solve(a, b, { overwriteA: true, overwriteB: true });
    return { x: finite(await x.toHost(), 'x') };
  } finally {
    a.dispose();
    b?.dispose();
    x?.dispose();
  }
}

/**
 * Draws A (n x n) and b (n) uniform in [0, 1) from `seed` with the task's cuRAND generator,
 * solves A x = b with cuSOLVER (LU), and answers the relative residual ||b - A x|| / ||b||
 * (cuBLAS gemv and nrm2) with the first entries of x: a request of a few bytes that keeps the
 * GPU busy, where a stream per request lets requests overlap on the GPU.
 */
async function runSolveRandom(
  request: SolveRandomRequest,
): Promise<{ n: number; seed: number; residual: number; x: number[] }> {
  const { n, seed } = request;
  // A first, then b: draws 0..n^2-1 and n^2..n^2+n-1 of the seed (draw.ts).
  const a = drawUniform(DeviceArray.empty('float64', [n, n]), seed, 0);
  let b: DeviceArray<'float64'> | undefined;
  let x: DeviceArray<'float64'> | undefined;
  let r: DeviceArray<'float64'> | undefined;
  try {
    b = drawUniform(DeviceArray.empty('float64', [n, 1]), seed, n * n);
    x = await solve(a, b);
    r = b.copy();
    gemv(a, x, r, { alpha: -1, beta: 1 }); // r = b - A x
    const [residualNorm, rightNorm] = await Promise.all([nrm2(r), nrm2(b)]);
    const head = await x.block(0, 0, Math.min(n, 4), 1).toHost();
    return { n, seed, residual: residualNorm / rightNorm, x: finite(head, 'x') };
  } finally {
    a.dispose();
    b?.dispose();
    x?.dispose();
    r?.dispose();
  }
}

/** Multiplies on the current stream. */
async function runMatmul(request: MatmulRequest): Promise<{ c: number[] }> {
  const { m, k, n } = request;
  const a = DeviceArray.fromHost(request.a, [m, k], { dtype: 'float64' });
  let b: DeviceArray<'float64'> | undefined;
  let c: DeviceArray<'float64'> | undefined;
  try {
    b = DeviceArray.fromHost(request.b, [k, n], { dtype: 'float64' });
    c = matmul(a, b);
    return { c: finite(await c.toHost(), 'c') };
  } finally {
    a.dispose();
    b?.dispose();
    c?.dispose();
  }
}

/** A validated request of a route: its estimated device memory and its GPU work. */
interface Prepared {
  /** Device memory its GPU work holds at its peak, as `estimatedGpuBytes` counts it. */
  bytes: number;
  /** Host-side waiting before its task (the shared index's build), under the request's signal. */
  before?: (signal: AbortSignal) => Promise<void>;
  /** The GPU work, run in the request's task. */
  run(): Promise<unknown>;
  /**
   * The `x-cuda-stream` label of the stream the work ran on, where that is not the request's
   * own (a batched search's batch task), once `run` has settled.
   */
  ranOn?: string | undefined;
}

interface Route {
  method: string;
  /** Its work for a body that `parseRequestBody` validated for the route (no GPU call yet). */
  prepare(body: ParsedBody): Prepared;
}

const ROUTES: Readonly<Record<string, Route>> = {
  '/solve': {
    method: 'POST',
    prepare(body) {
      const request = body as SolveRequest;
      return { bytes: estimatedGpuBytes('/solve', request), run: () => runSolve(request) };
    },
  },
  '/solve-random': {
    method: 'POST',
    prepare(body) {
      const request = body as SolveRandomRequest;
      return {
        bytes: estimatedGpuBytes('/solve-random', request),
        run: () => runSolveRandom(request),
      };
    },
  },
  '/matmul': {
    method: 'POST',
    prepare(body) {
      const request = body as MatmulRequest;
      return { bytes: estimatedGpuBytes('/matmul', request), run: () => runMatmul(request) };
    },
  },
};

/** A path that `new URL` gives back unchanged: no query, fragment, escapes, dot segments or doubled slashes. */
const PLAIN_PATH = /^(\/[A-Za-z0-9_-]+)+$|^\/$/;

/**
 * The request's pathname, as `new URL` gives it (exported for its tests).
 * @internal
 */
export function pathOf(url: string | undefined): string {
  // A plain path (letters, digits, '-', '_' after single slashes) is its own pathname: most
  // requests skip the URL parser.
  if (url !== undefined && PLAIN_PATH.test(url)) return url;
  try {
    return new URL(url ?? '/', 'http://localhost').pathname;
  } catch {
    return url ?? '/';
  }
}

/** Resolves as `promise` does, or rejects with the signal's reason once it aborts. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** net.Server's close: stops accepting, leaves the open connections alone. */
const netServerClose = NetServer.prototype.close;

/** Resolves once every promise settled, or after `ms`, whichever comes first. */
async function settledWithin(promises: Iterable<Promise<unknown>>, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([
    Promise.allSettled(promises),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}

/** The `{ indices, scores }` of a search, refused (422) when a score overflowed float32. */
function finiteScores(result: SearchResult): SearchResult {
  for (let i = 0; i < result.scores.length; i++) {
    if (!Number.isFinite(result.scores[i]!)) {
      throw new RequestError(
        422,
        `POST /search: scores[${i}] is not finite: the dot products overflow float32 (scale the query down)`,
      );
    }
  }
  return result;
}

/** What the service holds now (`GpuService.statistics`). */
export interface ServiceStatistics {
  /** Requests being read, waiting or running. */
  inFlight: number;
  /** Bytes of request bodies being read, reserved against `maxBufferedBodyBytes`. */
  bufferedBodyBytes: number;
  /** Estimated device bytes of the GPU work admitted now, against `gpuMemoryBudget`. */
  gpuBytesInFlight: number;
  /** Requests waiting in an admission line. */
  waiting: number;
  /** Whether `shutdown` was called. */
  closing: boolean;
  /** The body parsers: bodies parsed inline and in workers, workers alive, timeouts, crashes. */
  bodyParsing: ParsePoolStatistics;
  /** The search batches since the index was built (absent while none is, or unbatched). */
  searchBatches?: SearchBatchStatistics;
}

/** Options of `GpuService.shutdown`. */
export interface ShutdownOptions {
  /**
   * How long the requests in flight may take to finish and be answered, ms (default 10,000).
   * Past it, they are cancelled: their tasks' signals abort and they are answered 503.
   */
  graceMs?: number;
  /** How long cancelled requests get to be answered, ms, before their connections close (default 2000). */
  cancelMs?: number;
  /**
   * The drain window, ms (default 400, bounded by `graceMs`): for this long the listener still
   * accepts, so that requests already sent (in the listen backlog, or on a connection whose
   * request was not read yet) are answered 503 with `Connection: close` and `Retry-After`
   * instead of being dropped; afterwards a connection is closed once it has no request in
   * progress and has been quiet this long.
   */
  drainMs?: number;
}

/** `ShutdownOptions.drainMs`'s default. */
export const DEFAULT_DRAIN_MS = 400;

/** What `GpuService.shutdown` did. */
export interface ShutdownReport {
  /** Requests in flight when it began. */
  inFlight: number;
  /** Of those, cancelled after the grace (answered 503). */
  cancelled: number;
  /** Requests still unanswered when their connections were closed (0 unless a task ignored its signal). */
  unanswered: number;
  /** How long it took, ms. */
  elapsedMs: number;
}

/** The HTTP server of the service, with an orderly shutdown and its figures. */
export interface GpuService extends Server {
  /**
   * Stops in order: for the drain window (`drainMs`) it keeps accepting and answers every new
   * request 503 with `Connection: close` and `Retry-After: 1`, then stops accepting; a
   * connection is closed once it has no request in progress and has been quiet for the drain
   * window; the requests in flight have `graceMs` to finish (their answers say
   * `connection: close`); then the rest are cancelled (answered 503) with up to `cancelMs` to
   * answer; every connection left is closed; the shared stream and the search index are freed.
   * Resolves with what it did; calling it again returns the same promise.
   */
  shutdown(options?: ShutdownOptions): Promise<ShutdownReport>;
  /** What it holds now: requests in flight, body bytes, GPU bytes admitted, waiters. */
  statistics(): ServiceStatistics;
}

/**
 * Creates the service (not listening yet: call `listen`). Each request's body is read within
 * bounds (size, time, bytes buffered across requests), parsed and validated (off the event loop
 * in a worker thread when it is 16 KiB or more: `bodyParsing`; no GPU call for a bad one),
 * admitted within the bounds on GPU work in flight (bytes for every route, and a count for
 * `/search`), then runs in its own `task()`. Answers are JSON: `{ x }` for `/solve`, `{ c }` for
 * `/matmul`, `{ indices, scores }` for `/search` (best first), `{ error }` with status 400 (bad
 * body), 404 (unknown route), 405 (wrong method), 408 (body too slow), 413 (body too large),
 * 422 (singular matrix, overflow), 503 (busy, with `Retry-After`; past a deadline; no usable
 * GPU; shutting down; out of device memory) or 500 (any other GPU error). `GET /health`
 * answers 200 `{ status: 'ok', gpu }` while GPU requests can run, else 503
 * `{ status: 'unavailable', gpu: { usable: false, reason } }` (see `gpuHealth`): after a sticky
 * error the process must restart, and a supervisor probing the status sees it. A failing
 * request never takes the server down. Every answer of a request that ran on the GPU carries an
 * `x-cuda-stream` header naming the stream it ran on (`STREAM_HEADER`, `streamLabel`).
 * @example
 * const server = createServer();
 * server.listen(0, '127.0.0.1', () => console.log(server.address()));
 * process.once('SIGTERM', () => server.shutdown({ graceMs: 10_000 }));
 */
export function createServer(options: ServerOptions = {}): GpuService {
  const limits: RequestLimits = {
    maxDimension: options.maxDimension ?? DEFAULT_LIMITS.maxDimension,
    maxBodyBytes: options.maxBodyBytes ?? DEFAULT_LIMITS.maxBodyBytes,
  };
  const bounds: Record<keyof typeof DEFAULT_SERVICE_BOUNDS, number> = { ...DEFAULT_SERVICE_BOUNDS };
  for (const name of [
    'maxBufferedBodyBytes',
    'bodyTimeoutMs',
    'minBodyBytesPerSecond',
    'bodyRateGraceMs',
    'maxConnections',
    'maxWaiting',
    'maxWaitMs',
  ] as const) {
    const value = options[name];
    if (value === undefined) continue;
    const least =
      name === 'maxWaiting' || name === 'minBodyBytesPerSecond' || name === 'bodyRateGraceMs'
        ? 0
        : 1;
    if (typeof value !== 'number' || !(value >= least)) {
      throw new RangeError(
        `createServer: ${name} must be a number >= ${least}, got ${String(value)}`,
      );
    }
    bounds[name] = value;
  }
  const onServerError = options.onServerError ?? ((error: unknown) => console.error(error));
  const checkGpu = options.checkGpu ?? gpuHealth;
  const trimOptions = options.idleTrim === false ? undefined : (options.idleTrim ?? {});
  // Device 0's pool is trimmed only where the service runs its own tasks on the GPU.
  const trimPool: (() => TrimmablePool | undefined) | undefined =
    trimOptions?.pool !== undefined
      ? () => trimOptions.pool
      : trimOptions !== undefined && options.runTask === undefined
        ? () => (gpuNow().usable ? Device.get(0).primaryContext().memoryPool : undefined)
        : undefined;
  const idle =
    trimPool === undefined ? undefined : new IdleTrim(trimPool, trimOptions, onServerError);
  const givenRunTask: NonNullable<ServerOptions['runTask']> = options.runTask ?? task;
  // Every GPU task is counted, so that the pool is trimmed only once none has run for a while.
  const runTask: NonNullable<ServerOptions['runTask']> =
    idle === undefined
      ? givenRunTask
      : async (work, taskOptions) => {
          const end = idle.begin();
          try {
            return await givenRunTask(work, taskOptions);
          } finally {
            end();
          }
        };
  const deadlines: Record<string, number> = { ...DEFAULT_DEADLINES_MS };
  for (const [route, ms] of Object.entries(options.deadlinesMs ?? {})) {
    if (typeof ms !== 'number' || !(ms > 0)) {
      throw new RangeError(
        `createServer: deadlinesMs['${route}'] must be a positive number of milliseconds (or Infinity), got ${String(ms)}`,
      );
    }
    deadlines[route] = ms;
  }
  const line = { maxWaiting: bounds.maxWaiting, maxWaitMs: bounds.maxWaitMs };
  const gates = new Map<string, Admission>();
  const searchBatch =
    options.searchBatch === false ? undefined : searchBatchOptions(options.searchBatch);
  for (const [route, limit] of Object.entries({
    ...(searchBatch === undefined ? DEFAULT_GPU_IN_FLIGHT : {}),
    ...options.gpuInFlight,
  })) {
    if (limit === Number.POSITIVE_INFINITY) continue;
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(
        `createServer: gpuInFlight['${route}'] must be a positive integer (or Infinity), got ${String(limit)}`,
      );
    }
    gates.set(route, new Admission(limit, line));
  }
  const budget = options.gpuMemoryBudget ?? DEFAULT_GPU_MEMORY_BUDGET;
  if (typeof budget !== 'number' || !(budget >= 1)) {
    throw new RangeError(
      `createServer: gpuMemoryBudget must be a number of bytes >= 1 (or Infinity), got ${String(budget)}`,
    );
  }
  const memory = Number.isFinite(budget) ? new Admission(Math.floor(budget), line) : undefined;
  const bodies = new BodyBudget(bounds.maxBufferedBodyBytes);
  const parsing = new ParsePool(
    options.bodyParsing === false
      ? { workers: 0 }
      : { onError: onServerError, ...options.bodyParsing },
  );
  const priorities = options.priorities ?? true;
  // Created on the first request that needs it, so that a server without GPU still starts.
  let shared: Stream | undefined;
  // Aborts at shutdown: the signal of work shared by requests (the index build), which no
  // single request's signal may cancel.
  const lifetime = new AbortController();

  // The search route's embeddings: built once, outside any request (see search.ts).
  const searchRows = options.search?.rows ?? 1_000_000;
  const searchDim = options.search?.dim ?? 128;
  const createIndex = options.createSearchIndex ?? SearchIndex.create;
  /** The index, and the batcher of its searches where they run in batches. */
  interface SearchService {
    backend: SearchBackend;
    batcher: SearchBatcher | undefined;
  }
  // The stream each batch ran on, for the answers' x-cuda-stream header.
  const batchStreams = new WeakMap<SearchResult, string>();
  // Each batch in a task of its own (or on the shared stream), that no request's signal cancels.
  const runBatch: RunBatch = (work) =>
    runTask(
      async () => {
        const results = await (options.sharedStream && options.runTask === undefined
          ? withStream((shared ??= Stream.create({ name: 'service shared stream' })), work)
          : work());
        if (options.runTask === undefined) {
          const label = streamLabel(currentStream());
          for (const result of results) batchStreams.set(result, label);
        }
        return results;
      },
      {
        name: 'POST /search batch',
        signal: lifetime.signal,
        ...(priorities ? { priority: requestPriority('/search', undefined) } : {}),
      },
    ) as Promise<SearchResult[]>;
  let searchIndex: Promise<SearchService> | undefined;
  // The batcher of the index built last, for `statistics()`.
  let batcherNow: SearchBatcher | undefined;
  const sharedSearchIndex = (): Promise<SearchService> => {
    if (searchIndex === undefined) {
      const pending = (
        runTask(() => createIndex({ ...options.search, rows: searchRows, dim: searchDim }), {
          name: 'build the search index',
          signal: lifetime.signal,
        }) as Promise<SearchBackend>
      ).then((backend): SearchService => {
        // A cluster worker's batches run in the primary (cluster-search.ts): no GPU work here,
        // so no task of their own either.
        const batcher =
          searchBatch !== undefined && typeof backend.searchMany === 'function'
            ? new SearchBatcher(
                backend as BatchSearchBackend,
                searchBatch,
                backend instanceof PrimarySearch ? (work) => work() : runBatch,
              )
            : undefined;
        batcherNow = batcher;
        return { backend, batcher };
      });
      searchIndex = pending;
      // A failed build is not kept: the next request builds again.
      pending.catch(() => {
        if (searchIndex === pending) searchIndex = undefined;
      });
    }
    return searchIndex;
  };
  const bodyContext: BodyContext = { limits, searchDim, searchRows };
  const routes: Readonly<Record<string, Route>> = {
    ...ROUTES,
    '/search': {
      method: 'POST',
      prepare(body) {
        const request = body as SearchRequest;
        let index: SearchService | undefined;
        let requestSignal: AbortSignal | undefined;
        const prepared: Prepared = {
          bytes: estimatedGpuBytes('/search', request, { rows: searchRows }),
          async before(signal) {
            requestSignal = signal;
            // Each request waits for the shared build with its own signal: one that leaves
            // stops waiting, the build goes on for the others.
            index = await untilAborted(sharedSearchIndex(), signal);
          },
          async run() {
            const { backend, batcher } = index!;
            if (batcher === undefined) {
              return finiteScores(await backend.search(request.query, request.k));
            }
            const result = await batcher.search(request.query, request.k, requestSignal);
            // A result the cluster's primary found names the primary's stream.
            prepared.ranOn = batchStreams.get(result) ?? primaryStreamOf(result);
            return finiteScores(result);
          },
        };
        return prepared;
      },
    },
  };

  /** A request being handled: settles once it is answered; cancels it at shutdown. */
  interface InFlight {
    cancel: ((reason: RequestError) => void) | undefined;
  }
  const inFlight = new Map<InFlight, Promise<void>>();
  let closing: Promise<ShutdownReport> | undefined;

  /** Whether the GPU can run requests now (a check that throws counts as no). */
  const gpuNow = (): GpuHealth => {
    try {
      return checkGpu();
    } catch (error) {
      onServerError(error);
      return { usable: false, reason: 'the GPU check failed (details in the server log)' };
    }
  };

  /** Holds the admission of a request's GPU work; a refusal is a busy 503. */
  const admit = async (
    what: string,
    gate: Admission | undefined,
    signal: AbortSignal,
    units: number,
  ): Promise<boolean> => {
    if (gate === undefined) return false;
    try {
      await gate.acquire(signal, units);
      return true;
    } catch (error) {
      if (!(error instanceof AdmissionRefused)) throw error;
      throw new RequestError(503, `${what}: the service is busy (${error.message}); retry later`, {
        retryAfterSeconds: 1,
      });
    }
  };

  const onRequest = async (request: IncomingMessage, response: ServerResponse, entry: InFlight) => {
    const path = pathOf(request.url);
    let cancellation: RequestCancellation | undefined;
    try {
      if (closing !== undefined) {
        throw new RequestError(503, 'the service is shutting down', { retryAfterSeconds: 1 });
      }
      if (path === '/health' && (request.method === 'GET' || request.method === 'HEAD')) {
        // 200 only while GPU requests can run: a supervisor probing the status restarts a
        // process whose CUDA context a sticky error made unusable.
        const gpu = gpuNow();
        send(request, response, gpu.usable ? 200 : 503, {
          status: gpu.usable ? 'ok' : 'unavailable',
          gpu,
        });
        return;
      }
      if (path === '/stats' && request.method === 'GET') {
        // Memory figures (RSS, the GPU pool's used/reserved, streams, handles): see stats.ts.
        send(request, response, 200, memoryStatistics());
        return;
      }
      const route = Object.hasOwn(routes, path) ? routes[path] : undefined;
      if (route === undefined) {
        throw new RequestError(
          404,
          `no route ${request.method} ${path}: this service has POST /solve, POST /solve-random, POST /matmul, POST /search and GET /health`,
        );
      }
      if (request.method !== route.method) {
        response.setHeader('allow', route.method);
        throw new RequestError(
          405,
          `${path} takes ${route.method} with a JSON body, not ${request.method}`,
        );
      }
      const what = `${route.method} ${path}`;
      // From here on the request can be cancelled: by its client, its deadline, the shutdown.
      cancellation = requestSignal(
        request,
        response,
        deadlines[path] ?? Number.POSITIVE_INFINITY,
        what,
      );
      entry.cancel = cancellation.cancel;
      const signal = cancellation.signal;
      const raw = await readBody(request, {
        maxBytes: limits.maxBodyBytes,
        budget: bodies,
        timeoutMs: bounds.bodyTimeoutMs,
        minBytesPerSecond: bounds.minBodyBytesPerSecond,
        rateGraceMs: bounds.bodyRateGraceMs,
        signal,
        keepReserved: true,
      });
      // The body's bytes stay counted until it is parsed (a large one off the loop, its
      // bytes moved to a worker), so bodies waiting for a worker are bounded too.
      const length = raw.length;
      let body: ParsedBody;
      try {
        body = await parsing.parse(path as BodyRoute, raw.segments(), bodyContext, signal);
      } finally {
        bodies.release(length);
      }
      const prepared = route.prepare(body);
      const gpu = gpuNow();
      if (!gpu.usable) {
        throw new RequestError(503, `the GPU is not usable: ${gpu.reason ?? 'unknown reason'}`);
      }
      await prepared.before?.(signal);
      // In a task of its own (or on the shared stream), naming the stream it ran on in a
      // response header (see STREAM_HEADER); a stand-in runner gets the route's work alone.
      const onStream = async () => {
        response.setHeader(STREAM_HEADER, streamLabel(currentStream()));
        try {
          return await prepared.run();
        } finally {
          if (prepared.ranOn !== undefined) response.setHeader(STREAM_HEADER, prepared.ranOn);
        }
      };
      const work =
        options.runTask !== undefined
          ? prepared.run
          : options.sharedStream
            ? () => {
                shared ??= Stream.create({ name: 'service shared stream' });
                return withStream(shared, onStream);
              }
            : onStream;
      // The route's bound on requests (if any), then the bound on device memory of all routes.
      const gate = gates.get(path);
      const gated = await admit(what, gate, signal, 1);
      let result: unknown;
      try {
        const held = await admit(what, memory, signal, prepared.bytes);
        try {
          result = await runTask(work, {
            name: what,
            signal,
            ...(priorities ? { priority: requestPriority(path, body) } : {}),
            ...options.taskOptionsFor?.(path, body),
          });
        } finally {
          if (held) memory!.release(prepared.bytes);
        }
      } finally {
        if (gated) gate!.release();
      }
      send(request, response, 200, result, { close: closing !== undefined });
    } catch (error) {
      const cancelled =
        cancellation?.signal.aborted === true && error === cancellation.signal.reason;
      if (cancelled) options.onCancelled?.(path, error as RequestError);
      const { status, message, retryAfterSeconds } = errorResponse(error);
      // A request's own failure (bad input, a deadline) is not the server's.
      if (status >= 500 && !(error instanceof RequestError)) onServerError(error);
      send(
        request,
        response,
        status,
        { error: message },
        {
          close: closing !== undefined,
          retryAfterSeconds,
        },
      );
    } finally {
      cancellation?.done();
    }
  };

  /**
   * An open connection: its requests in progress, and when it was last seen active (a request
   * began or ended, or bytes arrived: the socket's `bytesRead` moved since `bytesRead` here).
   * Arrivals are read off the socket's count, not from 'data' listeners: a 'data' listener on a
   * server socket takes Node's HTTP parser off the socket's native reads, so that every chunk
   * goes through JavaScript (docs/decisions/0037).
   */
  interface Connection {
    requests: number;
    activeAt: number;
    bytesRead: number;
  }
  const connections = new Map<Socket, Connection>();

  const server = createHttpServer(
    {
      headersTimeout: bounds.headersTimeoutMs,
      requestTimeout: bounds.requestTimeoutMs,
      keepAliveTimeout: bounds.keepAliveTimeoutMs,
      // How often Node checks the two timeouts above (default 30 s).
      connectionsCheckingInterval: 1000,
    },
    (request, response) => {
      const connection = connections.get(request.socket);
      if (connection !== undefined) {
        connection.requests++;
        connection.activeAt = performance.now();
        response.once('close', () => {
          connection.requests--;
          connection.activeAt = performance.now();
          connection.bytesRead = request.socket.bytesRead;
        });
      }
      const entry: InFlight = { cancel: undefined };
      // onRequest catches everything it can; this is the last guard so that nothing escapes.
      const handled = onRequest(request, response, entry)
        .catch((error: unknown) => {
          onServerError(error);
          if (!response.headersSent) {
            send(request, response, 500, { error: errorResponse(error).message });
          } else response.destroy();
        })
        .finally(() => inFlight.delete(entry));
      inFlight.set(entry, handled);
    },
  );
  server.maxConnections = bounds.maxConnections;
  server.on('connection', (socket: Socket) => {
    connections.set(socket, { requests: 0, activeAt: performance.now(), bytesRead: 0 });
    socket.once('close', () => connections.delete(socket));
  });

  /**
   * Closes the connections with no request in progress, quiet for `quietMs`. Bytes that arrived
   * since the last look count as activity now (shutdown looks every 25 ms).
   */
  const closeQuietConnections = (quietMs: number) => {
    const now = performance.now();
    for (const [socket, connection] of connections) {
      const bytesRead = socket.bytesRead;
      if (bytesRead !== connection.bytesRead) {
        connection.bytesRead = bytesRead;
        connection.activeAt = now;
      }
      if (connection.requests === 0 && now - connection.activeAt >= quietMs) socket.destroy();
    }
  };

  let released = false;
  /** Frees the shared stream and the search index (once its build settles, within `waitMs`). */
  const release = async (waitMs = 2000) => {
    if (released) return;
    released = true;
    idle?.stop();
    const parsersClosed = parsing.close();
    lifetime.abort(new RequestError(503, 'the service is shutting down'));
    shared?.dispose();
    shared = undefined;
    const pending = searchIndex;
    searchIndex = undefined;
    // A build that ignores the abort is disposed whenever it ends; shutdown does not wait on it.
    const disposed = pending?.then(
      (index) => {
        index.batcher?.close(new RequestError(503, 'the service is shutting down'));
        index.backend.dispose();
      },
      () => undefined,
    );
    await settledWithin(
      disposed === undefined ? [parsersClosed] : [parsersClosed, disposed],
      waitMs,
    );
  };
  server.on('close', () => void release());

  const shutdown = (shutdownOptions: ShutdownOptions = {}): Promise<ShutdownReport> => {
    closing ??= (async () => {
      const graceMs = shutdownOptions.graceMs ?? 10_000;
      const cancelMs = shutdownOptions.cancelMs ?? 2000;
      const drainMs = Math.min(shutdownOptions.drainMs ?? DEFAULT_DRAIN_MS, graceMs);
      const started = performance.now();
      const atStart = inFlight.size;
      // The drain window: still accepting, every new request is answered 503 (onRequest).
      await sleep(drainMs);
      // Stops accepting and keeps the open connections (http.Server#close would also close the
      // ones whose request was not read yet); they close below once quiet.
      netServerClose.call(server, () => undefined);
      const deadline = started + graceMs;
      while (performance.now() < deadline) {
        closeQuietConnections(drainMs);
        if (inFlight.size === 0 && connections.size === 0) break;
        await sleep(Math.min(25, Math.max(0, deadline - performance.now())));
      }
      let cancelled = 0;
      if (inFlight.size > 0) {
        const reason = new RequestError(
          503,
          `the service is shutting down: the request was cancelled after a grace of ${graceMs} ms`,
          { retryAfterSeconds: 1 },
        );
        for (const entry of inFlight.keys()) {
          if (entry.cancel === undefined) continue;
          entry.cancel(reason);
          cancelled++;
        }
        await settledWithin(inFlight.values(), cancelMs);
      }
      const unanswered = inFlight.size;
      server.closeAllConnections();
      // http.Server's own close, now that no connection is left: it also stops the server's
      // connection-checking timer (the listener itself was closed above; its error is moot).
      server.close(() => undefined);
      await release(cancelMs);
      return { inFlight: atStart, cancelled, unanswered, elapsedMs: performance.now() - started };
    })();
    return closing;
  };

  const statistics = (): ServiceStatistics => {
    let waiting = memory?.waiting ?? 0;
    for (const gate of gates.values()) waiting += gate.waiting;
    return {
      inFlight: inFlight.size,
      bufferedBodyBytes: bodies.used,
      gpuBytesInFlight: memory?.holders ?? 0,
      waiting,
      closing: closing !== undefined,
      bodyParsing: parsing.statistics(),
      ...(batcherNow === undefined ? {} : { searchBatches: batcherNow.statistics() }),
    };
  };

  return Object.assign(server, { shutdown, statistics });
}

/** The default of `--grace-ms`: how long requests in flight may take at shutdown. */
export const DEFAULT_GRACE_MS = 10_000;

/**
 * The default of `--search-messages`: a cluster worker whose searches run in the primary keeps
 * up to this many batches waiting there, so that a turn's searches go at once instead of
 * waiting for an answer (the primary's own `--search-batches` bounds the GPU).
 */
export const DEFAULT_SEARCH_MESSAGES = 8;

/** The service's flags (`pnpm --filter @cuda-tasks/examples serve --help`). */
export const serverCommandLine = {
  command: 'server.ts',
  options: {
    port: {
      type: 'string',
      placeholder: 'N',
      description: 'port on 127.0.0.1',
      default: '$PORT, else a random free one',
    },
    'shared-stream': { type: 'boolean', description: 'run every request on one shared stream' },
    'no-priorities': {
      type: 'boolean',
      description: 'run every request at normal priority; without it, small requests run high',
    },
    'grace-ms': {
      type: 'string',
      placeholder: 'MS',
      description:
        'on SIGTERM / SIGINT, how long requests in flight may take before they are cancelled',
      default: DEFAULT_GRACE_MS,
    },
    processes: {
      type: 'string',
      placeholder: 'N',
      description: 'worker processes sharing the port and one search index on the GPU (cluster.ts)',
      default: 1,
    },
    'cluster-search': {
      type: 'string',
      placeholder: 'WHERE',
      description:
        "with --processes: where the searches run, 'primary' (it batches every worker's searches) or 'workers' (each opens the shared index)",
      default: 'primary',
    },
    'search-rows': {
      type: 'string',
      placeholder: 'N',
      description: 'embeddings of the /search index, each 128 float32 values',
      default: DEFAULT_SEARCH_ROWS,
    },
    'search-batch': {
      type: 'string',
      placeholder: 'N',
      description:
        'the most searches answered by one batch (one SGEMM over the index); 0: one GEMV per search',
      default: DEFAULT_SEARCH_BATCH.maxBatch,
    },
    'search-batches': {
      type: 'string',
      placeholder: 'N',
      description: 'batches of searches whose GPU work runs at once, at most 64',
      default: DEFAULT_SEARCH_BATCH.maxInFlight,
    },
    'search-messages': {
      type: 'string',
      placeholder: 'N',
      description:
        "with --cluster-search primary: a worker's batches of searches waiting in the primary at once, at most 64",
      default: DEFAULT_SEARCH_MESSAGES,
    },
    'parse-workers': {
      type: 'string',
      placeholder: 'N',
      description:
        'worker threads that parse bodies of 16 KiB or more, at most 64; 0: every body on the event loop',
      default: '3/8 of the cores, 4 to 8, fewer than the cores',
    },
  },
} as const;

/**
 * Parses the service's command line: the port (from `--port N`, then `$PORT`, then 0, a random
 * free port), `--shared-stream`, `--no-priorities`, `--grace-ms MS` (default 10,000) and
 * `--search-batch N` (default 64; 0: `searchBatch: false`) and `--search-batches N` (batches at
 * once, default 2), `--search-messages N` (a cluster worker's batches waiting in the primary,
 * default 8) and `--parse-workers N` (the body parsers' threads; undefined without the flag:
 * `defaultParseWorkers()`). Throws a `CommandLineError` for an unknown flag (listing the valid
 * ones), a port outside 0..65535, a grace or a batch size that is not an integer >= 0,
 * batches or messages at once outside 1..64, or parse workers outside 0..64.
 * @example parseServerArguments(['--port', '8080']); // { port: 8080, sharedStream: false, priorities: true, graceMs: 10000, searchBatch: 64, searchBatches: 2, searchMessages: 8, parseWorkers: undefined }
 */
export function parseServerArguments(
  argv: readonly string[],
  environment: NodeJS.ProcessEnv = process.env,
): {
  port: number;
  sharedStream: boolean;
  priorities: boolean;
  graceMs: number;
  searchBatch: number;
  searchBatches: number;
  searchMessages: number;
  parseWorkers: number | undefined;
} {
  const { values } = parseCommandLine(argv, serverCommandLine);
  const portText = values.port ?? environment.PORT ?? '0';
  const port = Number(portText);
  if (portText === '' || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new CommandLineError(
      `--port must be an integer in 0..65535, got ${portText || 'nothing'}`,
      usage(serverCommandLine),
    );
  }
  const graceText = values['grace-ms'] ?? String(DEFAULT_GRACE_MS);
  const graceMs = Number(graceText);
  if (graceText === '' || !Number.isSafeInteger(graceMs) || graceMs < 0) {
    throw new CommandLineError(
      `--grace-ms must be an integer >= 0, got ${graceText || 'nothing'}`,
      usage(serverCommandLine),
    );
  }
  const batchText = values['search-batch'] ?? String(DEFAULT_SEARCH_BATCH.maxBatch);
  const searchBatch = Number(batchText);
  if (batchText === '' || !Number.isSafeInteger(searchBatch) || searchBatch < 0) {
    throw new CommandLineError(
      `--search-batch must be an integer >= 0, got ${batchText || 'nothing'}`,
      usage(serverCommandLine),
    );
  }
  const fail = (message: string): never => {
    throw new CommandLineError(message, usage(serverCommandLine));
  };
  // Batches at once and a worker's batches waiting in the primary: decimal integers in 1..64.
  const atOnce = (name: 'search-batches' | 'search-messages', fallback: number): number =>
    integerFlag(name, values[name] ?? String(fallback), 1, 64, fail);
  const searchBatches = atOnce('search-batches', DEFAULT_SEARCH_BATCH.maxInFlight);
  const searchMessages = atOnce('search-messages', DEFAULT_SEARCH_MESSAGES);
  const parseWorkers = parseWorkersArgument(values['parse-workers'], fail);
  return {
    port,
    sharedStream: values['shared-stream'] === true,
    priorities: values['no-priorities'] !== true,
    graceMs,
    searchBatch,
    searchBatches,
    searchMessages,
    parseWorkers,
  };
}

/**
 * `--parse-workers` (of the service and of the load script, which passes it on): undefined
 * without the flag, else a decimal integer in 0..64; `fail` throws the refusal.
 * @example parseWorkersArgument('8', fail); // 8
 */
export function parseWorkersArgument(
  text: string | undefined,
  fail: (message: string) => never,
): number | undefined {
  return text === undefined ? undefined : integerFlag('parse-workers', text, 0, 64, fail);
}

/** `text` of flag `--name` as a decimal integer in lowest..highest, else `fail` with why. */
function integerFlag(
  name: string,
  text: string,
  lowest: number,
  highest: number,
  fail: (message: string) => never,
): number {
  const value = Number(text);
  if (!/^\d+$/.test(text) || value < lowest || value > highest) {
    fail(`--${name} must be an integer in ${lowest}..${highest}, got ${text || 'nothing'}`);
  }
  return value;
}

/**
 * Where the load script asks (`CUDA_TASKS_REPORT_LOOP_DELAY=1`), writes how this process batched
 * its searches to stderr at exit (`searchBatchLine`), if it batched any.
 */
function reportSearchBatchesOnExit(statistics: () => SearchBatchStatistics | undefined): void {
  if (process.env[LOOP_DELAY_VARIABLE] !== '1') return;
  process.once('exit', () => {
    const batches = statistics();
    if (batches !== undefined) process.stderr.write(`${searchBatchLine(process.pid, batches)}\n`);
  });
}

/** Options of `stopOnSignals`. */
export interface StopOnSignalsOptions {
  /** How long requests in flight may take before they are cancelled (`ShutdownOptions.graceMs`). */
  graceMs: number;
  /** Where progress lines go (default `console.error`). */
  log?: (line: string) => void;
  /** Ends the process (default `process.exit`). */
  exit?: (code: number) => void;
  /**
   * How long the process may take to end on its own once everything is given back, ms, before
   * `exit(0)` ends it (default 1000).
   */
  exitAfterMs?: number;
}

/**
 * Shuts `service` down on the first SIGTERM or SIGINT: `service.shutdown({ graceMs })` (stop
 * accepting, answer or cancel what is in flight, give back the shared stream and the index);
 * then the process ends on its own, or `exit(0)` ends it after `exitAfterMs` (what the GPU stack
 * keeps alive then, the driver's threads, is not ours to stop). A second signal exits at once
 * with 128 + its number. Returns a function that removes the handlers.
 * @example stopOnSignals(service, { graceMs: 10_000 });
 */
export function stopOnSignals(service: GpuService, options: StopOnSignalsOptions): () => void {
  const log = options.log ?? ((line: string) => console.error(line));
  const exit = options.exit ?? ((code: number) => process.exit(code));
  let stopping = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (stopping) {
      log(`${signal} again: exiting now`);
      exit(128 + (osConstants.signals[signal] ?? 0));
      return;
    }
    stopping = true;
    log(`${signal}: shutting down, requests in flight have ${options.graceMs} ms`);
    service.shutdown({ graceMs: options.graceMs }).then(
      (report) => {
        log(
          `stopped in ${Math.round(report.elapsedMs)} ms: ${report.inFlight} requests were in flight, ${report.cancelled} cancelled, ${report.unanswered} unanswered`,
        );
        process.exitCode = 0;
        setTimeout(() => exit(0), options.exitAfterMs ?? 1000).unref();
      },
      (error: unknown) => {
        log(`shutdown failed: ${error instanceof Error ? error.message : String(error)}`);
        exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
}

/**
 * Starts the service on 127.0.0.1 and prints its URL. The port comes from `--port N`, then
 * `$PORT`, then 0 (a random free port); `--shared-stream` forces the one-stream mode,
 * `--no-priorities` runs every request at normal priority. The task streams (of both
 * priorities), library handles and cuSOLVER's issue worker are made at startup, while the GPU
 * is idle. Resolves with the listening service; SIGTERM / SIGINT shut it down in order
 * (`stopOnSignals`, `--grace-ms`) and the process exits 0; a second signal exits at once.
 * With `--processes N` (N > 1) this process becomes the primary of a cluster instead: it builds
 * the search index (`--search-rows`) once in shareable GPU memory and resolves with the
 * `ClusterService` once its N workers listen (cluster.ts); each worker runs this function too.
 */
export async function main(
  argv: readonly string[] = process.argv.slice(2),
): Promise<GpuService | ClusterService> {
  const {
    port,
    sharedStream,
    priorities,
    graceMs,
    searchBatch,
    searchBatches,
    searchMessages,
    parseWorkers,
  } = parseServerArguments(argv);
  const { processes, searchRows, clusterSearch } = parseClusterArguments(
    parseCommandLine(argv, serverCommandLine).values,
    usage(serverCommandLine),
  );
  const worker = isClusterWorker();
  const searchBatchOption =
    searchBatch === 0 ? (false as const) : { maxBatch: searchBatch, maxInFlight: searchBatches };
  if (processes > 1 && !worker) {
    // The primary: builds the index once and forks the workers (cluster.ts); with
    // `--cluster-search primary` it also runs their searches, so its loop is measured too.
    if (clusterSearch === 'primary') reportLoopDelayOnExit();
    const primary = await startClusterPrimary({
      processes,
      searchRows,
      clusterSearch,
      searchBatch: searchBatchOption,
      port,
      graceMs,
      argv,
    });
    reportSearchBatchesOnExit(() => primary.searchStatistics()?.batches);
    stopClusterOnSignals(primary);
    return primary;
  }
  // A server process (not a cluster's primary) reports its event-loop delays at exit when the
  // load script asks (CUDA_TASKS_REPORT_LOOP_DELAY=1, loop-monitor.ts).
  reportLoopDelayOnExit();
  // Without a GPU the service still starts, saying so once here; its GPU routes answer 503.
  const gpu = gpuHealth();
  if (!gpu.usable) {
    console.error(
      `no usable GPU: ${gpu.reason} The GPU routes answer 503 while none is usable; GET /health says why.`,
    );
  } else {
    try {
      prewarm(0, priorities ? ['normal', 'high'] : ['normal']);
      // Large solves are issued from cuSOLVER's issue worker: start it now, not on the first one.
      void startIssueWorker();
    } catch (error) {
      // A CUDA library missing: the routes that need it answer 503 saying which.
      if (!CudaUnavailableError.isInstance(error)) throw error;
      console.error(`prewarm skipped: ${withoutDirectories(error.message)}`);
    }
  }
  // The body parsers start now too, not on the first large body.
  const server = createServer({
    sharedStream,
    priorities,
    bodyParsing: {
      prestart: true,
      ...(parseWorkers === undefined ? {} : { workers: parseWorkers }),
    },
    search: { rows: searchRows },
    // A worker whose searches run in the primary sends its batches there; the primary's own
    // batches over all workers' are what run on the GPU.
    searchBatch:
      worker && searchesInPrimary() && searchBatchOption !== false
        ? { ...searchBatchOption, maxInFlight: searchMessages }
        : searchBatchOption,
    // A worker of the cluster searches through the primary, or the primary's index opened
    // read-only (`--cluster-search`).
    ...(worker ? { createSearchIndex: openClusterSearchIndex } : {}),
  });
  // The load script also reads how this process batched its searches (a worker whose searches
  // run in the primary has no batches of its own on the GPU: the primary reports those).
  if (!(worker && searchesInPrimary())) {
    reportSearchBatchesOnExit(() => server.statistics().searchBatches);
  }
  return new Promise((resolveServer, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const address = server.address() as AddressInfo;
      stopOnSignals(server, { graceMs });
      resolveServer(server);
      // A worker says nothing: the primary prints the line once every worker listens.
      if (worker) return;
      console.log(
        `GPU service listening on http://127.0.0.1:${address.port} (${sharedStream ? 'one shared stream' : `a stream per request task${priorities ? ', small requests at high priority' : ''}`})`,
      );
      console.log(
        '  POST /solve {n, a, b, k?}   POST /solve-random {n, seed}   POST /matmul {m, k, n, a, b}   POST /search {query, k?}   GET /health',
      );
    });
  });
}

if (isEntryPoint(import.meta.url)) {
  parseCommandLineOrExit(process.argv.slice(2), serverCommandLine); // --help, unknown flags
  Promise.resolve()
    .then(() => main())
    .catch((error: unknown) => {
      const usageText = error instanceof CommandLineError ? `\n\n${error.usage}` : '';
      console.error(`${error instanceof Error ? error.message : error}${usageText}`);
      process.exitCode = error instanceof CommandLineError ? 2 : 1;
    });
}
