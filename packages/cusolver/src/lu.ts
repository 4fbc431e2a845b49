import {
  assertOptions,
  assertSameContext,
  booleanOption,
  byteRangesOverlap,
  CudaArgumentError,
  currentSignal,
  DeviceArray,
  renamedBooleanOption,
  resolveStream,
  type SameDType,
  type Stream,
  type StreamOption,
  streamOption,
} from '@cuda-tasks/cudadrv';
import { checkInfo, disposeAll, type StatusOption, solveIntoCopy, statusTarget } from './info.js';
import { factorOffThread, offThreadReady } from './issue-worker.js';
import { GETRF, GETRS, getrf, getrs, traceOffThread } from './routines.js';
import {
  assertPivots,
  assertSquare,
  type FloatDType,
  matrixLayout,
  NO_OPTIONS,
  rightHandSideLayout,
} from './validate.js';

/**
 * An LU factorization with partial pivoting, A = P * L * U, as LAPACK's getrf leaves it.
 * Dispose both arrays when done.
 */
export interface LuFactorization<D extends FloatDType = FloatDType> {
  /**
   * L and U of an m x n matrix in one m x n array: U on and above the diagonal, L's
   * multipliers below it (L's unit diagonal is not stored).
   */
  lu: DeviceArray<D>;
  /**
   * min(m, n) 1-based row interchanges (LAPACK's ipiv): during the factorization row `i`
   * was swapped with row `pivots[i]` (1-based), for i = 1, 2, ... in order.
   */
  pivots: DeviceArray<'int32'>;
}

/** Options for `lu` and `solve`: the stream, and where the status goes (see `StatusOption`). */
export interface LuOptions extends StreamOption, StatusOption {}

/** Options for `solve`: those of `lu`, and whether it may overwrite its inputs. */
export interface SolveOptions extends LuOptions {
  /**
   * `a` may be overwritten by its factors, saving a copy (default false; LAPACK's and SciPy's
   * `overwrite_a`). Taken where `a` is contiguous and shares no memory with `b`, outside a graph
   * capture (each replay must find its inputs as they were); otherwise a is copied as without
   * it. Either way, do not read `a` afterwards.
   */
  overwriteA?: boolean;
  /**
   * The solution may be written over `b`, saving a copy (default false; SciPy's
   * `overwrite_b`). Taken where `b` is contiguous and shares no memory with `a`, outside a graph
   * capture: the promise then resolves with `b` itself. Otherwise b is copied as without it.
   * Either way, use the returned array, not `b`, afterwards.
   */
  overwriteB?: boolean;
}

/** Options for `luSolve`. */
export interface LuSolveOptions extends StreamOption {
  /** Solve A^T X = B instead of A X = B (default false). */
  transA?: boolean;
  /**
   * Solve A^T X = B instead of A X = B.
   * @deprecated Spelled `transA` across the libraries; `transpose` is still taken (given with
   * `transA`, both must agree) and goes in the next minor release.
   */
  transpose?: boolean;
}

/**
 * getrf on `factors` in place, on the stream. For a caller that awaits the status (`awaited`:
 * `lu` and `solve` without `{ info }`), outside a capture, a large one is made by the issue
 * worker (issue-worker.ts: the arrays are lent to it, and the stream waits for it on the GPU)
 * and this returns the promise of that; otherwise it is issued here and this returns
 * undefined, nothing to await.
 */
function factorOn(
  stream: Stream,
  m: number,
  n: number,
  factors: DeviceArray<FloatDType>,
  pivots: DeviceArray<'int32'>,
  info: DeviceArray<'int32'>,
  awaited: boolean,
): Promise<void> | undefined {
  const dtype = factors.dtype;
  if (awaited && stream.capture === null && offThreadReady(Math.min(m, n))) {
    const traced = traceOffThread(stream, dtype);
    return factorOffThread(stream, factors, pivots, info, m, n, currentSignal()).finally(traced);
  }
  getrf(stream, dtype, m, n, factors.useOn(stream), m, pivots.useOn(stream), info.useOn(stream));
  return undefined;
}

/**
 * LU factorization with partial pivoting of an m x n float32/float64 matrix (cusolverDn
 * getrf) on a copy: `a` is not modified. The promise resolves once the factorization is done
 * (its status is read back without blocking the event loop); an exactly singular matrix
 * rejects with `SingularMatrixError` (`info` = the 1-based index of the zero pivot). With
 * `{ info }` the status goes to that int32 array instead and nothing waits: the form for a
 * graph capture, where anything else gives a CaptureError before any work is issued.
 * @example
 * const { lu: factors, pivots } = await lu(a);
 * const x = luSolve({ lu: factors, pivots }, b);
 */
export async function lu<D extends FloatDType>(
  a: DeviceArray<D>,
  options: LuOptions = NO_OPTIONS,
): Promise<LuFactorization<D>> {
  const { rows: m, columns: n } = matrixLayout('lu', 'a', a);
  assertOptions('lu', options, ['stream', 'info']);
  const stream = resolveStream(streamOption('lu', options.stream));
  assertSameContext('lu', 'a', a, stream);
  const dtype = a.dtype;
  const status = statusTarget(options, stream, 'lu', GETRF[dtype]);
  if (status !== undefined) assertSameContext('lu', 'info', status, stream);
  let factors: DeviceArray<D> | undefined;
  let pivots: DeviceArray<'int32'> | undefined;
  let info: DeviceArray<'int32'> | undefined;
  try {
    factors = a.copy({ stream });
    pivots = DeviceArray.empty('int32', Math.min(m, n), { stream });
    info = status ?? DeviceArray.empty('int32', 1, { stream });
    const issued = factorOn(stream, m, n, factors, pivots, info, status === undefined);
    if (issued !== undefined) await issued;
    const pending = info;
    info = undefined;
    if (status === undefined) await checkInfo(pending, stream, 'singular', GETRF[dtype]);
    return { lu: factors, pivots };
  } catch (error) {
    disposeAll(factors, pivots, info === status ? undefined : info);
    throw error;
  }
}

/**
 * Solves A X = B (or A^T X = B) from `lu(A)`'s factorization (cusolverDn getrs). `b` is an
 * n x k matrix or a length-n vector and is not modified; the solution is a new contiguous
 * array of b's shape. The solve is only queued on the stream: nothing waits for the GPU.
 * @example
 * const factorization = await lu(a);
 * const x1 = luSolve(factorization, b1);
 * const x2 = luSolve(factorization, b2, { transA: true }); // A^T X = B
 */
export function luSolve<D extends FloatDType, B extends FloatDType>(
  factorization: LuFactorization<D>,
  b: DeviceArray<B> & SameDType<D, B>,
  options: LuSolveOptions = NO_OPTIONS,
): DeviceArray<D> {
  if (typeof factorization !== 'object' || factorization === null) {
    throw new CudaArgumentError(
      'luSolve: the first argument must be the { lu, pivots } object that lu() returns',
    );
  }
  const layout = matrixLayout('luSolve', 'lu', factorization.lu);
  assertSquare('luSolve', 'lu', layout);
  const n = layout.rows;
  assertPivots('luSolve', factorization.pivots, n);
  const right = rightHandSideLayout('luSolve', b, factorization.lu, n, 'lu');
  assertOptions('luSolve', options, ['stream', 'transA', 'transpose']);
  const transpose = renamedBooleanOption(
    'luSolve',
    'transA',
    options.transA,
    'transpose',
    options.transpose,
  );
  const stream = resolveStream(streamOption('luSolve', options.stream));
  assertSameContext('luSolve', 'lu', factorization.lu, stream);
  assertSameContext('luSolve', 'pivots', factorization.pivots, stream);
  assertSameContext('luSolve', 'b', b, stream);
  // rightHandSideLayout checked that b has the dtype of lu.
  return solveIntoCopy(b as DeviceArray<D>, stream, (x, info) =>
    getrs(
      stream,
      b.dtype,
      transpose,
      n,
      right.columns,
      factorization.lu.useOn(stream, 'read'),
      layout.leadingDimension,
      factorization.pivots.useOn(stream, 'read'),
      x.useOn(stream),
      n,
      info.useOn(stream),
    ),
  );
}

/**
 * Solves the square system A X = B by LU factorization (getrf, then getrs), without
 * modifying `a` or `b`: both are copied, unless `{ overwriteA, overwriteB }` allow the solve
 * to work in them (see `SolveOptions`). `b` is an n x k matrix or a length-n vector; the
 * solution has b's shape. Rejects with `SingularMatrixError` when A is exactly singular.
 * With `{ info }` (two int32 words: getrf's, then getrs's) the status stays on the device and
 * nothing waits; inside a graph capture that is the only form (else a CaptureError).
 * @example
 * const a = DeviceArray.fromHost(new Float64Array([4, 1, 2, 3]), [2, 2]);
 * const b = DeviceArray.fromHost(new Float64Array([1, 2]));
 * const x = await solve(a, b);
 * console.log(await x.toHost());
 */
export async function solve<D extends FloatDType, B extends FloatDType>(
  a: DeviceArray<D>,
  b: DeviceArray<B> & SameDType<D, B>,
  options: SolveOptions = NO_OPTIONS,
): Promise<DeviceArray<D>> {
  const layout = matrixLayout('solve', 'a', a);
  assertSquare('solve', 'a', layout);
  const n = layout.rows;
  const right = rightHandSideLayout('solve', b, a, n);
  assertOptions('solve', options, ['stream', 'info', 'overwriteA', 'overwriteB']);
  const overwriteA = booleanOption('solve', 'overwriteA', options.overwriteA);
  const overwriteB = booleanOption('solve', 'overwriteB', options.overwriteB);
  const stream = resolveStream(streamOption('solve', options.stream));
  assertSameContext('solve', 'a', a, stream);
  assertSameContext('solve', 'b', b, stream);
  const dtype = a.dtype;
  const status = statusTarget(options, stream, 'solve', GETRF[dtype], GETRS[dtype]);
  if (status !== undefined) assertSameContext('solve', 'info', status, stream);
  let factors: DeviceArray<D> | undefined;
  let pivots: DeviceArray<'int32'> | undefined;
  let info: DeviceArray<'int32'> | undefined;
  let x: DeviceArray<D> | undefined;
  // Worked in place only where contiguous and apart (getrf must not change b, nor getrs a),
  // and never in a capture: each replay of the graph must find its inputs as they were.
  const apart = (overwriteA || overwriteB) && stream.capture === null && !sharesMemory(a, b);
  const inA = overwriteA && apart && a.contiguous;
  const inB = overwriteB && apart && b.contiguous;
  try {
    factors = inA ? a : a.copy({ stream });
    // rightHandSideLayout checked that b has the dtype of a.
    x = inB ? (b as DeviceArray<D>) : (b as DeviceArray<D>).copy({ stream });
    pivots = DeviceArray.empty('int32', n, { stream });
    // Two devInfo words: getrs resets its devInfo, so it must not overwrite getrf's.
    info = status ?? DeviceArray.empty('int32', 2, { stream });
    const issued = factorOn(stream, n, n, factors, pivots, info, status === undefined);
    if (issued !== undefined) {
      await issued;
      // The task's signal may have aborted meanwhile: then nothing more is issued.
      const signal = currentSignal();
      if (signal?.aborted) throw signal.reason;
    }
    getrs(
      stream,
      dtype,
      false,
      n,
      right.columns,
      factors.useOn(stream),
      n,
      pivots.useOn(stream),
      x.useOn(stream),
      n,
      info.useOn(stream) + 4n,
    );
    disposeAll(inA ? undefined : factors, pivots);
    factors = pivots = undefined;
    const pending = info;
    info = undefined;
    if (status === undefined) {
      await checkInfo(pending, stream, 'singular', GETRF[dtype], GETRS[dtype]);
    }
    return x;
  } catch (error) {
    // The caller's own arrays stay the caller's to dispose.
    disposeAll(
      inA ? undefined : factors,
      pivots,
      info === status ? undefined : info,
      inB ? undefined : x,
    );
    throw error;
  }
}

/** Whether the buffers under `a` and `b` share any byte (their whole buffers, not the views). */
function sharesMemory(a: DeviceArray<FloatDType>, b: DeviceArray<FloatDType>): boolean {
  if (a.buffer === b.buffer) return true;
  const from = (array: DeviceArray<FloatDType>) => Number(array.buffer.pointer);
  return byteRangesOverlap(from(a), a.buffer.byteLength, from(b), b.buffer.byteLength);
}
