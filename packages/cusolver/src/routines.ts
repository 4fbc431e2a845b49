/**
 * The cuSOLVER routines the solvers call. One table per routine family maps the matrix
 * dtype to the S or D entry point (and its `_bufferSize` query), as CUDA.jl generates its
 * wrappers from a `(fname, elty)` table; one function, `issue` (CUDA.jl's `@workspace`),
 * takes the handle bound to the stream through the task runtime's issue envelope (`solver`),
 * sizes the workspace, allocates it from the stream-ordered pool, issues the call inside the
 * envelope's trace, checks its status, and frees the workspace right after (the free is
 * ordered on the stream, after the routine's kernels).
 * Each routine passes in only its arguments. Arguments are device addresses already ordered
 * on the stream (`useOn`); nothing here waits for the GPU. Internal: the public API
 * validates before it calls these.
 */
import { DeviceBuffer, dtypeBytes, type Stream } from '@cuda-tasks/cudadrv';
import { Scratch } from '@cuda-tasks/cudadrv/internal';
import { IssueEnvelope } from '@cuda-tasks/task-runtime';
import { check } from './errors.js';
import {
  CUBLAS_FILL_MODE_LOWER,
  CUBLAS_FILL_MODE_UPPER,
  CUBLAS_OP_N,
  CUBLAS_OP_T,
  CUSOLVER_EIG_MODE_VECTOR,
  type CusolverBindings,
  cusolver,
} from './ffi/cusolver.js';
import { handles } from './handle.js';
import type { FloatDType } from './validate.js';

/**
 * The issue envelope of every cuSOLVER call (the task runtime's kit): the task's handle bound
 * to the stream with its context current, the trace, the status checked as a CusolverError.
 */
const solver = new IssueEnvelope<bigint>({ name: 'cusolver', check, handles });

/** An entry point of libcusolver, as named in cusolverDn.h. */
type Entry = keyof CusolverBindings;

/** The entry points that have a `_bufferSize` workspace query. */
type EntryWithQuery = {
  [E in Entry]: `${E}_bufferSize` extends Entry ? E : never;
}[Entry];

/** One precision of a cuSOLVER routine. */
export interface SolverRoutine {
  /** The entry point (a CusolverError or an info error names it as the call). */
  readonly symbol: Entry;
  /** Its workspace query, `<symbol>_bufferSize`; undefined for a routine without workspace. */
  readonly bufferSize: Entry | undefined;
  /** What the operation observer (traces, NVTX ranges) records, e.g. `cusolver.getrf`. */
  readonly operation: string;
  /** Bytes of one workspace element: the routine's precision. */
  readonly elementBytes: number;
}

/** A routine family: its routine for each dtype. */
export type SolverFamily = Readonly<Record<FloatDType, SolverRoutine>>;

function routine(dtype: FloatDType, symbol: Entry, query: boolean): SolverRoutine {
  return {
    symbol,
    bufferSize: query ? (`${symbol}_bufferSize` as Entry) : undefined,
    // cusolverDnSgetrf -> cusolver.getrf
    operation: `cusolver.${symbol.slice('cusolverDnS'.length)}`,
    elementBytes: dtypeBytes(dtype),
  };
}

/** A family whose routines take a workspace sized by `<symbol>_bufferSize`. */
function withWorkspace(symbols: Readonly<Record<FloatDType, EntryWithQuery>>): SolverFamily {
  return Object.freeze({
    float32: routine('float32', symbols.float32, true),
    float64: routine('float64', symbols.float64, true),
  });
}

/** A family whose routines take no workspace. */
function withoutWorkspace(symbols: Readonly<Record<FloatDType, Entry>>): SolverFamily {
  return Object.freeze({
    float32: routine('float32', symbols.float32, false),
    float64: routine('float64', symbols.float64, false),
  });
}

/** LU factorization with partial pivoting. */
export const GETRF = withWorkspace({ float32: 'cusolverDnSgetrf', float64: 'cusolverDnDgetrf' });
/** Solve with getrf's factors. */
export const GETRS = withoutWorkspace({ float32: 'cusolverDnSgetrs', float64: 'cusolverDnDgetrs' });
/** Cholesky factorization. */
export const POTRF = withWorkspace({ float32: 'cusolverDnSpotrf', float64: 'cusolverDnDpotrf' });
/** Solve with potrf's factor. */
export const POTRS = withoutWorkspace({ float32: 'cusolverDnSpotrs', float64: 'cusolverDnDpotrs' });
/** Householder QR. */
export const GEQRF = withWorkspace({ float32: 'cusolverDnSgeqrf', float64: 'cusolverDnDgeqrf' });
/** Q from geqrf's reflectors. */
export const ORGQR = withWorkspace({ float32: 'cusolverDnSorgqr', float64: 'cusolverDnDorgqr' });
/** Singular value decomposition. */
export const GESVD = withWorkspace({ float32: 'cusolverDnSgesvd', float64: 'cusolverDnDgesvd' });
/** Symmetric eigendecomposition by divide and conquer. */
export const SYEVD = withWorkspace({ float32: 'cusolverDnSsyevd', float64: 'cusolverDnDsyevd' });

/** A libcusolver function as koffi declares it. */
type NativeFunction = CusolverBindings[Entry];

/** Calls a `_bufferSize` query: `lwork` is where it writes the workspace size. */
type Query = (bufferSize: NativeFunction, handle: bigint, lwork: bigint) => number;

/** Calls the routine with the workspace (0 without one) and the size the query gave. */
type Compute = (routine: NativeFunction, handle: bigint, work: bigint, lwork: number) => number;

// The `int *Lwork` out-parameter of the _bufferSize queries: one reused native slot.
let arena: Scratch | undefined;

/** Runs a `_bufferSize` query with the handle: the workspace's size in elements. */
function workspaceSize(
  api: CusolverBindings,
  routine: SolverRoutine,
  handle: bigint,
  query: Query,
): number {
  const bufferSize = routine.bufferSize!;
  const slot = (arena ??= new Scratch(16));
  slot.i32[0] = 0;
  solver.check(query(api[bufferSize], handle, slot.pointer), bufferSize);
  return slot.i32[0]!;
}

/** The workspace from the stream-ordered pool: `lwork` elements (at least one) and `extra`. */
function allocateWorkspace(
  stream: Stream,
  routine: SolverRoutine,
  lwork: number,
  extra = 0,
): DeviceBuffer {
  return DeviceBuffer.allocate((Math.max(1, lwork) + extra) * routine.elementBytes, { stream });
}

/**
 * Issues one cuSOLVER routine on `stream` (CUDA.jl's `@workspace`) in the envelope's order:
 * the task's handle bound to the stream with its context current; for a routine with a
 * workspace, `query` sizes it and that many elements (at least one) plus `extraElements` come
 * from the stream-ordered pool; `compute` runs inside the trace (the workspace declared used
 * there); the trace ends and the workspace is freed, ordered on the stream, whatever `compute`
 * did; then its status is checked. Every status is checked under its entry point.
 */
function issue(
  stream: Stream,
  routine: SolverRoutine,
  compute: Compute,
  query?: Query,
  extraElements = 0,
): void {
  const api = cusolver();
  const handle = solver.handle(stream);
  let lwork = 0;
  let work: DeviceBuffer | undefined;
  if (query !== undefined) {
    lwork = workspaceSize(api, routine, handle, query);
    work = allocateWorkspace(stream, routine, lwork, extraElements);
  }
  const token = solver.begin(stream, routine.operation);
  let status: number;
  try {
    const workPointer = work === undefined ? 0n : work.useOn(stream);
    status = compute(api[routine.symbol], handle, workPointer, lwork);
  } finally {
    solver.endTrace(token);
    work?.dispose();
  }
  solver.check(status, routine.symbol);
}

function fillMode(upper: boolean): number {
  return upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
}

/**
 * LU factorization of an m x n matrix in place: A = P * L * U (cusolverDn<t>getrf), issued
 * here (`lu` and `solve` send large ones to the issue worker instead: lu.ts).
 */
export function getrf(
  stream: Stream,
  dtype: FloatDType,
  m: number,
  n: number,
  a: bigint,
  lda: number,
  pivots: bigint,
  info: bigint,
): void {
  issue(
    stream,
    GETRF[dtype],
    (getrf, handle, work) => getrf(handle, m, n, a, lda, work, pivots, info),
    (bufferSize, handle, lwork) => bufferSize(handle, m, n, a, lda, lwork),
  );
}

/**
 * The trace of a factorization the issue worker makes for `stream` (lu.ts): begun here on
 * the caller's stream, ended by the returned function, so that traces show it where the
 * caller's task issued it.
 */
export function traceOffThread(stream: Stream, dtype: FloatDType): () => void {
  const token = solver.begin(stream, GETRF[dtype].operation);
  return () => solver.endTrace(token);
}

/** Solves A X = B (or A^T X = B) with getrf's factors; B is overwritten by X (cusolverDn<t>getrs). */
export function getrs(
  stream: Stream,
  dtype: FloatDType,
  transpose: boolean,
  n: number,
  nrhs: number,
  a: bigint,
  lda: number,
  pivots: bigint,
  b: bigint,
  ldb: number,
  info: bigint,
): void {
  const trans = transpose ? CUBLAS_OP_T : CUBLAS_OP_N;
  issue(stream, GETRS[dtype], (getrs, handle) =>
    getrs(handle, trans, n, nrhs, a, lda, pivots, b, ldb, info),
  );
}

/** Cholesky factorization in place, of the `upper` or lower triangle (cusolverDn<t>potrf). */
export function potrf(
  stream: Stream,
  dtype: FloatDType,
  upper: boolean,
  n: number,
  a: bigint,
  lda: number,
  info: bigint,
): void {
  const uplo = fillMode(upper);
  issue(
    stream,
    POTRF[dtype],
    (potrf, handle, work, lwork) => potrf(handle, uplo, n, a, lda, work, lwork, info),
    (bufferSize, handle, lwork) => bufferSize(handle, uplo, n, a, lda, lwork),
  );
}

/** Solves A X = B with potrf's factor; B is overwritten by X (cusolverDn<t>potrs). */
export function potrs(
  stream: Stream,
  dtype: FloatDType,
  upper: boolean,
  n: number,
  nrhs: number,
  a: bigint,
  lda: number,
  b: bigint,
  ldb: number,
  info: bigint,
): void {
  const uplo = fillMode(upper);
  issue(stream, POTRS[dtype], (potrs, handle) =>
    potrs(handle, uplo, n, nrhs, a, lda, b, ldb, info),
  );
}

/** Householder QR in place: R above the diagonal, reflectors below, scalars in tau (cusolverDn<t>geqrf). */
export function geqrf(
  stream: Stream,
  dtype: FloatDType,
  m: number,
  n: number,
  a: bigint,
  lda: number,
  tau: bigint,
  info: bigint,
): void {
  issue(
    stream,
    GEQRF[dtype],
    (geqrf, handle, work, lwork) => geqrf(handle, m, n, a, lda, tau, work, lwork, info),
    (bufferSize, handle, lwork) => bufferSize(handle, m, n, a, lda, lwork),
  );
}

/**
 * Forms the first n columns of Q from k Householder reflectors, in place (cusolverDn<t>orgqr).
 * Needs m >= n >= k.
 */
export function orgqr(
  stream: Stream,
  dtype: FloatDType,
  m: number,
  n: number,
  k: number,
  a: bigint,
  lda: number,
  tau: bigint,
  info: bigint,
): void {
  issue(
    stream,
    ORGQR[dtype],
    (orgqr, handle, work, lwork) => orgqr(handle, m, n, k, a, lda, tau, work, lwork, info),
    (bufferSize, handle, lwork) => bufferSize(handle, m, n, k, a, lda, tau, lwork),
  );
}

/** LAPACK job letters for gesvd. */
const JOB_ALL = 65; // 'A'
const JOB_SOME = 83; // 'S'

/**
 * Singular value decomposition A = U S V^T of an m x n matrix with m >= n, destroying A
 * (cusolverDn<t>gesvd). `full`: U is m x m (jobu 'A'), else m x n (jobu 'S'); V^T is n x n.
 */
export function gesvd(
  stream: Stream,
  dtype: FloatDType,
  full: boolean,
  m: number,
  n: number,
  a: bigint,
  lda: number,
  s: bigint,
  u: bigint,
  ldu: number,
  vt: bigint,
  ldvt: number,
  info: bigint,
): void {
  const routine = GESVD[dtype];
  const job = full ? JOB_ALL : JOB_SOME;
  issue(
    stream,
    routine,
    (gesvd, handle, work, queried) => {
      // rwork (min(m,n) - 1 unconverged superdiagonal elements) lives after the workspace.
      const lwork = Math.max(1, queried);
      const rwork = work + BigInt(lwork * routine.elementBytes);
      return gesvd(handle, job, job, m, n, a, lda, s, u, ldu, vt, ldvt, work, lwork, rwork, info);
    },
    (bufferSize, handle, lwork) => bufferSize(handle, m, n, lwork),
    n,
  );
}

/**
 * Eigenvalues (ascending, into w) and eigenvectors (overwriting A, one per column) of a
 * symmetric matrix given by its `upper` or lower triangle (cusolverDn<t>syevd).
 */
export function syevd(
  stream: Stream,
  dtype: FloatDType,
  upper: boolean,
  n: number,
  a: bigint,
  lda: number,
  w: bigint,
  info: bigint,
): void {
  const uplo = fillMode(upper);
  const jobz = CUSOLVER_EIG_MODE_VECTOR;
  issue(
    stream,
    SYEVD[dtype],
    (syevd, handle, work, lwork) => syevd(handle, jobz, uplo, n, a, lda, w, work, lwork, info),
    (bufferSize, handle, lwork) => bufferSize(handle, jobz, uplo, n, a, lda, w, lwork),
  );
}
