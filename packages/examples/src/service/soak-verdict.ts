/**
 * The soak's verdict (soak.ts): whether the server's memory stayed flat after warm-up. Pure
 * functions of the samples, so that the rule is tested without a GPU.
 *
 * The rule: the samples after the warm-up are split in an early and a late half; a figure is
 * flat when the late half's peak exceeds the early half's peak by no more than its tolerance
 * (the larger of a fraction of the early peak and a number of MiB). Peaks, not means, because
 * the load alternates workloads whose memory in use differs: a high-water figure (the pool's
 * reserve, the process's GPU memory) only moves when it grows, and a leak makes the late peak
 * higher whatever the workload. The slope (MiB per minute, least squares over the same
 * samples) is reported alongside.
 */

/** One sample of the server's memory, in MiB (undefined: not measured this time). */
export interface SoakSample {
  /** Minutes since the load began. */
  minutes: number;
  /** The server process's GPU memory as nvidia-smi reports it. */
  gpuMiB?: number | undefined;
  /** The server process's resident set. */
  rssMiB?: number | undefined;
  /** The memory pool's bytes in use (freed blocks the per-stream caches keep included). */
  poolUsedMiB?: number | undefined;
  /** The memory pool's reserved bytes. */
  poolReservedMiB?: number | undefined;
}

/** A figure's tolerance: growth up to the larger of `fraction` x the early peak and `mib`. */
export interface Tolerance {
  /** A fraction of the early peak, e.g. 0.02 for 2%. */
  fraction: number;
  /** MiB. */
  mib: number;
}

/** The figures the verdict judges, and how much each may grow. */
export const DEFAULT_TOLERANCES: Readonly<Record<JudgedFigure, Tolerance>> = Object.freeze({
  gpuMiB: { fraction: 0.02, mib: 64 },
  rssMiB: { fraction: 0.05, mib: 32 },
  poolReservedMiB: { fraction: 0.02, mib: 64 },
});

/** The figures that decide the verdict (the pool's used bytes are reported, not judged). */
export type JudgedFigure = 'gpuMiB' | 'rssMiB' | 'poolReservedMiB';

/** How one figure moved after warm-up. */
export interface FigureTrend {
  /** Samples after warm-up that had the figure. */
  samples: number;
  /** The first sample's value after warm-up. */
  first: number;
  /** The last sample's value. */
  last: number;
  /** Peak of the early half. */
  earlyPeak: number;
  /** Peak of the late half. */
  latePeak: number;
  /** `latePeak - earlyPeak`, MiB. */
  growth: number;
  /** The growth allowed, MiB. */
  allowed: number;
  /** Least-squares slope, MiB per minute. */
  slopePerMinute: number;
  /** `growth <= allowed`. */
  flat: boolean;
}

/** The verdict over a run's samples. */
export interface SoakVerdict {
  /** FLAT: every judged figure measured stayed within its tolerance; GROWING: one did not;
   * INCONCLUSIVE: fewer than 4 samples after warm-up (run longer). */
  status: 'FLAT' | 'GROWING' | 'INCONCLUSIVE';
  /** Minutes the samples span. */
  minutes: number;
  /** Where warm-up ended, minutes. */
  warmupMinutes: number;
  /** Per figure measured after warm-up. */
  trends: Partial<Record<keyof Omit<SoakSample, 'minutes'>, FigureTrend>>;
  /** The judged figures that grew past their tolerance. */
  growing: JudgedFigure[];
}

/** Fewer samples after warm-up than this and the verdict is INCONCLUSIVE. */
export const MIN_SAMPLES_AFTER_WARMUP = 4;

/** Least-squares slope of `ys` over `xs` (0 for fewer than two distinct x). */
export function slope(xs: readonly number[], ys: readonly number[]): number {
  const n = xs.length;
  if (n < 2) return 0;
  let sx = 0;
  let sy = 0;
  for (let i = 0; i < n; i++) {
    sx += xs[i]!;
    sy += ys[i]!;
  }
  const mx = sx / n;
  const my = sy / n;
  let num = 0;
  let den = 0;
  for (let i = 0; i < n; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  return den === 0 ? 0 : num / den;
}

/** How `figure` moved over `samples` (all after warm-up), or undefined without 2 values. */
export function trendOf(
  samples: readonly SoakSample[],
  figure: keyof Omit<SoakSample, 'minutes'>,
  tolerance: Tolerance | undefined,
): FigureTrend | undefined {
  const points = samples.filter((sample) => typeof sample[figure] === 'number');
  if (points.length < 2) return undefined;
  const values = points.map((sample) => sample[figure] as number);
  const half = Math.floor(values.length / 2);
  const earlyPeak = Math.max(...values.slice(0, half));
  const latePeak = Math.max(...values.slice(half));
  const growth = latePeak - earlyPeak;
  const allowed =
    tolerance === undefined
      ? Number.POSITIVE_INFINITY
      : Math.max(tolerance.fraction * earlyPeak, tolerance.mib);
  return {
    samples: values.length,
    first: values[0]!,
    last: values.at(-1)!,
    earlyPeak,
    latePeak,
    growth,
    allowed,
    slopePerMinute: slope(
      points.map((sample) => sample.minutes),
      values,
    ),
    flat: growth <= allowed,
  };
}

/**
 * Judges a run: the samples taken at or after `warmupMinutes` are the steady state.
 * @example judge(samples, 1).status; // 'FLAT'
 */
export function judge(
  samples: readonly SoakSample[],
  warmupMinutes: number,
  tolerances: Readonly<Record<JudgedFigure, Tolerance>> = DEFAULT_TOLERANCES,
): SoakVerdict {
  const steady = samples.filter((sample) => sample.minutes >= warmupMinutes);
  const minutes = samples.length === 0 ? 0 : samples.at(-1)!.minutes;
  const trends: SoakVerdict['trends'] = {};
  const growing: JudgedFigure[] = [];
  for (const figure of ['gpuMiB', 'rssMiB', 'poolUsedMiB', 'poolReservedMiB'] as const) {
    const judged = figure === 'poolUsedMiB' ? undefined : tolerances[figure];
    const trend = trendOf(steady, figure, judged);
    if (trend === undefined) continue;
    trends[figure] = trend;
    if (figure !== 'poolUsedMiB' && !trend.flat) growing.push(figure);
  }
  const status =
    steady.length < MIN_SAMPLES_AFTER_WARMUP
      ? 'INCONCLUSIVE'
      : growing.length > 0
        ? 'GROWING'
        : 'FLAT';
  return { status, minutes, warmupMinutes, trends, growing };
}

function mib(value: number): string {
  return value >= 100 ? value.toFixed(0) : value.toFixed(1);
}

function describeTrend(label: string, unit: string, trend: FigureTrend | undefined): string {
  if (trend === undefined) return `${label} not measured`;
  const percent = trend.earlyPeak > 0 ? (100 * trend.growth) / trend.earlyPeak : 0;
  const sign = trend.growth >= 0 ? '+' : '';
  const allowed = Number.isFinite(trend.allowed) ? `, allowed +${mib(trend.allowed)}` : '';
  return `${label} ${mib(trend.earlyPeak)} -> ${mib(trend.latePeak)} ${unit} (${sign}${percent.toFixed(1)}%${allowed}; ${trend.slopePerMinute >= 0 ? '+' : ''}${trend.slopePerMinute.toFixed(1)} ${unit}/min)`;
}

/**
 * The verdict as one line: each figure's early-half peak -> late-half peak after warm-up, its
 * growth against the tolerance and its slope, then FLAT, GROWING (naming what grew) or
 * INCONCLUSIVE.
 * @example formatVerdict(judge(samples, 1)); // 'soak: 10.0 min (warm-up 1.0 min), GPU memory 3120 -> 3130 MiB (+0.3%, ...): FLAT'
 */
export function formatVerdict(verdict: SoakVerdict): string {
  const { trends } = verdict;
  const parts = [
    describeTrend('GPU memory', 'MiB', trends.gpuMiB),
    describeTrend('RSS', 'MiB', trends.rssMiB),
    describeTrend('pool reserved', 'MiB', trends.poolReservedMiB),
    describeTrend('pool used', 'MiB', trends.poolUsedMiB),
  ];
  const tail =
    verdict.status === 'GROWING'
      ? `GROWING (${verdict.growing.join(', ')})`
      : verdict.status === 'INCONCLUSIVE'
        ? `INCONCLUSIVE (fewer than ${MIN_SAMPLES_AFTER_WARMUP} samples after warm-up: run longer)`
        : 'FLAT';
  return `soak: ${verdict.minutes.toFixed(1)} min (warm-up ${verdict.warmupMinutes.toFixed(1)} min; early-half peak -> late-half peak after it), ${parts.join(', ')}: ${tail}`;
}

/**
 * The GPU memory of process `pid`, MiB, from `nvidia-smi
 * --query-compute-apps=pid,used_memory --format=csv,noheader,nounits` output (several lines
 * for one pid, one per GPU, are summed); undefined when no line has the pid.
 * @example gpuMemoryOf('4242, 3120\n77, 500\n', 4242); // 3120
 */
export function gpuMemoryOf(csv: string, pid: number): number | undefined {
  let total: number | undefined;
  for (const line of csv.split('\n')) {
    const [pidText, usedText] = line.split(',').map((part) => part.trim());
    if (pidText === undefined || usedText === undefined) continue;
    if (Number(pidText) !== pid) continue;
    const used = Number(usedText);
    if (!Number.isFinite(used)) continue;
    total = (total ?? 0) + used;
  }
  return total;
}

/**
 * The GPU memory (MiB) of the one compute process in nvidia-smi's
 * `--query-compute-apps=pid,used_memory` CSV, or undefined when it lists none or several.
 */
export function onlyProcessMemory(csv: string): number | undefined {
  const rows = csv
    .split('\n')
    .map((line) => line.split(',').map((part) => part.trim()))
    .filter((row) => row.length === 2 && row[0] !== '' && Number.isFinite(Number(row[1])));
  return rows.length === 1 ? Number(rows[0]![1]) : undefined;
}
