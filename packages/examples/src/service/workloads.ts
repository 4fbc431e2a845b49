/**
 * The load script's GPU-bound workloads, where a stream per request should pay:
 *
 * - head-of-line: a steady open-loop stream of small `POST /solve-random` requests (n = 256: a
 *   few hundred microseconds of GPU work) while large ones (n = 4096: milliseconds to tens of
 *   milliseconds) arrive now and then. On one shared stream a small request queues behind a
 *   large one; on its own stream it runs beside it. Reported: the small requests' p50/p99.
 * - search: `POST /search` against embeddings every request reads (search.ts), closed loop.
 *   Reported: throughput and p99.
 *
 * Pure parts here (the schedule, the tables, the verdicts); load.ts runs them.
 */
import type { ModeResult } from './client.js';
import { randomSource } from './client.js';
import type { KindResult, PlannedArrival, ScheduleResult } from './client-process.js';
import { formatNumber, formatTable } from './statistics.js';

/** The head-of-line workload's shape. */
export interface HeadOfLinePlan {
  /** Seconds of arrivals. */
  seconds: number;
  /** Small requests per second (Poisson arrivals). */
  smallRate: number;
  /** A large request every this many milliseconds (the first at half of it). */
  largeEveryMs: number;
  /** Seed of the arrival times. */
  seed: number;
}

/**
 * The arrivals of the head-of-line workload, in time order: small requests as a Poisson
 * process of `smallRate` per second (exponential gaps from a seeded generator), large ones
 * every `largeEveryMs` starting at `largeEveryMs / 2`, all within `seconds`.
 * @example headOfLineSchedule({ seconds: 10, smallRate: 200, largeEveryMs: 250, seed: 1 });
 */
export function headOfLineSchedule(plan: HeadOfLinePlan): PlannedArrival[] {
  const end = plan.seconds * 1000;
  const arrivals: PlannedArrival[] = [];
  const random = randomSource(plan.seed);
  if (plan.smallRate > 0) {
    const meanGap = 1000 / plan.smallRate;
    for (let at = -Math.log(1 - random()) * meanGap; at < end; ) {
      arrivals.push({ at, kind: 'small' });
      at += -Math.log(1 - random()) * meanGap;
    }
  }
  if (plan.largeEveryMs > 0) {
    for (let at = plan.largeEveryMs / 2; at < end; at += plan.largeEveryMs) {
      arrivals.push({ at, kind: 'large' });
    }
  }
  return arrivals.sort((x, y) => x.at - y.at);
}

/** One of the head-of-line modes: how the server runs each request. */
export interface HeadOfLineMode {
  /** The mode's key (`shared`, `task`, `priority`). */
  mode: string;
  /** Its row label. */
  label: string;
  /** Why it cannot run, if so (the row is then listed with the reason). */
  unavailable?: string;
}

/** The rows of the head-of-line table, in order. */
export const HEAD_OF_LINE_MODES: readonly HeadOfLineMode[] = [
  { mode: 'shared', label: 'one shared stream' },
  { mode: 'task', label: 'stream per request' },
  { mode: 'priority', label: 'stream per request, small at high priority' },
];

/** ratio <= this: a stream per request cuts the small requests' p99 by a wide margin. */
export const HEAD_OF_LINE_P99_TARGET = 0.25;

/** A head-of-line row: the mode's client result and the server's loop delay. */
export interface HeadOfLineRow {
  /** The mode. */
  mode: HeadOfLineMode;
  /** What the client measured (absent for a mode that did not run). */
  result?: ScheduleResult;
  /** The server process's largest event-loop delay during the measured run, ms. */
  loopDelayMaxMs?: number;
}

const small = (row: HeadOfLineRow): KindResult | undefined => row.result?.byKind.small;
const large = (row: HeadOfLineRow): KindResult | undefined => row.result?.byKind.large;

/**
 * The head-of-line table: per mode the small requests' count, p50, p99 and max, the large
 * ones' count and p50, the errors of both, and the server's loop delay; then stream per request
 * against the shared stream on the small p99, with the target's verdict.
 */
export function headOfLineReport(rows: readonly HeadOfLineRow[]): string {
  const cell = (value: number | undefined, digits = 2) =>
    value === undefined ? '-' : formatNumber(value, digits);
  const table = formatTable(
    [
      'mode',
      'small',
      'p50 ms',
      'p99 ms',
      'max ms',
      'large',
      'large p50 ms',
      'errors',
      'loop delay max ms',
    ],
    rows.map((row) => {
      if (row.result === undefined) {
        return [row.mode.label, `(${row.mode.unavailable ?? 'not run'})`];
      }
      const s = small(row);
      const l = large(row);
      return [
        row.mode.label,
        String(s?.count ?? 0),
        cell(s?.p50),
        cell(s?.p99),
        cell(s?.max),
        String(l?.count ?? 0),
        cell(l?.p50),
        String((s?.errors ?? 0) + (l?.errors ?? 0)),
        cell(row.loopDelayMaxMs),
      ];
    }),
  );
  const p99Of = (mode: string) => {
    const row = rows.find((candidate) => candidate.mode.mode === mode);
    return row === undefined ? undefined : small(row)?.p99;
  };
  const sharedP99 = p99Of('shared');
  const taskP99 = p99Of('task');
  const priorityP99 = p99Of('priority');
  if (sharedP99 === undefined || taskP99 === undefined || !(sharedP99 > 0)) return table;
  const ratio = taskP99 / sharedP99;
  const lines = [
    table,
    '',
    `small requests' p99, stream per request / one shared stream: x${formatNumber(ratio, 2)} (target <= ${HEAD_OF_LINE_P99_TARGET}: ${ratio <= HEAD_OF_LINE_P99_TARGET ? 'PASS' : 'FAIL'})`,
  ];
  if (priorityP99 !== undefined && taskP99 > 0) {
    lines.push(
      `small requests' p99, small at high priority / stream per request: x${formatNumber(priorityP99 / taskP99, 2)}; / one shared stream: x${formatNumber(priorityP99 / sharedP99, 2)}`,
    );
  }
  return lines.join('\n');
}

/** A search row: the mode's result, with the server's loop delay in `loopDelayMax`. */
export interface SearchRow {
  /** Row label. */
  label: string;
  /** What the client measured; `loopDelayMax` is the server's. */
  result: ModeResult;
}

/**
 * A closed-loop run's table, a row per labelled result: requests, errors, req/s, p50, p99,
 * max and the server's largest event-loop delay.
 * @example resultsTable([{ label: 'one shared stream', result }]);
 */
export function resultsTable(rows: readonly SearchRow[]): string {
  return formatTable(
    ['mode', 'requests', 'errors', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'loop delay max ms'],
    rows.map(({ label, result }) => [
      label,
      String(result.completed),
      String(result.errors),
      formatNumber(result.requestsPerSecond),
      formatNumber(result.p50, 2),
      formatNumber(result.p99, 2),
      formatNumber(result.max, 2),
      formatNumber(result.loopDelayMax, 2),
    ]),
  );
}

/**
 * Each measured round's comparison of a stream per request with one shared stream (the
 * throughput and p99 ratios, round by round), or undefined when a round lacks either mode:
 * how steady the pooled ratios are.
 * @example roundsLine(rounds); // 'per round: throughput x1.41, x1.38, x1.45; p99 x0.71, ...'
 */
export function roundsLine(rounds: readonly (readonly ModeResult[])[]): string | undefined {
  const throughputs: string[] = [];
  const p99s: string[] = [];
  for (const round of rounds) {
    const task = round.find((result) => result.mode === 'task');
    const shared = round.find((result) => result.mode === 'shared');
    if (task === undefined || shared === undefined) return undefined;
    throughputs.push(`x${formatNumber(task.requestsPerSecond / shared.requestsPerSecond, 2)}`);
    p99s.push(`x${formatNumber(task.p99 / shared.p99, 2)}`);
  }
  if (throughputs.length === 0) return undefined;
  return `per round (stream per request / one shared stream): throughput ${throughputs.join(', ')}; p99 ${p99s.join(', ')}`;
}

/**
 * The shared-data table (requests, errors, req/s, p50, p99, max, loop delay per mode; each
 * mode's rounds pooled) and the verdict: a stream per request must give at least the shared
 * stream's throughput and a lower p99. With `rounds`, a line of the ratios round by round.
 */
export function searchReport(
  rows: readonly SearchRow[],
  rounds: readonly (readonly ModeResult[])[] = [],
): string {
  const table = resultsTable(rows);
  const shared = rows.find((row) => row.result.mode === 'shared')?.result;
  const task = rows.find((row) => row.result.mode === 'task')?.result;
  if (shared === undefined || task === undefined || !(shared.requestsPerSecond > 0)) return table;
  const throughputRatio = task.requestsPerSecond / shared.requestsPerSecond;
  const p99Ratio = task.p99 / shared.p99;
  const pass = throughputRatio >= 1 && p99Ratio < 1;
  const perRound = roundsLine(rounds);
  return `${table}\n\nstream per request / one shared stream: throughput x${formatNumber(throughputRatio, 2)}, p99 x${formatNumber(p99Ratio, 2)} (target: throughput >= x1 and p99 < x1: ${pass ? 'PASS' : 'FAIL'})${perRound === undefined ? '' : `\n${perRound}`}`;
}
