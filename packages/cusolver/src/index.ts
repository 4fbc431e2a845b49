/**
 * @cuda-tasks/cusolver: dense linear algebra with cuSOLVER (cusolverDn) over DeviceArray
 * (float32 and float64, column-major). LU, Cholesky and QR factorizations, linear solves, the
 * SVD and the symmetric eigenvalue problem. Each call runs on the current task's stream
 * (or `{ stream }`) with a cusolverDn handle leased by the task and rebound lazily when the
 * stream changes; workspaces come from the stream-ordered pool; routines whose status is
 * reported on the device (devInfo) return a promise that resolves without blocking the
 * event loop.
 *
 * @module @cuda-tasks/cusolver
 */
export {
  type CholeskyFactorization,
  type CholeskyOptions,
  type CholeskySolveOptions,
  cholesky,
  choleskySolve,
} from './cholesky.js';
export { type EighOptions, type EighResult, eigh } from './eigh.js';
export {
  CusolverError,
  check,
  cusolverError,
  type InfoCondition,
  infoError,
  NotPositiveDefiniteError,
  SingularMatrixError,
  statusName,
} from './errors.js';
export { handle, handles, version } from './handle.js';
export type { StatusOption } from './info.js';
export {
  DEFAULT_ISSUE_WORKER_THRESHOLD,
  type IssueWorkerStatistics,
  issueWorkerStatistics,
  issueWorkerThreshold,
  setIssueWorkerThreshold,
  startIssueWorker,
} from './issue-worker.js';
export {
  type LuFactorization,
  type LuOptions,
  type LuSolveOptions,
  lu,
  luSolve,
  type SolveOptions,
  solve,
} from './lu.js';
export { type QrFactorization, qr } from './qr.js';
export { type SvdOptions, type SvdResult, svd } from './svd.js';
export type { SolverDType } from './validate.js';
