/**
 * @cuda-tasks/cublas: cuBLAS for Node.js over DeviceArrays. Every call runs on the current
 * task's stream: each task leases its own cuBLAS handle, rebound lazily when the stream
 * changes, with its own workspace per stream from the stream-ordered pool. The raw bindings
 * are at `@cuda-tasks/cublas/ffi`.
 *
 * @module @cuda-tasks/cublas
 */
export { CublasError, check, statusName } from './errors.js';
export {
  handle,
  handleCache,
  type MathMode,
  mathMode,
  setMathMode,
  setWorkspaceSize,
  version,
  workspaceSize,
} from './handle.js';
export { asum, axpy, dot, iamax, nrm2, scal, type VectorOptions } from './level1.js';
export { type GemvOptions, gemv } from './level2.js';
export {
  type GemmExOptions,
  type GemmOptions,
  gemm,
  gemmEx,
  gemmStridedBatched,
  type MatmulOptions,
  matmul,
  type StridedBatchedOptions,
} from './level3.js';
export {
  type GemmBackend,
  gemmBackend,
  planStatistics as gemmPlanStatistics,
  releasePlans as releaseGemmPlans,
  setGemmBackend,
} from './lt.js';
export type { BlasDType } from './validate.js';
export type { BatchOptions } from './validate-batched.js';
export type { GemmExInputDType, ProductOptions } from './validate-gemm.js';
