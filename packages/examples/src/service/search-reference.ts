/**
 * The CPU reference of `POST /search`: the k best rows of a query by float64 dot products over
 * the same embeddings the service holds, for the load script to check every answer with. It
 * travels to the load's client process as a small record per query (the rows that may be
 * returned and their dot products), not as the embeddings.
 */

/** What a correct answer to one query is. */
export interface SearchReference {
  /** Every row that a correct answer may contain: the k best, and rows tied with the k-th within `slack`. */
  rows: number[];
  /** The float64 dot product of each of `rows` with the query. */
  scores: number[];
  /** How far a returned float32 score may be from its row's dot product. */
  tolerance: number;
  /** The k-th best dot product: a row scoring above `kth + slack` must be returned. */
  kth: number;
  /** Rows within this of the k-th best may be exchanged for each other (float32 ties). */
  slack: number;
}

/**
 * The reference of `query` over `rows` x `dim` column-major float32 `embeddings`: float64 dot
 * products, a tolerance from the terms' magnitudes (float32 sums of `dim` terms), the k best.
 * @example searchReference(embeddings, 1000, 128, query, 10).rows.length; // 10, or more with ties
 */
export function searchReference(
  embeddings: Float32Array,
  rows: number,
  dim: number,
  query: readonly number[],
  k: number,
): SearchReference {
  const dots = new Float64Array(rows);
  let tolerance = 0;
  for (let i = 0; i < rows; i++) {
    let sum = 0;
    let magnitude = 0;
    for (let j = 0; j < dim; j++) {
      const term = embeddings[i + j * rows]! * query[j]!;
      sum += term;
      magnitude += Math.abs(term);
    }
    dots[i] = sum;
    tolerance = Math.max(tolerance, 1e-5 * magnitude + 1e-6);
  }
  // A typed array sorts numerically, ascending: the k-th best is k from the end.
  const kth = dots.slice().sort()[rows - k]!;
  const slack = 2 * tolerance;
  const reference: SearchReference = { rows: [], scores: [], tolerance, kth, slack };
  for (let i = 0; i < rows; i++) {
    if (dots[i]! >= kth - slack) {
      reference.rows.push(i);
      reference.scores.push(dots[i]!);
    }
  }
  return reference;
}

/**
 * Why `indices` and `scores` are not a correct answer by `reference`, or undefined: each
 * returned row may be returned, with its dot product within the tolerance, and every row
 * clearly above the k-th best is returned.
 */
export function checkAgainstReference(
  reference: SearchReference,
  indices: readonly number[],
  scores: readonly number[],
): string | undefined {
  const allowed = new Map<number, number>();
  for (let i = 0; i < reference.rows.length; i++) {
    allowed.set(reference.rows[i]!, reference.scores[i]!);
  }
  for (let i = 0; i < indices.length; i++) {
    const dot = allowed.get(indices[i]!);
    if (dot === undefined) {
      return `row ${indices[i]} is not among the k best by the CPU's dot products`;
    }
    if (Math.abs(scores[i]! - dot) > reference.tolerance) {
      return `row ${indices[i]} scored ${scores[i]}, its dot product on the CPU is ${dot}`;
    }
  }
  const returned = new Set(indices);
  for (let i = 0; i < reference.rows.length; i++) {
    if (
      reference.scores[i]! > reference.kth + reference.slack &&
      !returned.has(reference.rows[i]!)
    ) {
      return `row ${reference.rows[i]} (dot product ${reference.scores[i]}) is among the k best but was not returned`;
    }
  }
  return undefined;
}
