/**
 * The server's event-loop delay, seen from the load script when the server runs in processes
 * of its own (`load --processes N`): each server process started with
 * `CUDA_TASKS_REPORT_LOOP_DELAY=1` keeps its largest delay per 100 ms (`LoopDelayMonitor`) and
 * writes them as one `loop-delay {...}` line to stderr when it exits; the load script reads
 * those lines from the service's stderr (`parseLoopDelayLines`, which treats them as untrusted
 * input) and takes the largest delay inside each run's measured time (`loopDelayWithin`).
 */
import { type IntervalHistogram, monitorEventLoopDelay } from 'node:perf_hooks';

/** The environment variable that turns the report on in a server process (the value `1`). */
export const LOOP_DELAY_VARIABLE = 'CUDA_TASKS_REPORT_LOOP_DELAY';

/** The prefix of the report's line. */
const LINE_PREFIX = 'loop-delay ';

/** The most buckets a report keeps (the latest ones) and a parsed one may hold. */
export const MAX_LOOP_DELAY_BUCKETS = 36_000;

/** One process's largest event-loop delays, per bucket of time. */
export interface LoopDelayReport {
  /** The process's id. */
  pid: number;
  /** The bucket's length, ms. */
  bucketMs: number;
  /** When each bucket ended (ms since the epoch, `Date.now()`), in order. */
  at: number[];
  /** The largest delay within each bucket, ms. */
  maxMs: number[];
}

/**
 * Keeps this process's largest event-loop delay per `bucketMs` (default 100), the latest
 * `MAX_LOOP_DELAY_BUCKETS` of them. Its timer does not keep the process alive.
 *
 * Each bucket has its own `monitorEventLoopDelay` histogram, kept on through the next bucket
 * too, and a bucket's figure is the largest of the two histograms running then: a histogram
 * records a stall at its first tick after it, and a histogram reset (or started) between the
 * stall and that tick records nothing, so one that runs on across the boundary is what catches
 * a stall that ends next to it. A stall may so count in two neighbouring buckets, never in none.
 * @example const monitor = new LoopDelayMonitor(); monitor.start(); ... monitor.report();
 */
export class LoopDelayMonitor {
  readonly #bucketMs: number;
  readonly #at: number[] = [];
  readonly #maxMs: number[] = [];
  #current: IntervalHistogram | undefined;
  #previous: IntervalHistogram | undefined;
  #timer: NodeJS.Timeout | undefined;

  constructor(bucketMs = 100) {
    if (!Number.isFinite(bucketMs) || bucketMs < 10) {
      throw new RangeError(`LoopDelayMonitor: bucketMs must be at least 10, got ${bucketMs}`);
    }
    this.#bucketMs = bucketMs;
  }

  /** Starts measuring (again). */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#current = histogram();
    this.#timer = setInterval(() => this.#close(), this.#bucketMs);
    this.#timer.unref();
  }

  /** Stops measuring; the bucket in progress is kept. */
  stop(): void {
    if (this.#timer === undefined) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#close();
    this.#previous?.disable();
    this.#current?.disable();
    this.#previous = undefined;
    this.#current = undefined;
  }

  /** What was measured so far (the bucket in progress not included). */
  report(): LoopDelayReport {
    return {
      pid: process.pid,
      bucketMs: this.#bucketMs,
      at: [...this.#at],
      maxMs: [...this.#maxMs],
    };
  }

  #close(): void {
    // A histogram without samples reports a max of 0.
    const current = this.#current!;
    const largest = Math.max(current.max, this.#previous?.max ?? 0);
    this.#at.push(Date.now());
    this.#maxMs.push(largest / 1e6);
    if (this.#at.length > MAX_LOOP_DELAY_BUCKETS) {
      this.#at.shift();
      this.#maxMs.shift();
    }
    this.#previous?.disable();
    this.#previous = current;
    this.#current = histogram();
  }
}

/** A histogram of this process's event-loop delay, at 1 ms resolution, measuring from now. */
function histogram(): IntervalHistogram {
  const made = monitorEventLoopDelay({ resolution: 1 });
  made.enable();
  return made;
}

/** The report's line (no newline). */
export function loopDelayLine(report: LoopDelayReport): string {
  return LINE_PREFIX + JSON.stringify(report);
}

/**
 * Starts a `LoopDelayMonitor` when `environment` asks for it (`CUDA_TASKS_REPORT_LOOP_DELAY=1`;
 * any other value is ignored) and writes its report to stderr when the process exits. Returns
 * the monitor, or undefined.
 */
export function reportLoopDelayOnExit(
  environment: NodeJS.ProcessEnv = process.env,
): LoopDelayMonitor | undefined {
  if (environment[LOOP_DELAY_VARIABLE] !== '1') return undefined;
  const monitor = new LoopDelayMonitor();
  monitor.start();
  process.once('exit', () => {
    monitor.stop();
    // stderr on a pipe or a file is written synchronously on Linux: the line is out before exit.
    process.stderr.write(`${loopDelayLine(monitor.report())}\n`);
  });
  return monitor;
}

/**
 * The JSON values of the lines of `text` that start with `prefix` (a report a process wrote to
 * its stderr); lines whose rest is not JSON are left out. The values are untrusted: check them.
 * @example prefixedJsonLines('x {"a":1}\nother', 'x '); // [{ a: 1 }]
 */
export function prefixedJsonLines(text: string, prefix: string): unknown[] {
  const values: unknown[] = [];
  for (const line of text.split('\n')) {
    if (!line.startsWith(prefix)) continue;
    try {
      values.push(JSON.parse(line.slice(prefix.length)));
    } catch {
      // Not a report: left out.
    }
  }
  return values;
}

/**
 * The reports in `text` (a service's stderr): each `loop-delay {...}` line that holds a
 * well-formed report (a positive integer pid, a bucket of 10 ms to 1 min, at most
 * `MAX_LOOP_DELAY_BUCKETS` finite, non-negative figures with times in order); other lines and
 * malformed reports are left out.
 * @example parseLoopDelayLines(service.stderr()).length; // one per server process
 */
export function parseLoopDelayLines(text: string): LoopDelayReport[] {
  const reports: LoopDelayReport[] = [];
  for (const value of prefixedJsonLines(text, LINE_PREFIX)) {
    const report = wellFormed(value);
    if (report !== undefined) reports.push(report);
  }
  return reports;
}

function wellFormed(value: unknown): LoopDelayReport | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const { pid, bucketMs, at, maxMs } = value as Record<string, unknown>;
  if (!Number.isSafeInteger(pid) || (pid as number) < 1) return undefined;
  if (typeof bucketMs !== 'number' || !(bucketMs >= 10 && bucketMs <= 60_000)) return undefined;
  if (!Array.isArray(at) || !Array.isArray(maxMs) || at.length !== maxMs.length) return undefined;
  if (at.length > MAX_LOOP_DELAY_BUCKETS) return undefined;
  for (let i = 0; i < at.length; i++) {
    const t = at[i] as unknown;
    const m = maxMs[i] as unknown;
    if (typeof t !== 'number' || !Number.isFinite(t) || (i > 0 && t < (at[i - 1] as number))) {
      return undefined;
    }
    if (typeof m !== 'number' || !Number.isFinite(m) || m < 0) return undefined;
  }
  return { pid: pid as number, bucketMs, at: at as number[], maxMs: maxMs as number[] };
}

/**
 * The largest delay any of `reports` saw in the buckets that overlap [`from`, `to`] (ms since
 * the epoch), or NaN when none does (nothing measured then).
 * @example loopDelayWithin(parseLoopDelayLines(stderr), run.from, run.to);
 */
export function loopDelayWithin(
  reports: readonly LoopDelayReport[],
  from: number,
  to: number,
): number {
  let largest = Number.NaN;
  for (const report of reports) {
    for (let i = 0; i < report.at.length; i++) {
      const end = report.at[i]!;
      // The bucket ending at `end` covers (end - bucketMs, end].
      if (end <= from || end - report.bucketMs >= to) continue;
      largest = Number.isNaN(largest) ? report.maxMs[i]! : Math.max(largest, report.maxMs[i]!);
    }
  }
  return largest;
}
