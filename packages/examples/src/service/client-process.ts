/**
 * The load client in a process of its own. The load script (the server's process) forks this
 * module, sends it a job over IPC, and prints the progress it reports while it runs; the
 * client answers with the results. So the server's event loop, whose largest delay the load
 * script reports, carries the server alone: the client's JSON, checks and timers run
 * elsewhere.
 *
 * Jobs are plain data (they cross the process boundary): the client builds the requests and
 * their checks from a `RequestSpec` itself.
 */
import { fork } from 'node:child_process';
import { Agent } from 'node:http';
import { createRequire } from 'node:module';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isEntryPoint } from '../cli.js';
import {
  type Arrival,
  emptyFired,
  type Fired,
  fire,
  fireSchedule,
  type MeasureOptions,
  type ModeResult,
  makeProblem,
  makeRandomRequest,
  makeSearchRequest,
  measure,
  type Request,
  randomSource,
} from './client.js';
import type { SearchReference } from './search-reference.js';
import { summarize } from './statistics.js';

/** Which requests to send (each spec makes a list that is cycled through). */
export type RequestSpec =
  /** `POST /solve` with `problems` random systems of size n (seeded). */
  | { route: 'solve'; n: number; problems: number; seed: number }
  /** `POST /solve-random {n, seed}` with `problems` seeds. */
  | { route: 'solve-random'; n: number; problems: number; seed: number }
  /**
   * `POST /search {query, k}` with `queries` random queries of `dim` values (seeded); with
   * `references`, each answer is checked against the CPU's (one per query, search-reference.ts).
   */
  | {
      route: 'search';
      dim: number;
      rows: number;
      k: number;
      queries: number;
      seed: number;
      references?: SearchReference[];
    }
  /** Fixed JSON bodies to `path`; any 200 answer with a JSON body counts as right. */
  | { route: 'fixed'; path: string; bodies: unknown[] };

/**
 * The requests a spec stands for.
 * @example requestsFor({ route: 'solve-random', n: 256, problems: 4, seed: 1 }).length; // 4
 */
export function requestsFor(spec: RequestSpec): Request[] {
  switch (spec.route) {
    case 'solve': {
      const random = randomSource(spec.seed);
      return Array.from({ length: spec.problems }, () => makeProblem(spec.n, random));
    }
    case 'solve-random':
      return Array.from({ length: spec.problems }, (_, i) =>
        makeRandomRequest(spec.n, spec.seed * 1000 + i),
      );
    case 'search':
      return Array.from({ length: spec.queries }, (_, i) =>
        makeSearchRequest(spec.dim, spec.rows, spec.k, spec.seed * 1000 + i, spec.references?.[i]),
      );
    case 'fixed':
      return spec.bodies.map((body) => ({
        path: spec.path,
        body: Buffer.from(JSON.stringify(body)),
        check: () => undefined,
      }));
  }
}

/** A request of an open-loop schedule, by kind, as plain data. */
export interface PlannedArrival {
  /** Milliseconds after the start. */
  at: number;
  /** The kind: a key of the job's `requests`. */
  kind: string;
}

/** What the client is asked to do. */
export type ClientJob =
  /**
   * `measure`: a warm-up, then a closed loop of `options.concurrency` clients sending the
   * spec's requests (see `measure` in client.ts).
   */
  | {
      kind: 'closed';
      url: string;
      label: string;
      requests: RequestSpec;
      options: MeasureOptions;
      graceMs?: number;
      progressMs?: number;
    }
  /**
   * An open-loop schedule: first `warmup` requests of each kind one kind after the other
   * (closed loop, 4 at a time, not counted), then every arrival of `arrivals` at its time.
   */
  | {
      kind: 'schedule';
      url: string;
      label: string;
      requests: Record<string, RequestSpec>;
      arrivals: PlannedArrival[];
      warmup: number;
      maxInFlight?: number;
      graceMs?: number;
      progressMs?: number;
    };

/** The latencies of one kind of request, summarized (what crosses the process boundary). */
export interface KindResult {
  /** Requests sent (or due and refused at the in-flight bound). */
  issued: number;
  /** Requests answered (any status). */
  completed: number;
  /** Failed requests (see `Fired.errors`). */
  errors: number;
  /** The first few distinct error messages. */
  messages: string[];
  /** Correct answers. */
  count: number;
  /** Their median latency, ms. */
  p50: number;
  /** Their 99th percentile latency, ms. */
  p99: number;
  /** Their largest latency, ms. */
  max: number;
}

/** What a schedule job gave. */
export interface ScheduleResult {
  /** The job's label. */
  mode: string;
  /** Seconds from the first arrival time to the last answer. */
  seconds: number;
  /** Per kind. */
  byKind: Record<string, KindResult>;
}

/** Progress of one kind, as the client reports it while it runs. */
export interface KindProgress {
  /** Sent so far. */
  issued: number;
  /** Answered so far. */
  completed: number;
  /** Failed so far. */
  errors: number;
  /** 99th percentile of the correct answers so far, ms (NaN before the first). */
  p99: number;
}

/** Messages from the client to the load script. */
export type ClientMessage =
  | {
      type: 'progress';
      label: string;
      phase: 'warm-up' | 'measured';
      elapsedSeconds: number;
      byKind: Record<string, KindProgress>;
    }
  | { type: 'result'; pid: number; result: ModeResult | ScheduleResult }
  | { type: 'error'; pid: number; message: string };

/** The summary of one kind's `Fired`. */
export function kindResult(fired: Fired): KindResult {
  const summary = summarize(fired.latencies);
  return {
    issued: fired.issued,
    completed: fired.completed,
    errors: fired.errors,
    messages: fired.messages,
    count: summary.count,
    p50: summary.p50,
    p99: summary.p99,
    max: summary.max,
  };
}

function progressOf(byKind: Record<string, Fired>): Record<string, KindProgress> {
  return Object.fromEntries(
    Object.entries(byKind).map(([kind, fired]) => [
      kind,
      {
        issued: fired.issued,
        completed: fired.completed,
        errors: fired.errors,
        p99: summarize(fired.latencies).p99,
      },
    ]),
  );
}

/**
 * Runs a job in this process, reporting progress through `report` every `progressMs`
 * (default 1000) while a phase runs.
 */
export async function runJob(
  job: ClientJob,
  report: (message: ClientMessage) => void,
): Promise<ModeResult | ScheduleResult> {
  const url = new URL(job.url);
  let phase: 'warm-up' | 'measured' = 'warm-up';
  let live: Record<string, Fired> = {};
  let phaseStart = performance.now();
  const tell = () =>
    report({
      type: 'progress',
      label: job.label,
      phase,
      elapsedSeconds: (performance.now() - phaseStart) / 1000,
      byKind: progressOf(live),
    });
  const enter = (next: 'warm-up' | 'measured', byKind: Record<string, Fired>) => {
    phase = next;
    live = byKind;
    phaseStart = performance.now();
    tell();
  };
  const timer = setInterval(tell, job.progressMs ?? 1000);
  try {
    if (job.kind === 'closed') {
      return await measure(
        job.label,
        url,
        requestsFor(job.requests),
        job.options,
        job.graceMs,
        (next, fired) => enter(next, { requests: fired }),
      );
    }
    const requests = Object.fromEntries(
      Object.entries(job.requests).map(([kind, spec]) => [kind, requestsFor(spec)]),
    );
    const agent = new Agent({ keepAlive: true, maxSockets: job.maxInFlight ?? 256 });
    try {
      const warming: Record<string, Fired> = {};
      enter('warm-up', warming);
      for (const [kind, list] of Object.entries(requests)) {
        if (job.warmup === 0) break;
        warming[kind] = emptyFired();
        const warm = await fire(
          url,
          agent,
          list,
          job.warmup,
          performance.now() + 60_000,
          Math.min(4, job.warmup),
          job.graceMs,
          warming[kind],
        );
        if (warm.errors === warm.issued) {
          throw new Error(
            `every warm-up request failed (${job.label}, ${kind}): ${warm.messages.join('; ')}`,
          );
        }
      }
      const counters: Record<string, number> = {};
      const arrivals: Arrival[] = job.arrivals.map(({ at, kind }) => {
        const list = requests[kind];
        if (list === undefined || list.length === 0) {
          throw new Error(`the schedule has a request of kind ${kind}, which the job lacks`);
        }
        const index = (counters[kind] = (counters[kind] ?? -1) + 1);
        return { at, kind, request: list[index % list.length]! };
      });
      const byKind: Record<string, Fired> = Object.fromEntries(
        Object.keys(requests).map((kind) => [kind, emptyFired()]),
      );
      enter('measured', byKind);
      const fired = await fireSchedule(url, agent, arrivals, {
        byKind,
        ...(job.maxInFlight === undefined ? {} : { maxInFlight: job.maxInFlight }),
        ...(job.graceMs === undefined ? {} : { graceMs: job.graceMs }),
      });
      return {
        mode: job.label,
        seconds: fired.seconds,
        byKind: Object.fromEntries(
          Object.entries(fired.byKind).map(([kind, counted]) => [kind, kindResult(counted)]),
        ),
      };
    } finally {
      agent.destroy();
    }
  } finally {
    clearInterval(timer);
  }
}

/** What `runClient` gives: the client's result, its pid, and this process's loop delay. */
export interface ClientOutcome<R> {
  /** The result the client sent. */
  result: R;
  /** The client process's id (not this one's). */
  pid: number;
  /**
   * This process's (the server's) largest event-loop delay while the client ran its measured
   * phase, ms.
   */
  loopDelayMaxMs: number;
  /**
   * When the client's measured phase began and when its result came (ms since the epoch): the
   * time in which a server in processes of its own is asked for its loop delay.
   */
  measuredFrom: number;
  /** See `measuredFrom`. */
  measuredTo: number;
}

/** Options of `runClient`. */
export interface RunClientOptions {
  /** Called with each progress report, in this process. */
  onProgress?: (message: Extract<ClientMessage, { type: 'progress' }>) => void;
}

/** Node flags for the client: the TypeScript loader (tsx) and the in-repo source condition. */
function clientExecArgv(): string[] {
  const loader = createRequire(import.meta.url).resolve('tsx');
  return ['--conditions=@cuda-tasks/source', '--import', pathToFileURL(loader).href];
}

/**
 * Forks the load client (this module), runs `job` there and resolves with its result, while
 * measuring the largest event-loop delay of this process (the server's) during the measured
 * phase. Rejects with the client's error, or when it exits without a result.
 * @example
 * const { result, loopDelayMaxMs } = await runClient(job, { onProgress: console.log });
 */
export function runClient<R extends ModeResult | ScheduleResult>(
  job: ClientJob,
  options: RunClientOptions = {},
): Promise<ClientOutcome<R>> {
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  const child = fork(fileURLToPath(import.meta.url), [], {
    execArgv: clientExecArgv(),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    serialization: 'json',
  });
  let measuring = false;
  let measuredFrom = Number.NaN;
  return new Promise<ClientOutcome<R>>((resolve, reject) => {
    let settled = false;
    const settle = (action: () => void) => {
      if (settled) return;
      settled = true;
      histogram.disable();
      action();
    };
    child.on('message', (message: ClientMessage) => {
      if (message.type === 'progress') {
        // The warm-up's delays do not count: measure from the measured phase on.
        if (message.phase === 'measured' && !measuring) {
          measuring = true;
          measuredFrom = Date.now();
          histogram.reset();
        }
        options.onProgress?.(message);
      } else if (message.type === 'result') {
        const loopDelayMaxMs = histogram.max / 1e6;
        const measuredTo = Date.now();
        settle(() =>
          resolve({
            result: message.result as R,
            pid: message.pid,
            loopDelayMaxMs,
            measuredFrom: Number.isNaN(measuredFrom) ? measuredTo : measuredFrom,
            measuredTo,
          }),
        );
      } else {
        settle(() => reject(new Error(message.message)));
      }
    });
    child.on('error', (error) => settle(() => reject(error)));
    child.on('exit', (code, signal) =>
      settle(() =>
        reject(new Error(`the load client exited (${signal ?? `code ${code}`}) without a result`)),
      ),
    );
    child.send({ type: 'run', job });
  });
}

if (isEntryPoint(import.meta.url) && process.send !== undefined) {
  const send = (message: ClientMessage, then?: () => void) =>
    process.send!(message, undefined, {}, then);
  process.once('message', (message: { type: 'run'; job: ClientJob }) => {
    // The last message closes the channel once it is out, and the client exits.
    const last = (final: ClientMessage) => send(final, () => process.disconnect());
    runJob(message.job, send).then(
      (result) => last({ type: 'result', pid: process.pid, result }),
      (error: unknown) =>
        last({
          type: 'error',
          pid: process.pid,
          message: error instanceof Error ? error.message : String(error),
        }),
    );
  });
}
