/** Timing helpers shared by the TypeScript benchmarks: the same method as the C baseline. */

/** Timed batches per benchmark (the C baseline's REPEATS too); the median is reported. */
export const REPEATS = 15;
/** Untimed batches before the timed ones (the C baseline's WARMUPS too). */
export const WARMUPS = 3;

/** One benchmark result line (the JSON-lines format the C and Python baselines print too). */
export interface Result {
  /** The benchmark's id, e.g. `launch_empty` (the same id in C and the peers). */
  name: string;
  /** Median over the timed batches, in microseconds per operation. */
  median_us: number;
  /** What one operation is, e.g. `us/launch`. */
  unit: string;
  /** A remark shown beside the value. */
  note?: string;
  /** Further named numbers (a `max_` prefix: merged across rounds by the largest). */
  extra?: Record<string, number>;
}

/**
 * The median of `values` (any order, not modified): the middle value, or the mean of the
 * middle two for an even count; NaN for none.
 * @example median([3, 1, 2, 10]); // 2.5
 */
export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  return n % 2 ? sorted[(n - 1) / 2]! : 0.5 * (sorted[n / 2 - 1]! + sorted[n / 2]!);
}

/**
 * A distribution-free confidence interval for the median of `values` (default 95%): the
 * order statistics x(j) and x(n+1-j) with the largest j for which the number of values below
 * the median, Binomial(n, 1/2), lies in [j, n-j] with at least that probability. Needs n >= 6
 * for 95%; with fewer values it returns the whole range.
 * @example medianInterval(ratios) // 15 ratios: the 4th and 12th smallest
 */
export function medianInterval(values: readonly number[], confidence = 0.95): [number, number] {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  if (n === 0) return [Number.NaN, Number.NaN];
  // P(B <= i) for B ~ Binomial(n, 1/2), built up term by term.
  const below: number[] = [];
  let term = 0.5 ** n;
  let sum = 0;
  for (let i = 0; i <= n; i++) {
    sum += term;
    below.push(sum);
    term = (term * (n - i)) / (i + 1);
  }
  // Coverage of [x(j), x(n+1-j)] (1-based) is P(j <= B <= n-j) = 1 - 2 P(B <= j-1).
  let j = 1;
  while (j + 1 <= n + 1 - (j + 1) && 1 - 2 * below[j]! >= confidence) j++;
  return [sorted[j - 1]!, sorted[n - j]!];
}

/** Runs `batch` WARMUPS times untimed, then REPEATS times; each returns microseconds per op. */
export async function repeatMedian(batch: () => number | Promise<number>): Promise<number> {
  for (let i = 0; i < WARMUPS; i++) await batch();
  const samples: number[] = [];
  for (let i = 0; i < REPEATS; i++) samples.push(await batch());
  return median(samples);
}

/**
 * Runs `body` `count` times untimed, so that V8 has optimized the code under test before the
 * clock starts (the C baseline has no JIT to warm). For benchmarks whose batch is a single
 * iteration, where the harness's WARMUPS batches are too few.
 */
export async function warmJit(body: () => unknown | Promise<unknown>, count = 200): Promise<void> {
  for (let i = 0; i < count; i++) await body();
}

/** Microseconds since an arbitrary origin. */
export function nowUs(): number {
  return performance.now() * 1000;
}

/** Prints a result as one JSON line and returns it. */
export function emit(result: Result): Result {
  console.log(JSON.stringify(result));
  return result;
}
