/**
 * The service in cluster mode (`serve --processes N`): Node's way to use many cores is many
 * processes, and a GPU service's data should not be loaded once per process. The primary
 * process builds the search index once, in device memory allocated for sharing, and forks N
 * workers (node:cluster) that share the listening port and serve every route as the
 * single-process service does. GPU memory for the index stays one copy, whatever N. Where the
 * searches run (`--cluster-search`):
 * - `primary` (the default): the workers send their batches of searches to the primary, which
 *   runs the searches of all workers in its own batches (cluster-search.ts, decision 0046);
 * - `workers`: each worker opens the index read-only through a CUDA IPC handle
 *   (`SearchIndex.open`) and runs its own batches.
 *
 * The handle reaches the workers in their environment (`CUDA_TASKS_SEARCH_INDEX`), checked as
 * untrusted input there. A worker that dies is replaced; SIGTERM / SIGINT to the primary stop
 * the workers (each shuts down gracefully) and then free the index.
 */
import cluster, { type Worker } from 'node:cluster';
import { constants as osConstants } from 'node:os';
import {
  currentStream,
  parseSharedMemoryHandle,
  SharedMemoryError,
  type SharedMemoryHandle,
} from '@cuda-tasks/cudadrv';
import { task } from '@cuda-tasks/task-runtime';
import { CommandLineError } from '../cli.js';
import { PrimarySearch, PrimarySearchServer } from './cluster-search.js';
import { SearchIndex } from './search.js';
import type {
  BatchSearchBackend,
  RunBatch,
  SearchBatchOptions,
  SearchBatchStatistics,
} from './search-batcher.js';
import { streamLabel } from './stream-label.js';

/** The environment variable that carries the index's handle to the workers. */
export const SEARCH_INDEX_VARIABLE = 'CUDA_TASKS_SEARCH_INDEX';
/** The environment variable that tells the workers where the searches run. */
export const CLUSTER_SEARCH_VARIABLE = 'CUDA_TASKS_CLUSTER_SEARCH';
/** Where a cluster's searches run: in the primary, or in each worker on the opened index. */
export type ClusterSearch = 'primary' | 'workers';
/** The most worker processes `--processes` accepts. */
export const MAX_PROCESSES = 64;
/** The default of `--search-rows`. */
export const DEFAULT_SEARCH_ROWS = 1_000_000;

/** The cluster flags of the service's command line. */
export interface ClusterArguments {
  /** Worker processes (1: no cluster, the service runs in this process). */
  processes: number;
  /** Embeddings of the search index. */
  searchRows: number;
  /** Where the searches run (`--cluster-search`, default 'primary'). */
  clusterSearch: ClusterSearch;
}

/**
 * Reads `--processes N` (1..64, default 1), `--search-rows N` (default 1,000,000) and
 * `--cluster-search primary|workers` (default primary) from the values the service's command
 * line parsed; a `CommandLineError` for anything else.
 * @example parseClusterArguments({ processes: '4' }, 'usage'); // { processes: 4, searchRows: 1000000, clusterSearch: 'primary' }
 */
export function parseClusterArguments(
  values: { processes?: string; 'search-rows'?: string; 'cluster-search'?: string },
  usageText: string,
): ClusterArguments {
  const integer = (name: string, text: string | undefined, fallback: number, max: number) => {
    if (text === undefined) return fallback;
    const value = Number(text);
    if (text === '' || !Number.isSafeInteger(value) || value < 1 || value > max) {
      throw new CommandLineError(
        `--${name} must be an integer in 1..${max}, got ${text || 'nothing'}`,
        usageText,
      );
    }
    return value;
  };
  const clusterSearch = values['cluster-search'] ?? 'primary';
  if (clusterSearch !== 'primary' && clusterSearch !== 'workers') {
    throw new CommandLineError(
      `--cluster-search takes primary or workers, got ${clusterSearch || 'nothing'}`,
      usageText,
    );
  }
  return {
    processes: integer('processes', values.processes, 1, MAX_PROCESSES),
    searchRows: integer('search-rows', values['search-rows'], DEFAULT_SEARCH_ROWS, 100_000_000),
    clusterSearch,
  };
}

/** Whether this process is a worker of the service's cluster (it has the index's handle). */
export function isClusterWorker(): boolean {
  return cluster.isWorker && process.env[SEARCH_INDEX_VARIABLE] !== undefined;
}

/**
 * In a worker: the index's handle from the environment, checked as untrusted input, and
 * exported by `primary` (this worker's parent): a handle of any other process (a variable
 * set by hand, or left over from another service) is a SharedMemoryError ('malformed').
 */
export function readClusterIndexHandle(
  environment: NodeJS.ProcessEnv = process.env,
  primary: number = process.ppid,
): SharedMemoryHandle {
  const text = environment[SEARCH_INDEX_VARIABLE];
  if (text === undefined) throw new Error(`${SEARCH_INDEX_VARIABLE} is not set`);
  const handle = parseSharedMemoryHandle(text);
  if (handle.pid !== primary) {
    throw new SharedMemoryError(
      'malformed',
      `${SEARCH_INDEX_VARIABLE} names memory of process ${handle.pid}, not of this worker's primary (${primary})`,
    );
  }
  return handle;
}

/** Whether this worker's searches run in the primary (`--cluster-search primary`). */
export function searchesInPrimary(environment: NodeJS.ProcessEnv = process.env): boolean {
  return environment[CLUSTER_SEARCH_VARIABLE] === 'primary';
}

/**
 * In a worker: what its `/search` route searches. With `--cluster-search workers`, the index the
 * primary shared, opened read-only; the worker exits if the primary does (its index goes with
 * it; node:cluster also ends workers whose primary is gone). With `primary`, the primary's
 * searches (`PrimarySearch`), over the shape the handle names; the index is not opened.
 */
export async function openClusterSearchIndex(): Promise<SearchIndex | PrimarySearch> {
  const handle = readClusterIndexHandle();
  if (searchesInPrimary()) {
    const [rows, dim] = handle.shape;
    if (handle.shape.length !== 2 || handle.dtype !== 'float32') {
      throw new SharedMemoryError(
        'malformed',
        `${SEARCH_INDEX_VARIABLE} names ${handle.dtype} ${JSON.stringify(handle.shape)}, not a 2-D float32 index`,
      );
    }
    return new PrimarySearch(rows!, dim!);
  }
  return SearchIndex.open(handle, {
    onExporterExit: (error) => {
      console.error(`worker ${process.pid}: ${error.message}; exiting`);
      process.exit(1);
    },
  });
}

/** The primary of a running cluster. */
export interface ClusterService {
  /** The port the workers listen on, on 127.0.0.1. */
  readonly port: number;
  /** The workers' pids now. */
  workers(): number[];
  /** The handle of the shared index. */
  readonly index: SharedMemoryHandle;
  /**
   * With `--cluster-search primary`: the workers' search requests answered, and the primary's
   * batches over them; undefined with `workers`.
   */
  searchStatistics(): { requests: number; batches: SearchBatchStatistics | undefined } | undefined;
  /**
   * Stops the workers (SIGTERM: each shuts down gracefully) and frees the index. `signalled`:
   * the workers already got the signal (a terminal's Ctrl-C reaches the whole process group),
   * so they are not sent another (a second one would make them exit at once).
   */
  shutdown(signalled?: boolean): Promise<void>;
}

/** Options of `startClusterPrimary`. */
export interface ClusterPrimaryOptions extends ClusterArguments {
  /** The port to listen on (0: a random free one, the same for every worker). */
  port: number;
  /** How long the workers may take to shut down before they are killed, ms. */
  graceMs: number;
  /** The workers' command line (the service's flags; the workers ignore `--processes`). */
  argv: readonly string[];
  /**
   * The primary's batches over the workers' searches (`--search-batch`, `--search-batches`;
   * false: each worker's request alone), with `clusterSearch` 'primary'. Default: the batcher's.
   */
  searchBatch?: SearchBatchOptions | false;
  /**
   * Builds the index to share (default: `SearchIndex.create` of `searchRows` x 128, shareable).
   * A stand-in for tests without a GPU (with `clusterSearch` 'primary', it also searches).
   */
  buildIndex?: () => Promise<SharedIndex>;
  /**
   * Runs a batch of the workers' searches (default: in a task, the answer naming its stream). A
   * stand-in for tests without a GPU.
   */
  runSearchBatch?: RunBatch;
}

/** What the primary shares (and, with `--cluster-search primary`, searches). */
export interface SharedIndex extends Partial<BatchSearchBackend> {
  /** The handle the workers get. */
  share(): SharedMemoryHandle;
  /** Frees the index (once every worker has exited). */
  dispose(): void;
  /** The embeddings' dimension (needed where the primary searches). */
  readonly dim?: number;
}

/**
 * In the primary: builds the index (shareable), forks `processes` workers with its handle, and
 * resolves once every worker listens, printing the same line the single-process service
 * prints (with the port), which `spawn-service.ts` and the load script wait for.
 */
export async function startClusterPrimary(options: ClusterPrimaryOptions): Promise<ClusterService> {
  const started = performance.now();
  const index = await (options.buildIndex?.() ??
    task(() => SearchIndex.create({ rows: options.searchRows, dim: 128, shareable: true }), {
      name: 'build the shared search index',
    }));
  const handle = index.share();
  const built = performance.now() - started;
  let searches: PrimarySearchServer | undefined;
  if (options.clusterSearch === 'primary') {
    if (typeof index.searchMany !== 'function' || index.dim === undefined) {
      index.dispose();
      throw new Error('startClusterPrimary: the index cannot search (no searchMany or dim)');
    }
    searches = new PrimarySearchServer(index as BatchSearchBackend & { dim: number }, {
      ...(options.searchBatch === undefined ? {} : { searchBatch: options.searchBatch }),
      // Each batch of the workers' searches in a task of its own, as the service's batches.
      ...(options.runSearchBatch === undefined
        ? {
            run: (work) => task(work, { name: 'POST /search batch (primary)' }),
            streamLabel: () => streamLabel(currentStream()),
          }
        : { run: options.runSearchBatch }),
    });
  }
  // Typed arrays travel as bytes between the processes (the search requests and answers).
  cluster.setupPrimary({ args: [...options.argv], serialization: 'advanced' });
  const environment = {
    [SEARCH_INDEX_VARIABLE]: JSON.stringify(handle),
    [CLUSTER_SEARCH_VARIABLE]: options.clusterSearch,
  };
  const onMessage = (worker: Worker, message: unknown) => {
    searches?.handle(message, (answer) => {
      // A worker that exited meanwhile gets nothing (its requests went with it).
      if (!worker.isConnected()) return;
      try {
        worker.send(answer);
      } catch {
        // The channel closed between the check and the send: the same.
      }
    });
  };
  if (searches !== undefined) cluster.on('message', onMessage);
  let stopping = false;
  let port = -1;
  const live = new Set<Worker>();
  const fork = () => {
    const worker = cluster.fork(environment);
    live.add(worker);
    worker.once('exit', (code, signal) => {
      live.delete(worker);
      if (stopping) return;
      console.error(`worker ${worker.process.pid} exited (${signal ?? code}); starting another`);
      fork();
    });
    return worker;
  };
  const listening = new Promise<void>((resolve, reject) => {
    let ready = 0;
    const onListening = (_worker: Worker, address: { port: number }) => {
      port = address.port;
      if (++ready === options.processes) {
        cluster.off('listening', onListening);
        resolve();
      }
    };
    cluster.on('listening', onListening);
    cluster.once('exit', (worker, code) => {
      if (ready < options.processes) {
        reject(new Error(`worker ${worker.process.pid} exited with ${code} before listening`));
      }
    });
  });
  for (let i = 0; i < options.processes; i++) fork();
  try {
    await listening;
  } catch (error) {
    stopping = true;
    for (const worker of live) worker.process.kill('SIGKILL');
    cluster.off('message', onMessage);
    searches?.close(error);
    index.dispose();
    throw error;
  }
  const gib = (options.searchRows * 128 * 4) / 2 ** 30;
  console.log(
    `GPU service listening on http://127.0.0.1:${port} (${options.processes} processes sharing one search index of ${options.searchRows.toLocaleString('en-US')} x 128 float32, ${gib.toFixed(2)} GiB, built once in ${Math.round(built)} ms; searches run in the ${options.clusterSearch === 'primary' ? 'primary' : 'workers'})`,
  );
  let stopped: Promise<void> | undefined;
  const shutdown = (signalled = false): Promise<void> =>
    (stopped ??= (async () => {
      stopping = true;
      const exits = [...live].map(
        (worker) => new Promise<void>((resolve) => worker.once('exit', () => resolve())),
      );
      if (!signalled) for (const worker of live) worker.process.kill('SIGTERM');
      const timer = setTimeout(() => {
        for (const worker of live) worker.process.kill('SIGKILL');
      }, options.graceMs + 2000);
      await Promise.all(exits);
      clearTimeout(timer);
      cluster.off('message', onMessage);
      searches?.close(new Error('the cluster is shutting down'));
      // Every worker has exited: nobody holds the index, it is freed now (after the searches
      // in flight, which are ordered before the free).
      index.dispose();
    })());
  return {
    port,
    index: handle,
    workers: () => [...live].map((worker) => worker.process.pid!),
    searchStatistics: () => searches?.statistics(),
    shutdown,
  };
}

/**
 * The primary's signals: the first SIGTERM / SIGINT shuts the cluster down and exits 0; a
 * second exits at once with 128 + its number. SIGTERM is passed on to the workers; SIGINT is
 * not (a terminal sends it to every process of the group; workers still running after the
 * grace are killed).
 */
export function stopClusterOnSignals(service: ClusterService): void {
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) {
      process.exit(128 + (osConstants.signals[signal] ?? 0));
    }
    signalled = true;
    console.error(`${signal}: stopping ${service.workers().length} workers`);
    service.shutdown(signal === 'SIGINT').then(
      () => {
        console.error('stopped');
        process.exit(0);
      },
      (error: unknown) => {
        console.error(`shutdown failed: ${error instanceof Error ? error.message : error}`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}
