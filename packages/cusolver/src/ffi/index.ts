/**
 * The raw binding layer of `@cuda-tasks/cusolver`: libcusolver's dense API declared with koffi
 * exactly as cusolverDn.h names it, for routines the typed API does not wrap.
 *
 * @example
 * import { cusolver } from '@cuda-tasks/cusolver/ffi';
 * import { handle } from '@cuda-tasks/cusolver';
 * const stream: (bigint | null)[] = [null];
 * cusolver().cusolverDnGetStream(handle(), stream);
 *
 * @module @cuda-tasks/cusolver/ffi
 */
export * from './cusolver.js';
