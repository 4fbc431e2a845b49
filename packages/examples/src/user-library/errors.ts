import { type CudaError, type LibraryErrorClass, libraryErrors } from '@cuda-tasks/cudadrv';
import { cufftResult, cufftResultDescriptions } from './ffi.js';

// The error module from the status table, with cudadrv's factory, as the library packages do.
const errors = libraryErrors({
  library: 'cuFFT',
  className: 'CufftError',
  markerKey: '@cuda-tasks/examples/CufftError',
  statuses: cufftResult,
  unknownPrefix: 'CUFFT_STATUS_',
  messages: cufftResultDescriptions,
});

/**
 * A cuFFT call returned something other than `CUFFT_SUCCESS`: `code` is the `cufftResult`,
 * `status` its name, `call` the function. It extends `CudaError` like the library errors of
 * this repository, so one `CudaError.isInstance` check catches them all;
 * `CufftError.isInstance(error)` is true also for one from another loaded copy of this module.
 */
export const CufftError: LibraryErrorClass<CudaError> = errors.ErrorClass;
/** A failed cuFFT call (see the `CufftError` class). */
export type CufftError = CudaError;

/** The symbolic name of a `cufftResult`, e.g. `CUFFT_INVALID_SIZE` for 8. */
export const statusName: (status: number) => string = errors.statusName;

/** The CufftError for a failed call (see `check`). */
export const cufftError: (status: number, call: string) => CufftError = errors.error;

/**
 * Throws a CufftError naming `call` unless `status` is `CUFFT_SUCCESS`.
 * @example check(cufft().cufftDestroy(plan), 'cufftDestroy');
 */
export const check: (status: number, call: string) => void = errors.check;
