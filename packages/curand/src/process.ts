/**
 * Process-wide state of this package (shared by every loaded copy of a compatible version),
 * through cudadrv's `processState`.
 */
import { packageOf, processState } from '@cuda-tasks/cudadrv/internal';

/** This package as a loaded copy. */
const owner = packageOf(import.meta.url, '@cuda-tasks/curand');

/** @internal The process's single value of `name` for this package. Module level only. */
export function curandState<T>(name: string, create: () => T): T {
  return processState(owner, name, create);
}
