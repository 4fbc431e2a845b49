/**
 * Load test for the GPU service: fires `POST /solve` requests (random diagonally dominant
 * n x n systems) from C concurrent clients over loopback, checks every answer on the CPU
 * (the residual of a few rows), and reports per mode the throughput, p50 / p99 latency,
 * errors and the event loop's maximum delay. By default it starts the server in this process
 * twice, one with a stream per request task, one with one shared stream, and measures them in
 * turns: a round of each that is not counted (it warms the process), then `--rounds` (6)
 * rounds, the order reversed every other round; each mode's rounds are pooled into its row of
 * the comparison table, printed last with the ratios round by round. `--url` targets a running
 * server instead (loopback only). Before any load it asks whether the GPU is usable (the
 * server's `GET /health`, or in process the same check) and exits 3 with one line where not.
 * The client runs in a child process (client-process.ts), so
 * the loop delay is the server's alone; each run prints its progress every second.
 *
 * Bounded: a run stops after `--requests N` (default 6000) or `--seconds S` (default 20),
 * whichever comes first. The warm-up before each run (default 1000 requests: every run's client
 * is a new process, whose JIT warms up in it) stops after `--warmup` requests or the same
 * `--seconds` budget; a request still in flight when its budget ends is given up
 * `REQUEST_GRACE_MS` later (and counted as an error), so a run never takes longer than twice
 * (`--seconds` + the grace).
 *
 * With `--route solve-random` it fires `POST /solve-random {n, seed}` instead: the server draws
 * the system on the GPU, so the request's time goes to the GPU rather than to JSON, which is
 * where a stream per request pays off; the check is the residual the server reports and, per
 * seed, the same answer every time.
 *
 * `--workload head-of-line,search` runs the GPU-bound workloads of workloads.ts instead (or
 * as well, listed with `solve`): small `/solve-random` requests (`--small-n`, at `--small-rate`
 * per second) with a large one (`--large-n`) every `--large-every` ms, for `--seconds`,
 * reporting the small requests' p50/p99 per stream mode; and `POST /search` over
 * `--rows` x 128 embeddings resident on the GPU, top `--k`, closed loop.
 *
 * `--processes N` runs each mode's server as its own process tree instead of in this process:
 * `server.ts --processes N`, N workers sharing the port and one search index on the GPU
 * (cluster.ts; N = 1 is the plain service in one process), with each process's GPU memory as
 * `nvidia-smi` reports it printed once the server listens.
 *
 * Run: `pnpm --filter @cuda-tasks/examples load [--requests 6000] [--seconds 20] [--concurrency 32] [--n 128] [--route solve|solve-random] [--mode both|task|shared] [--rounds 6] [--url http://127.0.0.1:PORT] [--workload solve,head-of-line,search] [--processes N] [--search-batch N] [--search-batches N] [--clients N] [--parse-workers N]`
 */
import { execFileSync } from 'node:child_process';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import {
  CommandLineError,
  isEntryPoint,
  parseCommandLine,
  parseCommandLineOrExit,
  usage,
} from '../cli.js';
import {
  concurrentResult,
  type MeasureOptions,
  type ModeResult,
  pooledResult,
  searchQuery,
  splitMeasureOptions,
  turnOrder,
} from './client.js';
import {
  type ClientMessage,
  type RequestSpec,
  runClient,
  type ScheduleResult,
} from './client-process.js';
import { parseClusterArguments } from './cluster.js';
import {
  LOOP_DELAY_VARIABLE,
  type LoopDelayReport,
  loopDelayWithin,
  parseLoopDelayLines,
} from './loop-monitor.js';
import { defaultParseWorkers } from './parse-pool.js';
import { SearchIndex } from './search.js';
import { batchSummary, DEFAULT_SEARCH_BATCH, parseSearchBatchLines } from './search-batcher.js';
import { type SearchReference, searchReference } from './search-reference.js';
import {
  createServer,
  DEFAULT_GPU_IN_FLIGHT,
  DEFAULT_SEARCH_MESSAGES,
  type GpuHealth,
  gpuHealth,
  parseWorkersArgument,
  type ServerOptions,
} from './server.js';
import { startServiceProcess } from './spawn-service.js';
import { formatNumber } from './statistics.js';
import {
  HEAD_OF_LINE_MODES,
  type HeadOfLineRow,
  headOfLineReport,
  headOfLineSchedule,
  resultsTable,
  roundsLine,
  type SearchRow,
  searchReport,
} from './workloads.js';

export {
  checkSolution,
  emptyFired,
  type Fired,
  fire,
  type MeasureOptions,
  type ModeResult,
  makeProblem,
  makeRandomRequest,
  measure,
  type Problem,
  pooledResult,
  REQUEST_GRACE_MS,
  type Request,
  randomSource,
  turnOrder,
} from './client.js';

/** What the load script does (see `parseLoadArguments`). */
export interface LoadOptions {
  /**
   * Requests per closed-loop run (a mode in a round) at most (default: 2000 for `solve`, 6000
   * for `search`).
   */
  requests: number | undefined;
  /** Seconds per run (per mode in head-of-line) at most (default 20). */
  seconds: number;
  /** Requests in flight at once (default 32). */
  concurrency: number;
  /**
   * Closed-loop workloads: load client processes that share the concurrency and run at once
   * (default 1), for servers that answer faster than one client can ask.
   */
  clients: number;
  /** Matrix size (default 128). */
  n: number;
  /** Which in-process modes to run (default both). Ignored with `url`. */
  modes: ('task' | 'shared')[];
  /**
   * Closed-loop workloads: measured rounds, each a run of every mode, the modes taking turns
   * (default 3), after one round that is not counted.
   */
  rounds: number;
  /** A running server to target instead (loopback only). */
  url: string | undefined;
  /**
   * Requests before each measured run, not counted (default: 1000 for a closed-loop run, the
   * concurrency of each size for head-of-line).
   */
  warmup: number | undefined;
  /** Distinct systems, generated once and cycled through (default 16). */
  problems: number;
  /** Seed of the problem generator (default 1). */
  seed: number;
  /**
   * `solve` (default): `POST /solve` with the matrix in the JSON body (the server's time goes
   * to JSON); `solve-random`: `POST /solve-random {n, seed}`, the server draws the system on the
   * GPU (its time goes to the GPU).
   */
  route: 'solve' | 'solve-random';
  /** What to run, in order (default `solve`: the route above). */
  workloads: ('solve' | 'head-of-line' | 'search')[];
  /** Head-of-line: size of the small systems (default 256). */
  smallN: number;
  /** Head-of-line: size of the large systems (default 4096). */
  largeN: number;
  /** Head-of-line: small requests per second (default 200). */
  smallRate: number;
  /** Head-of-line: a large request every this many ms (default 250). */
  largeEveryMs: number;
  /** Search: embeddings on the device (default 1,000,000; 128 values each). */
  rows: number;
  /**
   * Search: the server's bound on searches running their GPU work at once (undefined: its
   * default, `DEFAULT_GPU_IN_FLIGHT` for searches one by one, none for batches; 0: no bound).
   */
  inFlight?: number | undefined;
  /**
   * Search: the server's largest batch of searches (undefined: its default,
   * `DEFAULT_SEARCH_BATCH.maxBatch`; 0: one GEMV per search, `searchBatch: false`).
   */
  searchBatch?: number | undefined;
  /**
   * Search: the server's batches whose GPU work runs at once (undefined: its default,
   * `DEFAULT_SEARCH_BATCH.maxInFlight`).
   */
  searchBatches?: number | undefined;
  /** Search: neighbours per query (default 10, at most 100). */
  k: number;
  /**
   * Run each mode's server as a separate process tree, `server.ts --processes N` (undefined:
   * in this process). Not with `url`.
   */
  processes?: number | undefined;
  /** With `processes`: where the cluster's searches run (undefined: the server's default). */
  clusterSearch?: string | undefined;
  /** With `processes`: server.ts's `--search-messages` (undefined: the server's default). */
  searchMessages?: number | undefined;
  /** The server's body-parsing threads (`--parse-workers`; undefined: the server's default). */
  parseWorkers?: number | undefined;
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

/**
 * Requests a closed-loop run sends at most, unless `--requests` says (both workloads); why six
 * rounds of them by default: docs/decisions/0037.
 */
export const DEFAULT_RUN_REQUESTS = 6000;
/**
 * Warm-up requests before each closed-loop run, unless `--warmup` says: every run's client is
 * a new process, and its JIT warms up on these (the server's warmed up in the round not counted).
 */
export const DEFAULT_CLOSED_LOOP_WARMUP = 1000;

/** The load script's flags (`pnpm --filter @cuda-tasks/examples load --help`). */
export const loadCommandLine = {
  command: 'load.ts',
  options: {
    requests: {
      type: 'string',
      placeholder: 'N',
      description: 'requests per run at most',
      default: DEFAULT_RUN_REQUESTS,
    },
    seconds: {
      type: 'string',
      placeholder: 'S',
      description: 'seconds per run at most',
      default: 20,
    },
    concurrency: {
      type: 'string',
      placeholder: 'N',
      description: 'requests in flight',
      default: 32,
    },
    clients: {
      type: 'string',
      placeholder: 'N',
      description:
        'closed loop: client processes sharing the concurrency, all at once (for a server faster than one client)',
      default: 1,
    },
    n: { type: 'string', placeholder: 'N', description: 'matrix size', default: 128 },
    mode: {
      type: 'string',
      placeholder: 'both|task|shared',
      description: 'in-process modes',
      default: 'both',
    },
    rounds: {
      type: 'string',
      placeholder: 'N',
      description: 'measured rounds of the closed-loop modes, taking turns',
      default: 6,
    },
    url: {
      type: 'string',
      placeholder: 'URL',
      description: 'a running server, at a loopback address',
    },
    warmup: {
      type: 'string',
      placeholder: 'N',
      description: 'warm-up requests per run',
      default: `${DEFAULT_CLOSED_LOOP_WARMUP}; head-of-line: the concurrency`,
    },
    problems: { type: 'string', placeholder: 'N', description: 'distinct systems', default: 16 },
    seed: { type: 'string', placeholder: 'N', description: 'seed of the problems', default: 1 },
    route: {
      type: 'string',
      placeholder: 'solve|solve-random',
      description: 'route',
      default: 'solve',
    },
    workload: {
      type: 'string',
      placeholder: 'solve,head-of-line,search',
      description: 'workloads to run, in order',
      default: 'solve',
    },
    'small-n': {
      type: 'string',
      placeholder: 'N',
      description: 'head-of-line: small n',
      default: 256,
    },
    'large-n': {
      type: 'string',
      placeholder: 'N',
      description: 'head-of-line: large n',
      default: 4096,
    },
    'small-rate': {
      type: 'string',
      placeholder: 'R',
      description: 'head-of-line: small requests per second',
      default: 200,
    },
    'large-every': {
      type: 'string',
      placeholder: 'MS',
      description: 'head-of-line: a large request every MS ms',
      default: 250,
    },
    rows: {
      type: 'string',
      placeholder: 'N',
      description: 'search: embeddings',
      default: 1_000_000,
    },
    k: {
      type: 'string',
      placeholder: 'K',
      description: 'search: neighbours per query',
      default: 10,
    },
    'in-flight': {
      type: 'string',
      placeholder: 'N',
      description: 'search: requests whose GPU work runs at once, 0 for no bound',
      default: `the server's: ${DEFAULT_GPU_IN_FLIGHT['/search']} one by one, none in batches`,
    },
    'search-batch': {
      type: 'string',
      placeholder: 'N',
      description: 'search: the most searches in one batch (one SGEMM); 0: one GEMV per search',
      default: `the server's, ${DEFAULT_SEARCH_BATCH.maxBatch}`,
    },
    'search-batches': {
      type: 'string',
      placeholder: 'N',
      description: 'search: batches whose GPU work runs at once',
      default: `the server's, ${DEFAULT_SEARCH_BATCH.maxInFlight}`,
    },
    processes: {
      type: 'string',
      placeholder: 'N',
      description:
        'run the server as processes of its own, server.ts --processes N: workers sharing one search index; without it, in this process',
    },
    'cluster-search': {
      type: 'string',
      placeholder: 'WHERE',
      description:
        "with --processes: where the searches run, server.ts's --cluster-search (primary or workers)",
      default: "the server's, primary",
    },
    'search-messages': {
      type: 'string',
      placeholder: 'N',
      description:
        "with --processes and the searches in the primary: server.ts's --search-messages, a worker's batches waiting in the primary",
      default: `the server's, ${DEFAULT_SEARCH_MESSAGES}`,
    },
    'parse-workers': {
      type: 'string',
      placeholder: 'N',
      description:
        "the server's threads that parse bodies of 16 KiB or more (server.ts's --parse-workers); 0: on its event loop",
      default: "the server's, 3/8 of the cores, 4 to 8",
    },
  },
} as const;

/**
 * Parses the command line (`--name value` or `--name=value`). Throws a `CommandLineError` for
 * unknown flags (listing the valid ones), out-of-range values and a non-loopback `--url`.
 * @example parseLoadArguments(['--requests', '100', '--mode', 'task']).requests; // 100
 */
export function parseLoadArguments(argv: readonly string[]): LoadOptions {
  const { values } = parseCommandLine(argv, loadCommandLine);
  const fail = (message: string): never => {
    throw new CommandLineError(message, usage(loadCommandLine));
  };
  const integer = (name: keyof typeof values, fallback: number, maximum: number): number => {
    const text = values[name] as string | undefined;
    if (text === undefined) return fallback;
    const value = Number(text);
    if (!Number.isInteger(value) || value < 1 || value > maximum) {
      fail(`--${name} must be an integer in 1..${maximum}, got ${text || 'nothing'}`);
    }
    return value;
  };
  const options: LoadOptions = {
    requests: values.requests === undefined ? undefined : integer('requests', 0, 10_000_000),
    seconds: loadCommandLine.options.seconds.default,
    concurrency: integer('concurrency', loadCommandLine.options.concurrency.default, 4096),
    clients: integer('clients', loadCommandLine.options.clients.default, 64),
    n: integer('n', loadCommandLine.options.n.default, 2048),
    modes: ['task', 'shared'],
    rounds: integer('rounds', loadCommandLine.options.rounds.default, 100),
    url: undefined,
    warmup:
      values.warmup === undefined
        ? undefined
        : values.warmup === '0'
          ? 0
          : integer('warmup', 0, 1_000_000),
    problems: integer('problems', loadCommandLine.options.problems.default, 1024),
    seed: integer('seed', loadCommandLine.options.seed.default, 2 ** 31 - 1),
    route: 'solve',
    workloads: ['solve'],
    smallN: integer('small-n', loadCommandLine.options['small-n'].default, 8192),
    largeN: integer('large-n', loadCommandLine.options['large-n'].default, 8192),
    smallRate: integer('small-rate', loadCommandLine.options['small-rate'].default, 100_000),
    largeEveryMs: integer('large-every', loadCommandLine.options['large-every'].default, 3_600_000),
    rows: integer('rows', loadCommandLine.options.rows.default, 100_000_000),
    k: integer('k', loadCommandLine.options.k.default, 100),
    inFlight:
      values['in-flight'] === undefined
        ? undefined
        : values['in-flight'] === '0'
          ? 0
          : integer('in-flight', 0, 4096),
    searchBatch:
      values['search-batch'] === undefined
        ? undefined
        : values['search-batch'] === '0'
          ? 0
          : integer('search-batch', 0, 4096),
    searchBatches:
      values['search-batches'] === undefined ? undefined : integer('search-batches', 1, 64),
    processes: values.processes === undefined ? undefined : integer('processes', 0, 64),
    clusterSearch: values['cluster-search'],
    searchMessages:
      values['search-messages'] === undefined ? undefined : integer('search-messages', 1, 64),
    parseWorkers: parseWorkersArgument(values['parse-workers'], fail),
  };
  if (options.searchMessages !== undefined && options.processes === undefined) {
    fail('--search-messages needs --processes');
  }
  if (options.clusterSearch !== undefined) {
    if (options.processes === undefined) fail('--cluster-search needs --processes');
    // The server's own check of the value (its message, this command's usage).
    parseClusterArguments({ 'cluster-search': options.clusterSearch }, usage(loadCommandLine));
  }
  // Each mode's server holds its own index: with processes, one mode unless asked for both.
  if (options.processes !== undefined) options.modes = ['task'];
  if (values.workload !== undefined) {
    const names = values.workload.split(',').filter(Boolean);
    const known = ['solve', 'head-of-line', 'search'] as const;
    for (const name of names) {
      if (!(known as readonly string[]).includes(name)) {
        fail(`--workload takes solve, head-of-line and search, got ${name || 'nothing'}`);
      }
    }
    if (names.length === 0) fail('--workload needs at least one of solve, head-of-line, search');
    options.workloads = names as LoadOptions['workloads'];
  }
  if (values.seconds !== undefined) {
    const seconds = Number(values.seconds);
    if (!(seconds > 0 && seconds <= 3600)) {
      fail(`--seconds must be a number in (0, 3600], got ${values.seconds || 'nothing'}`);
    }
    options.seconds = seconds;
  }
  if (values.route !== undefined) {
    if (values.route === 'solve' || values.route === 'solve-random') options.route = values.route;
    else fail(`--route must be solve or solve-random, got ${values.route || 'nothing'}`);
  }
  if (values.mode !== undefined) {
    if (values.mode === 'both') options.modes = ['task', 'shared'];
    else if (values.mode === 'task' || values.mode === 'shared') options.modes = [values.mode];
    else fail(`--mode must be task, shared or both, got ${values.mode || 'nothing'}`);
  }
  if (values.url !== undefined) {
    let url: URL | undefined;
    try {
      url = new URL(values.url);
    } catch {
      fail(`--url is not a URL: ${values.url}`);
    }
    if (url!.protocol !== 'http:' || !LOOPBACK_HOSTS.has(url!.hostname)) {
      fail(
        `--url must be an http:// loopback address (127.0.0.1, localhost, [::1]), got ${values.url}`,
      );
    }
    options.url = url!.origin;
    if (options.processes !== undefined) fail('--processes starts its own server: not with --url');
  }
  if (options.clients > options.concurrency) {
    fail(
      `--clients must be at most the concurrency (${options.concurrency}), got ${options.clients}`,
    );
  }
  return options;
}

function listen(server: Server): Promise<URL> {
  return new Promise((resolveUrl, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      resolveUrl(new URL(`http://127.0.0.1:${port}`));
    });
  });
}

function close(server: Server): Promise<void> {
  return new Promise((resolveClose) => {
    server.close(() => resolveClose());
    server.closeAllConnections();
  });
}

const MODE_LABELS: Record<string, string> = {
  task: 'stream per request',
  shared: 'one shared stream',
  remote: 'remote server',
};

/**
 * The results table (each mode's rounds pooled), a comparison line when both in-process modes
 * ran, and with `rounds` the ratios round by round (`roundsLine`).
 */
export function report(
  results: readonly ModeResult[],
  rounds: readonly (readonly ModeResult[])[] = [],
): string {
  const table = resultsTable(
    results.map((result) => ({ label: MODE_LABELS[result.mode] ?? result.mode, result })),
  );
  const task = results.find((result) => result.mode === 'task');
  const shared = results.find((result) => result.mode === 'shared');
  if (task === undefined || shared === undefined || shared.requestsPerSecond === 0) return table;
  const perRound = roundsLine(rounds);
  return `${table}\n\nstream per request vs one shared stream: throughput x${formatNumber(
    task.requestsPerSecond / shared.requestsPerSecond,
    2,
  )}, p99 latency x${formatNumber(task.p99 / shared.p99, 2)}${perRound === undefined ? '' : `\n${perRound}`}`;
}

/** A server the load runs against, and how to stop it. */
interface ServedBy {
  url: URL;
  close: () => Promise<void>;
  /**
   * Servers in processes of their own: after `close`, their largest event-loop delay in a span
   * of time (ms since the epoch), from what they reported at exit; NaN where none did.
   */
  loopDelayWithin?: (from: number, to: number) => number;
}

/** The server for one mode (or none with --url), and where to reach it. */
async function serverFor(options: LoadOptions, serverOptions: ServerOptions): Promise<ServedBy> {
  if (options.url !== undefined) return { url: new URL(options.url), close: async () => {} };
  if (options.processes !== undefined) return serviceProcesses(options, serverOptions);
  // Server-side 5xx errors also reach the client as answers: print only the first here.
  let logged = false;
  const server = createServer({
    ...serverOptions,
    ...(options.parseWorkers === undefined
      ? {}
      : { bodyParsing: { ...serverOptions.bodyParsing, workers: options.parseWorkers } }),
    onServerError: (error) => {
      if (!logged) console.error('server error:', error);
      logged = true;
    },
  });
  const url = await listen(server);
  return {
    url,
    close: () => {
      const batches = server.statistics().searchBatches;
      if (batches !== undefined && batches.batches > 0) {
        console.log(
          `server: ${batches.searches} searches in ${batches.batches} batches (${formatNumber(batches.searches / batches.batches, 1)} a batch, the largest ${batches.largestBatch})`,
        );
      }
      return close(server);
    },
  };
}

/**
 * `server.ts --processes N` in child processes (cluster.ts), with the flags of `serverOptions`
 * that the command line has (the stream mode, priorities, the index's rows, the search batch;
 * a bound on searches in flight it does not take); `close` sends SIGTERM and waits for the exit.
 */
async function serviceProcesses(
  options: LoadOptions,
  serverOptions: ServerOptions,
): Promise<ServedBy> {
  const script = fileURLToPath(new URL('./server.ts', import.meta.url));
  const args = [
    '--port',
    '0',
    '--processes',
    String(options.processes),
    '--search-rows',
    String(serverOptions.search?.rows ?? options.rows),
  ];
  if (serverOptions.sharedStream) args.push('--shared-stream');
  if (serverOptions.priorities === false) args.push('--no-priorities');
  if (options.searchBatch !== undefined) args.push('--search-batch', String(options.searchBatch));
  if (options.searchBatches !== undefined) {
    args.push('--search-batches', String(options.searchBatches));
  }
  if (options.clusterSearch !== undefined) args.push('--cluster-search', options.clusterSearch);
  if (options.searchMessages !== undefined) {
    args.push('--search-messages', String(options.searchMessages));
  }
  if (options.parseWorkers !== undefined) {
    args.push('--parse-workers', String(options.parseWorkers));
  }
  const usedBefore = gpuMemoryUsed();
  // Each server process reports its event-loop delays when it exits (loop-monitor.ts).
  const service = await startServiceProcess(script, args, { [LOOP_DELAY_VARIABLE]: '1' });
  console.log(
    `server: ${options.processes} process${options.processes === 1 ? '' : 'es'} (server.ts ${args.join(' ')}), pid ${service.child.pid}`,
  );
  const memory = gpuMemoryByProcess();
  if (memory !== undefined) console.log(`GPU memory by process (nvidia-smi): ${memory}`);
  const usedAfter = gpuMemoryUsed();
  if (usedBefore !== undefined && usedAfter !== undefined) {
    // Per-process figures count memory a process maps from another; the device's own count
    // of used memory does not, so its growth is what the service holds, the index once.
    console.log(
      `GPU memory used on the device (nvidia-smi): ${usedBefore} MiB before the server, ${usedAfter} MiB once it listens: +${usedAfter - usedBefore} MiB`,
    );
  }
  let reports: LoopDelayReport[] | undefined;
  return {
    url: new URL(`http://127.0.0.1:${service.port}`),
    close: async () => {
      if (service.child.exitCode === null) service.child.kill('SIGTERM');
      const { code, signal } = await service.exited;
      if (code !== 0) console.error(`server exited with ${signal ?? code}: ${service.stderr()}`);
      reports = parseLoopDelayLines(service.stderr());
      const batches = batchSummary(parseSearchBatchLines(service.stderr()));
      if (batches !== undefined) console.log(batches);
    },
    loopDelayWithin: (from, to) =>
      reports === undefined ? Number.NaN : loopDelayWithin(reports, from, to),
  };
}

/**
 * The in-process server's `searchBatch` option from `--search-batch` (0: none, one GEMV per
 * search) and `--search-batches`; nothing where neither is given (the server's defaults).
 */
function searchBatchOption(
  options: Pick<LoadOptions, 'searchBatch' | 'searchBatches'>,
): Pick<ServerOptions, 'searchBatch'> {
  const { searchBatch: maxBatch, searchBatches: maxInFlight } = options;
  if (maxBatch === 0) return { searchBatch: false };
  if (maxBatch === undefined && maxInFlight === undefined) return {};
  return {
    searchBatch: {
      ...(maxBatch === undefined ? {} : { maxBatch }),
      ...(maxInFlight === undefined ? {} : { maxInFlight }),
    },
  };
}

/**
 * Whether the server runs in this process, where the load script's own event loop is the
 * server's: not with `--processes` (server.ts in processes of its own) or `--url`.
 */
export function serverInThisProcess(options: Pick<LoadOptions, 'url' | 'processes'>): boolean {
  return options.url === undefined && options.processes === undefined;
}

/**
 * The server's largest event-loop delay during a run, from this process's delays while its
 * clients ran: their largest where the server runs in this process, NaN (not measured, printed
 * as -) where it runs elsewhere, whose loop this process does not see (with `--processes`,
 * the servers' own reports replace it once they have exited: `closedLoop`).
 * @example serverLoopDelay({ url: undefined, processes: 4 }, [3.2]); // NaN
 */
export function serverLoopDelay(
  options: Pick<LoadOptions, 'url' | 'processes'>,
  delaysMs: readonly number[],
): number {
  return serverInThisProcess(options) ? Math.max(...delaysMs) : Number.NaN;
}

/** The line under the tables that says what their loop delay is. */
export function loopDelayFootnote(options: Pick<LoadOptions, 'url' | 'processes'>): string {
  if (serverInThisProcess(options)) {
    return "loop delay: the server process's largest event-loop delay during the measured run (the load client runs in a child process).";
  }
  if (options.url === undefined) {
    return "loop delay: the largest event-loop delay of the server's processes during the measured run, by 100 ms, as each reported it at exit (- where none did; the head-of-line table has none).";
  }
  return 'loop delay: not measured (-): the server runs in processes of its own (--url), whose event loops this script does not see.';
}

/**
 * The memory used on GPU 0 as `nvidia-smi` reports it for the device (MiB), or undefined where
 * it does not run.
 */
export function gpuMemoryUsed(): number | undefined {
  try {
    const text = execFileSync(
      'nvidia-smi',
      ['--query-gpu=memory.used', '--format=csv,noheader,nounits', '--id=0'],
      { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] },
    ).trim();
    return /^\d+$/.test(text) ? Number(text) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Each process's GPU memory as `nvidia-smi` lists it ("pid: MiB, ..., total MiB"), or
 * undefined where it does not run.
 */
export function gpuMemoryByProcess(): string | undefined {
  let text: string;
  try {
    text = execFileSync(
      'nvidia-smi',
      ['--query-compute-apps=pid,used_memory', '--format=csv,noheader,nounits'],
      { encoding: 'utf8', timeout: 10_000, stdio: ['ignore', 'pipe', 'ignore'] },
    );
  } catch {
    return undefined;
  }
  const rows = text
    .split('\n')
    .map((line) => line.split(',').map((field) => field.trim()))
    .filter(
      (fields) => fields.length === 2 && /^\d+$/.test(fields[0]!) && /^\d+$/.test(fields[1]!),
    );
  if (rows.length === 0) return undefined;
  const total = rows.reduce((sum, [, mib]) => sum + Number(mib), 0);
  return `${rows.map(([pid, mib]) => `${pid}: ${mib} MiB`).join(', ')}; total ${total} MiB`;
}

/**
 * The CPU's answer to each search query the load sends (search-reference.ts): the same
 * embeddings as the service's (`--rows` x 128, seed 7) drawn here on the GPU, copied to the
 * host and freed, then float64 dot products. Every answer is checked against them.
 */
async function searchReferences(options: LoadOptions): Promise<SearchReference[]> {
  const started = performance.now();
  const index = await SearchIndex.create({ rows: options.rows, dim: 128 });
  let embeddings: Float32Array;
  try {
    embeddings = await index.embeddings.toHost();
  } finally {
    index.dispose();
  }
  const references = Array.from({ length: options.problems }, (_, i) =>
    searchReference(
      embeddings,
      options.rows,
      128,
      searchQuery(128, options.seed * 1000 + i),
      options.k,
    ),
  );
  console.log(
    `CPU reference of the ${options.problems} search queries (float64 dot products over the same embeddings): ${formatNumber((performance.now() - started) / 1000, 1)} s`,
  );
  return references;
}

/** One progress line per report of the client: the phase, its time, and per kind the counts. */
export function progressLine(message: Extract<ClientMessage, { type: 'progress' }>): string {
  const kinds = Object.entries(message.byKind).map(
    ([kind, counts]) =>
      `${kind === 'requests' ? '' : `${kind} `}${counts.completed}/${counts.issued} answered${counts.errors ? `, ${counts.errors} errors` : ''}${Number.isFinite(counts.p99) ? `, p99 ${formatNumber(counts.p99, 2)} ms` : ''}`,
  );
  return `  ${message.label}, ${message.phase} ${formatNumber(message.elapsedSeconds, 0)} s: ${kinds.join('; ') || 'starting'}`;
}

const printProgress = {
  onProgress: (message: Extract<ClientMessage, { type: 'progress' }>) =>
    console.log(progressLine(message)),
};

/**
 * What each run of a closed-loop workload measures: `options` with the defaults for what the
 * command line left out.
 * @example runMeasureOptions(parseLoadArguments([])).requests; // 6000
 */
export function runMeasureOptions(options: LoadOptions): MeasureOptions {
  return {
    requests: options.requests ?? DEFAULT_RUN_REQUESTS,
    seconds: options.seconds,
    concurrency: options.concurrency,
    warmup: options.warmup ?? DEFAULT_CLOSED_LOOP_WARMUP,
  };
}

/** Warm-up requests of each size before each head-of-line mode: `--warmup`, or the concurrency. */
function headOfLineWarmup(options: LoadOptions): number {
  return options.warmup ?? options.concurrency;
}

/** A closed-loop workload's result: per mode its runs pooled, and each round's runs. */
export interface ClosedLoopResult {
  /** Per mode, its measured runs as one (`pooledResult`), in the modes' order. */
  pooled: ModeResult[];
  /** The measured rounds, each a run per mode, in the modes' order. */
  rounds: ModeResult[][];
}

/**
 * The closed-loop workloads (`solve`, `search`). One server per mode, kept for the whole
 * workload; first a round of every mode that is not counted (it warms the process: the JIT,
 * the runtime's pools, the handles), then `options.rounds` measured rounds in which the modes
 * take turns (`turnOrder`). Each run is its own client process, after its own warm-up.
 */
async function closedLoop(
  options: LoadOptions,
  measureOptions: MeasureOptions,
  requests: RequestSpec,
  serverOptions: ServerOptions,
): Promise<ClosedLoopResult> {
  const modes =
    options.url !== undefined
      ? [{ mode: 'remote', shared: false }]
      : options.modes.map((mode) => ({ mode, shared: mode === 'shared' }));
  const servers: ServedBy[] = [];
  const order = modes.map((_, index) => index);
  // Per measured round, per mode: the run's result and its measured span (ms since the epoch).
  const rounds: ModeResult[][] = [];
  const spans: { from: number; to: number }[][] = [];
  try {
    for (const run of modes) {
      servers.push(
        await serverFor(options, {
          ...serverOptions,
          sharedStream: run.shared,
          priorities: false, // requests of one size: one priority
        }),
      );
    }
    const runOnce = async (
      index: number,
      round: string,
    ): Promise<{ result: ModeResult; span: { from: number; to: number } }> => {
      const run = modes[index]!;
      const label = MODE_LABELS[run.mode] ?? run.mode;
      console.log(`${round}: ${label} (${servers[index]!.url.origin}) ...`);
      // One client, or several at once sharing the concurrency (only the first one's progress
      // is printed).
      const outcomes = await Promise.all(
        splitMeasureOptions(measureOptions, options.clients).map((share, client) =>
          runClient<ModeResult>(
            { kind: 'closed', url: servers[index]!.url.href, label, requests, options: share },
            client === 0 ? printProgress : {},
          ),
        ),
      );
      const result = concurrentResult(
        outcomes.map((outcome) => ({ ...outcome.result, mode: run.mode })),
      );
      for (const message of result.messages) console.log(`  error: ${message}`);
      const loopDelayMax = serverLoopDelay(
        options,
        outcomes.map((outcome) => outcome.loopDelayMaxMs),
      );
      const span = {
        from: Math.min(...outcomes.map((outcome) => outcome.measuredFrom)),
        to: Math.max(...outcomes.map((outcome) => outcome.measuredTo)),
      };
      return { result: { ...result, mode: run.mode, loopDelayMax }, span };
    };
    for (const index of order) await runOnce(index, 'warm-up round (not counted)');
    for (let round = 0; round < options.rounds; round++) {
      const results: ModeResult[] = [];
      const roundSpans: { from: number; to: number }[] = [];
      for (const index of turnOrder(order, round)) {
        const { result, span } = await runOnce(index, `round ${round + 1} of ${options.rounds}`);
        results[index] = result;
        roundSpans[index] = span;
      }
      rounds.push(results);
      spans.push(roundSpans);
    }
  } finally {
    for (const server of servers) await server.close();
  }
  // Servers in processes of their own have now reported their loop delays (at exit).
  for (let index = 0; index < servers.length; index++) {
    const within = servers[index]!.loopDelayWithin;
    if (within === undefined) continue;
    for (let round = 0; round < rounds.length; round++) {
      const span = spans[round]![index]!;
      rounds[round]![index] = {
        ...rounds[round]![index]!,
        loopDelayMax: within(span.from, span.to),
      };
    }
  }
  const pooled = order.map((index) => pooledResult(rounds.map((results) => results[index]!)));
  return { pooled, rounds };
}

/** The head-of-line workload: each mode's server, the same schedule from the client. */
async function headOfLine(options: LoadOptions): Promise<HeadOfLineRow[]> {
  const arrivals = headOfLineSchedule({
    seconds: options.seconds,
    smallRate: options.smallRate,
    largeEveryMs: options.largeEveryMs,
    seed: options.seed,
  });
  const counts = { small: 0, large: 0 };
  for (const arrival of arrivals) counts[arrival.kind as 'small' | 'large']++;
  console.log(
    `head-of-line: POST /solve-random, ${counts.small} small (n = ${options.smallN}, ${options.smallRate}/s) and ${counts.large} large (n = ${options.largeN}, every ${options.largeEveryMs} ms) in ${options.seconds} s per mode, after ${headOfLineWarmup(options)} warm-up requests of each`,
  );
  const rows: HeadOfLineRow[] = [];
  const modes = options.url !== undefined ? HEAD_OF_LINE_MODES.slice(1, 2) : HEAD_OF_LINE_MODES;
  for (const mode of modes) {
    if (mode.unavailable !== undefined) {
      console.log(`skipped: ${mode.label} (${mode.unavailable})`);
      rows.push({ mode });
      continue;
    }
    const { url, close: stop } = await serverFor(options, {
      sharedStream: mode.mode === 'shared',
      maxDimension: Math.max(2048, options.smallN, options.largeN),
      // The first two rows at one priority; the third gives this workload's small requests
      // (n = smallN) high priority, the large ones normal.
      priorities: false,
      ...(mode.mode === 'priority'
        ? {
            taskOptionsFor: (_path: string, body: unknown) => ({
              priority: (body as { n?: unknown }).n === options.smallN ? 'high' : 'normal',
            }),
          }
        : {}),
    });
    console.log(`running: ${mode.label} (${url.origin}) ...`);
    try {
      const { result, loopDelayMaxMs } = await runClient<ScheduleResult>(
        {
          kind: 'schedule',
          url: url.href,
          label: mode.label,
          requests: {
            small: {
              route: 'solve-random',
              n: options.smallN,
              problems: options.problems,
              seed: options.seed,
            },
            large: {
              route: 'solve-random',
              n: options.largeN,
              problems: 4,
              seed: options.seed + 1,
            },
          },
          arrivals,
          warmup: headOfLineWarmup(options),
        },
        printProgress,
      );
      const serverDelay = serverLoopDelay(options, [loopDelayMaxMs]);
      rows.push({
        mode,
        result,
        ...(Number.isNaN(serverDelay) ? {} : { loopDelayMaxMs: serverDelay }),
      });
      for (const kind of Object.values(result.byKind)) {
        for (const message of kind.messages) console.log(`  error: ${message}`);
      }
    } finally {
      await stop();
    }
  }
  return rows;
}

/**
 * Why no load should be sent, or `undefined` when the GPU is usable. With `url`, the running
 * service's `GET /health` says (200: usable; 503: its reason); in process, the check the
 * service's `/health` makes (`checkGpu`, default `gpuHealth`).
 * @example await healthProblem('http://127.0.0.1:8080'); // undefined, or why not
 */
export async function healthProblem(
  url: string | undefined,
  checkGpu: () => GpuHealth = gpuHealth,
): Promise<string | undefined> {
  if (url === undefined) {
    const gpu = checkGpu();
    return gpu.usable ? undefined : `no usable GPU here: ${gpu.reason ?? 'no reason given'}`;
  }
  let response: Response;
  try {
    response = await fetch(`${url}/health`, { signal: AbortSignal.timeout(10_000) });
  } catch (error) {
    const cause = (error as { cause?: { code?: string } }).cause;
    const why = cause?.code ?? (error instanceof Error ? error.message : String(error));
    return `no server answers at ${url} (${why})`;
  }
  const text = await response.text();
  if (response.status === 200) return undefined;
  let body: { gpu?: GpuHealth; error?: string } | undefined;
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    body = undefined;
  }
  if (response.status === 503 && body?.gpu?.usable === false) {
    return `the server at ${url} says the GPU is not usable: ${body.gpu.reason ?? 'no reason given'}`;
  }
  if (response.status === 503 && typeof body?.error === 'string') {
    return `the server at ${url} is not ready: ${body.error}`;
  }
  return `GET ${url}/health answered ${response.status}, not 200: is this the GPU service?`;
}

/** Runs the load test; resolves with the errors counted (the tables are printed). */
export async function main(argv: readonly string[] = process.argv.slice(2)): Promise<number> {
  parseCommandLineOrExit(argv, loadCommandLine); // --help, unknown flags: print, exit
  let options: LoadOptions;
  try {
    options = parseLoadArguments(argv);
  } catch (error) {
    if (!(error instanceof CommandLineError)) throw error;
    console.error(`${error.message}\n\n${error.usage}`);
    process.exit(2);
  }
  // A GPU that cannot run requests would turn every request into an error: say so once instead.
  const problem = await healthProblem(options.url);
  if (problem !== undefined) {
    console.error(`load: ${problem.replace(/\.$/, '')}. No load was sent.`);
    process.exit(3);
  }
  let errors = 0;
  const tables: string[] = [];
  for (const workload of options.workloads) {
    if (workload === 'solve') {
      const measureOptions = runMeasureOptions(options);
      console.log(
        `POST /${options.route}, n = ${options.n}, concurrency ${options.concurrency}, at most ${measureOptions.requests} requests or ${options.seconds} s per run, ${options.rounds} rounds after one not counted (warm-up ${measureOptions.warmup} per run)${options.url === undefined ? `, ${options.parseWorkers ?? defaultParseWorkers()} parse workers in the server` : ''}`,
      );
      const { pooled, rounds } = await closedLoop(
        options,
        measureOptions,
        { route: options.route, n: options.n, problems: options.problems, seed: options.seed },
        {},
      );
      errors += pooled.reduce((sum, result) => sum + result.errors, 0);
      tables.push(`POST /${options.route}, n = ${options.n}:\n${report(pooled, rounds)}`);
    } else if (workload === 'head-of-line') {
      const rows = await headOfLine(options);
      for (const row of rows) {
        for (const kind of Object.values(row.result?.byKind ?? {})) errors += kind.errors;
      }
      tables.push(
        `head-of-line: small requests (n = ${options.smallN}) among large ones (n = ${options.largeN}):\n${headOfLineReport(rows)}`,
      );
    } else {
      const measureOptions = runMeasureOptions(options);
      const references = options.url === undefined ? await searchReferences(options) : undefined;
      console.log(
        `POST /search: top ${options.k} of ${options.rows.toLocaleString('en-US')} x 128 float32 embeddings on the GPU, concurrency ${options.concurrency}, at most ${measureOptions.requests} requests or ${options.seconds} s per run, ${options.rounds} rounds after one not counted (warm-up ${measureOptions.warmup} per run)`,
      );
      const { pooled, rounds } = await closedLoop(
        options,
        measureOptions,
        {
          route: 'search',
          dim: 128,
          rows: options.rows,
          k: options.k,
          queries: options.problems,
          seed: options.seed,
          ...(references === undefined ? {} : { references }),
        },
        {
          search: { rows: options.rows, dim: 128 },
          ...searchBatchOption(options),
          ...(options.inFlight === undefined
            ? {}
            : {
                gpuInFlight: {
                  '/search': options.inFlight === 0 ? Number.POSITIVE_INFINITY : options.inFlight,
                },
              }),
        },
      );
      errors += pooled.reduce((sum, result) => sum + result.errors, 0);
      const rows: SearchRow[] = pooled.map((result) => ({
        label: MODE_LABELS[result.mode] ?? result.mode,
        result,
      }));
      tables.push(
        `shared read-only data: POST /search over ${options.rows.toLocaleString('en-US')} embeddings every request reads:\n${searchReport(rows, rounds)}`,
      );
    }
  }
  console.log('');
  console.log(tables.join('\n\n'));
  console.log(`\n${loopDelayFootnote(options)}`);
  return errors;
}

if (isEntryPoint(import.meta.url)) {
  main().then(
    (errors) => process.exit(errors > 0 ? 1 : 0),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
