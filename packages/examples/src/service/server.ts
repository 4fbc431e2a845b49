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
 * Run: `pnpm --filter @cuda-tasks/examples serve [--port 8080] [--shared-stream]`
 */
import {
  createServer as createHttpServer,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { gemv, matmul, nrm2 } from '@cuda-tasks/cublas';
import {
  CudaArgumentError,
  CudaError,
  CudaOutOfMemoryError,
  CudaUnavailableError,
  currentStream,
  DeviceArray,
  deviceCount,
  Stream,
} from '@cuda-tasks/cudadrv';
import { stickyError } from '@cuda-tasks/cudadrv/internal';
import { SingularMatrixError, solve, startIssueWorker } from '@cuda-tasks/cusolver';
import { prewarm, type TaskOptions, task, withStream } from '@cuda-tasks/task-runtime';
import {
  CommandLineError,
  isEntryPoint,
  parseCommandLine,
  parseCommandLineOrExit,
  usage,
} from '../cli.js';
import { Admission } from './admission.js';
import { drawUniform } from './draw.js';
import {
  DEFAULT_DEADLINES_MS,
  type RequestCancellation,
  requestPriority,
  requestSignal,
} from './request-policy.js';
import { SearchIndex, type SearchIndexOptions } from './search.js';
import {
  DEFAULT_LIMITS,
  type MatmulRequest,
  parseJson,
  parseMatmulRequest,
  parseSearchRequest,
  parseSolveRandomRequest,
  parseSolveRequest,
  RequestError,
  type RequestLimits,
  type SolveRandomRequest,
  type SolveRequest,
} from './validation.js';

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
  /** Called with errors answered with a 5xx status (default: `console.error`). */
  onServerError?: (error: unknown) => void;
  /** What `GET /health` reports about the GPU (default: `gpuHealth`). */
  checkGpu?: () => GpuHealth;
  /**
   * The embeddings `POST /search` searches (default 1,000,000 x 128 float32, seed 7): made on
   * the device by the first search request, then read by every one.
   */
  search?: SearchIndexOptions;
  /**
   * Give small requests high priority (default true): each request's task gets
   * `requestPriority(path, body)`, so a small request's kernels go ahead of the pending work of
   * a large one. False: every request at normal priority.
   */
  priorities?: boolean;
  /**
   * Per-route deadlines in milliseconds, over `DEFAULT_DEADLINES_MS` (`Infinity`: none). A
   * request past its deadline is cancelled (its task's signal aborts: it issues no more GPU
   * work) and answered 503.
   */
  deadlinesMs?: Readonly<Record<string, number>>;
  /**
   * Called when a request's task was cancelled: its client disconnected before the answer
   * (`reason.status` 499) or it ran past its deadline (503). Default: nothing.
   */
  onCancelled?: (path: string, reason: RequestError) => void;
  /**
   * Options for a request's task, from its route and its parsed body, merged over the ones the
   * service sets (name, priority, signal). The hook for per-request task options, such as the
   * load script's own rule for which requests are small.
   */
  taskOptionsFor?: (path: string, body: unknown) => TaskOptions;
  /**
   * Per route, how many requests may run their GPU work at once, over
   * `DEFAULT_GPU_IN_FLIGHT` (`Infinity`: no bound). The others wait on the host, in arrival
   * order, before their task starts (their deadline runs meanwhile; a client that leaves
   * leaves the line). See admission.ts.
   */
  gpuInFlight?: Readonly<Record<string, number>>;
}

/**
 * How many requests of a route run their GPU work at once by default: `/search`'s GEMV reads
 * all the embeddings, so a few searches fill the GPU's memory bandwidth and more only share
 * it (each then takes longer); the other routes are unbounded.
 */
export const DEFAULT_GPU_IN_FLIGHT: Readonly<Record<string, number>> = { '/search': 4 };

/** An HTTP answer for an error: the status and the message of the `{ "error" }` body. */
export interface ErrorResponse {
  /** The HTTP status code. */
  status: number;
  /** The message of the `{ "error" }` body. */
  message: string;
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
 * RequestError keeps its own (400, 404, 405, 413, 422); an exactly singular matrix is 422; bad
 * input caught by the libraries is 400 (these messages are about the request). No GPU /
 * driver / library, or device memory exhausted, is 503 with the error's first line, file paths
 * cut to their last part; any other error is 500 with no more than a CUDA status and call (the
 * full error goes to the server's log).
 * @example errorResponse(new SingularMatrixError('cusolverDnDgetrf', 3)).status; // 422
 */
export function errorResponse(error: unknown): ErrorResponse {
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof RequestError) return { status: error.status, message };
  if (SingularMatrixError.isInstance(error)) return { status: 422, message };
  if (CudaArgumentError.isInstance(error)) return { status: 400, message };
  if (CudaUnavailableError.isInstance(error)) {
    return { status: 503, message: withoutDirectories(message) };
  }
  if (
    error instanceof CudaOutOfMemoryError ||
    (CudaError.isInstance(error) && error.name === 'CudaOutOfMemoryError')
  ) {
    return { status: 503, message: withoutDirectories(message) };
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
 * Whether the GPU is usable: the driver loads and reports a device (without creating a
 * context), and no sticky error (an illegal address, a failed launch) has made the context
 * unusable.
 */
export function gpuHealth(): GpuHealth {
  const sticky = stickyError();
  if (sticky !== undefined) {
    return {
      usable: false,
      reason: `the CUDA context is unusable since ${sticky}; the service must restart`,
    };
  }
  try {
    return { usable: true, devices: deviceCount() };
  } catch (error) {
    if (!CudaUnavailableError.isInstance(error)) throw error;
    return { usable: false, reason: withoutDirectories(error.message) };
  }
}

/**
 * Reads a request body up to `maxBytes`; a larger one (by Content-Length or as it streams in)
 * is a 413 RequestError. The rest of a refused body is discarded by Node when the response ends.
 */
export function readBody(request: IncomingMessage, maxBytes: number): Promise<Buffer> {
  const declared = Number(request.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    return Promise.reject(
      new RequestError(
        413,
        `the request body is ${declared} bytes; this service accepts at most ${maxBytes}`,
      ),
    );
  }
  return new Promise((resolveBody, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > maxBytes) {
        request.off('data', onData);
        request.off('end', onEnd);
        reject(
          new RequestError(
            413,
            `the request body is larger than ${maxBytes} bytes, the most this service accepts`,
          ),
        );
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => resolveBody(Buffer.concat(chunks, received));
    request.on('data', onData);
    request.on('end', onEnd);
    // A client that disconnects mid-body: reject instead of leaving an unhandled 'error'.
    request.on('error', (error) =>
      reject(new RequestError(400, `reading the body failed: ${error.message}`)),
    );
  });
}

/**
 * The response header that names the CUDA stream a GPU request ran on (set on the answers of
 * `/solve`, `/solve-random`, `/matmul` and `/search` that reached the GPU, errors included): the stream's
 * name and its CUstream handle in hex, e.g. `task-stream-3 0x5581c0a3e2f0`. Concurrent requests
 * show distinct streams in the default mode and the same one with `sharedStream: true`.
 */
export const STREAM_HEADER = 'x-cuda-stream';

/**
 * The value of the `x-cuda-stream` header for `stream`: its name (spaces replaced by `-`, other
 * characters outside printable ASCII by `?`; `unnamed` without one), a space, and its handle.
 * @example streamLabel(stream); // 'task-stream-3 0x5581c0a3e2f0'
 */
export function streamLabel(stream: Pick<Stream, 'name' | 'handle'>): string {
  const name = (stream.name ?? 'unnamed').replace(/ /g, '-').replace(/[^\x21-\x7e]/g, '?');
  return `${name || 'unnamed'} 0x${stream.handle.toString(16)}`;
}

function send(response: ServerResponse, status: number, body: unknown): void {
  if (response.headersSent || response.destroyed) return;
  const text = JSON.stringify(body);
  response.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(text),
  });
  response.end(text);
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
    x = await solve(a, b);
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

interface Route {
  method: string;
  /** Validates the parsed JSON body (pure), then runs on the GPU. */
  handle(body: unknown, limits: RequestLimits): () => Promise<unknown>;
}

const ROUTES: Readonly<Record<string, Route>> = {
  '/solve': {
    method: 'POST',
    handle(body, limits) {
      const request = parseSolveRequest(body, limits);
      return () => runSolve(request);
    },
  },
  '/solve-random': {
    method: 'POST',
    handle(body, limits) {
      const request = parseSolveRandomRequest(body, limits);
      return () => runSolveRandom(request);
    },
  },
  '/matmul': {
    method: 'POST',
    handle(body, limits) {
      const request = parseMatmulRequest(body, limits);
      return () => runMatmul(request);
    },
  },
};

function pathOf(url: string | undefined): string {
  try {
    return new URL(url ?? '/', 'http://localhost').pathname;
  } catch {
    return url ?? '/';
  }
}

/**
 * Creates the service (not listening yet: call `listen`). Each request is validated first
 * (no GPU call for a bad one), then runs in its own `task()`. Answers are JSON: `{ x }` for
 * `/solve`, `{ c }` for `/matmul`, `{ indices, scores }` for `/search` (best first),
 * `{ error }` with status 400 (bad body), 404 (unknown
 * route), 405 (wrong method), 413 (body too large), 422 (singular matrix), 503 (no GPU, or
 * out of device memory) or 500 (any other GPU error). `GET /health` answers 200 with
 * `{ status: 'ok' | 'degraded', gpu: { usable, devices?, reason? } }` (see `gpuHealth`). A failing request never takes the server down. Every answer of a
 * request that ran on the GPU carries an `x-cuda-stream` header naming the stream it ran on
 * (`STREAM_HEADER`, `streamLabel`).
 * @example
 * const server = createServer();
 * server.listen(0, '127.0.0.1', () => console.log(server.address()));
 */
export function createServer(options: ServerOptions = {}): Server {
  const limits: RequestLimits = {
    maxDimension: options.maxDimension ?? DEFAULT_LIMITS.maxDimension,
    maxBodyBytes: options.maxBodyBytes ?? DEFAULT_LIMITS.maxBodyBytes,
  };
  const onServerError = options.onServerError ?? ((error: unknown) => console.error(error));
  const deadlines: Record<string, number> = { ...DEFAULT_DEADLINES_MS };
  for (const [route, ms] of Object.entries(options.deadlinesMs ?? {})) {
    if (typeof ms !== 'number' || !(ms > 0)) {
      throw new RangeError(
        `createServer: deadlinesMs['${route}'] must be a positive number of milliseconds (or Infinity), got ${String(ms)}`,
      );
    }
    deadlines[route] = ms;
  }
  const gates = new Map<string, Admission>();
  for (const [route, limit] of Object.entries({
    ...DEFAULT_GPU_IN_FLIGHT,
    ...options.gpuInFlight,
  })) {
    if (limit === Number.POSITIVE_INFINITY) continue;
    if (!Number.isInteger(limit) || limit < 1) {
      throw new RangeError(
        `createServer: gpuInFlight['${route}'] must be a positive integer (or Infinity), got ${String(limit)}`,
      );
    }
    gates.set(route, new Admission(limit));
  }
  const priorities = options.priorities ?? true;
  // Created on the first request that needs it, so that a server without GPU still starts.
  let shared: Stream | undefined;
  // The search route's embeddings: made by the first search, read by all (see search.ts).
  const searchRows = options.search?.rows ?? 1_000_000;
  const searchDim = options.search?.dim ?? 128;
  let searchIndex: Promise<SearchIndex> | undefined;
  const routes: Readonly<Record<string, Route>> = {
    ...ROUTES,
    '/search': {
      method: 'POST',
      handle(body) {
        const request = parseSearchRequest(body, searchDim, searchRows);
        return async () => {
          const pending = (searchIndex ??= SearchIndex.create({
            ...options.search,
            rows: searchRows,
            dim: searchDim,
          }));
          let index: SearchIndex;
          try {
            index = await pending;
          } catch (error) {
            if (searchIndex === pending) searchIndex = undefined; // the next request retries
            throw error;
          }
          return index.search(request.query, request.k);
        };
      },
    },
  };

  const onRequest = async (request: IncomingMessage, response: ServerResponse) => {
    const path = pathOf(request.url);
    let cancellation: RequestCancellation | undefined;
    try {
      if (path === '/health' && (request.method === 'GET' || request.method === 'HEAD')) {
        // 200 while the process answers (a liveness probe); the body says whether GPU
        // requests can run.
        const gpu = (options.checkGpu ?? gpuHealth)();
        send(response, 200, { status: gpu.usable ? 'ok' : 'degraded', gpu });
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
      // From here on the request can be cancelled: by its client, or by its deadline.
      cancellation = requestSignal(
        request,
        response,
        deadlines[path] ?? Number.POSITIVE_INFINITY,
        `${route.method} ${path}`,
      );
      const body = parseJson(await readBody(request, limits.maxBodyBytes));
      const run = route.handle(body, limits);
      // Names the stream the work ran on in a response header (see STREAM_HEADER).
      const runHere = () => {
        response.setHeader(STREAM_HEADER, streamLabel(currentStream()));
        return run();
      };
      // A route with a bound on its GPU work in flight: wait for a slot (in arrival order).
      const gate = gates.get(path);
      if (gate !== undefined) await gate.acquire(cancellation.signal);
      let result: unknown;
      try {
        result = await task(
          () => {
            if (!options.sharedStream) return runHere();
            shared ??= Stream.create({ name: 'service shared stream' });
            return withStream(shared, runHere);
          },
          {
            name: `${route.method} ${path}`,
            signal: cancellation.signal,
            ...(priorities ? { priority: requestPriority(path, body) } : {}),
            ...options.taskOptionsFor?.(path, body),
          },
        );
      } finally {
        gate?.release();
      }
      send(response, 200, result);
    } catch (error) {
      const cancelled =
        cancellation?.signal.aborted === true && error === cancellation.signal.reason;
      if (cancelled) options.onCancelled?.(path, error as RequestError);
      const { status, message } = errorResponse(error);
      // A request's own failure (bad input, a deadline) is not the server's.
      if (status >= 500 && !(error instanceof RequestError)) onServerError(error);
      send(response, status, { error: message }); // nothing goes to a client that left
    } finally {
      cancellation?.done();
    }
  };

  const server = createHttpServer((request, response) => {
    // onRequest catches everything it can; this is the last guard so that nothing escapes.
    onRequest(request, response).catch((error: unknown) => {
      onServerError(error);
      if (!response.headersSent) send(response, 500, { error: errorResponse(error).message });
      else response.destroy();
    });
  });
  server.on('close', () => {
    shared?.dispose();
    shared = undefined;
    searchIndex?.then(
      (index) => index.dispose(),
      () => undefined,
    );
    searchIndex = undefined;
  });
  return server;
}

/** The service's flags (`pnpm --filter @cuda-tasks/examples serve --help`). */
export const serverCommandLine = {
  command: 'server.ts',
  options: {
    port: {
      type: 'string',
      placeholder: 'N',
      description: 'port on 127.0.0.1 ($PORT, else random)',
    },
    'shared-stream': { type: 'boolean', description: 'run every request on one shared stream' },
    'no-priorities': {
      type: 'boolean',
      description: 'run every request at normal priority (default: small requests high)',
    },
  },
} as const;

/**
 * Parses the service's command line: the port (from `--port N`, then `$PORT`, then 0, a random
 * free port), `--shared-stream` and `--no-priorities`. Throws a `CommandLineError` for an
 * unknown flag (listing the valid ones) or a port outside 0..65535.
 * @example parseServerArguments(['--port', '8080']); // { port: 8080, sharedStream: false, priorities: true }
 */
export function parseServerArguments(
  argv: readonly string[],
  environment: NodeJS.ProcessEnv = process.env,
): { port: number; sharedStream: boolean; priorities: boolean } {
  const { values } = parseCommandLine(argv, serverCommandLine);
  const portText = values.port ?? environment.PORT ?? '0';
  const port = Number(portText);
  if (portText === '' || !Number.isInteger(port) || port < 0 || port > 65535) {
    throw new CommandLineError(
      `--port must be an integer in 0..65535, got ${portText || 'nothing'}`,
      usage(serverCommandLine),
    );
  }
  return {
    port,
    sharedStream: values['shared-stream'] === true,
    priorities: values['no-priorities'] !== true,
  };
}

/**
 * Starts the service on 127.0.0.1 and prints its URL. The port comes from `--port N`, then
 * `$PORT`, then 0 (a random free port); `--shared-stream` forces the one-stream mode,
 * `--no-priorities` runs every request at normal priority. The task streams (of both
 * priorities), library handles and cuSOLVER's issue worker are made at startup, while the GPU is idle. Resolves with
 * the listening server; SIGINT / SIGTERM close it.
 */
export function main(argv: readonly string[] = process.argv.slice(2)): Promise<Server> {
  const { port, sharedStream, priorities } = parseServerArguments(argv);
  try {
    prewarm(0, priorities ? ['normal', 'high'] : ['normal']);
    // Large solves are issued from cuSOLVER's issue worker: start it now, not on the first one.
    void startIssueWorker();
  } catch (error) {
    // Without a GPU the service still starts (its GPU routes answer 503; /health says why).
    if (!CudaUnavailableError.isInstance(error)) throw error;
  }
  const server = createServer({ sharedStream, priorities });
  return new Promise((resolveServer, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const address = server.address() as AddressInfo;
      console.log(
        `GPU service listening on http://127.0.0.1:${address.port} (${sharedStream ? 'one shared stream' : `a stream per request task${priorities ? ', small requests at high priority' : ''}`})`,
      );
      console.log(
        '  POST /solve {n, a, b, k?}   POST /solve-random {n, seed}   POST /matmul {m, k, n, a, b}   POST /search {query, k?}   GET /health',
      );
      const stop = () => {
        server.close();
        server.closeAllConnections();
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
      resolveServer(server);
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
