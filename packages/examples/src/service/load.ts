/**
 * Load test for the GPU service: fires `POST /solve` requests (random diagonally dominant
 * n x n systems) from C concurrent clients over loopback, checks every answer on the CPU
 * (the residual of a few rows), and reports per mode the throughput, p50 / p99 latency,
 * errors and the event loop's maximum delay. By default it starts the server in-process
 * twice, first with a stream per request task, then with one shared stream, and prints a
 * comparison table last; `--url` targets a running server instead (loopback only).
 *
 * Bounded: stops after `--requests N` (default 2000) or `--seconds S` (default 20) per mode,
 * whichever comes first. The warm-up before each mode stops after `--warmup` requests or the
 * same `--seconds` budget; a request still in flight when its budget ends is given up
 * `REQUEST_GRACE_MS` later (and counted as an error), so a mode never runs longer than
 * twice (`--seconds` + the grace).
 *
 * With `--route solve-random` it fires `POST /solve-random {n, seed}` instead: the server draws
 * the system on the GPU, so the request's time goes to the GPU rather than to JSON, which is
 * where a stream per request pays off; the check is the residual the server reports and, per
 * seed, the same answer every time.
 *
 * Run: `pnpm --filter @cuda-tasks/examples load [--requests 2000] [--seconds 20] [--concurrency 32] [--n 128] [--route solve|solve-random] [--mode both|task|shared] [--url http://127.0.0.1:PORT]`
 */
import { Agent, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import {
  CommandLineError,
  isEntryPoint,
  parseCommandLine,
  parseCommandLineOrExit,
  usage,
} from '../cli.js';
import { createServer } from './server.js';
import { formatNumber, formatTable, summarize, throughput } from './statistics.js';

/** What the load script does (see `parseLoadArguments`). */
export interface LoadOptions {
  /** Requests per mode at most (default 2000). */
  requests: number;
  /** Seconds per mode at most (default 20). */
  seconds: number;
  /** Requests in flight at once (default 32). */
  concurrency: number;
  /** Matrix size (default 128). */
  n: number;
  /** Which in-process modes to run (default both). Ignored with `url`. */
  modes: ('task' | 'shared')[];
  /** A running server to target instead (loopback only). */
  url: string | undefined;
  /** Requests before each measured run, not counted (default: the concurrency). */
  warmup: number;
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
}

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

/** The load script's flags (`pnpm --filter @cuda-tasks/examples load --help`). */
export const loadCommandLine = {
  command: 'load.ts',
  options: {
    requests: { type: 'string', placeholder: 'N', description: 'requests per mode at most (2000)' },
    seconds: { type: 'string', placeholder: 'S', description: 'seconds per mode at most (20)' },
    concurrency: { type: 'string', placeholder: 'N', description: 'requests in flight (32)' },
    n: { type: 'string', placeholder: 'N', description: 'matrix size (128)' },
    mode: {
      type: 'string',
      placeholder: 'both|task|shared',
      description: 'in-process modes (both)',
    },
    url: { type: 'string', placeholder: 'URL', description: 'a running server (loopback only)' },
    warmup: { type: 'string', placeholder: 'N', description: 'warm-up requests (the concurrency)' },
    problems: { type: 'string', placeholder: 'N', description: 'distinct systems (16)' },
    seed: { type: 'string', placeholder: 'N', description: 'seed of the problems (1)' },
    route: { type: 'string', placeholder: 'solve|solve-random', description: 'route (solve)' },
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
    requests: integer('requests', 2000, 10_000_000),
    seconds: 20,
    concurrency: integer('concurrency', 32, 4096),
    n: integer('n', 128, 2048),
    modes: ['task', 'shared'],
    url: undefined,
    warmup: values.warmup === '0' ? 0 : integer('warmup', -1, 1_000_000),
    problems: integer('problems', 16, 1024),
    seed: integer('seed', 1, 2 ** 31 - 1),
    route: 'solve',
  };
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
  }
  if (options.warmup < 0) options.warmup = options.concurrency;
  return options;
}

/** A seeded PRNG (mulberry32) with values in [0, 1). */
export function randomSource(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** One request the load sends, and how to check its answer. */
export interface Request {
  /** The route, e.g. '/solve'. */
  path: string;
  /** The JSON body. */
  body: Buffer;
  /**
   * Checks a 200 answer (parsed JSON) of the request sent as number `index`; undefined when
   * it passes, else what is wrong.
   */
  check(answer: Record<string, unknown>, index: number): string | undefined;
}

/** One linear system and its request body. */
export interface Problem extends Request {
  /** The system's size. */
  n: number;
  /** n x n, column-major. */
  a: Float64Array;
  /** The right-hand side, n values. */
  b: Float64Array;
}

/**
 * A random strictly diagonally dominant n x n system (so it is nonsingular and well
 * conditioned): off-diagonal entries in [-1, 1), each diagonal entry 1 + the sum of the
 * magnitudes in its row, b in [-1, 1).
 */
export function makeProblem(n: number, random: () => number): Problem {
  const a = new Float64Array(n * n);
  const rowSums = new Float64Array(n);
  for (let j = 0; j < n; j++) {
    for (let i = 0; i < n; i++) {
      if (i === j) continue;
      const value = random() * 2 - 1;
      a[i + j * n] = value;
      rowSums[i]! += Math.abs(value);
    }
  }
  for (let i = 0; i < n; i++) a[i + i * n] = rowSums[i]! + 1;
  const b = Float64Array.from({ length: n }, () => random() * 2 - 1);
  const body = Buffer.from(JSON.stringify({ n, a: Array.from(a), b: Array.from(b) }));
  const problem: Problem = {
    n,
    a,
    b,
    path: '/solve',
    body,
    check: (answer, index) => checkSolution(problem, answer.x, [0, n >> 1, n - 1, index % n]),
  };
  return problem;
}

/**
 * A `POST /solve-random {n, seed}` request: the server draws the system from `seed`, so the
 * check is the residual it reports (below 1e-8) and, for every later answer to the same seed,
 * the same first entries of x bit for bit (a seeded generator gives the same numbers whichever
 * task and stream run it).
 */
export function makeRandomRequest(n: number, seed: number): Request {
  let first: string | undefined;
  return {
    path: '/solve-random',
    body: Buffer.from(JSON.stringify({ n, seed })),
    check(answer) {
      const { residual, x } = answer;
      if (typeof residual !== 'number' || !(residual < 1e-8)) {
        return `seed ${seed}: residual ${String(residual)} is not below 1e-8`;
      }
      if (!Array.isArray(x) || x.length !== Math.min(n, 4)) {
        return `seed ${seed}: expected the first ${Math.min(n, 4)} entries of x, got ${JSON.stringify(x)}`;
      }
      const text = JSON.stringify(x);
      first ??= text;
      if (text !== first) return `seed ${seed}: x starts ${text} this time, ${first} before`;
      return undefined;
    },
  };
}

/**
 * Checks a solution cheaply: the residual |(A x - b)_i| of rows `rows` against
 * 1e-9 * (sum_j |a_ij x_j| + |b_i|). Returns undefined when it passes, else what is wrong.
 */
export function checkSolution(
  problem: Pick<Problem, 'n' | 'a' | 'b'>,
  x: unknown,
  rows: readonly number[],
): string | undefined {
  const { n, a, b } = problem;
  if (!Array.isArray(x) || x.length !== n) {
    return `expected x with ${n} numbers, got ${Array.isArray(x) ? x.length : typeof x}`;
  }
  for (const row of rows) {
    let sum = -b[row]!;
    let scale = Math.abs(b[row]!);
    for (let j = 0; j < n; j++) {
      const term = a[row + j * n]! * (x[j] as number);
      sum += term;
      scale += Math.abs(term);
    }
    if (!(Math.abs(sum) <= 1e-9 * scale)) {
      return `row ${row}: residual ${Math.abs(sum).toExponential(2)} exceeds 1e-9 x ${scale.toExponential(2)}`;
    }
  }
  return undefined;
}

interface Response {
  status: number;
  text: string;
}

/**
 * How long past its batch's deadline a request in flight may still take before it is given up
 * (and counted as an error): 5 s, a small grace against `--seconds`.
 */
export const REQUEST_GRACE_MS = 5000;

function post(agent: Agent, url: URL, body: Buffer, timeoutMs: number): Promise<Response> {
  return new Promise((resolveResponse, reject) => {
    const request = httpRequest(
      url,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': body.length },
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolveResponse({
            status: response.statusCode ?? 0,
            text: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    const limit = Math.max(1, Math.ceil(timeoutMs));
    request.setTimeout(limit, () =>
      request.destroy(new Error(`no answer within ${(limit / 1000).toFixed(1)} s`)),
    );
    request.end(body);
  });
}

/** What one batch of requests gave. */
export interface Fired {
  /** Milliseconds from sending to the whole answer, of each correct answer. */
  latencies: number[];
  /** Failed requests: transport errors, timeouts, non-200 answers, wrong answers. */
  errors: number;
  /** The first few distinct error messages. */
  messages: string[];
  /** Requests answered (any status, correct or not). */
  completed: number;
  /** Requests sent. */
  issued: number;
}

/**
 * Sends up to `count` requests, `concurrency` at a time, cycling through `problems`; no new
 * request starts at or after `deadline` (a `performance.now()` time, ms), and one in flight is
 * given up (an error) `graceMs` after the deadline. Checks every answer with its `check`.
 * @example const fired = await fire(url, agent, problems, 100, performance.now() + 5000, 8);
 */
export async function fire(
  url: URL,
  agent: Agent,
  problems: readonly Request[],
  count: number,
  deadline: number,
  concurrency: number,
  graceMs: number = REQUEST_GRACE_MS,
): Promise<Fired> {
  const fired: Fired = { latencies: [], errors: 0, messages: [], completed: 0, issued: 0 };
  const fail = (message: string) => {
    fired.errors++;
    if (fired.messages.length < 3 && !fired.messages.includes(message)) {
      fired.messages.push(message);
    }
  };
  const worker = async () => {
    while (fired.issued < count && performance.now() < deadline) {
      const index = fired.issued++;
      const problem = problems[index % problems.length]!;
      const start = performance.now();
      try {
        const response = await post(
          agent,
          new URL(problem.path, url),
          problem.body,
          deadline - start + graceMs,
        );
        const latency = performance.now() - start;
        fired.completed++;
        let parsed: Record<string, unknown>;
        try {
          parsed = JSON.parse(response.text) as typeof parsed;
        } catch {
          fail(`HTTP ${response.status}: the body is not JSON`);
          continue;
        }
        if (response.status !== 200) {
          fail(`HTTP ${response.status}: ${String(parsed.error)}`);
          continue;
        }
        const wrong = problem.check(parsed, index);
        if (wrong !== undefined) fail(`wrong answer: ${wrong}`);
        else fired.latencies.push(latency);
      } catch (error) {
        fail((error as Error).message);
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return fired;
}

/** One mode's results. */
export interface ModeResult {
  /** `task`, `shared` or `remote` (or any label given to `measure`). */
  mode: string;
  /** Requests of the measured batch that were answered (any status). */
  completed: number;
  /** Requests of the measured batch that failed (see `Fired.errors`). */
  errors: number;
  /** The first few distinct error messages. */
  messages: string[];
  /** Wall time of the measured batch, in s. */
  seconds: number;
  /** Correct answers per second of the measured batch. */
  requestsPerSecond: number;
  /** Median latency of the correct answers, in ms. */
  p50: number;
  /** 99th percentile latency of the correct answers, in ms. */
  p99: number;
  /** Largest latency of the correct answers, in ms. */
  max: number;
  /** The event loop's largest delay during the run, in ms. */
  loopDelayMax: number;
}

/**
 * Runs the warm-up (at most `options.warmup` requests and `options.seconds` seconds, not
 * counted), then the measured batch (at most `options.requests` requests, none started after
 * `options.seconds` seconds) of `problems` against the server at `url`. Throughput counts the
 * correct answers per second of the measured batch; p50 / p99 / max are of their latencies.
 * `graceMs`: how long a request in flight may outlive its batch's budget.
 */
export async function measure(
  mode: string,
  url: URL,
  problems: readonly Request[],
  options: Pick<LoadOptions, 'requests' | 'seconds' | 'concurrency' | 'warmup'>,
  graceMs: number = REQUEST_GRACE_MS,
): Promise<ModeResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: options.concurrency });
  try {
    if (options.warmup > 0) {
      const warm = await fire(
        url,
        agent,
        problems,
        options.warmup,
        performance.now() + options.seconds * 1000,
        options.concurrency,
        graceMs,
      );
      if (warm.issued > 0 && warm.errors === warm.issued) {
        throw new Error(`every warm-up request failed (${mode}): ${warm.messages.join('; ')}`);
      }
    }
    const histogram = monitorEventLoopDelay({ resolution: 1 });
    histogram.enable();
    const start = performance.now();
    const fired = await fire(
      url,
      agent,
      problems,
      options.requests,
      start + options.seconds * 1000,
      options.concurrency,
      graceMs,
    );
    const seconds = (performance.now() - start) / 1000;
    histogram.disable();
    const summary = summarize(fired.latencies);
    return {
      mode,
      completed: fired.completed,
      errors: fired.errors,
      messages: fired.messages,
      seconds,
      requestsPerSecond: throughput(fired.latencies.length, seconds),
      p50: summary.p50,
      p99: summary.p99,
      max: summary.max,
      loopDelayMax: histogram.max / 1e6,
    };
  } finally {
    agent.destroy();
  }
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
  task: 'stream per task',
  shared: 'one shared stream',
  remote: 'remote server',
};

/** The results table (and a comparison line when both in-process modes ran). */
export function report(results: readonly ModeResult[]): string {
  const table = formatTable(
    ['mode', 'requests', 'errors', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'loop delay max ms'],
    results.map((result) => [
      MODE_LABELS[result.mode] ?? result.mode,
      String(result.completed),
      String(result.errors),
      formatNumber(result.requestsPerSecond),
      formatNumber(result.p50, 2),
      formatNumber(result.p99, 2),
      formatNumber(result.max, 2),
      formatNumber(result.loopDelayMax, 2),
    ]),
  );
  const task = results.find((result) => result.mode === 'task');
  const shared = results.find((result) => result.mode === 'shared');
  if (task === undefined || shared === undefined || shared.requestsPerSecond === 0) return table;
  return `${table}\n\nstream per task vs one shared stream: throughput x${formatNumber(
    task.requestsPerSecond / shared.requestsPerSecond,
    2,
  )}, p99 latency x${formatNumber(task.p99 / shared.p99, 2)}`;
}

/** Runs the load test; resolves with the results (printed along the way). */
export async function main(argv: readonly string[] = process.argv.slice(2)): Promise<ModeResult[]> {
  parseCommandLineOrExit(argv, loadCommandLine); // --help, unknown flags: print, exit
  let options: LoadOptions;
  try {
    options = parseLoadArguments(argv);
  } catch (error) {
    if (!(error instanceof CommandLineError)) throw error;
    console.error(`${error.message}\n\n${error.usage}`);
    process.exit(2);
  }
  const random = randomSource(options.seed);
  const problems: Request[] =
    options.route === 'solve'
      ? Array.from({ length: options.problems }, () => makeProblem(options.n, random))
      : Array.from({ length: options.problems }, (_, i) =>
          makeRandomRequest(options.n, options.seed * 1000 + i),
        );
  console.log(
    `POST /${options.route}, n = ${options.n}, concurrency ${options.concurrency}, at most ${options.requests} requests or ${options.seconds} s per mode (warm-up ${options.warmup})`,
  );
  const results: ModeResult[] = [];
  const runs: { mode: string; shared: boolean }[] =
    options.url !== undefined
      ? [{ mode: 'remote', shared: false }]
      : options.modes.map((mode) => ({ mode, shared: mode === 'shared' }));
  for (const run of runs) {
    let server: Server | undefined;
    let url: URL;
    if (options.url !== undefined) {
      url = new URL(options.url);
    } else {
      // Server-side 5xx errors also reach the client as answers: print only the first here.
      let logged = false;
      server = createServer({
        sharedStream: run.shared,
        onServerError: (error) => {
          if (!logged) console.error('server error:', error);
          logged = true;
        },
      });
      url = await listen(server);
    }
    console.log(`running: ${MODE_LABELS[run.mode]} (${url.origin}) ...`);
    try {
      const result = await measure(run.mode, url, problems, options);
      results.push(result);
      for (const message of result.messages) console.log(`  error: ${message}`);
    } finally {
      if (server !== undefined) await close(server);
    }
  }
  console.log('');
  console.log(report(results));
  console.log(
    '\nloop delay: the largest event-loop delay during the measured run (in-process, client and server share the loop).',
  );
  return results;
}

if (isEntryPoint(import.meta.url)) {
  main().then(
    (results) => process.exit(results.some((result) => result.errors > 0) ? 1 : 0),
    (error: unknown) => {
      console.error(error instanceof Error ? error.message : error);
      process.exit(1);
    },
  );
}
