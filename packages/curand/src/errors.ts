import { CudaError, markErrorClass } from '@cuda-tasks/cudadrv';
import { curandStatus, curandStatusDescriptions } from './ffi/curand.js';

const statusNames: ReadonlyMap<number, string> = new Map(
  Object.entries(curandStatus).map(([name, code]) => [code, name]),
);

/**
 * The symbolic name of a `curandStatus_t`, e.g. `CURAND_STATUS_LENGTH_NOT_MULTIPLE` for 105
 * (from a table of curand.h: cuRAND has no function that names a status).
 */
export function statusName(status: number): string {
  return statusNames.get(status) ?? `CURAND_STATUS_UNKNOWN_${status}`;
}

/**
 * A cuRAND call returned a status other than `CURAND_STATUS_SUCCESS`: `code` is the numeric
 * `curandStatus_t`, `status` its name, `call` the function that failed.
 */
export class CurandError extends CudaError {
  /** True for any CurandError, also one thrown by another loaded copy of this package. */
  static override readonly isInstance = markErrorClass(CurandError, '@cuda-tasks/CurandError');
  constructor(code: number, status: string, call: string, message: string) {
    super(code, status, call, message);
    this.name = 'CurandError';
  }
}

/** The CurandError for a failed call (see `check`). */
export function curandError(status: number, call: string): CurandError {
  const description = curandStatusDescriptions[status] ?? 'unknown cuRAND status';
  let message = description;
  if (status === curandStatus.CURAND_STATUS_PREEXISTING_FAILURE) {
    message +=
      ": an earlier asynchronous CUDA error (a failed kernel, an illegal address) was still pending when cuRAND was entered; the failure is not cuRAND's";
  } else if (status === curandStatus.CURAND_STATUS_LAUNCH_FAILURE) {
    message += ': the generator kernel could not be launched on the stream';
  }
  return new CurandError(status, statusName(status), call, message);
}

/** Throws a CurandError naming `call` when `status` is not `CURAND_STATUS_SUCCESS`. */
export function check(status: number, call: string): void {
  if (status !== 0) throw curandError(status, call);
}
