import { CudaError, libraryErrors, markErrorClass } from '@cuda-tasks/cudadrv';
import { cusolverStatus } from './ffi/cusolver.js';

/** What each cusolverStatus_t means, for error messages (from the cuSOLVER documentation). */
const STATUS_MESSAGES: Readonly<Record<string, string>> = {
  CUSOLVER_STATUS_NOT_INITIALIZED:
    'the cuSOLVER library was not initialized (the handle is invalid or cusolverDnCreate failed)',
  CUSOLVER_STATUS_ALLOC_FAILED: 'cuSOLVER could not allocate the resources it needs',
  CUSOLVER_STATUS_INVALID_VALUE: 'an unsupported value or parameter was passed to the function',
  CUSOLVER_STATUS_ARCH_MISMATCH: 'the device does not support a feature this function needs',
  CUSOLVER_STATUS_MAPPING_ERROR: 'access to GPU memory space failed',
  CUSOLVER_STATUS_EXECUTION_FAILED:
    'the GPU program failed to execute (often a kernel launch failure)',
  CUSOLVER_STATUS_INTERNAL_ERROR: 'an internal cuSOLVER operation failed',
  CUSOLVER_STATUS_MATRIX_TYPE_NOT_SUPPORTED: 'the matrix type is not supported by this function',
  CUSOLVER_STATUS_NOT_SUPPORTED: 'the operation or parameter combination is not supported',
  CUSOLVER_STATUS_ZERO_PIVOT: 'a zero pivot was found',
  CUSOLVER_STATUS_INVALID_LICENSE: 'the cuSOLVER license is invalid',
  CUSOLVER_STATUS_INVALID_WORKSPACE: 'the workspace is invalid (too small or misaligned)',
};

/**
 * A failed cuSOLVER call. For a returned cusolverStatus_t, `code` is that status and `info`
 * is undefined. For a failure reported through `devInfo` (the call itself succeeded), `code`
 * and `info` both hold the devInfo value and `status` names the condition:
 * `INVALID_PARAMETER` (info < 0), `SINGULAR_MATRIX`, `NOT_POSITIVE_DEFINITE` or
 * `NO_CONVERGENCE` (info > 0).
 */
export class CusolverError extends CudaError {
  /** True for any CusolverError (and subclasses), also one from another loaded copy of this package. */
  static override readonly isInstance = markErrorClass(CusolverError, '@cuda-tasks/CusolverError');
  /** The devInfo value that reported the failure; undefined for a returned status. */
  readonly info: number | undefined;

  constructor(code: number, status: string, call: string, message: string, info?: number) {
    super(code, status, call, message);
    this.name = 'CusolverError';
    this.info = info;
  }
}

/**
 * LU factorization found an exactly zero pivot: `U(info, info)` (1-based) is zero, so the
 * matrix is singular and cannot be used to solve a system.
 */
export class SingularMatrixError extends CusolverError {
  /** True for any SingularMatrixError, also one from another loaded copy of this package. */
  static override readonly isInstance = markErrorClass(
    SingularMatrixError,
    '@cuda-tasks/SingularMatrixError',
  );
  declare readonly info: number;

  constructor(call: string, info: number) {
    super(
      info,
      'SINGULAR_MATRIX',
      call,
      `U(${info},${info}) is exactly zero: the matrix is singular (devInfo = ${info})`,
      info,
    );
    this.name = 'SingularMatrixError';
  }
}

/**
 * Cholesky factorization failed: the leading minor of order `info` is not positive definite,
 * so the matrix is not symmetric positive definite.
 */
export class NotPositiveDefiniteError extends CusolverError {
  /** True for any NotPositiveDefiniteError, also one from another loaded copy of this package. */
  static override readonly isInstance = markErrorClass(
    NotPositiveDefiniteError,
    '@cuda-tasks/NotPositiveDefiniteError',
  );
  declare readonly info: number;

  constructor(call: string, info: number) {
    super(
      info,
      'NOT_POSITIVE_DEFINITE',
      call,
      `the leading minor of order ${info} is not positive definite: the matrix is not symmetric positive definite (devInfo = ${info})`,
      info,
    );
    this.name = 'NotPositiveDefiniteError';
  }
}

const errors = libraryErrors({
  library: 'cuSOLVER',
  errorClass: CusolverError,
  statuses: cusolverStatus,
  unknownPrefix: 'CUSOLVER_STATUS_',
  messages: STATUS_MESSAGES,
});

/** The symbolic name of a cusolverStatus_t value (`CUSOLVER_STATUS_<n>` for unknown values). */
export const statusName: (status: number) => string = errors.statusName;

/** What a cusolverStatus_t means (from the cuSOLVER documentation). */
export const statusMessage: (status: number) => string = errors.statusMessage;

/**
 * Turns a cusolverStatus_t into a CusolverError naming the call.
 * @example check(cusolver().cusolverDnCreate(out), 'cusolverDnCreate');
 */
export const check: (status: number, call: string) => void = errors.check;

/** The CusolverError for a non-zero cusolverStatus_t (see `check`). */
export const cusolverError: (status: number, call: string) => CusolverError = errors.error;

/** What a positive devInfo means for a routine. */
export type InfoCondition = 'singular' | 'notPositiveDefinite' | 'noConvergence';

/**
 * The error for a non-zero devInfo of `call`: info < 0 names the parameter with an illegal
 * value; info > 0 maps to SingularMatrixError (getrf), NotPositiveDefiniteError (potrf) or a
 * CusolverError with status NO_CONVERGENCE (gesvd, syevd).
 */
export function infoError(call: string, info: number, condition: InfoCondition): CusolverError {
  if (info < 0) {
    return new CusolverError(
      info,
      'INVALID_PARAMETER',
      call,
      `parameter ${-info} had an illegal value (devInfo = ${info}); this is a bug in @cuda-tasks/cusolver's argument checks, please report it`,
      info,
    );
  }
  switch (condition) {
    case 'singular':
      return new SingularMatrixError(call, info);
    case 'notPositiveDefinite':
      return new NotPositiveDefiniteError(call, info);
    default:
      return new CusolverError(
        info,
        'NO_CONVERGENCE',
        call,
        `the algorithm did not converge: ${info} off-diagonal element${info === 1 ? '' : 's'} of the intermediate form did not converge to zero (devInfo = ${info})`,
        info,
      );
  }
}
