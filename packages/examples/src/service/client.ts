/**
 * The load client's side of the load test: the requests it sends and how it checks their
 * answers, the closed-loop request loop (`fire`) and one mode's measurement (`measure`). No
 * GPU and no server here: the load script runs this in a process of its own
 * (client-process.ts), so that the server's event loop is measured alone.
 */
import { Agent, request as httpRequest } from 'node:http';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { checkAgainstReference, type SearchReference } from './search-reference.js';
import { summarize, throughput } from './statistics.js';

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

/** A whole HTTP answer: its status and body text. */
export interface Response {
  /** The HTTP status code. */
  status: number;
  /** The body, as UTF-8 text. */
  text: string;
}

/**
 * How long past its batch's deadline a request in flight may still take before it is given up
 * (and counted as an error): 5 s, a small grace against `--seconds`.
 */
export const REQUEST_GRACE_MS = 5000;

/**
 * POSTs a JSON `body` to `url` through `agent`; resolves with the whole answer, or rejects
 * when none came within `timeoutMs`.
 * @example const { status, text } = await post(agent, new URL('http://127.0.0.1:8080/solve'), body, 5000);
 */
export function post(agent: Agent, url: URL, body: Buffer, timeoutMs: number): Promise<Response> {
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

/** Counts a failed request in `fired`, keeping the first few distinct messages. */
function failed(fired: Fired, message: string): void {
  fired.errors++;
  if (fired.messages.length < 3 && !fired.messages.includes(message)) fired.messages.push(message);
}

/**
 * Sends one request (number `index` of its kind), waits for the whole answer at most
 * `timeoutMs`, checks it and counts it in `fired`: its latency when the answer is right, an
 * error otherwise.
 */
async function sendOne(
  url: URL,
  agent: Agent,
  request: Request,
  index: number,
  fired: Fired,
  timeoutMs: number,
): Promise<void> {
  const start = performance.now();
  try {
    const response = await post(agent, new URL(request.path, url), request.body, timeoutMs);
    const latency = performance.now() - start;
    fired.completed++;
    let parsed: Record<string, unknown>;
    try {
      parsed = JSON.parse(response.text) as typeof parsed;
    } catch {
      failed(fired, `HTTP ${response.status}: the body is not JSON`);
      return;
    }
    if (response.status !== 200) {
      failed(fired, `HTTP ${response.status}: ${String(parsed.error)}`);
      return;
    }
    const wrong = request.check(parsed, index);
    if (wrong !== undefined) failed(fired, `wrong answer: ${wrong}`);
    else fired.latencies.push(latency);
  } catch (error) {
    failed(fired, (error as Error).message);
  }
}

/** A `Fired` with nothing in it yet. */
export function emptyFired(): Fired {
  return { latencies: [], errors: 0, messages: [], completed: 0, issued: 0 };
}

/**
 * Sends up to `count` requests, `concurrency` at a time, cycling through `problems`; no new
 * request starts at or after `deadline` (a `performance.now()` time, ms), and one in flight is
 * given up (an error) `graceMs` after the deadline. Checks every answer with its `check`.
 * Counts into `fired` (default: a new one), which a caller may read while it fills.
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
  fired: Fired = emptyFired(),
): Promise<Fired> {
  const worker = async () => {
    while (fired.issued < count && performance.now() < deadline) {
      const index = fired.issued++;
      const problem = problems[index % problems.length]!;
      await sendOne(url, agent, problem, index, fired, deadline - performance.now() + graceMs);
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
  /** The latencies of the correct answers, in ms, in the order they were answered. */
  latencies: number[];
  /**
   * The event loop's largest delay during the measured run, in ms: of the process that ran
   * `measure`, and in the load script of the server's process (the client runs in a child);
   * NaN where the server runs in processes of its own (`--processes`, `--url`): not measured.
   */
  loopDelayMax: number;
}

/** How many requests `measure` sends, how many at a time, and for how long at most. */
export interface MeasureOptions {
  /** Requests in the measured batch at most. */
  requests: number;
  /** Seconds per batch (the warm-up's and the measured one's) at most. */
  seconds: number;
  /** Requests in flight at once. */
  concurrency: number;
  /** Requests before the measured batch, not counted. */
  warmup: number;
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
  options: MeasureOptions,
  graceMs: number = REQUEST_GRACE_MS,
  onPhase?: (phase: 'warm-up' | 'measured', fired: Fired) => void,
): Promise<ModeResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: options.concurrency });
  try {
    if (options.warmup > 0) {
      const warming = emptyFired();
      onPhase?.('warm-up', warming);
      const warm = await fire(
        url,
        agent,
        problems,
        options.warmup,
        performance.now() + options.seconds * 1000,
        options.concurrency,
        graceMs,
        warming,
      );
      if (warm.issued > 0 && warm.errors === warm.issued) {
        throw new Error(`every warm-up request failed (${mode}): ${warm.messages.join('; ')}`);
      }
    }
    const histogram = monitorEventLoopDelay({ resolution: 1 });
    histogram.enable();
    const measured = emptyFired();
    onPhase?.('measured', measured);
    const start = performance.now();
    const fired = await fire(
      url,
      agent,
      problems,
      options.requests,
      start + options.seconds * 1000,
      options.concurrency,
      graceMs,
      measured,
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
      latencies: fired.latencies,
      loopDelayMax: histogram.max / 1e6,
    };
  } finally {
    agent.destroy();
  }
}

/**
 * One mode's runs, taken in turns with the other modes', as one result: the answers and errors
 * of all runs, throughput over their summed measured time, p50 / p99 / max of all their
 * latencies together, the largest loop delay of any. Throws for no runs or runs of different
 * modes.
 * @example pooledResult([round1.task, round2.task, round3.task]).p99;
 */
export function pooledResult(runs: readonly ModeResult[]): ModeResult {
  const first = runs[0];
  if (first === undefined) throw new RangeError('pooledResult: no runs');
  const latencies: number[] = [];
  const messages: string[] = [];
  let completed = 0;
  let errors = 0;
  let seconds = 0;
  let loopDelayMax = 0;
  for (const run of runs) {
    if (run.mode !== first.mode) {
      throw new RangeError(`pooledResult: runs of ${first.mode} and ${run.mode}`);
    }
    for (const latency of run.latencies) latencies.push(latency);
    for (const message of run.messages) {
      if (!messages.includes(message)) messages.push(message);
    }
    completed += run.completed;
    errors += run.errors;
    seconds += run.seconds;
    loopDelayMax = Math.max(loopDelayMax, run.loopDelayMax);
  }
  const summary = summarize(latencies);
  return {
    mode: first.mode,
    completed,
    errors,
    messages,
    seconds,
    requestsPerSecond: throughput(latencies.length, seconds),
    p50: summary.p50,
    p99: summary.p99,
    max: summary.max,
    latencies,
    loopDelayMax,
  };
}

/**
 * The runs of one mode by clients that ran at the same time, as one result: the answers and
 * errors of all, throughput over the longest client's measured time (the clients started
 * together; counting each answer over the longest time errs low, never high), p50 / p99 / max
 * of all their latencies together, the largest loop delay of any. Throws for no runs or runs of
 * different modes.
 * @example concurrentResult([client1, client2]).requestsPerSecond;
 */
export function concurrentResult(runs: readonly ModeResult[]): ModeResult {
  const pooled = pooledResult(runs);
  const seconds = Math.max(...runs.map((run) => run.seconds));
  return {
    ...pooled,
    seconds,
    requestsPerSecond: throughput(pooled.latencies.length, seconds),
  };
}

/**
 * `options` split among `clients` load clients that run at once: the concurrency, the
 * requests and the warm-up shared out as evenly as whole numbers allow (the first ones get the
 * extra one), the seconds the same for each. Throws a RangeError for fewer than one client or
 * more clients than requests in flight.
 * @example splitMeasureOptions({ requests: 10, seconds: 5, concurrency: 5, warmup: 0 }, 2).map((o) => o.concurrency); // [3, 2]
 */
export function splitMeasureOptions(options: MeasureOptions, clients: number): MeasureOptions[] {
  if (!Number.isSafeInteger(clients) || clients < 1 || clients > options.concurrency) {
    throw new RangeError(
      `splitMeasureOptions: clients must be an integer in 1..${options.concurrency} (the concurrency), got ${clients}`,
    );
  }
  const share = (total: number, i: number) =>
    Math.floor(total / clients) + (i < total % clients ? 1 : 0);
  return Array.from({ length: clients }, (_, i) => ({
    requests: share(options.requests, i),
    seconds: options.seconds,
    concurrency: share(options.concurrency, i),
    warmup: share(options.warmup, i),
  }));
}

/**
 * The order of `modes` in round `round` (0, 1, ...) of a measurement that takes turns: as
 * given in even rounds, reversed in odd ones, so that no mode always runs first (the host's
 * speed drifts within a process; docs/decisions/0025).
 * @example turnOrder(['task', 'shared'], 1); // ['shared', 'task']
 */
export function turnOrder<T>(modes: readonly T[], round: number): T[] {
  return round % 2 === 0 ? [...modes] : [...modes].reverse();
}

/**
 * How far a score may move between two answers to one query, relative to 1 + |score|, without a
 * reference: float32 sums of 128 products of values in [-1, 1) and standard normal ones.
 */
export const REPEAT_TOLERANCE = 1e-4;

/** The query of `dim` values in [-1, 1) (float32) that `makeSearchRequest` draws from `seed`. */
export function searchQuery(dim: number, seed: number): number[] {
  const random = randomSource(seed);
  return Array.from({ length: dim }, () => Math.fround(random() * 2 - 1));
}

/**
 * A `POST /search {query, k}` request: a query of `dim` values in [-1, 1) drawn from `seed`.
 * The check: `k` distinct row numbers in 0..rows-1 and `k` finite scores, best first; with a
 * `reference`, the rows and scores the CPU's dot products give (search-reference.ts), which
 * allow for float32 rounding and for rows tied within it; without one, every later answer to
 * the same query must hold the same rows as the first, with scores within float32 rounding
 * (`REPEAT_TOLERANCE`): a search answered alone (GEMV) or in a batch (SGEMM) may sum in
 * another order, so answers need not agree bit for bit.
 */
export function makeSearchRequest(
  dim: number,
  rows: number,
  k: number,
  seed: number,
  reference?: SearchReference,
): Request {
  const query = searchQuery(dim, seed);
  let first: Map<number, number> | undefined;
  return {
    path: '/search',
    body: Buffer.from(JSON.stringify({ query, k })),
    check(answer) {
      const { indices, scores } = answer;
      if (!Array.isArray(indices) || !Array.isArray(scores)) {
        return `query ${seed}: expected indices and scores, got ${JSON.stringify(answer).slice(0, 80)}`;
      }
      if (indices.length !== k || scores.length !== k) {
        return `query ${seed}: expected ${k} results, got ${indices.length} indices and ${scores.length} scores`;
      }
      const seen = new Set<number>();
      for (let i = 0; i < k; i++) {
        const row = indices[i];
        const score = scores[i];
        if (!Number.isInteger(row) || row < 0 || row >= rows || seen.has(row)) {
          return `query ${seed}: result ${i} is not a new row number in 0..${rows - 1}: ${row}`;
        }
        seen.add(row);
        if (typeof score !== 'number' || !Number.isFinite(score)) {
          return `query ${seed}: score ${i} is not finite: ${score}`;
        }
        if (i > 0 && score > (scores[i - 1] as number)) {
          return `query ${seed}: scores are not best first at ${i}: ${scores[i - 1]} then ${score}`;
        }
      }
      if (reference !== undefined) {
        const wrong = checkAgainstReference(reference, indices, scores);
        if (wrong !== undefined) return `query ${seed}: ${wrong}`;
      }
      if (reference !== undefined) return undefined;
      if (first === undefined) {
        first = new Map(indices.map((row, i) => [row as number, scores[i] as number]));
        return undefined;
      }
      for (let i = 0; i < k; i++) {
        const before = first.get(indices[i] as number);
        const score = scores[i] as number;
        if (
          before === undefined ||
          Math.abs(before - score) > REPEAT_TOLERANCE * (1 + Math.abs(score))
        ) {
          return `query ${seed}: a different answer than the first time`;
        }
      }
      return undefined;
    },
  };
}

/** One request of an open-loop schedule: when it is sent, and of which kind. */
export interface Arrival {
  /** Milliseconds after the schedule's start. */
  at: number;
  /** Its kind (results are counted per kind), e.g. `small`. */
  kind: string;
  /** The request. */
  request: Request;
}

/** What an open-loop schedule gave: per kind, and how long it ran. */
export interface ScheduleFired {
  /** Per kind of request. */
  byKind: Record<string, Fired>;
  /** Seconds from the first arrival time to the last answer. */
  seconds: number;
}

/** Options of `fireSchedule`. */
export interface ScheduleOptions {
  /** Requests in flight at most; an arrival beyond it is not sent and counts as an error (256). */
  maxInFlight?: number;
  /** How long after the last arrival a request in flight may still take (`REQUEST_GRACE_MS`). */
  graceMs?: number;
  /** Where to count (default: new), which a caller may read while it fills. */
  byKind?: Record<string, Fired>;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * Sends each request at its arrival time whatever is still in flight (an open loop: a slow
 * answer does not delay the next request, as with independent clients), checks every answer
 * and counts per kind. A request still in flight `graceMs` after the last arrival is given up
 * (an error).
 * @example const { byKind } = await fireSchedule(url, agent, arrivals);
 */
export async function fireSchedule(
  url: URL,
  agent: Agent,
  arrivals: readonly Arrival[],
  options: ScheduleOptions = {},
): Promise<ScheduleFired> {
  const maxInFlight = options.maxInFlight ?? 256;
  const graceMs = options.graceMs ?? REQUEST_GRACE_MS;
  const byKind = options.byKind ?? {};
  const last = arrivals.reduce((latest, arrival) => Math.max(latest, arrival.at), 0);
  const start = performance.now();
  const deadline = start + last + graceMs;
  const inFlight = new Set<Promise<void>>();
  for (const arrival of arrivals) {
    const wait = start + arrival.at - performance.now();
    if (wait > 0) await sleep(wait);
    const fired = (byKind[arrival.kind] ??= emptyFired());
    const index = fired.issued++;
    if (inFlight.size >= maxInFlight) {
      failed(fired, `not sent: ${maxInFlight} requests were in flight`);
      continue;
    }
    const sent: Promise<void> = sendOne(
      url,
      agent,
      arrival.request,
      index,
      fired,
      deadline - performance.now(),
    ).finally(() => inFlight.delete(sent));
    inFlight.add(sent);
  }
  await Promise.all(inFlight);
  return { byKind, seconds: (performance.now() - start) / 1000 };
}
