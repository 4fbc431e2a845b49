/** Pure statistics and formatting helpers for the load script (unit tested). */

/**
 * The `p`-th percentile (0..100) of ascending `sorted` values, interpolating linearly
 * between the closest ranks (the definition of NumPy's default and Excel's PERCENTILE.INC).
 * NaN for no values.
 * @example percentile([1, 2, 3, 4], 50); // 2.5
 */
export function percentile(sorted: readonly number[], p: number): number {
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile: p must be in [0, 100], got ${p}`);
  if (sorted.length === 0) return Number.NaN;
  const rank = (p / 100) * (sorted.length - 1);
  const below = Math.floor(rank);
  const above = Math.min(below + 1, sorted.length - 1);
  const fraction = rank - below;
  return sorted[below]! + (sorted[above]! - sorted[below]!) * fraction;
}

/** Summary of a set of latencies (or any sample). */
export interface Summary {
  /** Number of values. */
  count: number;
  /** Arithmetic mean. */
  mean: number;
  /** Smallest value. */
  min: number;
  /** Median (50th percentile, interpolated). */
  p50: number;
  /** 99th percentile (interpolated). */
  p99: number;
  /** Largest value. */
  max: number;
}

/**
 * Count, mean, min, median, 99th percentile and max of `values` (any order; not modified).
 * All NaN (count 0) for no values.
 * @example summarize([3, 1, 2]).p50; // 2
 */
export function summarize(values: readonly number[]): Summary {
  const sorted = Float64Array.from(values).sort();
  const list = Array.from(sorted);
  let sum = 0;
  for (const value of list) sum += value;
  return {
    count: list.length,
    mean: list.length === 0 ? Number.NaN : sum / list.length,
    min: list.length === 0 ? Number.NaN : list[0]!,
    p50: percentile(list, 50),
    p99: percentile(list, 99),
    max: list.length === 0 ? Number.NaN : list[list.length - 1]!,
  };
}

/** Events per second; 0 for a zero or negative duration. */
export function throughput(count: number, seconds: number): number {
  return seconds > 0 ? count / seconds : 0;
}

/** A number with `digits` decimals, or "-" for NaN / infinite values. */
export function formatNumber(value: number, digits = 1): string {
  return Number.isFinite(value) ? value.toFixed(digits) : '-';
}

/**
 * A plain-text table: the first column left-aligned, the others right-aligned, columns
 * separated by two spaces, a dashed line under the header.
 * @example formatTable(['mode', 'req/s'], [['task', '812.0']]);
 */
export function formatTable(
  header: readonly string[],
  rows: readonly (readonly string[])[],
): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: readonly string[]) =>
    widths
      .map((width, column) => {
        const cell = cells[column] ?? '';
        return column === 0 ? cell.padEnd(width) : cell.padStart(width);
      })
      .join('  ')
      .trimEnd();
  return [
    line(header),
    widths.map((width) => '-'.repeat(width)).join('  '),
    ...rows.map(line),
  ].join('\n');
}
