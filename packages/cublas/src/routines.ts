/**
 * The cuBLAS routines the wrappers call, one table per routine family: the operands' dtype
 * picks the entry point (the S or D routine), the name the operation observer records and
 * the C type of the host scalars. A wrapper looks its routine up once and has one call site,
 * as CUDA.jl generates its wrappers from a `(fname, elty)` table.
 */
import type { FloatDType } from '@cuda-tasks/cudadrv';
import type { CublasBindings } from './ffi/cublas.js';
import type { ScalarType } from './scalars.js';

/** One precision of a cuBLAS routine. */
export interface Routine {
  /** The entry point as cublas_api.h names it (a CublasError reports it as the call). */
  readonly symbol: keyof CublasBindings;
  /** What the operation observer (traces, NVTX ranges) records, e.g. `cublas.sgemm`. */
  readonly operation: string;
  /** The C type of alpha and beta (and of a reduction's result). */
  readonly scalar: ScalarType;
}

/** A routine family: its routine for each dtype. */
export type RoutineFamily = Readonly<Record<FloatDType, Routine>>;

/** The operation name of an entry point: `cublasSgemm_v2` is `cublas.sgemm`. */
function operationOf(symbol: string): string {
  const name = symbol.slice('cublas'.length).replace(/_v2$/, '');
  return `cublas.${name[0]!.toLowerCase()}${name.slice(1)}`;
}

function family(symbols: Readonly<Record<FloatDType, keyof CublasBindings>>): RoutineFamily {
  const routine = (dtype: FloatDType): Routine => ({
    symbol: symbols[dtype],
    operation: operationOf(symbols[dtype]),
    scalar: dtype,
  });
  return Object.freeze({ float32: routine('float32'), float64: routine('float64') });
}

/** y = alpha x + y. */
export const AXPY = family({ float32: 'cublasSaxpy_v2', float64: 'cublasDaxpy_v2' });
/** x = alpha x. */
export const SCAL = family({ float32: 'cublasSscal_v2', float64: 'cublasDscal_v2' });
/** x . y */
export const DOT = family({ float32: 'cublasSdot_v2', float64: 'cublasDdot_v2' });
/** ||x||_2 */
export const NRM2 = family({ float32: 'cublasSnrm2_v2', float64: 'cublasDnrm2_v2' });
/** sum |x_i| */
export const ASUM = family({ float32: 'cublasSasum_v2', float64: 'cublasDasum_v2' });
/** The 1-based index of the largest |x_i| (an `int` result in either precision). */
export const IAMAX = family({ float32: 'cublasIsamax_v2', float64: 'cublasIdamax_v2' });
/** y = alpha op(A) x + beta y. */
export const GEMV = family({ float32: 'cublasSgemv_v2', float64: 'cublasDgemv_v2' });
/** C = alpha op(A) op(B) + beta C. */
export const GEMM = family({ float32: 'cublasSgemm_v2', float64: 'cublasDgemm_v2' });
/** C_i = alpha op(A_i) op(B_i) + beta C_i over a strided batch. */
export const GEMM_STRIDED_BATCHED = family({
  float32: 'cublasSgemmStridedBatched',
  float64: 'cublasDgemmStridedBatched',
});
/**
 * Mixed-precision C = alpha op(A) op(B) + beta C: one entry point for every dtype (the
 * operands' cudaDataType_t are arguments); CUBLAS_COMPUTE_32F takes `float` scalars.
 */
export const GEMM_EX: Routine = Object.freeze({
  symbol: 'cublasGemmEx',
  operation: 'cublas.gemmEx',
  scalar: 'float32',
});
