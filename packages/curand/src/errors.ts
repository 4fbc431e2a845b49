import { type CudaError, type LibraryErrorClass, libraryErrors } from '@cuda-tasks/cudadrv';
import { curandStatus, curandStatusDescriptions } from './ffi/curand.js';

/** The descriptions of curand.h, with where the failure comes from for two of them. */
const STATUS_MESSAGES: Readonly<Record<number, string>> = {
  ...curandStatusDescriptions,
  [curandStatus.CURAND_STATUS_PREEXISTING_FAILURE]: `${curandStatusDescriptions[curandStatus.CURAND_STATUS_PREEXISTING_FAILURE]}: an earlier asynchronous CUDA error (a failed kernel, an illegal address) was still pending when cuRAND was entered; the failure is not cuRAND's`,
  [curandStatus.CURAND_STATUS_LAUNCH_FAILURE]: `${curandStatusDescriptions[curandStatus.CURAND_STATUS_LAUNCH_FAILURE]}: the generator kernel could not be launched on the stream`,
};

// cuRAND has no function that names or describes a status: the tables of curand.h do.
const errors = libraryErrors({
  library: 'cuRAND',
  className: 'CurandError',
  markerKey: '@cuda-tasks/CurandError',
  statuses: curandStatus,
  unknownPrefix: 'CURAND_STATUS_UNKNOWN_',
  messages: STATUS_MESSAGES,
});

/**
 * A cuRAND call returned a status other than `CURAND_STATUS_SUCCESS`: `code` is the numeric
 * `curandStatus_t`, `status` its name, `call` the function that failed.
 * `CurandError.isInstance(error)` is true also for one thrown by another loaded copy of this
 * package.
 */
export const CurandError: LibraryErrorClass<CudaError> = errors.ErrorClass;
/** A failed cuRAND call (see the `CurandError` class). */
export type CurandError = CudaError;

/**
 * The symbolic name of a `curandStatus_t`, e.g. `CURAND_STATUS_LENGTH_NOT_MULTIPLE` for 105
 * (from a table of curand.h: cuRAND has no function that names a status).
 */
export const statusName: (status: number) => string = errors.statusName;

/** What a `curandStatus_t` means (the description in curand.h). */
export const statusMessage: (status: number) => string = errors.statusMessage;

/** The CurandError for a failed call (see `check`). */
export const curandError: (status: number, call: string) => CurandError = errors.error;

/** Throws a CurandError naming `call` when `status` is not `CURAND_STATUS_SUCCESS`. */
export const check: (status: number, call: string) => void = errors.check;
