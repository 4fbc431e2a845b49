import { CudaError, markErrorClass } from '@cuda-tasks/cudadrv';
import { cufftResult, cufftResultDescriptions } from './ffi.js';

/** The symbolic name of a `cufftResult`, e.g. `CUFFT_INVALID_SIZE` for 8. */
export function statusName(status: number): string {
  return cufftResult[status] ?? `CUFFT_STATUS_${status}`;
}

/**
 * A cuFFT call returned something other than `CUFFT_SUCCESS`: `code` is the `cufftResult`,
 * `status` its name, `call` the function. It extends `CudaError` like the library errors of
 * this repository, so one `CudaError.isInstance` check catches them all.
 */
export class CufftError extends CudaError {
  /** True for any CufftError, also one from another loaded copy of this module. */
  static override readonly isInstance = markErrorClass(
    CufftError,
    '@cuda-tasks/examples/CufftError',
  );
  constructor(code: number, status: string, call: string, message: string) {
    super(code, status, call, message);
    this.name = 'CufftError';
  }
}

/** The CufftError for a failed call (see `check`). */
export function cufftError(status: number, call: string): CufftError {
  return new CufftError(
    status,
    statusName(status),
    call,
    cufftResultDescriptions[status] ?? 'unknown cuFFT status',
  );
}

/**
 * Throws a CufftError naming `call` unless `status` is `CUFFT_SUCCESS`.
 * @example check(cufft().cufftDestroy(plan), 'cufftDestroy');
 */
export function check(status: number, call: string): void {
  if (status !== 0) throw cufftError(status, call);
}
