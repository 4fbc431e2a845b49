/**
 * The concurrency scaling report: turns the JSON lines of ours (src/scaling.ts), C
 * (c/scaling.cu) and the Python peers (python/scaling.py) into jobs/s and speedup over K = 1
 * per system, shape and K; checks the issue's targets; formats the table and the JSON. Pure
 * functions (the chart is in scaling-chart.ts): the report can be rebuilt from saved lines
 * anywhere.
 */
import { median } from './harness.js';
import { formatRatio } from './report.js';
import {
  INTERLEAVE_ROUNDS,
  type ScalingConfig,
  SHAPE_NAMES,
  SHAPES,
  type ShapeName,
  samplesFor,
} from './scaling-config.js';

/** Who ran the jobs. */
export type ScalingSystem =
  | 'ours'
  | 'ours_workers'
  | 'ours_engine'
  | 'ours_graph'
  | 'ours_floor'
  | 'ours_floor_workers'
  | 'c_threads'
  | 'c_polling'
  | 'cupy'
  | 'torch';

/** Every system in report order, with its label and chart color. */
export const SCALING_SYSTEMS: readonly {
  key: ScalingSystem;
  label: string;
  color: string;
}[] = [
  { key: 'ours', label: 'ours (K tasks)', color: '#4e79a7' },
  // The latency-bound and mixed shapes: each job a task on one of W worker threads
  // (WorkerPool); `systemLabel` puts in W where the run says it.
  { key: 'ours_workers', label: 'ours, worker tasks (W threads)', color: '#59a14f' },
  // The latency-bound and mixed shapes: ours' jobs (K tasks on the main thread) with the issue
  // engine started, W issuer threads making the launches; `systemLabel` puts in W.
  { key: 'ours_engine', label: 'ours, issue engine (W issuers)', color: '#9c755f' },
  // The latency-bound shape only: its steps captured once per task and replayed.
  { key: 'ours_graph', label: 'ours, graph replays', color: '#76b7b2' },
  // The latency-bound and mixed shapes: C's calls as bare koffi calls from plain async
  // functions, no runtime (the floor under ours from JavaScript).
  { key: 'ours_floor', label: 'Node floor, bare koffi', color: '#b07aa1' },
  // The latency-bound and mixed shapes: the same bare koffi jobs on W worker threads of their
  // own (the floor under ours' worker tasks); `systemLabel` puts in W.
  { key: 'ours_floor_workers', label: 'Node floor, bare koffi (W threads)', color: '#ff9da7' },
  { key: 'c_threads', label: 'C, K threads', color: '#555555' },
  { key: 'c_polling', label: 'C, one thread polling', color: '#a0a0a0' },
  { key: 'cupy', label: 'CuPy, K threads', color: '#f28e2b' },
  { key: 'torch', label: 'PyTorch, K threads', color: '#e15759' },
];

const SYSTEM_KEYS = new Set<string>(SCALING_SYSTEMS.map((system) => system.key));

/**
 * The worker threads of the worker-tasks variant: from its `_meta` line (`workers`), else from
 * the settings; undefined when neither says.
 * @example workersOf(collected.meta, config); // 8
 */
export function workersOf(
  meta: ScalingCollected['meta'] | undefined,
  config?: Pick<ScalingConfig, 'workers'>,
): number | undefined {
  const fromMeta = meta?.ours_workers?.workers;
  if (Number.isSafeInteger(fromMeta) && (fromMeta as number) > 0) return fromMeta as number;
  const fromConfig = config?.workers;
  return Number.isSafeInteger(fromConfig) && (fromConfig as number) > 0 ? fromConfig : undefined;
}

/**
 * The issuer threads of the issue-engine variant: from its `_meta` line (`issuers`), else from
 * the settings; undefined when neither says.
 * @example issuersOf(collected.meta, config); // 8
 */
export function issuersOf(
  meta: ScalingCollected['meta'] | undefined,
  config?: Pick<ScalingConfig, 'issuers'>,
): number | undefined {
  const fromMeta = meta?.ours_engine?.issuers;
  if (Number.isSafeInteger(fromMeta) && (fromMeta as number) > 0) return fromMeta as number;
  const fromConfig = config?.issuers;
  return Number.isSafeInteger(fromConfig) && (fromConfig as number) > 0 ? fromConfig : undefined;
}

/**
 * A system's label, with the worker threads (and the issuer threads) put in where known.
 * @example systemLabel('ours_workers', 8); // 'ours, worker tasks (8 threads)'
 * @example systemLabel('ours_engine', undefined, 4); // 'ours, issue engine (4 issuers)'
 */
export function systemLabel(system: ScalingSystem, workers?: number, issuers?: number): string {
  let label = SCALING_SYSTEMS.find((entry) => entry.key === system)?.label ?? system;
  if (workers !== undefined) {
    label = label.replace('(W threads)', `(${workers} thread${workers === 1 ? '' : 's'})`);
  }
  if (issuers !== undefined) {
    label = label.replace('(W issuers)', `(${issuers} issuer${issuers === 1 ? '' : 's'})`);
  }
  return label;
}

/** One result line: the wall seconds of every timed batch of (system, shape, K, mode). */
export interface ScalingLine {
  /** Always `scaling`. */
  name: 'scaling';
  /** Who ran it. */
  system: ScalingSystem;
  /** The job shape. */
  shape: ShapeName;
  /** Jobs started together (1 for a serial batch). */
  k: number;
  /** `concurrent`: K jobs together; `serial`: `jobs` jobs one after another. */
  mode: 'concurrent' | 'serial';
  /** Jobs per batch. */
  jobs: number;
  /** Wall seconds of each timed batch. */
  seconds: number[];
  /**
   * Variants that take turns in one process (ours, its graph variant, the floor): how many of
   * `seconds` each turn timed, in order (they add up to its length).
   */
  turns?: number[];
  /** Ours: the event loop's largest delay over the batches (warm-ups included), ms. */
  loop_delay_max_ms?: number;
}

/** The lines of one or more programs, sorted out. */
export interface ScalingCollected {
  /** The result lines (a later line for the same system, shape, K and mode replaces one). */
  lines: ScalingLine[];
  /** Systems (or programs) that did not run, and why. */
  skipped: { system: string; reason: string }[];
  /** `_meta` lines by system. */
  meta: Record<string, Record<string, unknown>>;
}

const isPositiveNumber = (value: unknown): value is number =>
  typeof value === 'number' && Number.isFinite(value) && value > 0;

/**
 * Parses JSON lines: `scaling` result lines (validated: a known system and shape, a positive
 * K and job count, positive seconds), `_skip` and `_meta` lines with a `system`. Everything
 * else (other benchmarks' lines, text) is ignored.
 */
export function parseScalingLines(text: string): ScalingCollected {
  const collected: ScalingCollected = { lines: [], skipped: [], meta: {} };
  const index = new Map<string, number>();
  for (const raw of text.split('\n')) {
    const trimmed = raw.trim();
    if (!trimmed.startsWith('{')) continue;
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(trimmed) as Record<string, unknown>;
    } catch {
      continue;
    }
    if (typeof line !== 'object' || line === null) continue;
    if (line.name === '_skip' && typeof line.system === 'string') {
      collected.skipped.push({ system: line.system, reason: String(line.reason ?? 'skipped') });
      continue;
    }
    if (line.name === '_meta' && typeof line.system === 'string') {
      const { name: _name, system, ...rest } = line;
      collected.meta[system as string] = rest;
      continue;
    }
    if (line.name !== 'scaling') continue;
    const { system, shape, k, mode, jobs, seconds } = line;
    if (
      typeof system !== 'string' ||
      !SYSTEM_KEYS.has(system) ||
      !SHAPE_NAMES.includes(shape as ShapeName) ||
      !(mode === 'concurrent' || mode === 'serial') ||
      !Number.isSafeInteger(k) ||
      (k as number) < 1 ||
      !Number.isSafeInteger(jobs) ||
      (jobs as number) < 1 ||
      !Array.isArray(seconds) ||
      seconds.length === 0 ||
      !seconds.every(isPositiveNumber)
    ) {
      continue;
    }
    const key = `${system}\u0000${shape}\u0000${k}\u0000${mode}`;
    const parsed = line as unknown as ScalingLine;
    const at = index.get(key);
    if (at === undefined) {
      index.set(key, collected.lines.length);
      collected.lines.push(parsed);
    } else {
      collected.lines[at] = parsed;
    }
  }
  return collected;
}

/** One measured cell: a system at a shape and K (or its serial batch). */
export interface ScalingCell {
  /** Jobs per second: jobs per batch / the median batch time. */
  jobsPerSecond: number;
  /** The median batch time, s. */
  medianSeconds: number;
  /** Timed batches. */
  samples: number;
  /** jobs/s over the same system's jobs/s at K = 1 (concurrent cells only, when K = 1 ran). */
  speedup?: number;
  /** Ours: the event loop's largest delay over the batches, ms. */
  loopDelayMaxMs?: number;
  /** Variants that took turns: the median batch time of each turn, s, in order. */
  turnMedians?: number[];
}

/** One K of one shape. */
export interface ScalingRow {
  /** Jobs started together. */
  k: number;
  /** By system (absent where it did not run). */
  cells: Partial<Record<ScalingSystem, ScalingCell>>;
}

/** One shape's results. */
export interface ScalingShapeResult {
  /** The shape. */
  shape: ShapeName;
  /** One row per K, ascending. */
  rows: ScalingRow[];
  /** The serial batch by system. */
  serial: Partial<Record<ScalingSystem, ScalingCell>>;
}

/**
 * The median of each turn's batches, when `turns` splits `seconds` into turns of at least one
 * batch each; undefined otherwise.
 */
function turnMediansOf(line: ScalingLine): number[] | undefined {
  const turns = line.turns;
  if (!Array.isArray(turns) || turns.length === 0) return undefined;
  if (!turns.every((count) => Number.isSafeInteger(count) && count > 0)) return undefined;
  if (turns.reduce((sum, count) => sum + count, 0) !== line.seconds.length) return undefined;
  const medians: number[] = [];
  let at = 0;
  for (const count of turns) {
    medians.push(median(line.seconds.slice(at, at + count)));
    at += count;
  }
  return medians;
}

function cellOf(line: ScalingLine): ScalingCell {
  const medianSeconds = median(line.seconds);
  const turnMedians = turnMediansOf(line);
  return {
    jobsPerSecond: line.jobs / medianSeconds,
    medianSeconds,
    samples: line.seconds.length,
    ...(typeof line.loop_delay_max_ms === 'number'
      ? { loopDelayMaxMs: line.loop_delay_max_ms }
      : {}),
    ...(turnMedians === undefined ? {} : { turnMedians }),
  };
}

/**
 * `a`'s jobs/s over `b`'s, for two cells of one row (the same jobs per batch). When both took
 * the same number of turns in one process, the median over the rounds of the ratio within each
 * round: a step in the machine's speed then shifts one round's ratio, not the whole figure
 * (the pooled medians can fall on opposite sides of such a step). Otherwise the ratio of the
 * cells' medians.
 * @example turnRatio(row.cells.ours!, row.cells.ours_floor!); // ours over the floor
 */
export function turnRatio(a: ScalingCell, b: ScalingCell): number {
  const ta = a.turnMedians;
  const tb = b.turnMedians;
  if (ta === undefined || tb === undefined || ta.length !== tb.length) {
    return a.jobsPerSecond / b.jobsPerSecond;
  }
  return median(ta.map((seconds, round) => tb[round]! / seconds));
}

/**
 * Per shape (in report order, only those with results): per K the median batch time of each
 * system as jobs/s, and the speedup over that system's K = 1; the serial batches apart.
 */
export function buildScaling(lines: readonly ScalingLine[]): ScalingShapeResult[] {
  const results: ScalingShapeResult[] = [];
  for (const shape of SHAPE_NAMES) {
    const ofShape = lines.filter((line) => line.shape === shape);
    if (ofShape.length === 0) continue;
    const serial: Partial<Record<ScalingSystem, ScalingCell>> = {};
    const byK = new Map<number, ScalingRow>();
    for (const line of ofShape) {
      if (line.mode === 'serial') {
        serial[line.system] = cellOf(line);
        continue;
      }
      let row = byK.get(line.k);
      if (row === undefined) byK.set(line.k, (row = { k: line.k, cells: {} }));
      row.cells[line.system] = cellOf(line);
    }
    const rows = [...byK.values()].sort((x, y) => x.k - y.k);
    const base = byK.get(1);
    for (const row of rows) {
      for (const [system, cell] of Object.entries(row.cells) as [ScalingSystem, ScalingCell][]) {
        const one = base?.cells[system];
        if (one !== undefined) cell.speedup = cell.jobsPerSecond / one.jobsPerSecond;
      }
    }
    results.push({ shape, rows, serial });
  }
  return results;
}

/** One of the issues' targets, checked on one shape. */
export interface ScalingTarget {
  /** The shape it is checked on. */
  shape: ShapeName;
  /**
   * On ours (K tasks): `vs_c` (>= 0.9x the better C at every K) and `vs_peers` (ahead of CuPy
   * and PyTorch at every K >= 4). On ours' worker tasks (issue 34): `workers_vs_c` (>= 1.0x the
   * better C at every K >= 8, >= 0.9x at K = 4) and `workers_vs_peers` (ahead of CuPy and
   * PyTorch at every K). On ours with the issue engine (issue 34): `engine_vs_c` and
   * `engine_vs_peers`, the same bars as the worker tasks'.
   */
  name:
    | 'vs_c'
    | 'vs_peers'
    | 'workers_vs_c'
    | 'workers_vs_peers'
    | 'engine_vs_c'
    | 'engine_vs_peers';
  /** The system checked (`ours`, `ours_workers` or `ours_engine`). */
  system: ScalingSystem;
  /** What is checked, in words. */
  description: string;
  /** Whether it is met at every K checked (absent when nothing could be compared). */
  met?: boolean;
  /**
   * The K furthest below (or least above) its bar: there the ratio of the system checked over
   * the better other side, and, for a target whose bar depends on K, that bar.
   */
  worst?: { k: number; ratio: number; bar?: number };
  /** K values checked. */
  checked: number[];
  /**
   * `vs_c` and `workers_vs_c`, where their floor ran (`FLOOR_OF`: the same calls from
   * JavaScript with no runtime, on the main thread or on the worker tasks' W threads), at the
   * worst K: the floor over the better C variant, and the system checked over the floor. A
   * floor below the bar says the target lies below what any JavaScript caller of the driver
   * reaches in this process from as many threads.
   */
  floor?: { ratio: number; oursOverFloor: number };
}

/** ours >= this fraction of the better C variant's jobs/s, at every K. */
export const VERSUS_C_TARGET = 0.9;
/** ours ahead of both Python peers from this K on. */
export const VERSUS_PEERS_FROM_K = 4;
/**
 * Ours' worker tasks against the better C variant (issue 34): from each `fromK` on (up to the
 * next one), at least `ratio` of C's jobs/s; below the first `fromK`, not checked.
 */
export const WORKERS_VERSUS_C_BARS: readonly { fromK: number; ratio: number }[] = [
  { fromK: 4, ratio: 0.9 },
  { fromK: 8, ratio: 1 },
];
/**
 * The floor under the system a target checks: the Node floor on the main thread under ours (K
 * tasks), the Node floor on W worker threads under ours' worker tasks.
 */
export const FLOOR_OF: Partial<Record<ScalingTarget['name'], ScalingSystem>> = {
  vs_c: 'ours_floor',
  workers_vs_c: 'ours_floor_workers',
};

/** The shapes the targets apply to (the control fills the GPU: no target). */
export const TARGET_SHAPES: readonly ShapeName[] = ['latency', 'mixed'];

/** The bar of `bars` at `k` (the last one whose `fromK` is at most `k`); undefined below all. */
export function barAt(
  bars: readonly { fromK: number; ratio: number }[],
  k: number,
): number | undefined {
  let bar: number | undefined;
  for (const entry of bars) if (k >= entry.fromK) bar = entry.ratio;
  return bar;
}

/** How one target is checked. */
interface TargetCheck {
  name: ScalingTarget['name'];
  system: ScalingSystem;
  description: string;
  /** The systems compared against (the better one at each K). */
  others: readonly ScalingSystem[];
  /** The ratio needed at K (undefined: K is not checked). */
  bars: readonly { fromK: number; ratio: number }[];
  /** Strictly above the bar (ahead of), or at least the bar. */
  strict: boolean;
}

const TARGET_CHECKS: readonly TargetCheck[] = [
  {
    name: 'vs_c',
    system: 'ours',
    description: `ours >= ${VERSUS_C_TARGET}x the better C variant at every K`,
    others: ['c_threads', 'c_polling'],
    bars: [{ fromK: 1, ratio: VERSUS_C_TARGET }],
    strict: false,
  },
  {
    name: 'vs_peers',
    system: 'ours',
    description: `ours ahead of CuPy and PyTorch at every K >= ${VERSUS_PEERS_FROM_K}`,
    others: ['cupy', 'torch'],
    bars: [{ fromK: VERSUS_PEERS_FROM_K, ratio: 1 }],
    strict: true,
  },
  {
    name: 'workers_vs_c',
    system: 'ours_workers',
    description:
      'ours, worker tasks >= 1.0x the better C variant at every K >= 8 and >= 0.9x at K = 4',
    others: ['c_threads', 'c_polling'],
    bars: WORKERS_VERSUS_C_BARS,
    strict: false,
  },
  {
    name: 'workers_vs_peers',
    system: 'ours_workers',
    description: 'ours, worker tasks ahead of CuPy and PyTorch at every K',
    others: ['cupy', 'torch'],
    bars: [{ fromK: 1, ratio: 1 }],
    strict: true,
  },
  {
    name: 'engine_vs_c',
    system: 'ours_engine',
    description:
      'ours, issue engine >= 1.0x the better C variant at every K >= 8 and >= 0.9x at K = 4',
    others: ['c_threads', 'c_polling'],
    bars: WORKERS_VERSUS_C_BARS,
    strict: false,
  },
  {
    name: 'engine_vs_peers',
    system: 'ours_engine',
    description: 'ours, issue engine ahead of CuPy and PyTorch at every K',
    others: ['cupy', 'torch'],
    bars: [{ fromK: 1, ratio: 1 }],
    strict: true,
  },
];

/**
 * The issues' targets on the latency-bound and mixed shapes. Ours (K tasks): >= 0.9x the better
 * C variant's throughput at every K, and ahead of CuPy and of PyTorch at every K >= 4. Ours'
 * worker tasks (issue 34): >= 1.0x the better C variant at every K >= 8 and >= 0.9x at K = 4
 * (K = 4 to 7), and ahead of CuPy and PyTorch at every K; ours with the issue engine, the same
 * (issue 34). A K where the system checked or every
 * compared system is missing is not checked; a peer that did not run is left out.
 */
export function scalingTargets(results: readonly ScalingShapeResult[]): ScalingTarget[] {
  const targets: ScalingTarget[] = [];
  for (const result of results) {
    if (!TARGET_SHAPES.includes(result.shape)) continue;
    for (const spec of TARGET_CHECKS) {
      const target: ScalingTarget = {
        shape: result.shape,
        name: spec.name,
        system: spec.system,
        description: spec.description,
        checked: [],
      };
      const variesWithK = new Set(spec.bars.map((bar) => bar.ratio)).size > 1;
      let worstMargin = Infinity;
      for (const row of result.rows) {
        const subject = row.cells[spec.system];
        const bar = barAt(spec.bars, row.k);
        if (bar === undefined || subject === undefined) continue;
        const rates = spec.others
          .map((system) => row.cells[system]?.jobsPerSecond)
          .filter((rate): rate is number => rate !== undefined);
        if (rates.length === 0) continue;
        // Against the better of the others: ahead of both is ahead of the better one.
        const ratio = subject.jobsPerSecond / Math.max(...rates);
        target.checked.push(row.k);
        const margin = ratio / bar;
        if (margin < worstMargin) {
          worstMargin = margin;
          target.worst = variesWithK ? { k: row.k, ratio, bar } : { k: row.k, ratio };
        }
      }
      if (target.worst !== undefined) {
        const bar = barAt(spec.bars, target.worst.k)!;
        target.met = spec.strict ? target.worst.ratio > bar : target.worst.ratio >= bar;
        const row = result.rows.find((candidate) => candidate.k === target.worst!.k)!;
        const floorSystem = FLOOR_OF[spec.name];
        const floor = floorSystem === undefined ? undefined : row.cells[floorSystem];
        if (floor !== undefined) {
          const best = Math.max(
            ...spec.others
              .map((system) => row.cells[system]?.jobsPerSecond)
              .filter((rate): rate is number => rate !== undefined),
          );
          target.floor = {
            ratio: floor.jobsPerSecond / best,
            oursOverFloor: turnRatio(row.cells[spec.system]!, floor),
          };
        }
      }
      targets.push(target);
    }
  }
  return targets;
}

/** Jobs per second: thousands separated, 3 significant digits below 100. */
export function formatRate(value: number | undefined): string {
  if (value === undefined || !Number.isFinite(value)) return '-';
  if (value >= 100) return Math.round(value).toLocaleString('en-US');
  return value.toPrecision(3);
}

/** Issue 34: the issue engine never holds the event loop above this long, ms. */
export const ENGINE_LOOP_DELAY_TARGET_MS = 5;

/** Where a system's event loop was held longest (`loopDelayOf`). */
export interface LoopDelayWorst {
  /** The largest delay over every batch of the system (all shapes, K and serial), ms. */
  maxMs: number;
  /** The shape where it happened. */
  shape: ShapeName;
  /** The K where it happened; `serial` for the serial batch. */
  k: number | 'serial';
}

/**
 * The largest event-loop delay `system` saw over its timed batches (the `loop_delay_max_ms` of
 * its lines, all shapes), and where; undefined when none of its lines has one.
 * @example loopDelayOf(results, 'ours_engine'); // { maxMs: 1.2, shape: 'latency', k: 64 }
 */
export function loopDelayOf(
  results: readonly ScalingShapeResult[],
  system: ScalingSystem,
): LoopDelayWorst | undefined {
  let worst: LoopDelayWorst | undefined;
  const consider = (cell: ScalingCell | undefined, shape: ShapeName, k: number | 'serial') => {
    const delay = cell?.loopDelayMaxMs;
    if (delay === undefined || !Number.isFinite(delay)) return;
    if (worst === undefined || delay > worst.maxMs) worst = { maxMs: delay, shape, k };
  };
  for (const result of results) {
    for (const row of result.rows) consider(row.cells[system], result.shape, row.k);
    consider(result.serial[system], result.shape, 'serial');
  }
  return worst;
}

/**
 * The issue engine's event-loop line (issue 34: the loop never held above 5 ms), with ours'
 * own largest delay beside it (the jobs' own synchronous work shows in both); undefined when
 * the engine's lines carry no delay.
 */
export function formatEngineLoopDelay(results: readonly ScalingShapeResult[]): string | undefined {
  const engine = loopDelayOf(results, 'ours_engine');
  if (engine === undefined) return undefined;
  const where = (worst: LoopDelayWorst) =>
    `${SHAPES[worst.shape].title}, ${worst.k === 'serial' ? 'serial' : `K = ${worst.k}`}`;
  const ours = loopDelayOf(results, 'ours');
  const met = engine.maxMs <= ENGINE_LOOP_DELAY_TARGET_MS;
  return `ours, issue engine: the event loop's largest delay over its batches ${engine.maxMs.toFixed(2)} ms (${where(engine)}; target <= ${ENGINE_LOOP_DELAY_TARGET_MS} ms): ${met ? 'PASS' : 'FAIL'}${
    ours === undefined
      ? ''
      : `   [ours without the engine: ${ours.maxMs.toFixed(2)} ms, ${where(ours)}]`
  }`;
}

const verdict = (target: ScalingTarget) =>
  target.met === undefined ? 'not measured' : target.met ? 'PASS' : 'FAIL';

/**
 * The scaling tables as aligned text: per shape a row per K with each system's jobs/s and its
 * speedup over K = 1, ours over the better C and over the better Python peer (and ours' worker
 * tasks and ours with the issue engine over them, where they ran); the serial batches; then the
 * targets with their verdicts, and the issue engine's event-loop delay. `meta` (the programs'
 * `_meta` lines) gives the worker threads and issuer threads of the labels.
 */
export function formatScaling(
  results: readonly ScalingShapeResult[],
  targets: readonly ScalingTarget[],
  config?: ScalingConfig,
  meta?: ScalingCollected['meta'],
): string {
  const workers = workersOf(meta, config);
  const issuers = issuersOf(meta, config);
  const systems = SCALING_SYSTEMS.filter((system) =>
    results.some(
      (result) =>
        result.rows.some((row) => row.cells[system.key] !== undefined) ||
        result.serial[system.key] !== undefined,
    ),
  );
  const out: string[] = [
    'concurrency scaling: K jobs started together; jobs/s (speedup over the same system at K = 1)',
  ];
  for (const result of results) {
    const info = SHAPES[result.shape];
    out.push('');
    out.push(`${info.title}${config ? `: ${info.describe(config)}` : ''}`);
    const hasFloor = result.rows.some((row) => row.cells.ours_floor !== undefined);
    const hasWorkers = result.rows.some((row) => row.cells.ours_workers !== undefined);
    const hasEngine = result.rows.some((row) => row.cells.ours_engine !== undefined);
    const hasWorkerFloor =
      hasWorkers && result.rows.some((row) => row.cells.ours_floor_workers !== undefined);
    const header = [
      'K',
      ...systems.map((system) => systemLabel(system.key, workers, issuers)),
      'ours/C',
      'ours/py',
      ...(hasWorkers ? ['workers/C', 'workers/py'] : []),
      ...(hasEngine ? ['engine/C', 'engine/py'] : []),
      ...(hasFloor ? ['ours/floor'] : []),
      ...(hasWorkerFloor ? ['workers/wfloor'] : []),
    ];
    const ratio = (
      row: ScalingRow,
      others: readonly ScalingSystem[],
      subject: ScalingSystem = 'ours',
    ) => {
      const ours = row.cells[subject]?.jobsPerSecond;
      const rates = others
        .map((system) => row.cells[system]?.jobsPerSecond)
        .filter((rate): rate is number => rate !== undefined);
      return ours === undefined || rates.length === 0 ? undefined : ours / Math.max(...rates);
    };
    const floorRatio = (
      row: ScalingRow,
      subject: ScalingSystem = 'ours',
      floorSystem: ScalingSystem = 'ours_floor',
    ) => {
      const ours = row.cells[subject];
      const floor = row.cells[floorSystem];
      return ours === undefined || floor === undefined ? undefined : turnRatio(ours, floor);
    };
    const body = result.rows.map((row) => [
      String(row.k),
      ...systems.map((system) => {
        const cell = row.cells[system.key];
        if (cell === undefined) return '-';
        return `${formatRate(cell.jobsPerSecond)} (${formatRatio(cell.speedup)})`;
      }),
      formatRatio(ratio(row, ['c_threads', 'c_polling'])),
      formatRatio(ratio(row, ['cupy', 'torch'])),
      ...(hasWorkers
        ? [
            formatRatio(ratio(row, ['c_threads', 'c_polling'], 'ours_workers')),
            formatRatio(ratio(row, ['cupy', 'torch'], 'ours_workers')),
          ]
        : []),
      ...(hasEngine
        ? [
            formatRatio(ratio(row, ['c_threads', 'c_polling'], 'ours_engine')),
            formatRatio(ratio(row, ['cupy', 'torch'], 'ours_engine')),
          ]
        : []),
      ...(hasFloor ? [formatRatio(floorRatio(row))] : []),
      ...(hasWorkerFloor
        ? [formatRatio(floorRatio(row, 'ours_workers', 'ours_floor_workers'))]
        : []),
    ]);
    body.push([
      'serial',
      ...systems.map((system) => formatRate(result.serial[system.key]?.jobsPerSecond)),
      '',
      '',
      ...(hasWorkers ? ['', ''] : []),
      ...(hasEngine ? ['', ''] : []),
      ...(hasFloor ? [''] : []),
      ...(hasWorkerFloor ? [''] : []),
    ]);
    const widths = header.map((title, column) =>
      Math.max(title.length, ...body.map((cells) => cells[column]!.length)),
    );
    const line = (cells: readonly string[]) =>
      cells
        .map((cell, column) =>
          column === 0 ? cell.padEnd(widths[column]!) : cell.padStart(widths[column]!),
        )
        .join('  ')
        .trimEnd();
    out.push(line(header));
    out.push(widths.map((width) => '-'.repeat(width)).join('  '));
    for (const cells of body) out.push(line(cells));
  }
  out.push('');
  out.push(
    'ours/C: ours over the better C variant; ours/py: over the better of CuPy and PyTorch; ours/floor: over the Node floor (the same driver calls as bare koffi calls from plain async functions, one thread, no runtime), the median of the ratios within each round of their turns; serial: jobs one after another on one stream',
  );
  if (results.some((result) => result.rows.some((row) => row.cells.ours_workers !== undefined))) {
    out.push(
      `workers/C, workers/py: ours, worker tasks (each job a task on one of ${workers ?? 'W'} worker threads) over the better C variant and over the better of CuPy and PyTorch`,
    );
  }
  if (
    results.some((result) =>
      result.rows.some(
        (row) => row.cells.ours_workers !== undefined && row.cells.ours_floor_workers !== undefined,
      ),
    )
  ) {
    out.push(
      `workers/wfloor: ours, worker tasks over the Node floor on ${workers ?? 'W'} threads (the Node floor's bare koffi jobs on ${workers ?? 'W'} worker threads of their own), the median of the ratios within each round of their turns`,
    );
  }
  if (results.some((result) => result.rows.some((row) => row.cells.ours_engine !== undefined))) {
    out.push(
      `engine/C, engine/py: ours with the issue engine (ours' jobs, K tasks on the main thread, the launches made by ${issuers ?? 'W'} issuer threads) over the better C variant and over the better of CuPy and PyTorch`,
    );
  }
  for (const target of targets) {
    const floor =
      target.floor === undefined
        ? ''
        : target.system === 'ours_workers'
          ? `; there the Node floor on ${workers ?? 'W'} threads is ${formatRatio(target.floor.ratio)} of C, and the worker tasks ${formatRatio(target.floor.oursOverFloor)} of that floor`
          : `; there the Node floor is ${formatRatio(target.floor.ratio)} of C, and ours ${formatRatio(target.floor.oursOverFloor)} of the floor`;
    const worst =
      target.worst === undefined
        ? ''
        : target.worst.bar !== undefined
          ? ` (worst ${formatRatio(target.worst.ratio)} at K = ${target.worst.k}, where ${formatRatio(target.worst.bar)} is needed${floor})`
          : ` (lowest ${formatRatio(target.worst.ratio)} at K = ${target.worst.k}${floor})`;
    out.push(`${SHAPES[target.shape].title}: ${target.description}: ${verdict(target)}${worst}`);
  }
  const loop = formatEngineLoopDelay(results);
  if (loop !== undefined) out.push(loop);
  return out.join('\n');
}

/** The scaling results as one JSON document (scaling.json, and `scaling` in bench.json). */
export function scalingJson(
  results: readonly ScalingShapeResult[],
  targets: readonly ScalingTarget[],
  collected: Pick<ScalingCollected, 'skipped' | 'meta'>,
  config: ScalingConfig,
): Record<string, unknown> {
  const cell = (value: ScalingCell | undefined) =>
    value === undefined
      ? null
      : {
          jobs_per_s: value.jobsPerSecond,
          speedup: value.speedup ?? null,
          median_s: value.medianSeconds,
          samples: value.samples,
          ...(value.loopDelayMaxMs !== undefined
            ? { loop_delay_max_ms: value.loopDelayMaxMs }
            : {}),
        };
  const bySystem = (cells: Partial<Record<ScalingSystem, ScalingCell>>) =>
    Object.fromEntries(SCALING_SYSTEMS.map((system) => [system.key, cell(cells[system.key])]));
  return {
    method: `K jobs started together, wall time from the start to the last job's end; per (system, shape, K) ${config.warmups} untimed batches, then max(${config.minSamples}, ${config.sampleJobs}/K) timed ones; jobs/s = K / the median batch time; speedup = jobs/s over the same system's at K = 1; serial: ${config.serialJobs} jobs one after another on one stream; ours, its graph variant and the Node floor take turns in one process (${INTERLEAVE_ROUNDS} rounds, every other one reversed), and ours/floor is the median of the ratios within each round; ours' worker tasks (latency-bound and mixed shapes) run each job as a task on one of ${workersOf(collected.meta, config) ?? 'W'} worker threads of one WorkerPool, taking turns with the others, and the Node floor on as many threads of its own runs the floor's jobs the same way (job j on thread j mod W), workers/wfloor being the median of the ratios within each round; ours with the issue engine (latency-bound and mixed shapes) runs ours' jobs with ${issuersOf(collected.meta, config) ?? 'W'} issuer threads started for its turns only`,
    config,
    systems: SCALING_SYSTEMS.map(({ key }) => ({
      key,
      label: systemLabel(key, workersOf(collected.meta, config), issuersOf(collected.meta, config)),
    })),
    shapes: results.map((result) => ({
      shape: result.shape,
      title: SHAPES[result.shape].title,
      job: SHAPES[result.shape].describe(config),
      rows: result.rows.map((row) => ({
        k: row.k,
        samples: samplesFor(config, row.k),
        systems: bySystem(row.cells),
      })),
      serial: bySystem(result.serial),
    })),
    targets,
    meta: collected.meta,
    skipped: collected.skipped,
  };
}
