import { CudaError, markErrorClass } from '@cuda-tasks/cudadrv';
import { cublasIfLoaded, cublasStatus } from './ffi/cublas.js';

/** cublasStatus_t names by value, from cublas_api.h (used when the library is not loaded). */
const STATUS_NAMES: ReadonlyMap<number, string> = new Map(
  Object.entries(cublasStatus).map(([name, value]) => [value, name]),
);

/** What each status means, after the cuBLAS documentation (fallback for cublasGetStatusString). */
const STATUS_MESSAGES: Readonly<Record<string, string>> = {
  CUBLAS_STATUS_SUCCESS: 'the operation completed successfully',
  CUBLAS_STATUS_NOT_INITIALIZED: 'the library was not initialized',
  CUBLAS_STATUS_ALLOC_FAILED: 'the resource allocation failed',
  CUBLAS_STATUS_INVALID_VALUE: 'an invalid numeric value was used as an argument',
  CUBLAS_STATUS_ARCH_MISMATCH: 'an absent device architectural feature is required',
  CUBLAS_STATUS_MAPPING_ERROR: 'an access to GPU memory space failed',
  CUBLAS_STATUS_EXECUTION_FAILED: 'the GPU program failed to execute',
  CUBLAS_STATUS_INTERNAL_ERROR: 'an internal operation failed',
  CUBLAS_STATUS_NOT_SUPPORTED: 'the functionality requested is not supported',
  CUBLAS_STATUS_LICENSE_ERROR: 'an error was detected when checking the current licensing',
};

/**
 * The symbolic name of a cublasStatus_t, e.g. `CUBLAS_STATUS_INVALID_VALUE`: from
 * cublasGetStatusName when the library is loaded, else from the table in cublas_api.h.
 */
export function statusName(status: number): string {
  const bindings = cublasIfLoaded();
  if (bindings !== undefined) {
    const name = bindings.cublasGetStatusName(status) as string | null;
    if (typeof name === 'string' && name.length > 0 && !name.includes('UNKNOWN')) return name;
  }
  return STATUS_NAMES.get(status) ?? `CUBLAS_STATUS_UNKNOWN_${status}`;
}

/** What a cublasStatus_t means (cublasGetStatusString when loaded, else the documented text). */
export function statusMessage(status: number): string {
  const bindings = cublasIfLoaded();
  if (bindings !== undefined) {
    const message = bindings.cublasGetStatusString(status) as string | null;
    if (typeof message === 'string' && message.length > 0) return message;
  }
  return STATUS_MESSAGES[STATUS_NAMES.get(status) ?? ''] ?? 'unknown cuBLAS status';
}

/**
 * A cuBLAS call returned a status other than CUBLAS_STATUS_SUCCESS. `status` is the symbolic
 * name, `code` the number, `call` the native function.
 * @example
 * try { gemm(a, b, c); } catch (error) {
 *   if (CublasError.isInstance(error)) console.log(error.status, error.call);
 * }
 */
export class CublasError extends CudaError {
  /** True for any CublasError, also one thrown by another loaded copy of this package. */
  static override readonly isInstance = markErrorClass(CublasError, '@cuda-tasks/CublasError');
  constructor(code: number, status: string, call: string, message: string) {
    super(code, status, call, message);
    this.name = 'CublasError';
  }
}

/** The CublasError for a status (see `check`). */
export function cublasError(status: number, call: string): CublasError {
  return new CublasError(status, statusName(status), call, statusMessage(status));
}

/**
 * Throws a CublasError unless `status` is CUBLAS_STATUS_SUCCESS (0). The one place where a
 * cuBLAS status becomes an error.
 */
export function check(status: number, call: string): void {
  if (status !== 0) throw cublasError(status, call);
}
