/**
 * Float64 CPU reference routines for the tests (not part of the package's API, not bundled).
 * Matrices are Float64Array in column-major order: element (i, j) of an m x n matrix is at
 * i + j * m.
 */

/** A small seeded PRNG (mulberry32) so that test inputs are reproducible. */
export class Rng {
  #state: number;
  constructor(seed: number) {
    this.#state = seed >>> 0;
  }
  /** Uniform in [0, 1). */
  next(): number {
    this.#state = (this.#state + 0x6d2b79f5) >>> 0;
    let t = this.#state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** Uniform in [-1, 1). */
  symmetric(): number {
    return 2 * this.next() - 1;
  }
}

/** An m x n matrix with entries uniform in [-1, 1). */
export function randomMatrix(rng: Rng, m: number, n: number): Float64Array {
  const a = new Float64Array(m * n);
  for (let i = 0; i < a.length; i++) a[i] = rng.symmetric();
  return a;
}

/** A random n x n matrix with n added to the diagonal: strictly diagonally dominant. */
export function diagonallyDominant(rng: Rng, n: number): Float64Array {
  const a = randomMatrix(rng, n, n);
  for (let i = 0; i < n; i++) a[i + i * n]! += n;
  return a;
}

/** M M^T + n I for a random n x n M: symmetric positive definite. */
export function symmetricPositiveDefinite(rng: Rng, n: number): Float64Array {
  const m = randomMatrix(rng, n, n);
  const a = multiply(m, n, n, transpose(m, n, n), n);
  for (let i = 0; i < n; i++) a[i + i * n]! += n;
  return a;
}

/** (A + A^T) / 2 of a random n x n A: symmetric. */
export function randomSymmetric(rng: Rng, n: number): Float64Array {
  const a = randomMatrix(rng, n, n);
  const s = new Float64Array(n * n);
  for (let j = 0; j < n; j++)
    for (let i = 0; i < n; i++) s[i + j * n] = (a[i + j * n]! + a[j + i * n]!) / 2;
  return s;
}

/** The n x n identity. */
export function identity(n: number): Float64Array {
  const a = new Float64Array(n * n);
  for (let i = 0; i < n; i++) a[i + i * n] = 1;
  return a;
}

/** A (m x k) times B (k x n). */
export function multiply(
  a: ArrayLike<number>,
  m: number,
  k: number,
  b: ArrayLike<number>,
  n: number,
): Float64Array {
  const c = new Float64Array(m * n);
  for (let j = 0; j < n; j++) {
    for (let p = 0; p < k; p++) {
      const bpj = b[p + j * k]!;
      if (bpj === 0) continue;
      const column = p * m;
      const out = j * m;
      for (let i = 0; i < m; i++) c[out + i]! += a[column + i]! * bpj;
    }
  }
  return c;
}

/** The transpose (n x m) of an m x n matrix. */
export function transpose(a: ArrayLike<number>, m: number, n: number): Float64Array {
  const t = new Float64Array(m * n);
  for (let j = 0; j < n; j++) for (let i = 0; i < m; i++) t[j + i * n] = a[i + j * m]!;
  return t;
}

/** A - B elementwise. */
export function subtract(a: ArrayLike<number>, b: ArrayLike<number>): Float64Array {
  if (a.length !== b.length) throw new Error(`subtract: ${a.length} vs ${b.length} elements`);
  const c = new Float64Array(a.length);
  for (let i = 0; i < a.length; i++) c[i] = a[i]! - b[i]!;
  return c;
}

/** The Frobenius norm. */
export function frobenius(a: ArrayLike<number>): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += a[i]! * a[i]!;
  return Math.sqrt(sum);
}

/** ||A - B||_F / ||B||_F. */
export function relativeError(a: ArrayLike<number>, b: ArrayLike<number>): number {
  return frobenius(subtract(a, b)) / frobenius(b);
}

/** ||A X - B||_F / (||A||_F ||X||_F) for A n x n, X and B n x k. */
export function relativeResidual(
  a: ArrayLike<number>,
  x: ArrayLike<number>,
  b: ArrayLike<number>,
  n: number,
  k: number,
): number {
  return frobenius(subtract(multiply(a, n, n, x, k), b)) / (frobenius(a) * frobenius(x));
}

/** ||Q^T Q - I||_F for an m x k matrix Q. */
export function orthogonalityError(q: ArrayLike<number>, m: number, k: number): number {
  return frobenius(subtract(multiply(transpose(q, m, k), k, m, q, k), identity(k)));
}

/** A matrix with the diagonal `d` (length k) as k x k. */
export function diagonal(d: ArrayLike<number>): Float64Array {
  const k = d.length;
  const a = new Float64Array(k * k);
  for (let i = 0; i < k; i++) a[i + i * k] = d[i]!;
  return a;
}

/** Float64 copy of any numeric array (e.g. what `toHost()` returned). */
export function toFloat64(a: ArrayLike<number>): Float64Array {
  return Float64Array.from(a as ArrayLike<number>);
}

/** The values a matrix holds once stored in `dtype` (float32 rounds). */
export function roundTo(dtype: 'float32' | 'float64', a: Float64Array): Float64Array {
  return dtype === 'float32' ? Float64Array.from(Float32Array.from(a)) : a;
}

/**
 * LU with partial pivoting as LAPACK getrf does it: returns the combined factors (m x n) and
 * the 1-based pivots (min(m, n)), and `info` (first zero pivot, 1-based, or 0).
 */
export function luFactor(
  a: ArrayLike<number>,
  m: number,
  n: number,
): { lu: Float64Array; pivots: Int32Array; info: number } {
  const lu = Float64Array.from(a as ArrayLike<number>);
  const k = Math.min(m, n);
  const pivots = new Int32Array(k);
  let info = 0;
  for (let j = 0; j < k; j++) {
    let p = j;
    for (let i = j + 1; i < m; i++) if (Math.abs(lu[i + j * m]!) > Math.abs(lu[p + j * m]!)) p = i;
    pivots[j] = p + 1;
    if (p !== j) {
      for (let c = 0; c < n; c++) {
        const t = lu[j + c * m]!;
        lu[j + c * m] = lu[p + c * m]!;
        lu[p + c * m] = t;
      }
    }
    const pivot = lu[j + j * m]!;
    if (pivot === 0) {
      if (info === 0) info = j + 1;
      continue;
    }
    for (let i = j + 1; i < m; i++) lu[i + j * m]! /= pivot;
    for (let c = j + 1; c < n; c++) {
      const u = lu[j + c * m]!;
      if (u === 0) continue;
      for (let i = j + 1; i < m; i++) lu[i + c * m]! -= lu[i + j * m]! * u;
    }
  }
  return { lu, pivots, info };
}

/**
 * P * L * U from getrf-style factors (m x n, L unit lower m x k, U upper k x n) and 1-based
 * pivots: undoes the row interchanges in reverse order. Equals A for a correct factorization.
 */
export function luReconstruct(
  lu: ArrayLike<number>,
  pivots: ArrayLike<number>,
  m: number,
  n: number,
): Float64Array {
  const k = Math.min(m, n);
  const l = new Float64Array(m * k);
  const u = new Float64Array(k * n);
  for (let j = 0; j < k; j++) {
    l[j + j * m] = 1;
    for (let i = j + 1; i < m; i++) l[i + j * m] = lu[i + j * m]!;
  }
  for (let j = 0; j < n; j++)
    for (let i = 0; i <= Math.min(j, k - 1); i++) u[i + j * k] = lu[i + j * m]!;
  const product = multiply(l, m, k, u, n);
  for (let i = k - 1; i >= 0; i--) {
    const p = pivots[i]! - 1;
    if (p === i) continue;
    for (let c = 0; c < n; c++) {
      const t = product[i + c * m]!;
      product[i + c * m] = product[p + c * m]!;
      product[p + c * m] = t;
    }
  }
  return product;
}

/**
 * Eigenvalues (ascending) and eigenvectors (columns) of a symmetric n x n matrix by the
 * cyclic Jacobi method: slow, simple and accurate; for small n.
 */
export function jacobiEigen(
  a: ArrayLike<number>,
  n: number,
): { values: Float64Array; vectors: Float64Array } {
  const s = Float64Array.from(a as ArrayLike<number>);
  const v = identity(n);
  for (let sweep = 0; sweep < 100; sweep++) {
    let off = 0;
    for (let j = 0; j < n; j++) for (let i = 0; i < n; i++) if (i !== j) off += s[i + j * n]! ** 2;
    if (off < 1e-30 * Math.max(1, frobenius(s) ** 2)) break;
    for (let p = 0; p < n - 1; p++) {
      for (let q = p + 1; q < n; q++) {
        const apq = s[p + q * n]!;
        if (apq === 0) continue;
        const app = s[p + p * n]!;
        const aqq = s[q + q * n]!;
        const theta = (aqq - app) / (2 * apq);
        const t = Math.sign(theta || 1) / (Math.abs(theta) + Math.sqrt(theta * theta + 1));
        const c = 1 / Math.sqrt(t * t + 1);
        const sn = t * c;
        // S <- J^T S J with J the rotation in the (p, q) plane.
        for (let k = 0; k < n; k++) {
          const skp = s[k + p * n]!;
          const skq = s[k + q * n]!;
          s[k + p * n] = c * skp - sn * skq;
          s[k + q * n] = sn * skp + c * skq;
        }
        for (let k = 0; k < n; k++) {
          const spk = s[p + k * n]!;
          const sqk = s[q + k * n]!;
          s[p + k * n] = c * spk - sn * sqk;
          s[q + k * n] = sn * spk + c * sqk;
        }
        for (let k = 0; k < n; k++) {
          const vkp = v[k + p * n]!;
          const vkq = v[k + q * n]!;
          v[k + p * n] = c * vkp - sn * vkq;
          v[k + q * n] = sn * vkp + c * vkq;
        }
      }
    }
  }
  const order = Array.from({ length: n }, (_, i) => i).sort(
    (x, y) => s[x + x * n]! - s[y + y * n]!,
  );
  const values = new Float64Array(n);
  const vectors = new Float64Array(n * n);
  order.forEach((from, to) => {
    values[to] = s[from + from * n]!;
    for (let k = 0; k < n; k++) vectors[k + to * n] = v[k + from * n]!;
  });
  return { values, vectors };
}

/** Singular values (descending) of an m x n matrix: square roots of the eigenvalues of A^T A. */
export function singularValues(a: ArrayLike<number>, m: number, n: number): Float64Array {
  const gram =
    m >= n ? multiply(transpose(a, m, n), n, m, a, n) : multiply(a, m, n, transpose(a, m, n), m);
  const k = Math.min(m, n);
  const { values } = jacobiEigen(gram, k);
  return Float64Array.from(values, (value) => Math.sqrt(Math.max(0, value))).reverse();
}

/** Largest absolute elementwise difference. */
export function maxAbsDifference(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let max = 0;
  for (let i = 0; i < a.length; i++) max = Math.max(max, Math.abs(a[i]! - b[i]!));
  return max;
}
