import { type CudaError, type LibraryErrorClass, libraryErrors } from '@cuda-tasks/cudadrv';
import { cublasIfLoaded, cublasStatus } from './ffi/cublas.js';

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

const errors = libraryErrors({
  library: 'cuBLAS',
  className: 'CublasError',
  markerKey: '@cuda-tasks/CublasError',
  statuses: cublasStatus,
  unknownPrefix: 'CUBLAS_STATUS_UNKNOWN_',
  messages: STATUS_MESSAGES,
  // cuBLAS names and describes its statuses itself once it is loaded.
  nativeName(status) {
    const name = cublasIfLoaded()?.cublasGetStatusName(status) as string | null | undefined;
    return typeof name === 'string' && name.length > 0 && !name.includes('UNKNOWN')
      ? name
      : undefined;
  },
  nativeMessage(status) {
    const message = cublasIfLoaded()?.cublasGetStatusString(status) as string | null | undefined;
    return typeof message === 'string' && message.length > 0 ? message : undefined;
  },
});

/**
 * A cuBLAS call returned a status other than CUBLAS_STATUS_SUCCESS. `status` is the symbolic
 * name, `code` the number, `call` the native function. `CublasError.isInstance(error)` is
 * true also for one thrown by another loaded copy of this package.
 * @example
 * try { gemm(a, b, c); } catch (error) {
 *   if (CublasError.isInstance(error)) console.log(error.status, error.call);
 * }
 */
export const CublasError: LibraryErrorClass<CudaError> = errors.ErrorClass;
/** A failed cuBLAS call (see the `CublasError` class). */
export type CublasError = CudaError;

/**
 * The symbolic name of a cublasStatus_t, e.g. `CUBLAS_STATUS_INVALID_VALUE`: from
 * cublasGetStatusName when the library is loaded, else from the table in cublas_api.h.
 */
export const statusName: (status: number) => string = errors.statusName;

/** What a cublasStatus_t means (cublasGetStatusString when loaded, else the documented text). */
export const statusMessage: (status: number) => string = errors.statusMessage;

/** The CublasError for a status (see `check`). */
export const cublasError: (status: number, call: string) => CublasError = errors.error;

/**
 * Throws a CublasError unless `status` is CUBLAS_STATUS_SUCCESS (0). The one place where a
 * cuBLAS status becomes an error.
 */
export const check: (status: number, call: string) => void = errors.check;
