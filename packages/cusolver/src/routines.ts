/**
 * One function per cuSOLVER routine pair (`_bufferSize` + compute), for float32 and float64:
 * take the handle bound to the stream, size the workspace, allocate it from the
 * stream-ordered pool, issue the call between `beginOperation`/`endOperation`, and free the
 * workspace right after (the free is ordered on the stream, after the routine's kernels).
 * Arguments are device addresses already ordered on the stream (`useOn`); nothing here
 * waits for the GPU. Internal: the public API validates before it calls these.
 */
import { DeviceBuffer, type Stream } from '@cuda-tasks/cudadrv';
import { beginOperation, endOperation, Scratch } from '@cuda-tasks/cudadrv/internal';
import { check } from './errors.js';
import {
  CUBLAS_FILL_MODE_LOWER,
  CUBLAS_FILL_MODE_UPPER,
  CUBLAS_OP_N,
  CUBLAS_OP_T,
  CUSOLVER_EIG_MODE_VECTOR,
  cusolver,
} from './ffi/cusolver.js';
import { handles } from './handle.js';
import type { SolverDType } from './validate.js';

// The `int *Lwork` out-parameter of the _bufferSize queries: one reused native slot.
let arena: Scratch | undefined;

function lworkSlot(): Scratch {
  const slot = (arena ??= new Scratch(16));
  slot.i32[0] = 0;
  return slot;
}

/** The handle for `stream`, with the stream's context current for the runtime API. */
function handleFor(stream: Stream): bigint {
  const handle = handles.get(stream);
  stream.context.makeCurrent();
  return handle;
}

/** A workspace of `elements` elements (at least one) from the stream-ordered pool. */
function workspace(elements: number, elementBytes: number, stream: Stream): DeviceBuffer {
  return DeviceBuffer.allocate(Math.max(1, elements) * elementBytes, { stream });
}

/** LU factorization of an m x n matrix in place: A = P * L * U (cusolverDn<t>getrf). */
export function getrf(
  stream: Stream,
  dtype: SolverDType,
  m: number,
  n: number,
  a: bigint,
  lda: number,
  pivots: bigint,
  info: bigint,
): void {
  const api = cusolver();
  const handle = handleFor(stream);
  const double = dtype === 'float64';
  const slot = lworkSlot();
  check(
    (double ? api.cusolverDnDgetrf_bufferSize : api.cusolverDnSgetrf_bufferSize)(
      handle,
      m,
      n,
      a,
      lda,
      slot.pointer,
    ),
    double ? 'cusolverDnDgetrf_bufferSize' : 'cusolverDnSgetrf_bufferSize',
  );
  const work = workspace(slot.i32[0]!, double ? 8 : 4, stream);
  const token = beginOperation('cusolver.getrf', stream);
  try {
    check(
      (double ? api.cusolverDnDgetrf : api.cusolverDnSgetrf)(
        handle,
        m,
        n,
        a,
        lda,
        work.useOn(stream),
        pivots,
        info,
      ),
      double ? 'cusolverDnDgetrf' : 'cusolverDnSgetrf',
    );
  } finally {
    endOperation(token);
    work.dispose();
  }
}

/** Solves A X = B (or A^T X = B) with getrf's factors; B is overwritten by X (cusolverDn<t>getrs). */
export function getrs(
  stream: Stream,
  dtype: SolverDType,
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
  const api = cusolver();
  const handle = handleFor(stream);
  const double = dtype === 'float64';
  const token = beginOperation('cusolver.getrs', stream);
  try {
    check(
      (double ? api.cusolverDnDgetrs : api.cusolverDnSgetrs)(
        handle,
        transpose ? CUBLAS_OP_T : CUBLAS_OP_N,
        n,
        nrhs,
        a,
        lda,
        pivots,
        b,
        ldb,
        info,
      ),
      double ? 'cusolverDnDgetrs' : 'cusolverDnSgetrs',
    );
  } finally {
    endOperation(token);
  }
}

/** Cholesky factorization in place, of the `upper` or lower triangle (cusolverDn<t>potrf). */
export function potrf(
  stream: Stream,
  dtype: SolverDType,
  upper: boolean,
  n: number,
  a: bigint,
  lda: number,
  info: bigint,
): void {
  const api = cusolver();
  const handle = handleFor(stream);
  const double = dtype === 'float64';
  const uplo = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  const slot = lworkSlot();
  check(
    (double ? api.cusolverDnDpotrf_bufferSize : api.cusolverDnSpotrf_bufferSize)(
      handle,
      uplo,
      n,
      a,
      lda,
      slot.pointer,
    ),
    double ? 'cusolverDnDpotrf_bufferSize' : 'cusolverDnSpotrf_bufferSize',
  );
  const lwork = slot.i32[0]!;
  const work = workspace(lwork, double ? 8 : 4, stream);
  const token = beginOperation('cusolver.potrf', stream);
  try {
    check(
      (double ? api.cusolverDnDpotrf : api.cusolverDnSpotrf)(
        handle,
        uplo,
        n,
        a,
        lda,
        work.useOn(stream),
        lwork,
        info,
      ),
      double ? 'cusolverDnDpotrf' : 'cusolverDnSpotrf',
    );
  } finally {
    endOperation(token);
    work.dispose();
  }
}

/** Solves A X = B with potrf's factor; B is overwritten by X (cusolverDn<t>potrs). */
export function potrs(
  stream: Stream,
  dtype: SolverDType,
  upper: boolean,
  n: number,
  nrhs: number,
  a: bigint,
  lda: number,
  b: bigint,
  ldb: number,
  info: bigint,
): void {
  const api = cusolver();
  const handle = handleFor(stream);
  const double = dtype === 'float64';
  const token = beginOperation('cusolver.potrs', stream);
  try {
    check(
      (double ? api.cusolverDnDpotrs : api.cusolverDnSpotrs)(
        handle,
        upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER,
        n,
        nrhs,
        a,
        lda,
        b,
        ldb,
        info,
      ),
      double ? 'cusolverDnDpotrs' : 'cusolverDnSpotrs',
    );
  } finally {
    endOperation(token);
  }
}

/** Householder QR in place: R above the diagonal, reflectors below, scalars in tau (cusolverDn<t>geqrf). */
export function geqrf(
  stream: Stream,
  dtype: SolverDType,
  m: number,
  n: number,
  a: bigint,
  lda: number,
  tau: bigint,
  info: bigint,
): void {
  const api = cusolver();
  const handle = handleFor(stream);
  const double = dtype === 'float64';
  const slot = lworkSlot();
  check(
    (double ? api.cusolverDnDgeqrf_bufferSize : api.cusolverDnSgeqrf_bufferSize)(
      handle,
      m,
      n,
      a,
      lda,
      slot.pointer,
    ),
    double ? 'cusolverDnDgeqrf_bufferSize' : 'cusolverDnSgeqrf_bufferSize',
  );
  const lwork = slot.i32[0]!;
  const work = workspace(lwork, double ? 8 : 4, stream);
  const token = beginOperation('cusolver.geqrf', stream);
  try {
    check(
      (double ? api.cusolverDnDgeqrf : api.cusolverDnSgeqrf)(
        handle,
        m,
        n,
        a,
        lda,
        tau,
        work.useOn(stream),
        lwork,
        info,
      ),
      double ? 'cusolverDnDgeqrf' : 'cusolverDnSgeqrf',
    );
  } finally {
    endOperation(token);
    work.dispose();
  }
}

/**
 * Forms the first n columns of Q from k Householder reflectors, in place (cusolverDn<t>orgqr).
 * Needs m >= n >= k.
 */
export function orgqr(
  stream: Stream,
  dtype: SolverDType,
  m: number,
  n: number,
  k: number,
  a: bigint,
  lda: number,
  tau: bigint,
  info: bigint,
): void {
  const api = cusolver();
  const handle = handleFor(stream);
  const double = dtype === 'float64';
  const slot = lworkSlot();
  check(
    (double ? api.cusolverDnDorgqr_bufferSize : api.cusolverDnSorgqr_bufferSize)(
      handle,
      m,
      n,
      k,
      a,
      lda,
      tau,
      slot.pointer,
    ),
    double ? 'cusolverDnDorgqr_bufferSize' : 'cusolverDnSorgqr_bufferSize',
  );
  const lwork = slot.i32[0]!;
  const work = workspace(lwork, double ? 8 : 4, stream);
  const token = beginOperation('cusolver.orgqr', stream);
  try {
    check(
      (double ? api.cusolverDnDorgqr : api.cusolverDnSorgqr)(
        handle,
        m,
        n,
        k,
        a,
        lda,
        tau,
        work.useOn(stream),
        lwork,
        info,
      ),
      double ? 'cusolverDnDorgqr' : 'cusolverDnSorgqr',
    );
  } finally {
    endOperation(token);
    work.dispose();
  }
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
  dtype: SolverDType,
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
  const api = cusolver();
  const handle = handleFor(stream);
  const double = dtype === 'float64';
  const bytes = double ? 8 : 4;
  const slot = lworkSlot();
  check(
    (double ? api.cusolverDnDgesvd_bufferSize : api.cusolverDnSgesvd_bufferSize)(
      handle,
      m,
      n,
      slot.pointer,
    ),
    double ? 'cusolverDnDgesvd_bufferSize' : 'cusolverDnSgesvd_bufferSize',
  );
  const lwork = Math.max(1, slot.i32[0]!);
  // rwork (min(m,n) - 1 unconverged superdiagonal elements) lives after the workspace.
  const work = workspace(lwork + n, bytes, stream);
  const workPointer = work.useOn(stream);
  const token = beginOperation('cusolver.gesvd', stream);
  try {
    check(
      (double ? api.cusolverDnDgesvd : api.cusolverDnSgesvd)(
        handle,
        full ? JOB_ALL : JOB_SOME,
        full ? JOB_ALL : JOB_SOME,
        m,
        n,
        a,
        lda,
        s,
        u,
        ldu,
        vt,
        ldvt,
        workPointer,
        lwork,
        workPointer + BigInt(lwork * bytes),
        info,
      ),
      double ? 'cusolverDnDgesvd' : 'cusolverDnSgesvd',
    );
  } finally {
    endOperation(token);
    work.dispose();
  }
}

/**
 * Eigenvalues (ascending, into w) and eigenvectors (overwriting A, one per column) of a
 * symmetric matrix given by its `upper` or lower triangle (cusolverDn<t>syevd).
 */
export function syevd(
  stream: Stream,
  dtype: SolverDType,
  upper: boolean,
  n: number,
  a: bigint,
  lda: number,
  w: bigint,
  info: bigint,
): void {
  const api = cusolver();
  const handle = handleFor(stream);
  const double = dtype === 'float64';
  const uplo = upper ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
  const slot = lworkSlot();
  check(
    (double ? api.cusolverDnDsyevd_bufferSize : api.cusolverDnSsyevd_bufferSize)(
      handle,
      CUSOLVER_EIG_MODE_VECTOR,
      uplo,
      n,
      a,
      lda,
      w,
      slot.pointer,
    ),
    double ? 'cusolverDnDsyevd_bufferSize' : 'cusolverDnSsyevd_bufferSize',
  );
  const lwork = slot.i32[0]!;
  const work = workspace(lwork, double ? 8 : 4, stream);
  const token = beginOperation('cusolver.syevd', stream);
  try {
    check(
      (double ? api.cusolverDnDsyevd : api.cusolverDnSsyevd)(
        handle,
        CUSOLVER_EIG_MODE_VECTOR,
        uplo,
        n,
        a,
        lda,
        w,
        work.useOn(stream),
        lwork,
        info,
      ),
      double ? 'cusolverDnDsyevd' : 'cusolverDnSsyevd',
    );
  } finally {
    endOperation(token);
    work.dispose();
  }
}
